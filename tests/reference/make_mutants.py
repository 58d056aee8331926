#!/usr/bin/env python3
"""Builds deliberately broken variants of the GPU reference tests (mutation check).

Each mutant edits one source line of reference/device/, builds reference_layer_test,
device_plan_test and reference_fuzz_test in BUILD_DIR, copies them to OUT_DIR/<mutant>/ and
restores the source (touching it, so the next build recompiles the original). On a GPU machine
perf/reference_device_run.sh (stage "mutants") runs them: every mutant must make a test fail.

  tests/reference/make_mutants.py BUILD_DIR OUT_DIR [MUTANT...]
"""
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGETS = ["reference_layer_test", "device_plan_test", "reference_fuzz_test"]
BINARIES = ["tests/reference/reference_layer_test", "tests/reference/device_plan_test", "fuzz/reference_fuzz_test"]

# name: (file, original text, broken text)
MUTANTS = {
    "combine_drops_shared": (
        "reference/device/glue_kernels.cu",
        "    if (shared != nullptr) {\n      const Vec8 s = load_bf16x8(shared + t * H + c);\n#pragma unroll\n"
        "      for (int v = 0; v < kVec; ++v) acc.v[v] = acc.v[v] + s.v[v];\n    }\n    store_bf16x8(out + t * H + c, acc);",
        "    store_bf16x8(out + t * H + c, acc);"),
    "dx_sum_skips_slot0": (
        "reference/device/glue_kernels.cu",
        "    for (int64_t j = 0; j < k; ++j) {\n      const Vec8 dx = load_bf16x8(",
        "    for (int64_t j = 1; j < k; ++j) {\n      const Vec8 dx = load_bf16x8("),
    "no_zero_fill_empty_experts": (
        "reference/device/reference_backward.cpp",
        "        DETMOE_CUDA_RETURN(cudaMemsetAsync(dwd, 0, H * F * gbytes, r->stream));\n"
        "        DETMOE_CUDA_RETURN(cudaMemsetAsync(dwgu, 0, 2 * F * H * gbytes, r->stream));\n",
        ""),
    "plan_recv_offset_last_expert": (
        "reference/device/plan_kernels.cu",
        "      if (n > 0 && !found) {",
        "      if (n > 0) {"),
}


def build(build_dir):
    r = subprocess.run(["ninja", "-C", build_dir, *TARGETS], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"build failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    build_dir, out_dir = sys.argv[1], sys.argv[2]
    names = sys.argv[3:] or list(MUTANTS)
    for name in names:
        path, original, broken = MUTANTS[name]
        full = os.path.join(ROOT, path)
        source = open(full).read()
        if source.count(original) != 1:
            sys.exit(f"{name}: the original text is not in {path} exactly once (source changed?)")
        try:
            with open(full, "w") as f:
                f.write(source.replace(original, broken))
            build(build_dir)
            dest = os.path.join(out_dir, name)
            os.makedirs(dest, exist_ok=True)
            for b in BINARIES:
                shutil.copy(os.path.join(build_dir, b), dest)
            print(f"{name}: built into {dest}")
        finally:
            with open(full, "w") as f:
                f.write(source)
            os.utime(full)  # newer than the broken object: the next build recompiles the original
    build(build_dir)


if __name__ == "__main__":
    main()
