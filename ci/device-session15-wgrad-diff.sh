#!/usr/bin/env bash
# Session 15's fourth device call: where the reference's weight gradients leave the megakernel's
# (and the oracle's) at T=16384 H=64 F=64 E=361 k=10 zipf:1.57 seed 0. Both run the same input
# file (.ab/in.safetensors, written here by `detmoe run --write-inputs`); numpy compares per
# expert and tests whether each expert's difference is rank one (one row's term dyᵀa or dhᵀx).
#   detmoe run --write-inputs .ab/in.safetensors --T 16384 --H 64 --F 64 --E 361 --k 10 --routing zipf:1.570 --seed 0
#   (and .ab/st.py: a numpy safetensors reader, load(path) -> {name: array}), then
#   OUT=dir bash ci/device-session15-wgrad-diff.sh     (carry .devdeps .ab)
source "$(dirname "$0")/device-call.sh"
build_device detmoe
for impl in reference megakernel; do
  build-device/detmoe run --impl $impl --inputs .ab/in.safetensors --outputs /tmp/$impl.safetensors 2>&1 | tail -2
done
build-device/detmoe run --impl oracle --inputs .ab/in.safetensors --outputs /tmp/oracle.safetensors 2>&1 | tail -1
/opt/torch/.venv/bin/python - <<'PY'
import sys, numpy as np
sys.path.insert(0, '.ab'); from st import load
i = load('.ab/in.safetensors'); rows = np.bincount(i['topk_idx'].ravel(), minlength=i['w_down'].shape[0])
R, M, O = load('/tmp/reference.safetensors'), load('/tmp/megakernel.safetensors'), load('/tmp/oracle.safetensors')
for name in ['dw_gate', 'dw_up', 'dw_down', 'd_x', 'out']:
    r, m, o = R[name].astype(np.float64), M[name].astype(np.float64), O[name].astype(np.float64)
    print(f'{name}: max|ref-mk| {np.abs(r-m).max():.3e}  max|ref-oracle| {np.abs(r-o).max():.3e}  max|mk-oracle| {np.abs(m-o).max():.3e}')
    if not name.startswith('dw'): continue
    d = np.abs(r - m).reshape(r.shape[0], -1).max(axis=1)
    bad = np.argsort(-d)[:8]
    for e in bad:
        diff = (r[e] - m[e]); s = np.linalg.svd(diff, compute_uv=False)
        print(f'   expert {e:3d} rows {rows[e]:5d}  max|ref-mk| {d[e]:.3e}  |mk-oracle| {np.abs(m[e]-o[e]).max():.2e}  '
              f'sv1 {s[0]:.3e} sv2 {s[1]:.3e} sv3 {s[2]:.3e}  elems>1e-3 {(np.abs(diff) > 1e-3).sum()}')
    print(f'   experts with max|ref-mk| > 1e-3: {np.sum(d > 1e-3)}: {sorted(np.nonzero(d > 1e-3)[0].tolist())[:40]}')
PY
