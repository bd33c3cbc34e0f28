#!/usr/bin/env bash
# mmdebstrap customize hook: runs on the host with the new root filesystem as $1.
set -euo pipefail
root=$1

# Our hardening goes first in the first texmf.cnf kpathsea reads, where the first value wins.
system_cnf=$(chroot "$root" kpsewhich -a texmf.cnf | head -n1)
cat "$root/tmp/texmf-hardening.cnf" "$root$system_cnf" > "$root/tmp/texmf.cnf.new"
mv "$root/tmp/texmf.cnf.new" "$root$system_cnf"
rm "$root/tmp/texmf-hardening.cnf"
for setting in shell_escape=f openin_any=p openout_any=p; do
  value=$(chroot "$root" kpsewhich -var-value="${setting%%=*}")
  [ "$value" = "${setting#*=}" ] || { echo "customize.sh: ${setting%%=*} is '$value'" >&2; exit 1; }
done

# The luaotfload font name database, built once here instead of in every lualatex job.
chroot "$root" env TEXMFVAR=/var/lib/texmf luaotfload-tool --update --force >/dev/null

# The sandbox user: no password, no shell, its home is the job's tmpfs.
chroot "$root" useradd --uid 1000 --user-group --no-create-home --home-dir /work \
  --shell /usr/sbin/nologin tex
mkdir -p "$root/work"
rm -rf "$root/var/cache/apt" "$root/var/lib/apt/lists"/*
