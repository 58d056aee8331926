#!/usr/bin/env bash
# Makes (once) a Python virtual environment with PyTorch from PyPI for building and testing the
# PyTorch op on a machine that has none, and prints its interpreter's path. Only what the op's
# build and CPU-side tests need: the torch wheel (CUDA 13 build, ~530 MB) and the few libraries
# `import torch` loads that the CUDA toolkit under /usr/local/cuda lacks — not cuDNN, NCCL or
# Triton (about 1.7 GB in all, ~30 s from PyPI).
#   ci/torch-venv.sh [VENV_DIR]   (default: $DETMOE_TORCH_VENV, else .torch-venv in the checkout)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-${DETMOE_TORCH_VENV:-$root/.torch-venv}}
torch_version=2.11.0
py=$venv/bin/python
if [ -x "$py" ] && "$py" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$torch_version')" 2>/dev/null; then
  echo "$py"; exit 0
fi
python=$(command -v python3 || true)
[ -n "$python" ] || { echo "ci/torch-venv.sh: no python3 on PATH" >&2; exit 3; }
"$python" -m venv "$venv" >&2 || { echo "ci/torch-venv.sh: $python cannot make a venv (install python3-venv)" >&2; exit 3; }
"$py" -m pip install -q --no-deps "torch==$torch_version" >&2
"$py" -m pip install -q typing_extensions sympy filelock networkx jinja2 fsspec numpy safetensors \
  "cuda-toolkit[cufile]==13.0.2" "nvidia-cusparselt-cu13==0.8.0" "nvidia-nvshmem-cu13==3.4.5" >&2
"$py" -c "import torch; print('ci/torch-venv.sh: torch', torch.__version__, 'at', torch.__file__)" >&2
echo "$py"
