#!/usr/bin/env bash
# Builds the sandbox image of a TeX Live year and prints its reference: the TeX Live base
# (base/build.sh, rebuilt only when base/ changes) plus a thin layer holding the supervisor
# binary given as $1, the restricted shell built beside it (as /usr/bin/sh) and LuaTeX's
# sandbox (luatex-sandbox.lua, loaded by the compile driver with --lua before any format):
# what changes with the code, so that a change rebuilds seconds, not the TeX Live base.
# The tag hashes the base tag and the binaries, so an unchanged build is a no-op.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
supervisor=${1:?usage: build.sh path/to/texfleet-supervisor [YEAR]}
year=${2:-2024}
# The restricted shell is built beside the supervisor (sandbox-image/shell).
shell="$(dirname "$supervisor")/texfleet-sh"

base=$("$here/base/build.sh" "$year")
lua_sandbox="$here/luatex-sandbox.lua"
hash=$( { echo "$base"; cat "$supervisor" "$shell" "$lua_sandbox"; } | sha256sum | cut -c1-16)
tag="texfleet-sandbox:$year-$hash"
if ! docker image inspect "$tag" >/dev/null 2>&1; then
  container=$(docker create "$base" true)
  trap 'docker rm -f "$container" >/dev/null' EXIT
  docker cp "$supervisor" "$container:/usr/local/bin/texfleet-supervisor" >&2
  docker cp "$shell" "$container:/usr/bin/sh" >&2
  # Root's and read-only, whatever the checkout's umask: the compile may read it, never change it.
  tar --owner=0 --group=0 --mode=0644 -C "$here" -cf - luatex-sandbox.lua |
    docker cp - "$container:/usr/share/texfleet/" >&2
  docker commit \
    --change 'CMD ["texfleet-supervisor"]' \
    --change 'LABEL org.texfleet.sandbox=1' \
    "$container" "$tag" >/dev/null
fi
echo "$tag"
