#!/usr/bin/env bash
# Session 15's first device call: build; the property test's fix (drawn knobs always valid, the
# session-14 counterexample replayed, MegakernelBackwardProperty with 300 problems) and the
# megakernel's other backward tests; a same-run megakernel + reference bench of the four shapes
# (fwd and fwd+bwd, joules per step, task timelines); then ncu's DRAM/L2 bytes and instruction
# counts of one deepseek-v3 forward step of each (where the reference spends less energy).
#   OUT=dir BUDGET_S=560 bash ci/device-session15.sh     (carry .devdeps)
source "$(dirname "$0")/device-call.sh"
step build
build_device detmoe detmoe_perf_layer detmoe_layer_test
B=build-device
step "tests"
layer_tests tests 120 'MegakernelPropertyKnobs.*:MegakernelBackwardProperty.Session14*:*Backward*-*NamedShapes*:*Property*:MegakernelCombine.*'
step "bench (megakernel + reference, same run)"
timeout 240 $B/perf/detmoe_perf_layer --impls=megakernel,reference --shapes=qwen3-30b-a3b,deepseek-v3,mixtral-8x7b,gpt-oss-120b \
  --routings=balanced --timed=20 --trace --benchmark_out="$OUT/bench.json" --benchmark_out_format=json >"$OUT/bench.log" 2>&1
echo "bench exit $?"
python3 - "$OUT/bench.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for b in d["benchmarks"]:
    print(f'{b["name"].split("/iterations")[0]:55s} median {b.get("median_ms",0):7.3f} ms  min {b.get("min_ms",0):7.3f}  J/step {b.get("joules_per_step",0):6.2f}  W {b.get("avg_watts",0):5.0f}  SM MHz {b.get("trace_sm_mhz",0):5.0f}')
PY
if [ "$(left)" -gt 200 ]; then
  step "property ($(left) s left)"
  backward_property $(( $(left) - 110 ))
fi
for impl in megakernel reference; do
  [ "$(left)" -gt 45 ] || break
  step "ncu $impl deepseek-v3 fwd (2 steps)"
  timeout $(( $(left) - 10 )) ncu --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,sm__inst_executed.sum,l1tex__m_xbar2l1tex_read_bytes.sum,sm__cycles_elapsed.avg.per_second \
    --csv $B/detmoe verify --impl $impl --shape deepseek-v3 --forward-only --no-oracle >"$OUT/ncu-$impl.csv" 2>"$OUT/ncu-$impl.err"
  echo "ncu $impl exit $?"
  python3 - "$OUT/ncu-$impl.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
hdr = rows[0]; idx = {h: i for i, h in enumerate(hdr)}
tot = collections.defaultdict(float); kernels = set(); names = collections.Counter()
for r in rows[1:]:
    if len(r) < len(hdr): continue
    kernels.add(r[idx["ID"]]); m = r[idx["Metric Name"]]; u = r[idx["Metric Unit"]]
    v = float(r[idx["Metric Value"]].replace(",", ""))
    scale = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "nsecond": 1, "usecond": 1e3, "msecond": 1e6}.get(u, 1)
    tot[m] += v * scale
    if m == "gpu__time_duration.sum": names[r[idx["Kernel Name"]][:60]] += 1
print(f"kernels {len(kernels)}; per step (÷2): " + ", ".join(f"{m} {v/2:.4g}" for m, v in sorted(tot.items()) if "per_second" not in m))
for n, c in names.most_common(6): print(f"  {c:4d} × {n}")
PY
done
step done
