#!/usr/bin/env bash
# mmdebstrap customize hook: runs on the host with the new root filesystem as $1.
set -euo pipefail
root=$1
biber_expected=$2
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
  expect "$program" shell_escape p
  expect "$program" shell_escape_commands latexminted,kpsewhich,l3sys-query
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
# Each patch is made against one biber version (biber-<version>-no-eval.patch), which the
# year's list names: a release whose biber is another version fails here.
biber_version=$(chroot "$root" dpkg-query -W -f='${Version}' biber | sed 's/-[^-]*$//')
[ "$biber_version" = "$biber_expected" ] ||
  { echo "customize.sh: biber is $biber_version, the list names $biber_expected (each version needs its own reviewed patch)" >&2; exit 1; }
biber_patch="$here/biber-$biber_version-no-eval.patch"
patch -d "$root" -p1 --batch --forward --no-backup-if-mismatch < "$biber_patch" >/dev/null
for file in usr/share/perl5/Biber.pm usr/share/perl5/Biber/Utils.pm usr/bin/biber; do
  grep -q texfleet "$root/$file" || { echo "customize.sh: $file is not patched" >&2; exit 1; }
done
! grep -n 'eegxms\|eval \$a\|->reval' "$root/usr/share/perl5/Biber/Utils.pm" "$root/usr/share/perl5/Biber.pm" ||
  { echo "customize.sh: biber still evaluates document values" >&2; exit 1; }

# The complete TeX Live (texlive-fonts-extra among its packages) or a part of it.
complete=false
chroot "$root" dpkg-query -W -f='${Status}' texlive-fonts-extra 2>/dev/null | grep -q 'install ok installed' && complete=true

# The icon fonts that templates use most, with their maps registered by Debian's triggers.
if $complete; then
  for file in fontawesome.sty fontawesome5.sty academicons.sty fontawesome5.map; do
    chroot "$root" kpsewhich "$file" >/dev/null || { echo "customize.sh: $file is not found" >&2; exit 1; }
  done
  grep -q fa5free "$root$(chroot "$root" kpsewhich -var-value=TEXMFSYSVAR)/fonts/map/pdftex/updmap/pdftex.map" ||
    { echo "customize.sh: fontawesome5.map is not in pdftex.map" >&2; exit 1; }
fi

# texfleet's own files: the package index (below) and, added by ../build.sh, LuaTeX's sandbox.
mkdir -p "$root/usr/share/texfleet"

# pdfTeX reads its whole font map at the first page: the complete one (5.4 MB, nearly all of it
# texlive-fonts-extra's Type 1 fonts) costs a short document a quarter of a second. A map of
# every other font, made by updmap from the same configuration, is what pdfTeX passes find
# first (TEXFONTMAPS); one that lacks a font runs again with the complete map
# (supervisor/src/driver/tex_live.rs). --outputdir keeps the system's maps as they are.
fonts_extra_files() { if $complete; then chroot "$root" dpkg -L texlive-fonts-extra; fi; }
# (Never empty: awk would read the next file as this one.)
{ echo texfleet-no-such.map; fonts_extra_files | sed -n 's|.*/fonts/map/.*/\([^/]*\.map\)$|\1|p'; } |
  sort -u >"$root/tmp/extra-maps"
awk 'NR == FNR { extra[$0]; next } ($1 == "Map" || $1 == "MixedMap") && !($2 in extra)' \
  "$root/tmp/extra-maps" "$root/var/lib/texmf/updmap.cfg-DEBIAN" "$root/var/lib/texmf/updmap.cfg-TEXLIVEDIST" \
  >"$root/tmp/common-updmap.cfg"
chroot "$root" updmap-sys --cnffile /tmp/common-updmap.cfg --outputdir /tmp/common-maps --nohash --quiet >/dev/null
mkdir -p "$root/usr/share/texfleet/font-maps"
# (TeX Live 2022's updmap makes pdftex.map a link to pdftex_dl14.map: the file is copied.)
cp -L "$root/tmp/common-maps/pdftex.map" "$root/usr/share/texfleet/font-maps/pdftex.map"
rm -rf "$root/tmp/extra-maps" "$root/tmp/common-updmap.cfg" "$root/tmp/common-maps"
common_map="$root/usr/share/texfleet/font-maps/pdftex.map"
grep -q '^cmr10 ' "$common_map" && grep -q '^ec-lmr10 ' "$common_map" && ! grep -q fa5free "$common_map" &&
  [ "$(stat -c %s "$common_map")" -lt 1000000 ] ||
  { echo "customize.sh: the common font map is not Computer Modern and Latin Modern without fontawesome5, under 1 MB" >&2; exit 1; }

