#!/usr/bin/env python3
"""A translation unit's SASS on the CPU machine, without the GPU machine's cuobjdump.

NVIDIA's cuobjdump and nvdisasm are on PyPI as binary wheels (nvidia-cuda-cuobjdump,
nvidia-cuda-nvdisasm); this downloads them once into BUILD_DIR/sasstools (ignored with the build
folder), recompiles one source of BUILD_DIR's compile_commands.json to an sm_90a cubin with the
same flags, and writes its SASS. Then it prints, per kernel, the text size and instruction count,
the spill instructions (STL/LDL) and, with --span OPCODE, the extent of the code between the first
and last instruction containing OPCODE and the loops (backward branches) inside it — how session 32
checked that the rolled dSwiGLU epilogue's loop body holds no spill.

    perf/sass_local.py build megakernel/host/layer_backward_launch.cu --out /tmp/bwd.sass --span MUFU.EX2
    python3 perf/sass_summary.py /tmp/bwd.sass      # the mainloop view, as on the GPU machine
"""
import argparse
import json
import pathlib
import re
import shlex
import subprocess
import sys
import zipfile

from sass_summary import instructions  # cuobjdump's instruction lines, parsed once for both scripts

TOOLS = ("nvidia-cuda-cuobjdump", "nvidia-cuda-nvdisasm")


def tool_dir(build):
    """BUILD/sasstools/bin holding cuobjdump and nvdisasm, downloaded on first use."""
    root = build / "sasstools"
    bin_dir = root / "bin"
    if (bin_dir / "cuobjdump").exists() and (bin_dir / "nvdisasm").exists():
        return bin_dir
    wheels = root / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(wheels), *TOOLS],
                   check=True)
    bin_dir.mkdir(exist_ok=True)
    for wheel in wheels.glob("*.whl"):
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                if name.endswith("/bin/cuobjdump") or name.endswith("/bin/nvdisasm"):
                    target = bin_dir / pathlib.Path(name).name
                    target.write_bytes(z.read(name))
                    target.chmod(0o755)
    if not (bin_dir / "cuobjdump").exists():
        sys.exit(f"no cuobjdump in the wheels under {wheels}")
    return bin_dir


def compile_cubin(build, source, cubin):
    """Recompile `source` (a suffix of a compile_commands.json entry) to an sm_90a cubin."""
    entries = json.load(open(build / "compile_commands.json"))
    entry = next((e for e in entries if e["file"].endswith(source)), None)
    if entry is None:
        sys.exit(f"{source}: not in {build}/compile_commands.json")
    args = shlex.split(entry["command"])
    out = args.index("-o")
    args[out + 1] = str(cubin)
    args = [a for a in args if a != "-c"]
    # -cubin takes one GPU code: the sm_90a SASS alone (no embedded PTX).
    args = ["--generate-code=arch=compute_90a,code=sm_90a" if a.startswith("--generate-code") else a for a in args]
    args.insert(1, "-cubin")
    r = subprocess.run(args, cwd=entry["directory"], capture_output=True, text=True)
    if r.returncode:
        sys.exit(r.stderr[-3000:])


def kernels(sass_text):
    """{mangled kernel name: [(offset, instruction text)]} from cuobjdump -sass output."""
    out = {}
    # Each "Function : NAME" header starts a kernel; its instructions run to the next header.
    for chunk in re.split(r"^\s+Function : ", sass_text, flags=re.M)[1:]:
        name, _, body = chunk.partition("\n")
        out[name.strip()] = [(int(offset, 16), text) for offset, text in instructions(body)]
    return out


def report_span(ins, opcode):
    hits = [i for i, (_, t) in enumerate(ins) if opcode in t]
    if not hits:
        print(f"    no {opcode}")
        return
    lo, hi = hits[0], hits[-1]
    by_offset = {a: i for i, (a, _) in enumerate(ins)}
    print(f"    {opcode}: {len(hits)} instructions, first at {lo}, last at {hi} ({hi - lo + 1} instructions apart)")
    for i in range(max(0, lo - 400), min(len(ins), hi + 600)):
        text = ins[i][1]
        m = re.search(r"BRA(?:\.\S+)?\s+(?:`\(\S+\)\s*)?0x([0-9a-f]+)", text)
        target = by_offset.get(int(m.group(1), 16)) if m else None
        if target is None or target >= i or target > hi or i < lo:
            continue
        body = ins[target:i + 1]
        spills = sum(1 for _, t in body if re.search(r"\b(STL|LDL)", t))
        uses = sum(1 for _, t in body if opcode in t)
        print(f"    loop {target}..{i}: {i - target + 1} instructions ({16 * (i - target + 1)} bytes), "
              f"{uses} × {opcode}, {spills} spill instructions")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", type=pathlib.Path, help="a configured build folder (compile_commands.json)")
    ap.add_argument("source", help="the translation unit, e.g. megakernel/host/layer_backward_launch.cu")
    ap.add_argument("--out", type=pathlib.Path, help="write the SASS here (default: BUILD/sasstools/<source>.sass)")
    ap.add_argument("--span", metavar="OPCODE", help="where OPCODE's instructions lie and the loops among them")
    a = ap.parse_args()
    build = a.build.resolve()
    bin_dir = tool_dir(build)
    cubin = build / "sasstools" / (pathlib.Path(a.source).name + ".cubin")
    compile_cubin(build, a.source, cubin)
    sass = subprocess.run([str(bin_dir / "cuobjdump"), "-sass", str(cubin)], check=True, capture_output=True,
                          text=True).stdout
    out = a.out or cubin.with_suffix(".sass")
    out.write_text(sass)
    print(f"{a.source}: SASS in {out}")
    for name, ins in kernels(sass).items():
        spills = sum(1 for _, t in ins if re.search(r"\b(STL|LDL)", t))
        print(f"  {name[:100]}: {len(ins)} instructions ({16 * len(ins)} bytes), {spills} spill instructions")
        if a.span:
            report_span(ins, a.span)
    return 0


if __name__ == "__main__":
    sys.exit(main())
