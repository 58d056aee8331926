#!/usr/bin/env bash
# perf/sass_local.py's reading of cuobjdump output, on synthetic SASS (no download, no compile): the
# kernels and their instructions are split by "Function :", and --span finds the loop (a backward
# branch) around the opcode with its size and spill count; a branch forward is no loop.
#   sass_local_test.sh SOURCE_DIR
set -u
src=${1:?source dir}
python3 - "$src/perf" <<'PY'
import contextlib, io, sys
sys.path.insert(0, sys.argv[1])
import sass_local
text = """
        Function : _Z1kv
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   STL [R1], R2 ;
        /*0020*/                   MUFU.EX2 R3, R4 ;
        /*0030*/                   LDL R5, [R1] ;
        /*0040*/                   MUFU.EX2 R6, R3 ;
        /*0050*/               @P0 BRA 0x20 ;
        /*0060*/                   BRA 0x70 ;
        /*0070*/                   EXIT ;
        Function : _Z1jv
        /*0000*/                   EXIT ;
"""
k = sass_local.kernels(text)
fail = 0
def check(what, ok):
    global fail
    print(("ok: " if ok else "FAIL: ") + what)
    fail |= not ok
check("two kernels", list(k) == ["_Z1kv", "_Z1jv"])
check("eight instructions in the first", len(k["_Z1kv"]) == 8 and k["_Z1kv"][2] == (0x20, "MUFU.EX2 R3, R4"))
out = io.StringIO()
with contextlib.redirect_stdout(out):
    sass_local.report_span(k["_Z1kv"], "MUFU.EX2")
text_out = out.getvalue()
check("span of the two MUFU.EX2", "2 instructions, first at 2, last at 4" in text_out)
check("the loop 2..5 with one spill", "loop 2..5: 4 instructions (64 bytes), 2 × MUFU.EX2, 1 spill instructions" in text_out)
check("the forward branch is no loop", text_out.count("loop ") == 1)
if fail:
    print(text_out)
sys.exit(fail)
PY
