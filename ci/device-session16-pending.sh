#!/usr/bin/env bash
# What session 16 could not run on its final tree (its device time was spent): compute-sanitizer
# racecheck and memcheck of the fused forward + backward with the backward's dx row tables
# (P = 1, 2, 4 loopback), the 300-problem backward property, and a same-run bench (megakernel,
# reference, PyTorch pipeline) of the final kernels. Run it first.
#   OUT=dir bash ci/device-session16-pending.sh     (carry .devdeps)
source "$(dirname "$0")/device-call.sh"
step build
build_device detmoe detmoe_perf_layer detmoe_layer_test
B=build-device
for tool in racecheck memcheck; do
  sanitize_verify $tool --shape small-shared --routing zipf1
  sanitize_verify $tool --shape small --routing hot:0.5 --P 2 --backend loopback
  sanitize_verify $tool --shape small-shared --routing zipf1 --P 4 --backend loopback
done
step "backward property ($(left) s left)"
backward_property 200
if [ "$(left)" -gt 200 ]; then
  step "bench ($(left) s left)"
  timeout $(( $(left) - 10 )) $B/detmoe bench --impl megakernel --json "$OUT/bench.json" >"$OUT/bench.log" 2>&1
  echo "bench exit $?"; grep -A20 "^megakernel vs" "$OUT/bench.log" | head -22
fi
step done
