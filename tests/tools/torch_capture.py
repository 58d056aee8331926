#!/usr/bin/env python3
"""Writes a layer problem the way a PyTorch user would capture one (torch tensors, torch's own
router, int64 indices, extra tensors DetMoE does not read), for `detmoe run --inputs` on the GPU
paths: data no generator of ours wrote.
    torch_capture.py OUT.safetensors [--T 300 --H 256 --F 128 --E 16 --k 4 --Fs 0 --seed 0]
"""
import argparse
import json
import struct

import torch


def save(path, tensors, metadata):
    try:
        from safetensors.torch import save_file  # what users write with
        save_file(tensors, path, metadata=metadata)
        return "safetensors.torch.save_file"
    except ImportError:  # the format by hand: 8-byte header length, JSON header, raw bytes
        names = sorted(tensors)
        dt = {torch.bfloat16: "BF16", torch.float32: "F32", torch.int64: "I64"}
        header, blobs, off = {"__metadata__": metadata}, [], 0
        for n in names:
            b = tensors[n].contiguous().view(torch.uint8).numpy().tobytes()
            header[n] = {"dtype": dt[tensors[n].dtype], "shape": list(tensors[n].shape), "data_offsets": [off, off + len(b)]}
            blobs.append(b)
            off += len(b)
        h = json.dumps(header).encode()
        h += b" " * ((8 - len(h) % 8) % 8)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
        return "hand-written safetensors"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    for name, default in (("T", 300), ("H", 256), ("F", 128), ("E", 16), ("k", 4), ("Fs", 0), ("seed", 0)):
        p.add_argument(f"--{name}", type=int, default=default)
    a = p.parse_args()
    g = torch.Generator().manual_seed(a.seed)
    bf = lambda *shape, scale=1.0: (torch.randn(*shape, generator=g) * scale).to(torch.bfloat16)
    logits = torch.randn(a.T, a.E, generator=g)
    top, idx = logits.topk(a.k, dim=-1)  # torch's router: top-k, softmax over the picked slots
    t = {
        "x": bf(a.T, a.H),
        "topk_idx": idx,  # int64, as torch gives it
        "topk_w": torch.softmax(top, dim=-1).float(),
        "w_gate": bf(a.E, a.F, a.H, scale=a.H ** -0.5),
        "w_up": bf(a.E, a.F, a.H, scale=a.H ** -0.5),
        "w_down": bf(a.E, a.H, a.F, scale=a.F ** -0.5),
        "dout": bf(a.T, a.H),
        "router_logits": logits,  # extras a capture carries; DetMoE names and skips them
        "step": torch.tensor([1234], dtype=torch.int64),
    }
    if a.Fs > 0:
        t["ws_gate"] = bf(a.Fs, a.H, scale=a.H ** -0.5)
        t["ws_up"] = bf(a.Fs, a.H, scale=a.H ** -0.5)
        t["ws_down"] = bf(a.H, a.Fs, scale=a.Fs ** -0.5)
    how = save(a.out, t, {"source": "torch_capture.py", "torch": torch.__version__})
    print(f"wrote {a.out} with {how} (torch {torch.__version__}): T={a.T} H={a.H} F={a.F} E={a.E} k={a.k} Fs={a.Fs}")


if __name__ == "__main__":
    main()
