#!/usr/bin/env bash
# Builds the sandbox image of a TeX Live year and prints its reference: the TeX Live base
# (base/build.sh, rebuilt only when base/ changes) plus a thin layer holding the supervisor
# binary given as $1, the restricted shell built beside it (as /usr/bin/sh), LuaTeX's sandbox
# (luatex-sandbox.lua, loaded by the compile driver with --lua before any format) and, where
# the year's kpathsea lets TeX read a name it should refuse, kpathsea-guard.c's rule preloaded
# into every program: what changes with the code, so that a change rebuilds seconds, not the
# TeX Live base.
# The tag hashes the base tag and the layer's sources, so an unchanged build is a no-op.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
supervisor=${1:?usage: build.sh path/to/texfleet-supervisor [YEAR]}
year=${2:-2024}
# The restricted shell is built beside the supervisor (sandbox-image/shell).
shell="$(dirname "$supervisor")/texfleet-sh"

base=$("$here/base/build.sh" "$year")
lua_sandbox="$here/luatex-sandbox.lua"
guard="$here/kpathsea-guard.c"
hash=$( { echo "$base"; cat "$supervisor" "$shell" "$lua_sandbox" "$guard"; } | sha256sum | cut -c1-16)
tag="texfleet-sandbox:$year-$hash"

# Names that kpathsea must refuse pdfLaTeX under `openin_any = p`, each a way past one year's
# kpathsea or another: absolute, expanded into an absolute name, a parent folder, a dot file.
refused_names=(/etc/passwd '$SELFAUTOPARENT/etc/passwd' '~/x' ../x a/.b/c.tex)
# Whether kpathsea lets pdfLaTeX read one of them by name in `image`.
lets_one_through() {
  local name
  for name in "${refused_names[@]}"; do
    docker run --rm --network none --user 65101:65101 --entrypoint /usr/bin/kpsewhich "$1" \
      -progname=pdflatex "-safe-in-name=$name" >/dev/null 2>&1 && return 0
  done
  return 1
}

if ! docker image inspect "$tag" >/dev/null 2>&1; then
  work=$(mktemp -d)
  container=$(docker create "$base" true)
  trap 'docker rm -f "$container" >/dev/null; rm -rf "$work"' EXIT
  docker cp "$supervisor" "$container:/usr/local/bin/texfleet-supervisor" >&2
  docker cp "$shell" "$container:/usr/bin/sh" >&2
  # Root's and read-only, whatever the checkout's umask: the compile may read it, never change it.
  tar --owner=0 --group=0 --mode=0644 -C "$here" -cf - luatex-sandbox.lua |
    docker cp - "$container:/usr/share/texfleet/" >&2
  guarded=false
  if lets_one_through "$base"; then
    # Built here: it needs the C library only, and the image's is no older than the host's.
    mkdir -p "$work/layer/usr/lib/texfleet" "$work/layer/etc"
    cc -O2 -shared -fPIC -Wall -Wextra -Werror -o "$work/layer/usr/lib/texfleet/kpathsea-guard.so" "$guard"
    echo /usr/lib/texfleet/kpathsea-guard.so >"$work/layer/etc/ld.so.preload"
    tar --owner=0 --group=0 --mode=a+rX,go-w -C "$work/layer" -cf - usr/lib/texfleet etc/ld.so.preload |
      docker cp - "$container:/" >&2
    guarded=true
  fi
  docker commit \
    --change 'CMD ["texfleet-supervisor"]' \
    --change 'LABEL org.texfleet.sandbox=1' \
    --change "LABEL org.texfleet.kpathsea-guard=$guarded" \
    "$container" "$tag" >/dev/null
  if lets_one_through "$tag"; then
    docker rmi "$tag" >/dev/null
    echo "build.sh: kpathsea in $tag lets TeX read one of ${refused_names[*]} by name" >&2
    exit 1
  fi
fi
echo "$tag"