# Java for bib2gls, found through Debian's fixed default-java link. Java reads its security
# settings from /etc/java-<version>-openjdk, which Landlock lets the compile read
# (sandbox-image/supervisor/src/confine.rs names 17, 21 and 25): another version must be named
# there.
java=$(basename "$(readlink -f "$root/usr/lib/jvm/default-java")" | sed 's/-amd64$//')
case "$java" in
  java-17-openjdk | java-21-openjdk | java-25-openjdk) ;;
  *) echo "customize.sh: default Java is $java, whose settings the sandbox does not let Java read" >&2; exit 1 ;;
esac
[ -d "$root/etc/$java" ] || { echo "customize.sh: Java's settings are not in /etc/$java" >&2; exit 1; }
for file in usr/lib/jvm/default-java/bin/java usr/lib/jvm/default-java/lib/jspawnhelper \
  usr/share/texlive/texmf-dist/scripts/bib2gls/bib2gls.jar; do
  chroot "$root" test -e "/$file" || { echo "customize.sh: /$file is missing" >&2; exit 1; }
done

# TeX Live's fonts for XeTeX, which finds fonts by name through fontconfig.
mv "$root/tmp/texlive-fonts.conf" "$root/etc/fonts/conf.d/09-texlive-fonts.conf"
chmod 0644 "$root/etc/fonts/conf.d/09-texlive-fonts.conf"
# fontconfig trusts a folder's cache only while the folder's modification time is the one it
# recorded, to the nanosecond, and mmdebstrap clamps every time in the tarball to
# SOURCE_DATE_EPOCH (build.sh sets it): the font folders get that time before the cache is made.
epoch=${SOURCE_DATE_EPOCH:?build.sh sets SOURCE_DATE_EPOCH}
for fonts in usr/share/fonts usr/local/share/fonts usr/share/texlive/texmf-dist/fonts/opentype \
  usr/share/texlive/texmf-dist/fonts/truetype usr/share/texmf/fonts/opentype; do
  if [ -d "$root/$fonts" ]; then
    find "$root/$fonts" -type d -exec touch -m -d "@$epoch" {} +
  fi
done
chroot "$root" fc-cache --system-only --force >/dev/null
# TeX Live's fonts for XeTeX: Fira Sans (texlive-fonts-extra), or TeX Gyre Pagella in a part.
font='TeX Gyre Pagella'
$complete && font='Fira Sans'
chroot "$root" fc-match -f '%{family}\n' "$font" | grep -q "$font" ||
  { echo "customize.sh: fontconfig does not find TeX Live's $font" >&2; exit 1; }

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
# Japanese (luatexja's HaranoAji) and Korean (luatexko's) too: a job that made those caches
# itself would take 15 s and most of its memory.
cat > "$root/tmp/fontcache/japanese.tex" <<'TEX'
\documentclass{ltjsarticle}
\usepackage{luatexja-fontspec}
\begin{document}
日本語\textbf{太字}\textsf{ゴシック}\texttt{等幅}
\end{document}
TEX
cat > "$root/tmp/fontcache/korean.tex" <<'TEX'
\documentclass{article}
\usepackage{luatexko}
\begin{document}
한국어 \textbf{굵게} \textsf{돋움} \texttt{고정폭}
\end{document}
TEX
# The CJK faces documents name most (a CJK font's cache takes more than a job's memory to make).
{
  echo '\documentclass{article}\usepackage{fontspec}\begin{document}'
  for family in "Noto Serif CJK" "Noto Sans CJK"; do
    for language in JP KR SC TC; do
      for weight in Regular Bold; do echo "\\fontspec{$family $language $weight}字한"; done
    done
  done
  for face in "Noto Serif CJK KR Light" "Noto Sans CJK KR DemiLight" "Noto Sans CJK KR Medium" \
    HaranoAjiMincho-Regular HaranoAjiMincho-Bold HaranoAjiGothic-Regular HaranoAjiGothic-Medium \
    HaranoAjiGothic-Bold; do
    echo "\\fontspec{$face}字"
  done
  echo '\end{document}'
} > "$root/tmp/fontcache/cjk.tex"
documents=fonts
$complete && documents="fonts japanese korean cjk"
for document in $documents; do
  chroot "$root" env TEXMFVAR=/var/lib/texmf HOME=/tmp/fontcache \
    lualatex -interaction=nonstopmode -output-directory=/tmp/fontcache "/tmp/fontcache/$document.tex" >/dev/null ||
    { grep -A3 '^!' "$root/tmp/fontcache/$document.log" >&2; exit 1; }
