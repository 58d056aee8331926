# Shared by the CLI contract tests (source it): a temporary folder $tmp removed on exit, fail=0,
# and `expect <exit code> <description> <command...>`, which runs the command with its output in
# $tmp/out, prints "ok: …" or "FAIL: …" with the output, and sets fail=1 on a wrong exit code.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
expect() {
  local want=$1 what=$2; shift 2
  "$@" >"$tmp/out" 2>&1; local got=$?
  if [ "$got" -ne "$want" ]; then echo "FAIL: $what: exit $got, want $want"; cat "$tmp/out"; fail=1; else echo "ok: $what"; fi
}
