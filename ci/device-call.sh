# Preamble of a device call's script (source it first, from a script in ci/): the repository
# root as working directory; $OUT (default /tmp/out) created and everything printed also written
# to $OUT/summary.txt; `step NAME` prints the seconds since the start, `left` what remains of
# BUDGET_S (default 560); `build_device TARGET...` builds them into build-device (log in
# $OUT/build.log, its tail and exit on failure) and sources ci/device-env.sh.
set -u
cd "$(dirname "${BASH_SOURCE[1]}")/.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
exec > >(tee "$OUT/summary.txt") 2>&1
# The device tool brings back at most 8 files: on exit, everything but summary.txt goes into
# $OUT/logs.tgz when there are more (session 19's landing call lost its test logs that way).
bundle_out() {
  [ "$(find "$OUT" -type f | wc -l)" -le 8 ] && return
  tar czf /tmp/device-logs.tgz -C "$OUT" --exclude=./summary.txt . || return
  find "$OUT" -mindepth 1 -type f ! -name summary.txt -delete
  # A nested call's folder keeps its own summary.txt, so only the emptied folders go (session 37:
  # deleting folders that still held one failed the chain and the bundle was never moved back).
  find "$OUT" -mindepth 1 -type d -empty -delete
  mv /tmp/device-logs.tgz "$OUT/logs.tgz"
}
trap bundle_out EXIT
device_call_start=$SECONDS
step() { echo "== $1 ($(( SECONDS - device_call_start )) s in)"; }
left() { echo $(( ${BUDGET_S:-560} - (SECONDS - device_call_start) )); }
build_device() {
  ci/device-build.sh build-device "$@" >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  source ci/device-env.sh
}
# `use_prebuilt [DIR]`: run binaries built on the CPU machine from DIR (default .abbin; carried):
# the device environment, DIR/lib (libbenchmark) on the library path, the golden cases read from
# this tree rather than the build's, and the binaries executable.
use_prebuilt() {
  local dir=${1:-.abbin}
  source ci/device-env.sh
  export LD_LIBRARY_PATH=$PWD/$dir/lib:$LD_LIBRARY_PATH DETMOE_SOURCE_DIR=$PWD
  chmod +x "$dir"/*/detmoe* 2>/dev/null
}
# `sanitize_verify TOOL ARGS...`: compute-sanitizer TOOL (racecheck, memcheck) over `detmoe verify
# --impl megakernel ARGS` (forward and backward) of the build-device tree; its summary lines.
sanitize_verify() {
  local tool=$1; shift
  step "$tool $*"
  timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 9 build-device/detmoe verify --impl megakernel "$@" \
    >"$OUT/san-$tool.log" 2>&1
  echo "$tool exit $?"; grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|Hazard|PASS|FAIL|rror' "$OUT/san-$tool.log" | head -4
}
# `gtest_run NAME LIMIT BINARY FILTER`: a GoogleTest binary (built here or prebuilt) with a gtest
# filter (RC_PARAMS as the environment has it), output in $OUT/NAME.log; prints the exit code, the
# summary lines and a property test's counterexample if any.
gtest_run() {
  local name=$1 limit=$2 binary=$3 filter=$4
  timeout "$limit" "$binary" --gtest_filter="$filter" >"$OUT/$name.log" 2>&1
  echo "$name exit $?"
  grep -E '^\[  (PASSED|FAILED)|FAILED  \]|Failure|OK, passed|Falsifiable|Gave up' "$OUT/$name.log" | head -12
  grep -A14 'Falsifiable' "$OUT/$name.log" | head -30
}
# `layer_tests NAME LIMIT FILTER`: gtest_run of build-device's detmoe_layer_test.
layer_tests() { gtest_run "$1" "$2" build-device/tests/megakernel/detmoe_layer_test "$3"; }
# `backward_property LIMIT`: MegakernelBackwardProperty.Random* at 300 problems ($OUT/property.log).
backward_property() { RC_PARAMS="max_success=300" layer_tests property "$1" 'MegakernelBackwardProperty.Random*'; }
# `compare_outputs DIR A B`: every output of `detmoe run --impl megakernel` from trees DIR/A and
# DIR/B on one problem whose backward dx tiles the wave gate holds (F 8192: 256 k-blocks) and whose
# weight-gradient experts (1,024 rows) take both tile orders, compared byte for byte; log in
# $OUT/bits.log.
compare_outputs() {
  local dir=$1 a=$2 b=$3
  timeout 60 "$dir/$a/detmoe" run --T 2048 --H 4096 --F 8192 --E 4 --k 2 --seed 7 --write-inputs /tmp/in.safetensors \
    >"$OUT/bits.log" 2>&1
  for tree in "$a" "$b"; do
    timeout 60 "$dir/$tree/detmoe" run --impl megakernel --inputs /tmp/in.safetensors --outputs "/tmp/out-$tree.safetensors" \
      >>"$OUT/bits.log" 2>&1; echo "$tree run exit $?"
  done
  cmp "/tmp/out-$a.safetensors" "/tmp/out-$b.safetensors" &&
    echo "bits: every output of $b equals $a's ($(stat -c %s "/tmp/out-$a.safetensors") bytes)"
}
