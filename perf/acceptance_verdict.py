#!/usr/bin/env python3
"""Issues 18 and 19's speed bars, applied to one A/B call's output (ci/device-ab-prebuilt.sh with
AB_REF=round, AB_TORCH=1 and both routings): per shape and routing, each bar's value, its bound
and PASS/FAIL, then the verdict. Ratios against the reference are the medians of per-round ratios
(ab_summary.py's rule: a ratio taken within a round cancels the power cap's drift between rounds);
ratios against the torch pipeline use the tree's median over rounds (torch runs once, after them).

  python3 perf/acceptance_verdict.py OUT_DIR [--tree NAME] [--bf16-grads-tree NAME]

--bf16-grads-tree names a tree of the same call that ran with bf16 weight gradients
(detmoe_perf_layer --grad-dtype=bf16, e.g. a knob tree 'bf16=--grad-dtype=bf16'): the torch pipeline's
weight gradients are bf16 (its parameters are), so fwd+bwd torch / mk is also printed like for like.
That table is information for whoever reads the bars; the verdict counts the default (fp32) tree only.

Exit 0 when every bar passes on an H200 (where the issues measure), 1 when a bar fails, 2 when all
pass on another GPU (the numbers hold for that GPU only) or data is missing.
"""
import argparse
import json
import os
import statistics
import sys

from ab_summary import load, passes

SHAPES = ("qwen3-30b-a3b", "deepseek-v3", "mixtral-8x7b", "gpt-oss-120b")
ROUTINGS = ("balanced", "zipf1")
# Issue 19: forward against the reference (≥ 1.0 everywhere) and the torch pipeline.
FWD_VS_TORCH = {"qwen3-30b-a3b": 1.3, "deepseek-v3": 1.3, "gpt-oss-120b": 1.3, "mixtral-8x7b": 1.15}
P75_SPREAD_SHAPE, P75_SPREAD_MAX = "gpt-oss-120b", 1.05
# Issue 18: backward against the reference (≤ 1.0 everywhere) and fwd+bwd against the pipeline.
FWD_BWD_VS_TORCH = {"qwen3-30b-a3b": 1.35, "gpt-oss-120b": 1.35, "deepseek-v3": 1.25, "mixtral-8x7b": 1.25}


def p75_spreads(out_dir, tree):
    """(shape, routing) → the largest p75 / median of the tree's forward over its rounds."""
    spread = {}
    for name in sorted(os.listdir(out_dir)):
        if not (name.startswith(f"ab-{tree}-") and name.endswith(".json")):
            continue
        for b in json.load(open(os.path.join(out_dir, name))).get("benchmarks", []):
            parts = b["name"].split("/")
            if len(parts) >= 4 and parts[3] == "fwd" and "p75_ms" in b and b.get("median_ms"):
                key = (parts[1], parts[2])
                spread[key] = max(spread.get(key, 0.0), b["p75_ms"] / b["median_ms"])
    return spread


def gpu_name(out_dir, tree):
    for name in sorted(os.listdir(out_dir)):
        if name.startswith(f"ab-{tree}-") and name.endswith(".json"):
            return json.load(open(os.path.join(out_dir, name))).get("context", {}).get("gpu", "unknown GPU")
    return "unknown GPU"


def tree_median(rounds, key, step):
    """A tree's median over its rounds of one row (shape, routing) and pass, None without data."""
    values = [p[key][step] for p in rounds.values() if key in p and step in p[key]]
    return statistics.median(values) if values else None


