#!/usr/bin/env python3
"""DRAM bytes of the routed weight-gradient launches by tile order: an event model with an LRU L2
that the launch's output also passes through.

The weight gradients (megakernel/host/weight_grads.cu) are GEMM-core launches C[e] = Aᵀ·B over each
expert's rows: dW_down (m = H, n = F; A = dy, B = a) and dW_gate_up (m = 2F, n = H; A = dh,
B = x_recv). Their K is the expert's rows (2048 on deepseek-v3 and mixtral-8x7b: 32 k-blocks), so a
tile is short and an expert's grid spans many waves: what L2 has to keep is not slices shared by
concurrent tiles at one k (tile_drift_dram.py) but whole panels re-used by later tiles of the same
expert. Today's order (gemm/band_order.h: bands of 8 m-blocks, m fastest) reads each A panel once
and B once per band — if B's panels do not survive from one band to the next, the launch reads B
(m_blocks / 8) times. ncu measured (session 37, H100, mixtral-8x7b / deepseek-v3): dW_down 2.2-2.4 /
2.6-3.0 GB, dW_gate_up 5.2-5.6 / 4.8-4.9 GB, against 0.60 / 1.21 and 1.07 / 1.47 GB for each operand
once.

Each CTA runs its tiles' k-blocks at its own pace (as tile_drift_dram.py) and every k-block reads
its A slice (tile_m x 64 rows) and B slice (tile_n x 64 rows); at a tile's end its output (tile_m x
tile_n x out_bytes) is written through the L2: `keep` inserts those lines as most recent (plain TMA
stores), `stream` as least recent (an L2 evict-first policy). A read miss is a DRAM read. Orders:
`mB` = bands of B m-blocks, m fastest (today's is m8); `nB` = bands of B n-blocks, n fastest (the
transpose: a band's B panels stay while every m-block passes, A is read once per band).

    perf/wgrad_order_dram.py --launch mixtral-gate_up --orders m8,n8,n16 --l2-mb 25,50

A prediction tool, not a measurement: the L2 is not LRU (two partitions, hashed sets), the producer
runs stages ahead of its consumers and the output's write-back is not modelled.
"""
import argparse
import math
import random

from tile_drift_dram import LruL2, schedule
from tile_order_dram import band_coords

# (experts, m, n, rows per expert) of each named launch, balanced routing (core/shapes.cpp).
LAUNCHES = {
    "deepseek-down": (32, 7168, 2048, 2048),
    "deepseek-gate_up": (32, 4096, 7168, 2048),
    "mixtral-down": (8, 4096, 14336, 2048),
    "mixtral-gate_up": (8, 28672, 4096, 2048),
    "qwen3-down": (128, 2048, 768, 1024),
    "qwen3-gate_up": (128, 1536, 2048, 1024),
    "gptoss-down": (128, 2880, 2880, 512),
    "gptoss-gate_up": (128, 5760, 2880, 512),
}
TILE_M, TILE_N, KBLOCK = 128, 256, 64


def band_order(m_blocks, n_blocks, order):
    """(m, n) of every tile of one expert's grid in the order `order` ('m8', 'n16', ...): balanced
    bands as gemm/band_order.h (tile_order_dram.band_coords), transposed for n-fastest ones."""
    fast, band = order[0], int(order[1:])
    if fast == "m":
        return [band_coords(i, m_blocks, n_blocks, band) for i in range(m_blocks * n_blocks)]
    return [band_coords(i, n_blocks, m_blocks, band)[::-1] for i in range(m_blocks * n_blocks)]


def simulate(experts, m, n, rows, order, l2_bytes, out_bytes, stores, ctas, speed, noise, seed, deal):
    """DRAM bytes read by the launch (tile_drift_dram.schedule with the tiles' output stores).
    `deal`: static (tile i to CTA i mod ctas, the core's deal for even groups) or tickets (the CTA
    that frees first takes the next tile)."""
    mb, nb, kbs = math.ceil(m / TILE_M), math.ceil(n / TILE_N), math.ceil(rows / KBLOCK)
    tiles = [(g, mi, ni) for g in range(experts) for mi, ni in band_order(mb, nb, order)]
    events = schedule(tiles, ctas, kbs, deal, speed, noise, random.Random(seed), writes=True)
    events.sort(key=lambda e: e[0])
    a_bytes, b_bytes, c_bytes = TILE_M * KBLOCK * 2, TILE_N * KBLOCK * 2, TILE_M * TILE_N * out_bytes
    l2, missed = LruL2(l2_bytes), 0
    for _, key in events:
        if key[0] == "c":
            l2.write(key, c_bytes, evict_first=stores == "stream")
        else:
            missed += l2.read(key, a_bytes if key[0] == "a" else b_bytes)
    return missed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--launch", default="mixtral-gate_up", help="one or more of " + ", ".join(LAUNCHES))
    ap.add_argument("--orders", default="m8,n8,n16")
    ap.add_argument("--l2-mb", default="25,50", help="LRU capacities to try (H100 50 MB in two partitions)")
    ap.add_argument("--out-bytes", type=int, default=4, help="4: fp32 gradients (the default), 2: bf16")
    ap.add_argument("--stores", default="keep,stream")
    ap.add_argument("--ctas", type=int, default=132)
    ap.add_argument("--speed", type=float, default=0.005, help="sigma of the CTAs' fixed pace offsets")
    ap.add_argument("--noise", type=float, default=0.02, help="sigma of each k-block's time")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--deal", default="static", help="static (the core's deal for even groups) or tickets")
    a = ap.parse_args()
    for name in a.launch.split(","):
        experts, m, n, rows = LAUNCHES[name]
        once = experts * (m + n) * rows * 2
        print(f"{name}: {experts} experts, C {m} x {n}, {rows} rows each; each operand once {once / 1e9:.2f} GB, "
              f"output {experts * m * n * a.out_bytes / 1e9:.2f} GB")
        for l2 in (float(x) for x in a.l2_mb.split(",")):
            row = []
            for order in a.orders.split(","):
                for stores in a.stores.split(","):
                    got = simulate(experts, m, n, rows, order, l2 * 1e6, a.out_bytes, stores, a.ctas, a.speed,
                                   a.noise, a.seed, a.deal)
                    row.append(f"{order}/{stores} {got / 1e9:.2f}")
            print(f"  L2 {l2:g} MB: " + ", ".join(row) + " GB")


if __name__ == "__main__":
    main()
