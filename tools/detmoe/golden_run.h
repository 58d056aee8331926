// Runs golden cases through an implementation and judges them with golden::check_case, for
// `golden check`, `gate` and `accept` alike, so the three cannot drift. Tells a check that ran
// (pass, or fail: wrong bits) from one that could not run here (no hash file for this platform,
// no CUDA device, a path not built yet): `git bisect run` must skip a commit for the second,
// never blame it.
#pragma once

#include <optional>
#include <string>

#include "detmoe/status.h"
#include "golden/golden.h"
#include "impl_registry.h"

namespace detmoe::cli {

enum class GoldenOutcome { kPass, kFail, kCouldNotRun };

struct GoldenCaseRun {
  GoldenOutcome outcome = GoldenOutcome::kCouldNotRun;
  golden::CaseVerdict verdict;  // filled when the case ran
  std::string detail;           // the verdict's summary, or why it could not run
};

// Whether an implementation's error means "not on this machine" rather than "wrong": no CUDA
// device visible, a path that is not built yet (kNotImplemented), or too little host memory for
// the problem (kOutOfMemory). Anything else a run returns (a device fault, a timeout, a CUDA
// error with a device present) is the code's failure.
bool could_not_run_here(const Status& s);

// Empty when `impl` can run in this process, else why not (a GPU path without a CUDA device).
std::string why_impl_cannot_run(const ImplEntry& impl);

// The recorded hashes of `impl` on `platform` from `hashes_dir`; an error (missing, unreadable,
// or recorded for another impl or platform) means the check could not run.
StatusOr<golden::HashFile> load_recorded_hashes(const std::string& hashes_dir, const std::string& impl,
                                                const std::string& platform);

// Runs case `c` and checks it against `file`.
GoldenCaseRun run_golden_case(const ImplEntry& impl, const golden::GoldenCase& c, const golden::HashFile& file,
                              const std::string& store_dir);

}  // namespace detmoe::cli
