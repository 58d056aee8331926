// The one writer of every file DetMoE's tools produce (hash files, tensor stores, safetensors
// outputs, JSON, HTML, Markdown, run reports).
//
// A regular file is replaced atomically: the bytes go to a temporary file beside it (same
// folder, so rename(2) cannot cross file systems), every write is checked, the data is
// fsync'ed, and only then does rename put it in place. On any failure (full disk, a file-size
// limit, a kill) the previous file stays intact and the temporary one is removed — by the
// writer on an error, by `remove_inflight_output_files` (async-signal-safe) on a signal.
// A target that exists and is not a regular file (/dev/stdout, /dev/full, a pipe) is written
// in place with the same checks; a directory, or a missing folder, is an error (a typo in a
// path never creates folders: callers that own a folder tree create it first).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "detmoe/status.h"

namespace detmoe {

// Writes the concatenation of `pieces` to `path`. Errors are kIoError and name the path and
// the system's reason ("No space left on device").
Status write_output_file(const std::string& path, const std::vector<std::string_view>& pieces);
inline Status write_output_file(const std::string& path, std::string_view bytes) {
  return write_output_file(path, std::vector<std::string_view>{bytes});
}

// True when `a` and `b` name the same file: the same device and inode when both exist, the
// same absolute, normalised path otherwise. Used to refuse an output that would overwrite an
// input of the same command.
bool same_file(const std::string& a, const std::string& b);

// Unlinks every temporary file a write in progress holds. Async-signal-safe: for SIGINT/SIGTERM
// handlers that then re-raise the signal.
void remove_inflight_output_files();

}  // namespace detmoe