def like_for_like(rounds, tree, torch):
    """fwd+bwd torch / mk for a tree with bf16 weight gradients, as the pipeline computes them."""
    print(f"fwd+bwd torch / mk with bf16 weight gradients (tree {tree}; information, not in the verdict):")
    if not rounds:
        print(f"  no rounds of tree {tree} in this call")
        return
    print("| shape | routing | torch / mk (bf16 weight gradients) | issue 18's bound |")
    print("|---|---|---|---|")
    for shape in SHAPES:
        for routing in ROUTINGS:
            fb, t = tree_median(rounds, (shape, routing), "fwd+bwd"), torch.get((shape, routing, "fwd+bwd"))
            value = f"{t / fb:.3f}" if fb and t else "—"
            print(f"| {shape} | {routing} | {value} | ≥ {FWD_BWD_VS_TORCH[shape]} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--tree", help="the megakernel tree to judge (default: the first that is not the reference)")
    ap.add_argument("--bf16-grads-tree", help="a tree of the same call with bf16 weight gradients (not counted)")
    a = ap.parse_args()
    runs = load(a.out_dir)
    per = {tree: {rnd: passes(m) for rnd, m in rounds.items()} for tree, rounds in runs.items()}
    ref = per.get("reference")
    trees = [t for t in per if t not in ("reference", a.bf16_grads_tree)]
    tree = a.tree or (trees[0] if trees else None)
    torch_path = os.path.join(a.out_dir, "torch-pipeline.json")
    if ref is None or tree not in per or not os.path.exists(torch_path):
        print(f"{a.out_dir}: needs ab-<tree>-<round>.json, ab-reference-<round>.json (AB_REF=round) and "
              "torch-pipeline.json (AB_TORCH=1)")
        return 2
    torch = {(r["shape"], r["routing"], r["pass"]): r["median_ms"] for r in json.load(open(torch_path))["results"]}
    mk = per[tree]
    spread = p75_spreads(a.out_dir, tree)

    def ref_ratio(key, step):
        ratios = [ref[rnd][key][step] / p[key][step] if step == "fwd" else p[key][step] / ref[rnd][key][step]
                  for rnd, p in mk.items() if key in p and key in ref.get(rnd, {})
                  and step in p[key] and step in ref[rnd][key]]
        return statistics.median(ratios) if ratios else None

    rows, failed, missing = [], 0, 0

    def bar(issue, what, key, value, bound, at_least):
        nonlocal failed, missing
        if value is None:
            missing += 1
            rows.append((issue, what, key, "—", bound, at_least, "MISSING"))
            return
        ok = value >= bound if at_least else value <= bound
        failed += 0 if ok else 1
        rows.append((issue, what, key, f"{value:.3f}", bound, at_least, "pass" if ok else "FAIL"))

    for shape in SHAPES:
        for routing in ROUTINGS:
            key = (shape, routing)
            bar(19, "fwd ref/mk", key, ref_ratio(key, "fwd"), 1.0, True)
            f, t = tree_median(mk, key, "fwd"), torch.get((shape, routing, "fwd"))
            bar(19, "fwd torch/mk", key, t / f if f and t else None, FWD_VS_TORCH[shape], True)
            if shape == P75_SPREAD_SHAPE:
                bar(19, "fwd p75/median", key, spread.get(key), P75_SPREAD_MAX, False)
            bar(18, "bwd mk/ref", key, ref_ratio(key, "bwd"), 1.0, False)
            fb, t = tree_median(mk, key, "fwd+bwd"), torch.get((shape, routing, "fwd+bwd"))
            bar(18, "fwd+bwd torch/mk", key, t / fb if fb and t else None, FWD_BWD_VS_TORCH[shape], True)

    gpu = gpu_name(a.out_dir, tree)
    print(f"tree {tree} on {gpu}, {len(mk)} round(s)")
    print("| issue | bar | shape | routing | value | bound | result |")
    print("|---|---|---|---|---|---|---|")
    for issue, what, (shape, routing), value, bound, at_least, result in rows:
        print(f"| {issue} | {what} | {shape} | {routing} | {value} | {'≥' if at_least else '≤'} {bound} | {result} |")
    h200 = "H200" in gpu
    print(f"verdict: {failed} of {len(rows)} bars fail, {missing} missing"
          + ("" if h200 else f"; measured on {gpu}, not the H200 the issues name"))
    if a.bf16_grads_tree:
        like_for_like(per.get(a.bf16_grads_tree), a.bf16_grads_tree, torch)
    if failed:
        return 1
    return 0 if h200 and not missing else 2


if __name__ == "__main__":
    sys.exit(main())
