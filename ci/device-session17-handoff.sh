#!/usr/bin/env bash
# Session 17, first call: the GEMM2 scatter hand-off (tree .ab/handoff, branch wip/handoff-rebased)
# beside main (.ab/main): both built, the hand-off tree's forward GPU tests, memcheck of a custom
# shape, racecheck + memcheck of fwd+bwd at P = 1, 2, 4 loopback, then a same-run A/B timing.
#   OUT=dir bash ci/device-session17-handoff.sh      (carry .devdeps .ab)
source "$(dirname "$0")/device-call.sh"
export AB_TREES='handoff=.ab/handoff main=.ab/main'
step "build + tests + memcheck repro"
AB_ROUNDS=0 AB_WORK=/tmp/ab-tests AB_TESTS='Megakernel*:LayerTrace*-*NamedShapes.MatchReference:*BackwardProperty.Random*:*Backward*' \
  AB_REPRO='--T 300 --H 1024 --F 512 --E 16 --k 4' AB_MEMCHECK=1 timeout 330 perf/megakernel_ab.sh >/dev/null 2>&1
echo "ab (build/tests) exit $?"; cat "$OUT/ab-summary.txt"; mv "$OUT/ab-logs.tgz" "$OUT/ab-tests-logs.tgz"
ln -sfn .ab/handoff/build-ab build-device
source ci/device-env.sh
for tool in racecheck memcheck; do
  sanitize_verify $tool --shape small-shared --routing zipf1
  sanitize_verify $tool --shape small --routing hot:0.5 --P 2 --backend loopback
  sanitize_verify $tool --shape small-shared --routing zipf1 --P 4 --backend loopback
done
step "A/B timing ($(left) s left)"
AB_ROUNDS=2 AB_SHAPES=deepseek-v3,mixtral-8x7b,qwen3-30b-a3b,gpt-oss-120b timeout $(( $(left) - 5 )) perf/megakernel_ab.sh >/dev/null 2>&1
echo "ab timing exit $?"; grep round "$OUT/ab-summary.txt"
step done
