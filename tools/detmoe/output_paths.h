// Checks on the file paths a command is given, made before any work so that a long run never
// ends in a path mistake: an output that would overwrite an input, an input that is a
// directory, an output whose folder does not exist.
#pragma once

#include <string>
#include <string_view>

namespace detmoe::cli {

// Throws kInvalidArgument (exit 2) naming both options when `out` is the same file as `in`
// (detmoe::same_file: sees through ./, .., and symbolic links). No-op when either is empty.
void refuse_same_file(std::string_view out_option, const std::string& out, std::string_view in_option,
                      const std::string& in, std::string_view why = "the output would overwrite the input");

// Throws kIoError (exit 3) when `path` is a directory: reading one fails later with a
// meaningless stream error ("basic_filebuf::underflow"). A missing file is left to the reader.
void refuse_directory_input(std::string_view option, const std::string& path);

// Throws kIoError (exit 3) when `path` is a directory or its folder does not exist, the two
// failures detmoe::write_output_file would report only at the end of the run.
void check_output_path(std::string_view option, const std::string& path);

}  // namespace detmoe::cli
