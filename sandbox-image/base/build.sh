#!/usr/bin/env bash
# Builds the base of a sandbox image, Debian and its TeX Live, offline; prints its tag.
#
#   build.sh [YEAR]    the TeX Live of texlive-YEAR.txt (default 2024), with the Debian
#                      release and biber version that list names
#
# mmdebstrap makes a minimal root filesystem from the Debian mirror this machine is configured
# with (no registry is needed), customize.sh hardens TeX and adds the sandbox user, and
# `docker import` turns the tarball into an image. The tag is a hash of the year's package
# list and of every other file of this folder, so the minutes of this build are spent only
# when one of them changes. Manual pages are left out, but Java's postinst links its own
# through update-alternatives, which needs their folder.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"

year=${1:-2024}
list="texlive-$year.txt"
[ -f "$list" ] || { echo "build.sh: no $list: TeX Live $year is not one this image is built for" >&2; exit 1; }
suite=$(sed -n 's/^# debian: *//p' "$list")
[ -n "$suite" ] || { echo "build.sh: $list names no Debian release (# debian: ...)" >&2; exit 1; }
# The release's biber, whose reviewed patch customize.sh applies (and fails on another version).
biber=$(sed -n 's/^# biber: *//p' "$list")
[ -f "biber-$biber-no-eval.patch" ] || { echo "build.sh: $list names no biber with a reviewed patch (# biber: ...)" >&2; exit 1; }
hash=$( { cat "$list" "biber-$biber-no-eval.patch"
  find . -maxdepth 1 -type f ! -name 'texlive-*.txt' ! -name 'biber-*.patch' | sort | xargs cat; } |
  sha256sum | cut -c1-16)
tag="texfleet-sandbox-base:$year-$hash"
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
packages=$(grep -v -e '^#' -e '^$' "$list" | paste -sd, -)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# mmdebstrap clamps every modification time to this; customize.sh gives it to the font folders.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(date +%s)}
echo "build.sh: building $tag from $mirror (takes a few minutes)" >&2
# The testing release's Release file is valid for a week only (Valid-Until), and a mirror
# snapshot goes on serving it after that: its signature is still checked, its age is not.
mmdebstrap --variant=minbase --include="$packages" \
  --aptopt='APT::Install-Recommends "false"' \
  --aptopt='Acquire::Check-Valid-Until "false"' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --essential-hook='mkdir -p "$1/usr/share/man/man1"' \
  --customize-hook="copy-in texmf-hardening.cnf texlive-fonts.conf /tmp" \
  --customize-hook="$here/customize.sh \"\$1\" $biber" \
  "$suite" "$work/rootfs.tar" "$mirror" >&2

docker import \
  --change "LABEL org.texfleet.texlive=$year" \
  --change 'USER 65101:65101' \
  --change 'WORKDIR /work' \
  --change 'ENV HOME=/work PATH=/usr/local/bin:/usr/bin LANG=C.UTF-8' \
  "$work/rootfs.tar" "$tag" >&2

# fontconfig must find its caches valid in the image as it is, or every XeLaTeX compile scans
# TeX Live's thousands of fonts again (seconds) and writes a cache of its own: a program that
# reads them must change nothing.
probe=$(docker create --network none --user 0 --entrypoint /usr/bin/fc-list "$tag")
docker start --attach "$probe" >/dev/null
rewritten=$(docker diff "$probe" | grep -c '^C /var/cache/fontconfig/.' || true)
docker rm "$probe" >/dev/null
if [ "$rewritten" != 0 ]; then
  docker rmi "$tag" >/dev/null
  echo "build.sh: fontconfig finds $rewritten of its caches stale in $tag" >&2
  exit 1
fi
echo "$tag"
