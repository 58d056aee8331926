#!/usr/bin/env bash
# Renders reports with `detmoe report render` and loads each page in headless Chromium:
# the page must log nothing to the console (its Content-Security-Policy turns any script or
# external resource into a console error), the DOM must hold the expected plots, and hostile
# names must arrive as text. Also takes a screenshot of the example for a human to look at.
#   chromium_render_test.sh <path to detmoe> <source dir> <work dir>
# Exit 77 (CTest: skipped) when no Chromium is installed.
set -u
detmoe=$1 src=$2 work=$3
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
  echo "SKIP: no chromium on PATH (Debian: apt-get install chromium; ci/setup.sh installs it)"
  exit 77
fi
rm -rf "$work"; mkdir -p "$work"
fail=0
profile=$(mktemp -d); trap 'rm -rf "$profile"' EXIT

# browse <name> <extra chromium args...>: loads $work/<name>.html, DOM to <name>.dom, log to <name>.log.
browse() {
  local name=$1; shift
  # --no-sandbox: CI containers run as root, where Chromium's sandbox refuses to start.
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$profile/$name" \
    --enable-logging=stderr --v=0 "$@" "file://$work/$name.html" >"$work/$name.dom" 2>"$work/$name.log"
  local rc=$?
  if [ $rc -ne 0 ]; then echo "FAIL: $name: chromium exit $rc"; tail -20 "$work/$name.log"; fail=1; fi
  if grep -q ':CONSOLE' "$work/$name.log"; then
    echo "FAIL: $name: the page logged to the console:"; grep ':CONSOLE' "$work/$name.log"; fail=1
  fi
}
dom_has() {  # dom_has <name> <count> <text>: the DOM holds text exactly count times (count "+" = at least once)
  local n; n=$(grep -oF -- "$3" "$work/$1.dom" | wc -l)
  if { [ "$2" = "+" ] && [ "$n" -eq 0 ]; } || { [ "$2" != "+" ] && [ "$n" -ne "$2" ]; }; then
    echo "FAIL: $1: DOM has '$3' $n times, want $2"; fail=1
  fi
}
render() {  # render <name> <json>
  "$detmoe" report render "$2" -o "$work/$1.html" >/dev/null || { echo "FAIL: render $2"; fail=1; }
}

render sample "$src/reports/examples/sample-run.json"
browse sample --dump-dom
for plot in throughput-fwd throughput-fwd-bwd fraction-of-ceiling bandwidth; do dom_has sample 1 "data-plot=\"$plot\""; done
dom_has sample 48 '<rect class="bar"'   # 4 shapes x 3 impls x 2 passes, and the same 24 as fractions of the ceiling
dom_has sample 16 '<rect class="cell"'  # 4 x 4 bandwidth heat map
dom_has sample + 'id="verdict-grid"'
dom_has sample + 'class="verdict v-Fail"'
dom_has sample 0 '<script'

# Hostile names: every one must be text in the DOM, none an element.
render hostile "$src/tests/reports/data/hostile-run.json"
browse hostile --dump-dom
dom_has hostile 0 '<script'
dom_has hostile 0 '<img'
dom_has hostile 0 '<iframe'
dom_has hostile 0 '<foreignObject'
dom_has hostile 0 '<a href'
dom_has hostile + '&lt;script&gt;console.error("xss")&lt;/script&gt;'
dom_has hostile 1 'data-plot="throughput-fwd"'
dom_has hostile 1 'data-plot="bandwidth"'

render empty "$src/tests/reports/data/empty-run.json"
browse empty --dump-dom
dom_has empty 1 'No benchmarks in this run.'
dom_has empty 1 'No checks in this run.'
dom_has empty 0 '<svg'

# A picture of the example, for people (and the artefacts of a CI run).
browse sample --screenshot="$work/sample.png" --window-size=1200,5200 --hide-scrollbars
if [ "$(head -c 8 "$work/sample.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')" != "89504e470d0a1a0a" ]; then
  echo "FAIL: no PNG screenshot at $work/sample.png"; fail=1
else
  echo "screenshot: $work/sample.png"
fi
[ $fail -eq 0 ] && echo "ok: $("$browser" --version 2>/dev/null | head -1) loaded 3 reports without console messages; plots present"
exit $fail
