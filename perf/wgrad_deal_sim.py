#!/usr/bin/env python3
"""Model of the GEMM core's static deal for one weight-gradient launch (dW_down of gpt-oss-120b by
default), balanced against zipf1 routing: tiles numbered group by group in bands of 8 m-blocks
(m fastest), CTA c takes tiles c, c + G, ...; a tile costs k_blocks * T_KB + T_EPI µs (mainloop at
the clock's peak, then its fp32 epilogue). Prints each routing's makespan and, while expert 0's
tiles run, the union of the K windows the running tiles read (per A and b panel: the k-block range
between the least and the most advanced tile), an L2 footprint proxy for the hot expert's panels.
Zipf counts are drawn like core/routing.cpp's (weights 1/(e + 1), k distinct experts per token),
not bit-identical to it. docs/PERF.md session 29 uses it:  python3 perf/wgrad_deal_sim.py"""
import argparse
import random

p = argparse.ArgumentParser()
p.add_argument("--T", type=int, default=16384)
p.add_argument("--k", type=int, default=4)
p.add_argument("--E", type=int, default=128)
p.add_argument("--M", type=int, default=2880, help="weight-gradient rows (dW_down: H)")
p.add_argument("--N", type=int, default=2880, help="weight-gradient columns (dW_down: F)")
p.add_argument("--ctas", type=int, default=132)
p.add_argument("--t-kb", type=float, default=0.74, help="µs per 64-row k-block of a 128 x 256 tile")
p.add_argument("--t-epi", type=float, default=3.8, help="µs per tile epilogue (fp32 stores)")
a = p.parse_args()


def zipf_counts(rng):
    counts = [0] * a.E
    for _ in range(a.T):
        w = [1.0 / (e + 1) for e in range(a.E)]
        for _ in range(a.k):
            r, acc, pick = rng.random() * sum(w), 0.0, a.E - 1
            for e in range(a.E):
                acc += w[e]
                if acc >= r:
                    pick = e
                    break
            counts[pick] += 1
            w[pick] = 0.0
    return counts


def deal(counts, band=8):
    mb, nb = (a.M + 127) // 128, (a.N + 255) // 256
    tiles = []
    for g, rows in enumerate(counts):
        kb = (rows + 63) // 64
        for b0 in range(0, mb, band):
            h = min(band, mb - b0)
            tiles += [(g, m, n, kb) for n in range(nb) for m in range(b0, b0 + h)]
    runs, ends = [], []
    for c in range(a.ctas):
        t = 0.0
        for i in range(c, len(tiles), a.ctas):
            g, m, n, kb = tiles[i]
            runs.append((t, t + kb * a.t_kb, g, m, n))
            t += kb * a.t_kb + a.t_epi
        ends.append(t)
    return runs, max(ends)


def hot_window_mb(runs, samples=200):
    hot = [r for r in runs if r[2] == 0]
    t0, t1 = min(r[0] for r in hot), max(r[1] for r in hot)
    sizes = []
    for s in range(samples):
        t = t0 + (t1 - t0) * (s + 0.5) / samples
        win = {}
        for st, en, g, m, n in runs:
            if st <= t < en:
                kpos = int((t - st) / a.t_kb)
                for key in (("A", g, m), ("B", g, n)):
                    lo, hi = win.get(key, (kpos, kpos))
                    win[key] = (min(lo, kpos), max(hi, kpos))
        sizes.append(sum((hi - lo + 1) * 64 * (128 if kind == "A" else 256) * 2 for (kind, _, _), (lo, hi) in win.items()))
    return sum(sizes) / len(sizes) / 1e6, max(sizes) / 1e6


zipf = zipf_counts(random.Random(1))
print("zipf1 rows per expert: max %d (experts 0-4: %s), min %d" % (max(zipf), zipf[:5], min(zipf)))
for name, counts in (("balanced", [a.T * a.k // a.E] * a.E), ("zipf1", zipf)):
    runs, makespan = deal(counts)
    mean, worst = hot_window_mb(runs)
    print("%-8s makespan %.2f ms; expert 0's running K windows: mean %.1f MB, worst %.1f MB" % (name, makespan / 1e3, mean, worst))
