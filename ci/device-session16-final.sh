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
B=build-device; T=$B/tests/megakernel/detmoe_layer_test
for tool in racecheck memcheck; do
  for args in "--shape small-shared --routing zipf1" "--shape small --routing hot --P 2 --backend loopback"; do
    step "$tool $args"
    timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $B/detmoe verify --impl megakernel $args --no-oracle \
      >"$OUT/san.log" 2>&1
    echo "$tool exit $?"; grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|Hazard|PASS|FAIL' "$OUT/san.log" | head -4
  done
done
step "bench (megakernel + reference + torch pipeline, same run; $(left) s left)"
timeout 330 $B/detmoe bench --impl megakernel --trace --json "$OUT/bench.json" >"$OUT/bench.log" 2>&1
echo "bench exit $?"
grep -vE '^ +(GEMM|bwd|plan|dispatch|weighted|kind|busy)|^task|^megakernel/|^reference/|last timed launch|^\$' "$OUT/bench.log" | tail -40
if [ "$(left)" -gt 150 ]; then
  step "backward property ($(left) s left)"
  RC_PARAMS="max_success=300" timeout $(( $(left) - 60 )) $T --gtest_filter='MegakernelBackwardProperty.Random*' >"$OUT/property.log" 2>&1
  echo "property exit $?"; grep -E 'OK, passed|Falsifiable|Gave up|PASSED|FAILED' "$OUT/property.log" | head -4
fi
if [ "$(left)" -gt 60 ]; then
  step "accept --level 1"
  timeout $(( $(left) - 10 )) $B/detmoe accept --level 1 >"$OUT/accept.log" 2>&1; echo "accept exit $?"; tail -8 "$OUT/accept.log"
fi
step done
