#!/usr/bin/env bash
# Session 15's second device call: the backward property's counterexample of call 1
# (T=16384 H=64 F=64 E=361 k=10 P=1 zipf:1.570 seed 0: megakernel vs reference out of tolerance),
# replayed with the comparison table printed, and both implementations against the fp64 oracle
# (with the Σ|terms| clause) in fp32 and bf16 weight gradients.
#   OUT=dir bash ci/device-session15-property.sh     (carry .devdeps)
source "$(dirname "$0")/device-call.sh"
step build
build_device detmoe detmoe_layer_test
B=build-device
step "replay"
RC_PARAMS="${REPRO:-reproduce=B4SbldWYrVmcuVGbgY2bydXYyRGIrAiYhN2a3FmckBidzBiclZWZyVmbjVGLgQUMarYP_H8JYe4MvLjispdldaT1fhkNeLf_kh3afJ2So4HgACIgACYAAsyWAAAAFsACAAAD}" \
  timeout 120 $B/tests/megakernel/detmoe_layer_test --gtest_filter='MegakernelBackwardProperty.Random*' >"$OUT/replay.log" 2>&1
echo "replay exit $?"; grep -v '^\s*$' "$OUT/replay.log" | sed -n '/Falsifiable/,/FAILED/p' | head -60
for impl in megakernel reference; do
  for g in fp32 bf16; do
    step "verify $impl $g"
    timeout 120 $B/detmoe verify --impl $impl --T 16384 --H 64 --F 64 --E 361 --k 10 --routing zipf:1.570 --seed 0 \
      --grad-dtype $g >"$OUT/verify-$impl-$g.log" 2>&1
    echo "verify exit $?"; tail -n 30 "$OUT/verify-$impl-$g.log"
  done
done
step done
