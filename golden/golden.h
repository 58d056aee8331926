// Golden hashes: fixed cases (golden/cases.json), the recorded XXH3-128 of every output per
// (implementation, platform), and the check that reports a change of bits as an event with
// the case, the output, the first differing element and the count of differing elements.
//
// Hash files are checked in (golden/hashes/<impl>.<platform>.json). They also hold per-chunk
// hashes, so a check without the recorded tensors still localises a change to a chunk; with a
// tensor store (`--store DIR`, written by `record`, kept out of git) it names the element and
// both values.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "detmoe/host_problem.h"
#include "detmoe/problem.h"
#include "detmoe/routing.h"
#include "detmoe/status.h"
#include "detmoe/tensor.h"

namespace detmoe::golden {

struct GoldenCase {
  std::string name;
  std::string shape_name;
  Shape shape;          // resolved, with overrides (P, Fs) applied
  std::string routing;  // parse_routing text
  uint64_t seed = 1;
  bool backward = true;
  GradPrecision grad_precision = GradPrecision::kFP32;
  std::vector<std::string> impls;  // implementations this case is recorded for
  std::string data = "seeded";     // "seeded", or "twin-experts" (make_twin_experts; GPU paths upload it)
};

StatusOr<std::vector<GoldenCase>> load_cases(const std::string& path);

// The seeded host problem a case describes.
StatusOr<HostProblem> make_case_problem(const GoldenCase& c);

struct OutputRecord {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string hash;                       // XXH3-128 of all bytes
  int64_t chunk_bytes = 0;
  std::vector<std::string> chunk_hashes;  // XXH3-128 of each chunk_bytes slice (hex, 16 digits kept)
};
struct CaseRecord {
  std::string name;
  std::vector<OutputRecord> outputs;
};
struct HashFile {
  std::string impl, platform;
  std::vector<CaseRecord> cases;
};

OutputRecord make_output_record(const NamedTensor& t);
StatusOr<HashFile> read_hash_file(const std::string& path);
Status write_hash_file(const std::string& path, const HashFile& file);
std::string hash_file_path(const std::string& dir, const std::string& impl, const std::string& platform);

// Raw tensor store for element-level reports: DIR/<impl>.<platform>/<case>/<output>.bin.
Status store_tensor(const std::string& dir, const std::string& impl, const std::string& platform,
                    const std::string& case_name, const NamedTensor& t);
StatusOr<NamedTensor> load_stored_tensor(const std::string& dir, const std::string& impl, const std::string& platform,
                                         const std::string& case_name, const OutputRecord& record);

struct Difference {
  std::string case_name, output;
  std::string summary;  // one line: first differing element (index, both values) and the count
};

// One output of a case as judged: recorded, produced, or both. An empty hash means "absent".
struct OutputVerdict {
  std::string output;
  std::string expected_hash, actual_hash;
  bool match = false;
};

// The verdict on one case. Symmetric on purpose: a check that looked only at the recorded outputs
// passed a record that holds none, or only some, of what the implementation produces.
struct CaseVerdict {
  std::string case_name;
  int recorded = 0;  // outputs in the record
  int matched = 0;   // recorded outputs produced with the recorded bits
  std::vector<OutputVerdict> outputs;    // the recorded ones in record order, then the unrecorded
  std::vector<Difference> differences;   // empty exactly when the case passes
  bool pass() const { return differences.empty(); }
  // "7 recorded outputs bitwise equal", or the differences joined with "; ".
  std::string summary() const;
};

// The record of `name` in `file`, or nullptr.
const CaseRecord* find_case(const HashFile& file, const std::string& name);

// THE per-case check of `golden check`, `gate` and `accept`: fails on every recorded output not
// produced, every produced output not recorded, every change of shape, dtype or bits, a case
// recorded with no outputs, and a case not recorded at all (`recorded` null). `store_dir` may be
// empty; with it, changed bits are reported with the first differing element and both values.
CaseVerdict check_case(const std::string& case_name, const CaseRecord* recorded, const std::vector<NamedTensor>& fresh,
                       const std::string& store_dir, const std::string& impl, const std::string& platform);

}  // namespace detmoe::golden
