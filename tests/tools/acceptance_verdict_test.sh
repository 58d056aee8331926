#!/usr/bin/env bash
# perf/acceptance_verdict.py (issues 18 and 19's bars over one A/B call's output) on synthetic
# calls: every bar met on an H200 exits 0; the same numbers on an H100 exit 2 and say so; a
# forward 1 % slower than the reference in one round of two, and a backward over the reference,
# exit 1 naming those bars; a tree with bf16 weight gradients beside them is printed like for like
# and leaves the verdict alone; a call without the torch pipeline exits 2.
#   acceptance_verdict_test.sh SOURCE_DIR
set -u
src=${1:?source dir}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
# make_call DIR GPU MK_FWD_SCALE MK_BWD_SCALE: two rounds; the reference's fwd / bwd at 10 / 20 ms,
# the megakernel's at 10·fwd_scale / 20·bwd_scale (round 2: 1 % faster), torch 1.5× the reference.
make_call() {
  python3 - "$@" <<'PY'
import json, os, sys
d, gpu, fs, bs = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
os.makedirs(d, exist_ok=True)
shapes = ["qwen3-30b-a3b", "deepseek-v3", "mixtral-8x7b", "gpt-oss-120b"]
def bench(impl, fwd, bwd):
    out = []
    for s in shapes:
        for r in ["balanced", "zipf1"]:
            out.append({"name": f"{impl}/{s}/{r}/fwd/iterations:20/manual_time", "median_ms": fwd, "p75_ms": fwd * 1.01})
            out.append({"name": f"{impl}/{s}/{r}/fwd+bwd/iterations:20/manual_time", "median_ms": fwd + bwd})
    return {"context": {"gpu": gpu}, "benchmarks": out}
for rnd, speed in ((1, 1.0), (2, 0.99)):
    json.dump(bench("megakernel", 10 * fs * speed, 20 * bs * speed), open(f"{d}/ab-mk-{rnd}.json", "w"))
    json.dump(bench("reference", 10.0, 20.0), open(f"{d}/ab-reference-{rnd}.json", "w"))
json.dump({"results": [{"shape": s, "routing": r, "pass": p, "median_ms": 1.5 * (10.0 if p == "fwd" else 30.0)}
                       for s in shapes for r in ["balanced", "zipf1"] for p in ["fwd", "fwd+bwd"]]},
          open(f"{d}/torch-pipeline.json", "w"))
PY
}
verdict() { (cd "$src/perf" && python3 acceptance_verdict.py "$1") >"$tmp/out.txt" 2>&1; echo $?; }
expect() {  # expect WHAT CODE GOT [PATTERN]
  if [ "$3" != "$2" ]; then echo "FAIL: $1: exit $3, expected $2"; cat "$tmp/out.txt"; fail=1; fi
  if [ -n "${4:-}" ] && ! grep -qE "$4" "$tmp/out.txt"; then echo "FAIL: $1: no line matching '$4'"; cat "$tmp/out.txt"; fail=1; fi
}
make_call "$tmp/pass" "NVIDIA H200" 0.9 0.9
expect "all bars met on an H200" 0 "$(verdict "$tmp/pass")" "verdict: 0 of 34 bars fail, 0 missing$"
make_call "$tmp/h100" "NVIDIA H100 80GB HBM3" 0.9 0.9
expect "all bars met on an H100" 2 "$(verdict "$tmp/h100")" "not the H200 the issues name"
# Forward 1.0× then 0.99×: the per-round ratios 1.0 and ≈ 1.0101 → median 1.005 passes; at 1.02 the
# rounds give 0.980 and 0.990 → FAIL. Backward 1.01× over the reference fails its ≤ 1.0 bar.
make_call "$tmp/slow" "NVIDIA H200" 1.02 1.01
expect "slow forward and backward" 1 "$(verdict "$tmp/slow")" "\| 19 \| fwd ref/mk \| mixtral-8x7b \| zipf1 \| 0\.98[0-9] \| ≥ 1\.0 \| FAIL \|"
grep -qE "\| 18 \| bwd mk/ref \| deepseek-v3 \| balanced \| 1\.00[0-9] \| ≤ 1\.0 \| FAIL \|" "$tmp/out.txt" ||
  { echo "FAIL: the backward bar over the reference is not named"; cat "$tmp/out.txt"; fail=1; }
# A bf16-weight-gradient tree beside it is printed like for like and left out of the verdict: the
# same slow call with a fast bf16 tree still fails the same bars.
python3 - "$tmp/slow" <<'PY'
import json, sys
d = sys.argv[1]
for rnd in (1, 2):
    b = json.load(open(f"{d}/ab-mk-{rnd}.json"))
    for x in b["benchmarks"]:
        x["median_ms"] *= 0.5
    json.dump(b, open(f"{d}/ab-bf16-{rnd}.json", "w"))
PY
code=$( (cd "$src/perf" && python3 acceptance_verdict.py "$tmp/slow" --tree mk --bf16-grads-tree bf16) >"$tmp/out.txt" 2>&1; echo $?)
expect "bf16 tree beside a slow call" 1 "$code" "\| deepseek-v3 \| balanced \| 2\.9[0-9]+ \| ≥ 1\.25 \|"
grep -qE "^verdict: [1-9][0-9]* of 34 bars fail" "$tmp/out.txt" || { echo "FAIL: the bf16 tree changed the verdict"; cat "$tmp/out.txt"; fail=1; }
rm "$tmp/pass/torch-pipeline.json"
expect "no torch pipeline" 2 "$(verdict "$tmp/pass")" "torch-pipeline.json"
[ "$fail" = 0 ] && echo "acceptance_verdict: all cases passed"
exit "$fail"
