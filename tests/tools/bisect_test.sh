#!/usr/bin/env bash
# ci/bisect.sh's contract with git bisect: --help builds nothing and exits 0; usage errors exit
# 129 (git aborts instead of skipping every commit); extra options keep the default baseline;
# a gate pass is 0 and a planted change is 1; a failed build is 125. The build step is replaced
# by a stub (DETMOE_SETUP) that installs the already-built detmoe, so the test takes seconds.
#   bisect_test.sh <path to detmoe> <source dir>
set -u
detmoe=$1 src=$2
source "$(dirname "$0")/expect.sh"
cat >"$tmp/setup-stub.sh" <<STUB
#!/usr/bin/env bash
mkdir -p "\$DETMOE_BUILD_DIR" && cp "$detmoe" "\$DETMOE_BUILD_DIR/detmoe"
STUB
printf '#!/usr/bin/env bash\nexit 1\n' >"$tmp/broken-setup.sh"
chmod +x "$tmp/setup-stub.sh" "$tmp/broken-setup.sh"
cd "$src" || exit 1
export DETMOE_BISECT_BUILD=$tmp/build
expect 0 "--help exits 0" ci/bisect.sh --help
grep -q "usage: git bisect run" "$tmp/out" || { echo "FAIL: --help prints no usage"; fail=1; }
[ -e "$tmp/build" ] && { echo "FAIL: --help built something"; fail=1; }
expect 129 "unknown option is a usage error (129)" ci/bisect.sh --frobnicate
expect 129 "missing baseline is a usage error (129)" ci/bisect.sh --baseline "$tmp/nope.json"
expect 129 "--baseline without a file (129)" ci/bisect.sh --baseline
DETMOE_SETUP=$tmp/broken-setup.sh expect 125 "a build failure is a skip (125)" ci/bisect.sh
DETMOE_SETUP=$tmp/setup-stub.sh expect 0 "--report keeps the default baseline: good" ci/bisect.sh --report "$tmp/run.json"
grep -q "golden/oracle" "$tmp/out" || { echo "FAIL: the default baseline's golden checks did not run"; cat "$tmp/out"; fail=1; }
[ -s "$tmp/run.json" ] || { echo "FAIL: --report did not reach the gate"; fail=1; }
DETMOE_TEST_PLANT=combine-reversed DETMOE_SETUP=$tmp/setup-stub.sh expect 1 "a planted change is bad (1)" ci/bisect.sh
echo '{"schema": "nope"}' >"$tmp/bad-baseline.json"
DETMOE_SETUP=$tmp/setup-stub.sh expect 129 "a baseline the gate refuses aborts (129)" ci/bisect.sh --baseline "$tmp/bad-baseline.json"
exit $fail
