#!/usr/bin/env bash
# One device call that explains the megakernel's time instead of only measuring it: every timed
# launch's timeline in one line (SM clock, busy per task kind, mainloop + epilogue per GEMM tile:
# `detmoe_perf_layer --trace`) with the GPU's clocks and power sampled beside it, the GEMM core
# alone on the same GEMM shapes, and ncu's full section set on one launch.
#   OUT=dir PROF_SHAPES=gpt-oss-120b,mixtral-8x7b PROF_GEMM='gpt-oss|qwen3-30b-a3b_up' \
#     PROF_NCU=gpt-oss-120b PROF_BENCH=1 PROF_BUDGET_S=400 perf/megakernel_profile.sh
# PROF_BENCH=1 adds `detmoe bench --impl megakernel --routing balanced` (the four shapes against
# the PyTorch pipeline, $OUT/bench-megakernel.json).
# PROF_LINES=shape: a -lineinfo build (build-line) and ncu's stall samples of one launch of that
# shape per source file and line (perf/ncu_source_lines.py; $OUT/ncu-lines.txt).
# Builds build-device (ci/device-build.sh; carry .devdeps). Output: $OUT/profile.log (summary),
# $OUT/ncu-full.txt, $OUT/ncu-hotspots.txt (stall samples per SASS instruction), $OUT/clocks.csv.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:?}
mkdir -p "$OUT"
source "$root/ci/device-env.sh"
start=$(date +%s)
left() { echo $(( ${PROF_BUDGET_S:-400} - ($(date +%s) - start) )); }
step() { echo; echo "=== $* ($(date +%T), $(left) s left)"; }
{
  step build
  "$root/ci/device-build.sh" build-device detmoe detmoe_perf_layer detmoe_perf_gemm 2>&1 | grep -E "error|FAILED" | head -20
  cd "$root/build-device" || exit 1
  if [ -n "${PROF_SHAPES-gpt-oss-120b}" ]; then
  step "megakernel, every launch traced (${PROF_SHAPES:-gpt-oss-120b})"
  # Clocks, power and throttle reasons every 100 ms while the layer benchmark runs.
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv -lms 100 >"$OUT/clocks.csv" 2>&1 &
  smi=$!
  timeout $(( $(left) > 260 ? 200 : $(left) - 60 )) ./perf/detmoe_perf_layer --impls=megakernel --routings=balanced \
    --shapes="${PROF_SHAPES:-gpt-oss-120b}" --timed="${PROF_TIMED:-20}" --trace --benchmark_counters_tabular=true 2>&1 |
    grep -vE "^(Run on|CPU Caches|  L[123]|Load Average|-----)"
  kill $smi 2>/dev/null
  echo "clock samples: $(wc -l <"$OUT/clocks.csv"); SM MHz min/max: $(awk -F', ' 'NR>1 && $2+0>0 {print $2+0}' "$OUT/clocks.csv" | sort -n | sed -n '1p;$p' | tr '\n' ' ')"
  echo "power W max: $(awk -F', ' 'NR>1 {print $4+0}' "$OUT/clocks.csv" | sort -n | tail -1); throttle reasons seen: $(awk -F', ' 'NR>1 {print $6}' "$OUT/clocks.csv" | sort | uniq -c | tr '\n' ' ')"
  fi
  if [ "${PROF_BENCH:-0}" = 1 ] && [ "$(left)" -gt 200 ]; then
    step "detmoe bench --impl megakernel, balanced, against PyTorch"
    timeout 150 ./detmoe bench --impl megakernel --routing balanced --json "$OUT/bench-megakernel.json" 2>&1 |
      grep -E "/fwd|torch .*fwd|speedup|rror" | tail -16
  fi
  if [ -n "${PROF_GEMM:-gpt-oss}" ] && [ "$(left)" -gt 120 ]; then
    step "GEMM core alone (${PROF_GEMM:-gpt-oss})"
    timeout 90 ./perf/detmoe_perf_gemm --benchmark_filter="grouped/(${PROF_GEMM:-gpt-oss})" --benchmark_counters_tabular=true 2>&1 |
      grep -E "^gemm/|rror"
  fi
  if [ -n "${PROF_NCU:-}" ] && [ "$(left)" -gt 100 ]; then
    step "ncu --set full, one ${PROF_NCU} launch"
    timeout $(( $(left) - 30 )) ncu --clock-control none --set full --import-source no -f -o /tmp/prof \
      -k regex:layer_forward --launch-count 1 \
      ./detmoe verify --impl megakernel --shape "$PROF_NCU" --forward-only --no-oracle >/tmp/ncu-run.log 2>&1
    echo "ncu exit $?"; tail -3 /tmp/ncu-run.log
    ncu --import /tmp/prof.ncu-rep --page details >"$OUT/ncu-full.txt" 2>&1
    grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Hit Rate|Issue Slots Busy|No Eligible" "$OUT/ncu-full.txt" | head -12
    # Stall samples per SASS instruction: where the warps wait.
    ncu --import /tmp/prof.ncu-rep --page source --print-source sass --csv >/tmp/sass.csv 2>&1
    python3 "$root/perf/ncu_hotspots.py" /tmp/sass.csv --top "${PROF_HOT:-40}" --context 4 --listing 0.02 \
      >"$OUT/ncu-hotspots.txt" 2>&1
    gzip -c /tmp/sass.csv >"$OUT/ncu-sass.csv.gz"
    echo "hotspots exit $?"; head -c 3000 "$OUT/ncu-hotspots.txt"
  fi
  if [ -n "${PROF_LINES:-}" ] && [ "$(left)" -gt 120 ]; then
    step "stall samples per source line, one ${PROF_LINES} launch (-lineinfo build)"
    cmake -S "$root" -B "$root/build-line" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-lineinfo \
      -DCMAKE_PREFIX_PATH="$root/.devdeps/usr" -DCMAKE_LIBRARY_PATH="$root/.devdeps/usr/lib/x86_64-linux-gnu" \
      -DNCCL_ROOT="$DETMOE_NCCL_ROOT" >/dev/null && ninja -C "$root/build-line" detmoe >/tmp/build-line.log 2>&1
    echo "build-line exit $?"
    timeout $(( $(left) - 40 )) ncu --clock-control none --section SourceCounters -f -o /tmp/lines \
      -k regex:layer_forward --launch-count 1 \
      "$root/build-line/detmoe" verify --impl megakernel --shape "$PROF_LINES" --forward-only --no-oracle >/tmp/ncu-lines.log 2>&1
    echo "ncu exit $?"
    ncu --import /tmp/lines.ncu-rep --page source --print-source sass --csv >/tmp/lines-sass.csv 2>&1
    rm -rf /tmp/cubins && mkdir -p /tmp/cubins && (cd /tmp/cubins && cuobjdump -xelf all "$root/build-line/detmoe" >/dev/null)
    cubin=$(grep -l layer_forward_kernel /tmp/cubins/*.cubin | head -1)
    nvdisasm -g -c "$cubin" >/tmp/lines-disasm.txt
    python3 "$root/perf/ncu_source_lines.py" /tmp/lines-sass.csv /tmp/lines-disasm.txt --kernel layer_forward_kernel \
      --top "${PROF_HOT:-40}" >"$OUT/ncu-lines.txt" 2>&1
    echo "source lines exit $?"; head -30 "$OUT/ncu-lines.txt"
  fi
  step done
} 2>&1 | tee "$OUT/profile.log"
