#!/usr/bin/env python3
"""DRAM bytes a grouped GEMM's tile order would read if its CTAs ran in lockstep (a lower bound).

Model: `ctas` persistent CTAs take tiles by the static deal (CTA c runs tiles c, c + ctas, ...), all
at the same k-block, so a wave of `ctas` concurrent tiles reads each distinct A m-block slice and B
n-block slice once from DRAM and nothing survives into the next wave. Tiles are numbered group by
group and, inside a group, in balanced bands of `band` m-blocks, m fastest (gemm/band_order.h).
On mixtral-8x7b's dx this model gives the GEMM core (band 8) 5.55 GB; ncu counted 10.5-10.8 GB
(session 36, dram__bytes_read.sum) and cuBLAS per expert 4.24 — the CTAs do not run in lockstep
(tile_drift_dram.py models their drift; docs/PERF.md).

    perf/tile_order_dram.py --groups 8 --m 2048 --n 4096 --k 28672 --bands 4,8,16,32
"""
import argparse
import math


def band_coords(local, m_blocks, n_blocks, band):
    """(m, n) of tile `local` in balanced bands of about `band` m-blocks, m fastest."""
    bands = math.ceil(m_blocks / band)
    base, extra = divmod(m_blocks, bands)
    first = 0
    for b in range(bands):
        height = base + (1 if b < extra else 0)
        if local < height * n_blocks:
            return first + local % height, local // height
        local -= height * n_blocks
        first += height
    raise ValueError("tile out of range")


def order(groups, m_blocks, n_blocks, band):
    return [(g, *band_coords(i, m_blocks, n_blocks, band)) for g in range(groups) for i in range(m_blocks * n_blocks)]


def dram_bytes(tiles, ctas, k, tile_m, tile_n):
    total = 0
    for w in range(0, len(tiles), ctas):
        wave = tiles[w:w + ctas]
        a = {(g, m) for g, m, _ in wave}
        b = {(g, n) for g, _, n in wave}
        total += (len(a) * tile_m + len(b) * tile_n) * k * 2
    return total


def add_problem_args(ap):
    """The grouped problem's arguments (mixtral-8x7b's dx by default), shared with tile_drift_dram.py."""
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--m", type=int, default=2048, help="rows per group")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", type=int, default=28672)
    ap.add_argument("--ctas", type=int, default=132)
    ap.add_argument("--tile", default="128x256")


def problem_dims(a):
    """From add_problem_args' values: tile rows and columns, m-blocks and n-blocks per group, and the
    bytes of every operand read once (the floor any order is measured against)."""
    tm, tn = (int(x) for x in a.tile.split("x"))
    floor = (a.groups * a.m * a.k + a.groups * a.k * a.n) * 2
    return tm, tn, math.ceil(a.m / tm), math.ceil(a.n / tn), floor


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_problem_args(ap)
    ap.add_argument("--bands", default="4,8,16,32")
    a = ap.parse_args()
    tm, tn, mb, nb, floor = problem_dims(a)
    print(f"each operand once: {floor / 1e9:.2f} GB")
    for band in (int(x) for x in a.bands.split(",")):
        grouped = dram_bytes(order(a.groups, mb, nb, band), a.ctas, a.k, tm, tn)
        per_group = a.groups * dram_bytes(order(1, mb, nb, band), a.ctas, a.k, tm, tn)
        print(f"band {band:3d}: one grouped launch {grouped / 1e9:.2f} GB, one launch per group {per_group / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
