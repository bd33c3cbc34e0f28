#!/usr/bin/env bash
# mmdebstrap customize hook: runs on the host with the new root filesystem as $1.
set -euo pipefail
root=$1
here=$(cd "$(dirname "$0")" && pwd)

# Our hardening goes first in the first texmf.cnf kpathsea reads, where the first value wins.
system_cnf=$(chroot "$root" kpsewhich -a texmf.cnf | head -n1)
cat "$root/tmp/texmf-hardening.cnf" "$root$system_cnf" > "$root/tmp/texmf.cnf.new"
mv "$root/tmp/texmf.cnf.new" "$root$system_cnf"
rm "$root/tmp/texmf-hardening.cnf"
# The effective settings, program by program, as each engine and tool will read them.
expect() {
  local program=$1 setting=$2 wanted=$3 value
  value=$(chroot "$root" kpsewhich -progname="$program" -var-value="$setting")
  [ "$value" = "$wanted" ] || { echo "customize.sh: $setting is '$value' for $program, not '$wanted'" >&2; exit 1; }
}
for program in pdflatex pdftex xelatex xetex lualatex luatex luahbtex bibtex makeindex kpsewhich; do
  expect "$program" shell_escape f
  expect "$program" openout_any p
  expect "$program" MKTEXPK 0
  expect "$program" MKTEXTFM 0
  expect "$program" MKTEXFMT 0
  expect "$program" MKTEXTEX 0
done
for program in pdflatex pdftex xelatex xetex bibtex kpsewhich; do
  expect "$program" openin_any p
done
for program in lualatex luatex luahbtex makeindex; do
  expect "$program" openin_any r
done
# Search paths, with the compile's HOME and TEXMFVAR as the driver sets them: none may lead
# into a folder the document writes, and formats and xdvipdfmx's configuration not into ".".
for program in pdflatex xelatex lualatex xdvipdfmx bibtex makeindex; do
  for setting in TEXMF TEXFORMATS DVIPDFMXINPUTS TEXINPUTS; do
    value=$(chroot "$root" env HOME=/work TEXMFVAR=/tmp/texmf-var kpsewhich -progname="$program" -var-value="$setting")
    case "$value" in
      */work*|*/tmp*|*/nonexistent*) echo "customize.sh: $setting reaches a writable folder for $program: $value" >&2; exit 1 ;;
    esac
  done
  # The driver searches the work directory for a main document in a folder (TEXINPUTS and
  # the bibliography paths): no other path may follow them there.
  for setting in TEXMF TEXFORMATS DVIPDFMXINPUTS; do
    value=$(chroot "$root" env HOME=/work TEXMFVAR=/tmp/texmf-var TEXINPUTS=.:/work: \
      BIBINPUTS=.:/work: BSTINPUTS=.:/work: kpsewhich -progname="$program" -var-value="$setting")
    case "$value" in
      */work*|*/tmp*) echo "customize.sh: $setting follows the driver's search path for $program: $value" >&2; exit 1 ;;
    esac
  done
  for setting in TEXFORMATS DVIPDFMXINPUTS; do
    value=$(chroot "$root" kpsewhich -progname="$program" -var-value="$setting")
    case ":$value:" in
      *:.:*|*'{.,'*|*',.}'*) echo "customize.sh: $setting searches the work folder for $program: $value" >&2; exit 1 ;;
    esac
  done
done

# biber passes values of the control file, which the document writes, to Perl's eval (sourcemap
# replacements through s///ee, sort keys, package names): the patch removes every such eval.
# It is made against Debian's biber 2.20; another version fails here, to be patched anew.
patch -d "$root" -p1 --batch --forward --no-backup-if-mismatch < "$here/biber-no-eval.patch" >/dev/null
for file in usr/share/perl5/Biber.pm usr/share/perl5/Biber/Utils.pm usr/bin/biber; do
  grep -q texfleet "$root/$file" || { echo "customize.sh: $file is not patched" >&2; exit 1; }
done
! grep -n 'eegxms\|eval \$a' "$root/usr/share/perl5/Biber/Utils.pm" "$root/usr/share/perl5/Biber.pm" ||
  { echo "customize.sh: biber still evaluates document values" >&2; exit 1; }

# Three icon font packages out of texlive-fonts-extra, which is 1.7 GB whole: the package is
# fetched through the chroot's apt (so its signature is checked), only their folders are kept,
# and their font maps are registered the way Debian's own triggers do it.
chroot "$root" env -C /tmp apt-get download -q=2 texlive-fonts-extra
fonts_extra=$(echo "$root"/tmp/texlive-fonts-extra_*.deb)
dpkg-deb --fsys-tarfile "$fonts_extra" | tar -x -C "$root" --wildcards \
  './usr/share/texlive/texmf-dist/*/fontawesome/*' \
  './usr/share/texlive/texmf-dist/*/fontawesome5/*' \
  './usr/share/texlive/texmf-dist/*/academicons/*'
rm "$fonts_extra"
printf 'Map fontawesome.map\nMap fontawesome5.map\n' \
  > "$root/var/lib/tex-common/fontmap-cfg/texlive/texfleet-icon-fonts.cfg"
