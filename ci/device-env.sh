# Environment for builds and runs on the GPU machine (source it). The system NCCL there
# (2.28.3) has broken symmetric memory; PyTorch's 2.28.9 is used instead. The Debian -dev
# packages travel in .devdeps (../shared/tools/device-deps.sh), which the device has no
# registry to install from. The toolkit's lib64 is listed for binaries built on the CPU machine
# (their runpath names /usr/local/cuda/lib, which the GPU machine may lack).
DETMOE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export DETMOE_NCCL_ROOT=${DETMOE_NCCL_ROOT:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl}
export LD_LIBRARY_PATH=$DETMOE_NCCL_ROOT/lib:$DETMOE_ROOT/.devdeps/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
export PATH=/usr/local/cuda/bin:$PATH
# Reports name the commit they ran: from git, or from GIT_SHA when the tree was copied without .git.
export DETMOE_GIT_SHA=${DETMOE_GIT_SHA:-$(git -C "$DETMOE_ROOT" rev-parse HEAD 2>/dev/null || cat "$DETMOE_ROOT/GIT_SHA" 2>/dev/null || true)}
