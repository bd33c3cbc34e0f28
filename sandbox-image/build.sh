#!/usr/bin/env bash
# Builds the sandbox image and prints its reference: the TeX Live base (base/build.sh, rebuilt
# only when base/ changes) plus a thin layer holding the supervisor binary given as $1.
# The tag hashes the base tag and the binary, so an unchanged build is a no-op.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
supervisor=${1:?usage: build.sh path/to/texfleet-supervisor}

base=$("$here/base/build.sh")
hash=$( { echo "$base"; cat "$supervisor"; } | sha256sum | cut -c1-16)
tag="texfleet-sandbox:$hash"
if ! docker image inspect "$tag" >/dev/null 2>&1; then
  container=$(docker create "$base" true)
  trap 'docker rm -f "$container" >/dev/null' EXIT
  docker cp "$supervisor" "$container:/usr/local/bin/texfleet-supervisor" >&2
  docker commit \
    --change 'CMD ["texfleet-supervisor"]' \
    --change 'LABEL org.texfleet.sandbox=1' \
    "$container" "$tag" >/dev/null
fi
echo "$tag"
