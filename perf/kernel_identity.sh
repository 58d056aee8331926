#!/usr/bin/env bash
# Is the fused layer kernel's machine code unchanged between two commits? Compiles
# megakernel/host/layer_launch.cu of each to an sm_90a cubin (ptxas runs here; no GPU needed),
# without line info, and compares the bytes. For refactors that must leave the kernel
# byte-identical (docs/MEGAKERNEL.md); prints the PTX diff size when they differ.
#   perf/kernel_identity.sh [BASE_REV (default HEAD~1)] [NEW_REV (default: the working tree)]
set -euo pipefail
root=$(git rev-parse --show-toplevel)
base=${1:-HEAD~1} new=${2:-}
tmp=$(mktemp -d); trap 'git -C "$root" worktree remove --force "$tmp/base" >/dev/null 2>&1; [ -z "$new" ] || git -C "$root" worktree remove --force "$tmp/new" >/dev/null 2>&1; rm -rf "$tmp"' EXIT
compile() {  # compile TREE OUT KIND(-cubin|-ptx)
  (cd "$1" && nvcc -I"$1/include" -I"$1" -O3 -DNDEBUG --generate-code=arch=compute_90a,code=[sm_90a] \
    --expt-relaxed-constexpr --extended-lambda -std=c++20 -x cu "$3" megakernel/host/layer_launch.cu -o "$2")
}
git -C "$root" worktree add -q --detach "$tmp/base" "$base"
new_tree=$root
if [ -n "$new" ]; then git -C "$root" worktree add -q --detach "$tmp/new" "$new"; new_tree=$tmp/new; fi
compile "$tmp/base" "$tmp/base.cubin" -cubin
compile "$new_tree" "$tmp/new.cubin" -cubin
if cmp -s "$tmp/base.cubin" "$tmp/new.cubin"; then
  echo "layer kernel cubin byte-identical: $base vs ${new:-working tree} ($(stat -c %s "$tmp/new.cubin") bytes)"
  exit 0
fi
compile "$tmp/base" "$tmp/base.ptx" -ptx
compile "$new_tree" "$tmp/new.ptx" -ptx
strip() { grep -v '^\s*//\|^\s*\.loc\|^\s*\.file' "$1"; }
echo "layer kernel cubin DIFFERS: $base vs ${new:-working tree}; PTX lines differing: $(diff <(strip "$tmp/base.ptx") <(strip "$tmp/new.ptx") | grep -c '^[<>]')"
exit 1
