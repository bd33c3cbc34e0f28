#!/usr/bin/env bash
# Checks the systemd units of deploy/systemd with systemd-analyze: `verify` must print
# nothing (a misspelt or unknown setting is only a warning there, so any output fails), and
# `security` must rate each unit's exposure "OK" (below 2.0 of 10). systemd-analyze wants
# ExecStart's binary to exist, so each unit is checked as a copy pointing at the texfleet
# binary given as $1.
set -euo pipefail
binary=$(realpath "${1:?usage: deploy/verify.sh path/to/texfleet}")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for unit in "$here"/systemd/*.service; do
  name=$(basename "$unit")
  sed "s|/usr/local/bin/texfleet|$binary|" "$unit" > "$work/$name"
  output=$(cd "$work" && systemd-analyze verify "./$name" 2>&1) || true
  if [ -n "$output" ]; then
    echo "deploy/verify.sh: $name: $output" >&2
    status=1
  fi
  exposure=$(cd "$work" && systemd-analyze security --offline=true "./$name" 2>&1 | tail -n1)
  case "$exposure" in
    *" OK "*) echo "deploy/verify.sh: $name: $exposure" ;;
    *) echo "deploy/verify.sh: $name is too exposed: $exposure" >&2; status=1 ;;
  esac
done
exit $status
