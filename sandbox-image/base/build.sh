#!/usr/bin/env bash
# Builds the base of the sandbox image (Debian trixie + TeX Live) offline; prints its tag.
#
# mmdebstrap makes a minimal root filesystem from the Debian mirror this machine is configured
# with (no registry is needed), customize.sh hardens TeX and adds the sandbox user, and
# `docker import` turns the tarball into an image. The tag is a hash of every file in this
# folder, so the few minutes of this build are spent only when one of them changes. Manual
# pages are left out, but Java's postinst links its own through update-alternatives, which
# needs their folder.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"

hash=$(cat ./* | sha256sum | cut -c1-16)
tag="texfleet-sandbox-base:$hash"
if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag"
  exit 0
fi

# The first Debian (not security) mirror in the machine's apt sources, deb822 or one-line style.
detect_mirror() {
  { grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}'
    grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}'
  } | grep -v -e security -e '^$' | grep '/debian/\?$' | head -n1 || true
}
mirror=${TEXFLEET_DEBIAN_MIRROR:-$(detect_mirror)}
[ -n "$mirror" ] || { echo "build.sh: no Debian mirror found; set TEXFLEET_DEBIAN_MIRROR" >&2; exit 1; }
packages=$(grep -v -e '^#' -e '^$' packages.txt | paste -sd, -)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "build.sh: building $tag from $mirror (takes a few minutes)" >&2
mmdebstrap --variant=minbase --include="$packages" \
  --aptopt='APT::Install-Recommends "false"' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --essential-hook='mkdir -p "$1/usr/share/man/man1"' \
  --customize-hook="copy-in texmf-hardening.cnf luatex-sandbox.lua /tmp" \
  --customize-hook="$here/customize.sh \"\$1\"" \
  trixie "$work/rootfs.tar" "$mirror" >&2

docker import \
  --change 'USER 65101:65101' \
  --change 'WORKDIR /work' \
  --change 'ENV HOME=/work PATH=/usr/local/bin:/usr/bin LANG=C.UTF-8' \
  "$work/rootfs.tar" "$tag" >&2
echo "$tag"
