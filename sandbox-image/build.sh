#!/usr/bin/env bash
# Builds the sandbox image of a TeX Live year and prints its reference: the TeX Live base
# (base/build.sh, rebuilt only when base/ changes) plus a thin layer holding the supervisor
# binary given as $1 and the restricted shell built beside it (as /usr/bin/sh).
# The tag hashes the base tag and the binaries, so an unchanged build is a no-op.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
supervisor=${1:?usage: build.sh path/to/texfleet-supervisor [YEAR]}
year=${2:-2024}
# The restricted shell is built beside the supervisor (sandbox-image/shell).
shell="$(dirname "$supervisor")/texfleet-sh"

base=$("$here/base/build.sh" "$year")
hash=$( { echo "$base"; cat "$supervisor" "$shell"; } | sha256sum | cut -c1-16)
tag="texfleet-sandbox:$year-$hash"
if ! docker image inspect "$tag" >/dev/null 2>&1; then
  container=$(docker create "$base" true)
  trap 'docker rm -f "$container" >/dev/null' EXIT
  docker cp "$supervisor" "$container:/usr/local/bin/texfleet-supervisor" >&2
  docker cp "$shell" "$container:/usr/bin/sh" >&2
  docker commit \
    --change 'CMD ["texfleet-supervisor"]' \
    --change 'LABEL org.texfleet.sandbox=1' \
    "$container" "$tag" >/dev/null
fi
echo "$tag"
