#!/usr/bin/env python3
"""DRAM bytes of a grouped GEMM whose CTAs drift apart: an event model with an LRU L2.

tile_order_dram.py assumes every CTA of a wave reads the same k-block at the same time. Session 36
measured the GEMM core at 2.3-2.5x cuBLAS's bytes (mixtral-8x7b dx 10.5-10.8 GB by ncu's counter,
cuBLAS per expert 4.24), and neither the band nor L2 eviction hints moved it (docs/PERF.md). This
model asks whether drift can: each CTA runs its tiles' k-blocks one after another at its own pace
(a fixed per-CTA speed offset, sigma `--speed`, and per-k-block noise, sigma `--noise`), and every
k-block reads its A slice (tile_m rows x 64 k) and B slice (tile_n x 64 k); an LRU cache of
`--l2-mb` serves the reads in time order, a miss is a DRAM read. Deals: `static` (CTA c runs
c, c + ctas, ...), `tickets` (the next tile to the CTA that frees first, the core's ticket deal) and
`per_group` (one launch per group, all CTAs restarting together, as the reference calls cuBLAS).

    perf/tile_drift_dram.py --groups 8 --m 2048 --n 4096 --k 28672 --speed 0,0.005,0.01,0.02

A prediction tool, not a measurement: the L2 is not LRU (two partitions, hashed sets) and the
producer runs up to 4 stages ahead of its consumers.
"""
import argparse
import heapq
import math
import random
from collections import OrderedDict

from tile_order_dram import add_problem_args, order, problem_dims


def schedule(tiles, ctas, k_blocks, deal, speed, noise, rng, spread=0.0, writes=False):
    """Every slice read of the launch as (time, key). `spread`: the CTAs' first tiles start at
    times spread evenly over that fraction of a tile (a launch that joins a persistent kernel's
    steady state, where tiles of other phases ended at uneven times, instead of a cold start).
    `writes`: also each tile's output store at its end, as (time, ("c", g, m, n))."""
    pace = [1.0 + rng.gauss(0.0, speed) for _ in range(ctas)]
    start = [spread * k_blocks * c / ctas for c in range(ctas)]
    reads = []

    def run(c, tile, t):
        """Reads of `tile` on CTA c from time t; returns when the CTA is free again."""
        g, m, n = tile
        for kb in range(k_blocks):
            reads.append((t, ("a", g, m, kb)))
            reads.append((t, ("b", g, n, kb)))
            t += pace[c] * max(0.5, 1.0 + rng.gauss(0.0, noise))
        if writes:
            reads.append((t, ("c", g, m, n)))
        return t

    if deal == "static":
        for c in range(ctas):
            t = start[c]
            for i in range(c, len(tiles), ctas):
                t = run(c, tiles[i], t)
        return reads
    # tickets: the CTA that frees first takes the next tile
    free = [(start[c], c) for c in range(ctas)]
    heapq.heapify(free)
    for tile in tiles:
        t, c = heapq.heappop(free)
        heapq.heappush(free, (run(c, tile, t), c))
    return reads


class LruL2:
    """An LRU cache of `capacity` bytes standing in for L2 (also wgrad_order_dram.py's): read()
    returns the bytes it fetched from DRAM (0 on a hit); write() allocates a line without reading
    it, as the most recent one or, `evict_first`, as the next to go."""

    def __init__(self, capacity):
        self.capacity, self.lines, self.used = capacity, OrderedDict(), 0

    def read(self, key, size):
        if key in self.lines:
            self.lines.move_to_end(key)
            return 0
        self._insert(key, size, False)
        return size

    def write(self, key, size, evict_first=False):
        self._insert(key, size, evict_first)

    def _insert(self, key, size, first_out):
        self.lines[key] = size
        if first_out:
            self.lines.move_to_end(key, last=False)
        self.used += size
        while self.used > self.capacity:
            _, s = self.lines.popitem(last=False)
            self.used -= s


def dram_bytes(reads, l2_bytes, a_bytes, b_bytes):
    reads.sort(key=lambda r: r[0])
    l2 = LruL2(l2_bytes)
    return sum(l2.read(key, a_bytes if key[0] == "a" else b_bytes) for _, key in reads)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_problem_args(ap)
    ap.add_argument("--band", type=int, default=8)
    ap.add_argument("--l2-mb", type=float, default=50.0)
    ap.add_argument("--speed", default="0,0.005,0.01,0.02", help="sigmas of the CTAs' fixed pace offsets")
    ap.add_argument("--noise", type=float, default=0.02, help="sigma of each k-block's time")
    ap.add_argument("--deals", default="static,tickets,per_group")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--spread", default="0", help="fractions of a tile over which the CTAs' first starts spread")
    a = ap.parse_args()
    tm, tn, mb, nb, floor = problem_dims(a)
    kbs = math.ceil(a.k / 64)
    a_bytes, b_bytes = tm * 64 * 2, tn * 64 * 2
    l2 = a.l2_mb * 1e6
    print(f"each operand once: {floor / 1e9:.2f} GB; {a.groups * mb * nb} tiles of {kbs} k-blocks on {a.ctas} CTAs, "
          f"band {a.band}, L2 {a.l2_mb:g} MB (LRU), k-block noise {a.noise:g}")
    for speed, spread in ((float(x), float(f)) for x in a.speed.split(",") for f in a.spread.split(",")):
        row = []
        for deal in a.deals.split(","):
            rng = random.Random(a.seed)
            if deal == "per_group":
                total = 0
                for g in range(a.groups):
                    tiles = [(g, m, n) for _, m, n in order(1, mb, nb, a.band)]
                    reads = schedule(tiles, a.ctas, kbs, "static", speed, a.noise, rng, spread)
                    total += dram_bytes(reads, l2, a_bytes, b_bytes)
            else:
                reads = schedule(order(a.groups, mb, nb, a.band), a.ctas, kbs, deal, speed, a.noise, rng, spread)
                total = dram_bytes(reads, l2, a_bytes, b_bytes)
            row.append(f"{deal} {total / 1e9:.2f} GB")
        print(f"pace sigma {speed:.3f}, start spread {spread:g} tile: " + ", ".join(row))


if __name__ == "__main__":
    main()
