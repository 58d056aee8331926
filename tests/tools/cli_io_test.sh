#!/usr/bin/env bash
# CLI files: every output goes through detmoe::write_output_file (a failed write exits 3 naming
# the path and leaves the old file whole), no output overwrites an input (exit 2 naming both
# options), and an input that is a directory is named as such.
#   cli_io_test.sh <path to detmoe>
set -u
detmoe=$(realpath "$1")
source "$(dirname "$0")/expect.sh"
cd "$tmp" || exit 1
says() {  # says <text>: the last command's output contains <text>
  grep -qF -- "$1" "$tmp/out" || { echo "FAIL: output does not say '$1'"; cat "$tmp/out"; fail=1; }
}
# A full disk: 1 KiB file-size limit. The CLI ignores SIGXFSZ, so the write fails with EFBIG.
limited() { bash -c 'ulimit -f 1; exec "$@"' limited "$@"; }
intact() {  # intact <file> <copy>: the old file survived the failed write
  cmp -s "$1" "$2" || { echo "FAIL: $1 was changed by a failed write"; fail=1; }
}

# --- oracle --json ---------------------------------------------------------------------------
expect 3 "oracle --json /dev/full" "$detmoe" oracle --shape tiny --json /dev/full
says "/dev/full"
says "No space left on device"
printf 'old oracle json\n' >old.json; cp old.json old.copy
expect 3 "oracle --json over the file-size limit" limited "$detmoe" oracle --shape small --json old.json
says "File too large"; intact old.json old.copy
expect 3 "oracle --json into a missing folder" "$detmoe" oracle --shape tiny --json nofolder/o.json
says "nofolder"
[ ! -e nofolder ] || { echo "FAIL: a missing folder was created"; fail=1; }

# --- run --write-inputs / --outputs ------------------------------------------------------------
expect 0 "write seeded inputs" "$detmoe" run --write-inputs in.safetensors --shape tiny --seed 3
cp in.safetensors in.copy
printf 'old inputs\n' >old.safetensors; cp old.safetensors old.st.copy
expect 3 "run --write-inputs over the file-size limit" limited "$detmoe" run --write-inputs old.safetensors --shape small --seed 3
says "File too large"; intact old.safetensors old.st.copy
expect 3 "run --outputs over the file-size limit" limited "$detmoe" run --impl oracle --inputs in.safetensors --outputs old.safetensors
says "File too large"; intact old.safetensors old.st.copy
expect 3 "run --outputs /dev/full" "$detmoe" run --impl oracle --inputs in.safetensors --outputs /dev/full
says "/dev/full"
expect 2 "run --outputs equal to --inputs" "$detmoe" run --impl oracle --inputs in.safetensors --outputs in.safetensors
says "--outputs"; says "--inputs"; intact in.safetensors in.copy
expect 2 "run --outputs equal to --inputs through ./ and .." "$detmoe" run --impl oracle --inputs in.safetensors --outputs "./../$(basename "$tmp")/in.safetensors"
intact in.safetensors in.copy
ln -s in.safetensors link.safetensors
expect 2 "run --outputs a symlink to --inputs" "$detmoe" run --impl oracle --inputs in.safetensors --outputs link.safetensors
intact in.safetensors in.copy
mkdir somedir
expect 3 "run --inputs a directory" "$detmoe" run --impl oracle --inputs somedir --outputs o.safetensors
says "somedir is a directory"

# --- report render -----------------------------------------------------------------------------
expect 0 "accept writes a report" "$detmoe" accept --level 1 --json run.json
cp run.json run.copy
expect 2 "report render x.json -o x.json" "$detmoe" report render run.json -o run.json
says "-o run.json"; says "the input run.json"; intact run.json run.copy
expect 2 "report render --markdown onto the input" "$detmoe" report render run.json --markdown ./run.json
says "--markdown"; intact run.json run.copy
expect 3 "report render -o /dev/full" "$detmoe" report render run.json -o /dev/full
says "/dev/full"
printf 'old page\n' >old.html; cp old.html old.html.copy
expect 3 "report render -o over the file-size limit" limited "$detmoe" report render run.json -o old.html
says "File too large"; intact old.html old.html.copy
expect 3 "report render --markdown over the file-size limit" limited "$detmoe" report render run.json -o /dev/null --markdown old.html
intact old.html old.html.copy
expect 3 "report render of a directory" "$detmoe" report render somedir
says "somedir: it is a directory"
expect 3 "report validate of a directory" "$detmoe" report validate somedir
says "somedir: is a directory"

# --- accept --html -----------------------------------------------------------------------------
expect 2 "accept --json X --html X" "$detmoe" accept --level 1 --json same.out --html ./same.out
says "--html ./same.out"; says "--json same.out"
expect 3 "accept --html /dev/full" "$detmoe" accept --level 1 --html /dev/full
says "/dev/full"
expect 3 "accept --html into a missing folder" "$detmoe" accept --level 1 --html nofolder/run.html
says "nofolder"
expect 3 "accept --json into a missing folder" "$detmoe" accept --level 1 --json nofolder/run.json
says "nofolder"

leftover=$(find "$tmp" -name '.*.tmp.*')
[ -z "$leftover" ] || { echo "FAIL: temporary files left: $leftover"; fail=1; }
exit $fail
