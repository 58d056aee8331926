#!/usr/bin/env bash
# One device call for the GPU gate (issue: the gate must gate the megakernel): build, the GPU
# tests that cover the touched paths, golden hashes recorded and checked, stored speed medians,
# the gate N times, a planted slowdown, and `git bisect run ci/bisect.sh --gpu` over a bundle of
# commits with one planted bad commit. Stages are switched by environment variables; logs and
# the files to commit go to $OUT (at most 8 files come back: one log, demo.log, and the JSON
# to commit).
#   OUT=dir STAGES="build tests replay record perf gate slow bisect" ci/device-gate-demo.sh
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$root/out-device}
mkdir -p "$OUT"
source "$root/ci/device-env.sh"
STAGES=${STAGES:-"build tests record perf gate slow bisect"}
GATE_RUNS=${GATE_RUNS:-3}
build=$root/build-device
has() { [[ " $STAGES " == *" $1 "* ]]; }
step() { echo; echo "=== $* ($(date +%T))"; }
store_baseline() {  # the GPU baseline with a tensor store, so a change names its first element
  python3 - "$root/ci/gate-baseline-gpu.json" "$root/ci/.gate-baseline-gpu-store.json" "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["golden"]["store"] = "../golden-store"
if "perf-only" in sys.argv[3:]:
    d = {"schema": d["schema"], "performance": {"suites": [s for s in d["performance"]["suites"] if "megakernel" in " ".join(s["args"])]}}
if "golden-mk-only" in sys.argv[3:]:
    d = {"schema": d["schema"], "golden": {"impls": ["megakernel"], "store": "../golden-store"}}
json.dump(d, open(sys.argv[2], "w"), indent=1)
PY
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
echo "git: $(command -v git) python3: $(command -v python3)"
if has build; then
  step build
  t0=$(date +%s)
  "$root/ci/device-build.sh" build-device 2>&1 | tail -3
  echo "build took $(( $(date +%s) - t0 )) s"
fi
cd "$build" || exit 3
if has tests; then
  step "every test but the long property/fuzz runs (GPU tests really run here)"
  ctest -j4 --timeout 200 -E "${TESTS_EXCLUDE:-MegakernelProperty|ReferenceFuzz|LayerFuzz}" >/tmp/ctest.log 2>&1; echo "ctest exit $?"
  cat /tmp/ctest.log >>"$OUT/demo.log"
  grep -E "tests passed|\*\*\*Failed|\*\*\*Exception|Timeout" /tmp/ctest.log | head -20
  echo "skipped: $(grep -c '\*\*\*Skipped' /tmp/ctest.log)"
fi
if has replay; then
  step "replay: PyTorch-made captures through the GPU paths, against the oracle; a seeded file gives the golden bits"
  py=/opt/torch/.venv/bin/python
  for fs in 0 64; do
    "$py" "$root/tests/tools/torch_capture.py" "/tmp/cap$fs.safetensors" --Fs $fs --seed $((fs + 1)) 2>&1 | tail -1
    ./detmoe run --impl reference --inputs "/tmp/cap$fs.safetensors" --outputs "/tmp/ref$fs.safetensors" --check-oracle \
      >/tmp/replay.log 2>&1; echo "reference replay (Fs=$fs) exit $?"; cat /tmp/replay.log >>"$OUT/demo.log"
    grep -E "ignoring|check|vs the oracle" /tmp/replay.log
    ./detmoe run --impl megakernel --forward-only --inputs "/tmp/cap$fs.safetensors" --outputs "/tmp/mk$fs.safetensors" \
      --check-oracle >/tmp/replay.log 2>&1; echo "megakernel replay (Fs=$fs, forward) exit $?"; cat /tmp/replay.log >>"$OUT/demo.log"
    grep -E "check|vs the oracle" /tmp/replay.log
  done
  ./detmoe run --write-inputs /tmp/seeded.safetensors --shape small-shared --seed 7 >/dev/null
  ./detmoe run --impl reference --inputs /tmp/seeded.safetensors --outputs /tmp/seeded-out.safetensors >/tmp/replay.log 2>&1
  python3 - /tmp/replay.log "$root/golden/hashes/reference.sm90-132sm-cuda13.0.json" <<'PY'
import json, re, sys
got = dict(re.findall(r"^  (\S+)\s+\S+\s+([0-9a-f]{32})$", open(sys.argv[1]).read(), re.M))
rec = {o["name"]: o["xxh3_128"] for c in json.load(open(sys.argv[2]))["cases"] if c["name"] == "small-shared" for o in c["outputs"]}
same = [n for n in rec if got.get(n) == rec[n]]
print(f"seeded file replayed through the reference: {len(same)} of {len(rec)} outputs bitwise equal to golden small-shared"
      + ("" if len(same) == len(rec) and len(got) == len(rec) else f" (MISMATCH: got {sorted(got)}, recorded {sorted(rec)})"))
PY
fi
if has record; then
  step golden: the committed hashes still hold, then a tensor store recorded at this good commit
  for impl in reference megakernel; do
    ./detmoe golden check --impl $impl 2>&1 | tail -3; echo "golden check $impl (committed hashes) exit ${PIPESTATUS[0]}"
    ./detmoe golden record --impl $impl --store "$root/golden-store" >>"$OUT/demo.log" 2>&1; echo "golden record $impl --store exit $?"
  done
  git -C "$root" diff --quiet -- golden/hashes 2>/dev/null || echo "(no git here: hash files compared by golden check above)"
  cp "$root"/golden/hashes/reference.*.json "$root"/golden/hashes/megakernel.*.json "$OUT/" 2>/dev/null
fi
if has perf; then
  step stored speed medians: the megakernel forward on the four shapes, three runs, the slowest median kept
  for r in 1 2 3; do
    ./perf/detmoe_perf_layer --impls=megakernel --shapes=qwen3-30b-a3b,deepseek-v3,mixtral-8x7b,gpt-oss-120b \
      --routings=balanced --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
      --benchmark_format=json >"/tmp/perf-run$r.json" 2>>"$OUT/demo.log"; echo "perf run $r exit $?"
  done
  python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
runs = [json.load(open(f"/tmp/perf-run{r}.json")) for r in (1, 2, 3)]
keep = runs[0]
for b in keep["benchmarks"]:
    if b.get("aggregate_name") == "median":
        vals = [x["real_time"] for run in runs for x in run["benchmarks"] if x["name"] == b["name"]]
        print(f'{b["run_name"]}: medians {", ".join(f"{v:.3f}" for v in vals)} ms -> stored {max(vals):.3f}')
        b["real_time"] = max(vals)
keep["context"]["detmoe_note"] = "per benchmark the slowest median of three good-commit runs (ci/device-gate-demo.sh)"
json.dump(keep, open(f"{out}/gate-perf-megakernel-h200.json", "w"), indent=1)
PY
  cp "$OUT/gate-perf-megakernel-h200.json" "$root/ci/"
fi
if has gate; then
  store_baseline
  for r in $(seq 1 "$GATE_RUNS"); do
    step "GPU gate, run $r of $GATE_RUNS"
    "$root/ci/gpu-gate.sh" --no-build --build-dir "$build" --baseline "$root/ci/.gate-baseline-gpu-store.json" \
      --report "$OUT/gate-run$r.json" >/tmp/gate-run$r.log 2>&1
    echo "gpu-gate run $r exit $?"; cat /tmp/gate-run$r.log >>"$OUT/demo.log"
    grep -E "^(FAIL|WARN|SKIP)|gate:" /tmp/gate-run$r.log | head -12; [ $r -gt 1 ] && rm -f "$OUT/gate-run$r.json"
  done
fi
if has slow; then
  step "planted slowdown (DETMOE_TEST_PLANT=megakernel-slowdown: 90 % of the SMs, same bits)"
  store_baseline perf-only
  DETMOE_TEST_PLANT=megakernel-slowdown "$root/ci/gpu-gate.sh" --no-build --build-dir "$build" \
    --baseline "$root/ci/.gate-baseline-gpu-store.json" >/tmp/gate-slow.log 2>&1
  echo "planted-slowdown gate exit $?"; cat /tmp/gate-slow.log >>"$OUT/demo.log"; grep -E "^(FAIL|WARN|PASS)|gate:" /tmp/gate-slow.log | head -12
fi
if has bisect; then
  step "git bisect run ci/bisect.sh --gpu over bisect-demo.bundle (one planted bad commit among five)"
  demo=$root/.bisect-demo
  rm -rf "$demo" && git clone -q "$root/bisect-demo.bundle" "$demo" -b bisect-demo 2>&1 | tail -2
  ln -s "$root/.devdeps" "$demo/.devdeps"
  cp -r "$root/golden-store" "$demo/golden-store"
  store_baseline golden-mk-only && cp "$root/ci/.gate-baseline-gpu-store.json" /tmp/bisect-baseline.json
  sed -i 's|"../golden-store"|"'"$demo"'/golden-store"|' /tmp/bisect-baseline.json
  cp "$demo/ci/bisect.sh" "$demo/ci/gpu-gate.sh" /tmp/
  cd "$demo" && git log --oneline -6
  good=$(git rev-list --max-parents=0 HEAD 2>/dev/null | head -1)
  git bisect start HEAD HEAD~5 >/dev/null
  DETMOE_SETUP=$demo/ci/device-build.sh DETMOE_BUILD_TARGETS="detmoe" DETMOE_BISECT_BUILD=$demo/build-bisect \
    git bisect run /tmp/bisect.sh --gpu --baseline /tmp/bisect-baseline.json >/tmp/bisect.log 2>&1
  echo "git bisect run exit $?"; cat /tmp/bisect.log >>"$OUT/demo.log"
  grep -E "bisect.sh:|is the first bad commit|^commit |FAIL" /tmp/bisect.log | head -30
  git bisect log | tail -8
fi
step done