done
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

# pdfTeX passes search the common TeX Live first: texmf-dist without texlive-fonts-extra, whose
# fonts are more than half of the file database kpathsea reads at every run (common-tree.py).
# Its files are hard links to texmf-dist's, made once texmf-dist has lost what it loses above.
fonts_extra_files >"$root/tmp/fonts-extra-files"
python3 "$here/common-tree.py" "$root" "$root/tmp/fonts-extra-files"
rm "$root/tmp/fonts-extra-files"
common_tree=/usr/share/texfleet/texmf-common
in_common_tree() { chroot "$root" env TEXMFDIST=$common_tree kpsewhich "$@"; }
# The same file as texmf-dist's, found in the common tree (in a bucket of tex/latex's folders).
same_in_common_tree() {
  local found
  found=$(in_common_tree "$1") && [ "${found#"$common_tree"/}" != "$found" ] &&
    [ "$root$found" -ef "$root/usr/share/texlive/texmf-dist/$2" ]
}
stop_or_absent() { ! $complete || [ "$(in_common_tree "$1")" = $common_tree/tex/generic/texfleet-complete-only/"$1" ]; }
same_in_common_tree article.cls tex/latex/base/article.cls &&
  same_in_common_tree cmr10.tfm fonts/tfm/public/cm/cmr10.tfm && stop_or_absent newtxmath.sty &&
  [ -z "$(in_common_tree fa5brands0.tfm)" ] && [ "$(stat -c %s "$root$common_tree/ls-R")" -lt 2000000 ] ||
  { echo "customize.sh: the common tree is not texmf-dist without texlive-fonts-extra, with a database under 2 MB" >&2; exit 1; }

# What LaTeX packages and classes the image has, for the API (GET /info/packages/{name}).
python3 "$here/package-index.py" "$root" "$root/usr/share/texfleet/packages.json"

# Only the programs of executables.txt are executable by the compile's and the supervisor's
# uids ("others" of every file, which root owns); every other file loses that bit.
# Each program by its file, and every hard link to it (/usr/bin/perl is /usr/bin/perl5.*).
keep=$(grep -v -e '^#' -e '^$' "$here/executables.txt" | while read -r path; do
  real=$(chroot "$root" readlink -e "$path") || { echo "customize.sh: $path is missing" >&2; exit 1; }
  find "$root" -xdev -samefile "$root$real" | sed "s#^$root##"
done | sort -u)
find "$root" -xdev -type f -perm -o+x | sed "s#^$root##" | sort >"$root/tmp/executable"
comm -23 "$root/tmp/executable" <(echo "$keep") | sed "s#^#$root#" | xargs -r -d '\n' chmod o-x,g-x
find "$root" -xdev -type f -perm /o+x,g+x | sed "s#^$root##" | sort >"$root/tmp/executable"
[ "$(cat "$root/tmp/executable")" = "$keep" ] || {
  echo "customize.sh: the image's executables are not those of executables.txt:" >&2
  diff <(echo "$keep") "$root/tmp/executable" >&2
  exit 1
}
rm "$root/tmp/executable"

# No shell in the image: nothing of a compile may reach one, by slip or by design. Last step,
# since the steps above (dpkg's among them) need one.
for shell in sh dash bash rbash; do
  rm -f "$root/usr/bin/$shell" "$root/bin/$shell"
done
for shell in sh bash dash; do
  [ ! -e "$root/usr/bin/$shell" ] || { echo "customize.sh: /usr/bin/$shell is still there" >&2; exit 1; }
done
