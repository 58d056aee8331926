// Where a layer step's time goes between its launches, in the steady state the benchmarks
// measure (perf/layer_bench.cpp --phases). ncu times kernels one at a time, each from a cold start
// and at the clock it reaches alone, which favours short kernels under the 700 W cap (docs/PERF.md
// session 34); these marks time the same phases inside back-to-back steps instead.
//
// While a PhaseMarks is installed (only the benchmark installs one), the implementations record a
// CUDA event on their stream at each phase boundary, named by the phase that ends there; once the
// stream has synchronised the benchmark reads each phase's ms. With none installed, a mark is one
// load and a branch. Meaningful for P = 1 (one stream); the marks of several ranks interleave.
// Single-threaded, like the benchmark.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace detmoe {

class PhaseMarks {
 public:
  PhaseMarks() = default;
  PhaseMarks(const PhaseMarks&) = delete;
  PhaseMarks& operator=(const PhaseMarks&) = delete;
  ~PhaseMarks() {
    for (Mark& m : marks_)
      if (m.event != nullptr) cudaEventDestroy(m.event);
  }

  // Starts a step: forgets the last step's marks (their events are reused) and records its start.
  void begin_step(cudaStream_t stream) {
    used_ = 0;
    mark(stream, "start");
  }

  // Records the end of phase `name` on `stream`. The first CUDA error sticks (error()).
  void mark(cudaStream_t stream, const char* name) {
    if (used_ == marks_.size()) {
      Mark m;
      note(cudaEventCreate(&m.event));
      marks_.push_back(std::move(m));
    }
    Mark& m = marks_[used_++];
    m.name = name;
    if (m.event != nullptr) note(cudaEventRecord(m.event, stream));
  }

  // After the stream synchronised: each phase's ms since the mark before it, in order (the step's
  // start mark is not a phase). A phase whose events failed reads −1.
  std::vector<std::pair<std::string, float>> phases() {
    std::vector<std::pair<std::string, float>> out;
    for (size_t i = 1; i < used_; ++i) {
      float ms = -1;
      if (marks_[i - 1].event != nullptr && marks_[i].event != nullptr &&
          note(cudaEventElapsedTime(&ms, marks_[i - 1].event, marks_[i].event)) != cudaSuccess)
        ms = -1;
      out.emplace_back(marks_[i].name, ms);
    }
    return out;
  }

  cudaError_t error() const { return error_; }

 private:
  struct Mark {
    std::string name;
    cudaEvent_t event = nullptr;
  };
  cudaError_t note(cudaError_t e) {
    if (e != cudaSuccess && error_ == cudaSuccess) error_ = e;
    return e;
  }
  std::vector<Mark> marks_;
  size_t used_ = 0;
  cudaError_t error_ = cudaSuccess;
};

// The installed marks (nullptr: none). One per process: an inline function's static is shared by
// every translation unit of the binary.
inline PhaseMarks*& installed_phase_marks() {
  static PhaseMarks* marks = nullptr;
  return marks;
}

// The end of phase `name` on `stream`, when marks are installed.
inline void mark_phase(cudaStream_t stream, const char* name) {
  if (PhaseMarks* m = installed_phase_marks()) m->mark(stream, name);
}

}  // namespace detmoe
