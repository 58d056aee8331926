#!/usr/bin/env bash
# Session 16's last device call, on the final tree: compute-sanitizer racecheck and memcheck of
# the forward's new shared-memory hand-offs (task descriptions in the ring, the GEMM2 row table)
# on small cases (single rank and P = 2 loopback), the same-run bench of the four shapes
# (megakernel, reference and the PyTorch pipeline, fwd and fwd+bwd, with the task timelines),
# then the backward property test and `detmoe accept --level 1` as the time allows.
#   OUT=dir bash ci/device-session16-final.sh     (carry .devdeps)
source "$(dirname "$0")/device-call.sh"
step build
build_device detmoe detmoe_perf_layer detmoe_layer_test
B=build-device
# (As run in session 16 the second case named routing "hot", which verify refuses: hot:0.5 here;
# the P = 2 case ran in ci/device-session16-p2.sh.)
for tool in racecheck memcheck; do
  sanitize_verify $tool --shape small-shared --routing zipf1 --no-oracle
  sanitize_verify $tool --shape small --routing hot:0.5 --P 2 --backend loopback --no-oracle
done
step "bench (megakernel + reference + torch pipeline, same run; $(left) s left)"
timeout 330 $B/detmoe bench --impl megakernel --trace --json "$OUT/bench.json" >"$OUT/bench.log" 2>&1
echo "bench exit $?"
grep -vE '^ +(GEMM|bwd|plan|dispatch|weighted|kind|busy)|^task|^megakernel/|^reference/|last timed launch|^\$' "$OUT/bench.log" | tail -40
if [ "$(left)" -gt 150 ]; then
  step "backward property ($(left) s left)"
  backward_property $(( $(left) - 60 ))
fi
if [ "$(left)" -gt 60 ]; then
  step "accept --level 1"
  timeout $(( $(left) - 10 )) $B/detmoe accept --level 1 >"$OUT/accept.log" 2>&1; echo "accept exit $?"; tail -8 "$OUT/accept.log"
fi
step done
