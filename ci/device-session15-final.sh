#!/usr/bin/env bash
# Session 15's eighth device call: the megakernel's new ragged-row test, the session-14
# counterexample and the small backward cases; the reference's golden hashes recorded afresh
# (three cases moved with the split weight-gradient GEMMs: small-zipf1, small-hot,
# small-cancel-shared-ep2); then a same-run zipf1 bench of the megakernel and the (split) reference.
#   OUT=dir bash ci/device-session15-final.sh     (carry .devdeps)
source "$(dirname "$0")/device-call.sh"
step build
build_device detmoe detmoe_layer_test detmoe_perf_layer
B=build-device
step "megakernel tests"
layer_tests mk 150 '*Ragged*:*Session14*:Small/MegakernelBackward.*'
step "golden record reference"
d=$(mktemp -d); cp golden/hashes/*.json "$d/"
timeout 120 $B/detmoe golden record --impl reference --dir "$d" >"$OUT/golden-record.log" 2>&1; echo "record exit $?"
cp "$d"/reference.*.json "$OUT/"; diff <(python3 -m json.tool golden/hashes/reference.sm90-132sm-cuda13.0.json) \
  <(python3 -m json.tool "$d"/reference.sm90-132sm-cuda13.0.json) | grep '^[<>]' | grep -c . ; 
timeout 120 $B/detmoe golden check --impl reference --dir "$d" 2>&1 | tail -1
step "bench zipf1 (megakernel + reference, same run)"
timeout 300 $B/perf/detmoe_perf_layer --impls=megakernel,reference --shapes=qwen3-30b-a3b,deepseek-v3,mixtral-8x7b,gpt-oss-120b \
  --routings=zipf1 --timed=20 --benchmark_out="$OUT/bench-zipf1.json" --benchmark_out_format=json >"$OUT/bench.log" 2>&1
echo "bench exit $?"
python3 - "$OUT/bench-zipf1.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for b in d["benchmarks"]:
    print(f'{b["name"].split("/iterations")[0]:55s} median {b.get("median_ms",0):7.3f} ms  min {b.get("min_ms",0):7.3f}  J/step {b.get("joules_per_step",0):6.2f}  W {b.get("avg_watts",0):5.0f}')
PY
step done