chroot "$root" mktexlsr /usr/share/texlive/texmf-dist >/dev/null
chroot "$root" update-updmap --quiet
chroot "$root" updmap-sys --nohash >/dev/null
chroot "$root" mktexlsr /var/lib/texmf >/dev/null
for file in fontawesome.sty fontawesome5.sty academicons.sty fontawesome5.map; do
  chroot "$root" kpsewhich "$file" >/dev/null || { echo "customize.sh: $file is not found" >&2; exit 1; }
done
grep -q fa5free "$root$(chroot "$root" kpsewhich -var-value=TEXMFSYSVAR)/fonts/map/pdftex/updmap/pdftex.map" ||
  { echo "customize.sh: fontawesome5.map is not in pdftex.map" >&2; exit 1; }

# LuaTeX's sandbox, loaded by the compile driver with --lua before any format.
mkdir -p "$root/usr/share/texfleet"
mv "$root/tmp/luatex-sandbox.lua" "$root/usr/share/texfleet/luatex-sandbox.lua"
chmod 0644 "$root/usr/share/texfleet/luatex-sandbox.lua"

# Java for bib2gls, found through Debian's fixed default-java link. Java reads its security
# settings from /etc/java-<version>-openjdk, which Landlock lets the compile read
# (sandbox-image/supervisor/src/confine.rs): a new Java version must be named there.
[ -d "$root/etc/java-21-openjdk" ] || { echo "customize.sh: Java's settings are not in /etc/java-21-openjdk" >&2; exit 1; }
for file in usr/lib/jvm/default-java/bin/java usr/lib/jvm/default-java/lib/jspawnhelper \
  usr/share/texlive/texmf-dist/scripts/bib2gls/bib2gls.jar; do
  chroot "$root" test -e "/$file" || { echo "customize.sh: /$file is missing" >&2; exit 1; }
done

# The luaotfload font name database and the caches of the most used fonts, built once here
# instead of in every lualatex job. Only the text (.lua) caches are kept: the Lua sandbox
# loads no bytecode it did not make itself.
chroot "$root" env TEXMFVAR=/var/lib/texmf luaotfload-tool --update --force >/dev/null
mkdir -p "$root/tmp/fontcache"
cat > "$root/tmp/fontcache/fonts.tex" <<'TEX'
\documentclass{article}
\usepackage{fontspec}
\begin{document}
Latin Modern \textbf{bold} \textit{italic} \texttt{mono} \textsf{sans}
\fontspec{DejaVu Serif}DejaVu \fontspec{DejaVu Sans}DejaVu
\fontspec{TeX Gyre Termes}Termes \fontspec{TeX Gyre Pagella}Pagella \fontspec{TeX Gyre Heros}Heros
\end{document}
TEX
chroot "$root" env TEXMFVAR=/var/lib/texmf HOME=/tmp/fontcache \
  lualatex -interaction=nonstopmode -output-directory=/tmp/fontcache /tmp/fontcache/fonts.tex >/dev/null ||
  { grep -A3 '^!' "$root/tmp/fontcache/fonts.log" >&2; exit 1; }
rm -rf "$root/tmp/fontcache"
find "$root/var/lib/texmf/luatex-cache" -name '*.luc' -delete
find "$root/var/lib/texmf/luatex-cache" -name '*.luc.gz' -delete

# Two users: the supervisor and the compile (see sandbox-image/supervisor/src/lib.rs for why
# these uids). Neither has a password or a shell; their home is the job's tmpfs.
for user in texfleet-supervisor:65100 texfleet-compile:65101; do
  chroot "$root" useradd --uid "${user#*:}" --user-group --no-create-home --home-dir /work \
    --shell /usr/sbin/nologin "${user%:*}"
done
mkdir -p "$root/work"
rm -rf "$root/var/cache/apt" "$root/var/lib/apt/lists"/*

# No programs that make files on demand: kpathsea would start them for a file it misses (the
# settings above turn that off; this removes what they would start).
# Nor rungs, which runs Ghostscript with the names xdvipdfmx quotes (the driver gives xdvipdfmx
# a conversion command of its own). The scripts go as well as their links in /usr/bin.
rm -f "$root"/usr/bin/mktex* "$root"/usr/bin/fmtutil* "$root"/usr/bin/mkocp "$root"/usr/bin/mkofm \
  "$root"/usr/bin/rungs
for tree in "$root/usr/share/texlive" "$root/usr/share/texmf" "$root/usr/share/tex-common"; do
  if [ -d "$tree" ]; then
    find "$tree" \( -name 'mktex*' -o -name 'fmtutil*' -o -name 'rungs*' \) \( -type f -o -type l \) -delete
  fi
done
! find "$root/usr" \( -name 'mktex*' -o -name 'fmtutil*' -o -name 'rungs*' \) \( -type f -o -type l \) | grep . ||
  { echo "customize.sh: an on-demand maker is still there" >&2; exit 1; }

# No shell in the image: nothing of a compile may reach one, by slip or by design. Last step,
# since the steps above (dpkg's among them) need one.
for shell in sh dash bash rbash; do
  rm -f "$root/usr/bin/$shell" "$root/bin/$shell"
done
for shell in sh bash dash; do
  [ ! -e "$root/usr/bin/$shell" ] || { echo "customize.sh: /usr/bin/$shell is still there" >&2; exit 1; }
done
