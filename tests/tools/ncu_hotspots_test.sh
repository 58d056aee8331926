#!/usr/bin/env bash
# perf/ncu_hotspots.py --span on a synthetic ncu source page (plain and gzip): the region between the
# first and last MUFU.EX2 (with --pad 1) is found, its share of the samples and its largest stall
# reason are printed; an opcode that is not there says so and exits 0; a page without a sampling
# column exits 1.
#   ncu_hotspots_test.sh SOURCE_DIR
set -u
src=${1:?source dir}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
# 8 instructions; 2..5 are the "epilogue" (MUFU.EX2 at 3 and 4) with 60 of the 100 samples, 40 of
# them stall_no_inst.
cat >"$tmp/page.csv" <<'CSV'
"Kernel Name","k(int)",
"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed","stall_long_sb","stall_no_inst","stall_selected"
"0x00","      LDC R1, c[0x0][0x28]","10","4","10","0","0"
"0x10","      @!P0  BRA 0x40","30","4","30","0","0"
"0x20","      FFMA R2, R3, R4, R5","10","8","0","5","5"
"0x30","      MUFU.EX2 R6, R2","20","8","0","15","5"
"0x40","      MUFU.EX2 R7, R2","20","8","0","15","5"
"0x50","      FMUL R8, R6, R7","10","8","0","5","5"
"0x60","      NOP","0","4","0","0","0"
"0x70","      EXIT","0","4","0","0","0"
CSV
gzip -c "$tmp/page.csv" >"$tmp/page.csv.gz"
check() {  # check DESCRIPTION PATTERN FILE
  if grep -qE "$2" "$3"; then echo "ok: $1"; else echo "FAIL: $1 (no /$2/)"; cat "$3"; fail=1; fi
}
for f in page.csv page.csv.gz; do
  python3 "$src/perf/ncu_hotspots.py" "$tmp/$f" --top 1 --span MUFU.EX2 --pad 1 >"$tmp/out" 2>&1 \
    || { echo "FAIL: $f exit $?"; cat "$tmp/out"; fail=1; }
  check "$f: two instructions contain the opcode" '2 instructions contain it' "$tmp/out"
  check "$f: span 2..5 holds 60 % of the samples" 'instructions 2\.\.5 \(4\), 60 samples = 60\.00 %' "$tmp/out"
  check "$f: its largest stall is no_inst, 2/3 of the span" 'stall_no_inst +66\.7 %' "$tmp/out"
  check "$f: opcode mix of the span" 'executed warp instructions 32: .*MUFU 50 %' "$tmp/out"
done
python3 "$src/perf/ncu_hotspots.py" "$tmp/page.csv" --top 0 --span HGMMA >"$tmp/out" 2>&1 \
  || { echo "FAIL: missing opcode exit $?"; fail=1; }
check "an opcode not in the kernel is reported as absent" '0 instructions contain it' "$tmp/out"
printf '"Address","Source","Other"\n"0x0","NOP","1"\n' >"$tmp/bad.csv"
if python3 "$src/perf/ncu_hotspots.py" "$tmp/bad.csv" >"$tmp/out" 2>&1; then
  echo "FAIL: a page without samples exited 0"; fail=1
else
  check "a page without samples says which column is missing" 'missing Source or sampling column' "$tmp/out"
fi
exit $fail
