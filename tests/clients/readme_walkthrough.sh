#!/usr/bin/env bash
# Runs the README's walk-through ("Walk-through with curl") exactly as written, against the dev
# stack, in a folder of its own that sees .dev/env; fails on any failed step and unless the PDF
# it downloads says what the walk-through compiled.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ln -s "$root/.dev" "$work/.dev"
awk '/^## Walk-through with curl/ { section = 1 }
     section && /^```sh$/ { inside = 1; next }
     inside && /^```$/ { exit }
     inside' "$root/README.md" >"$work/walkthrough.sh"
[ -s "$work/walkthrough.sh" ] || { echo "the README has no walk-through" >&2; exit 1; }
cd "$work"
bash -euo pipefail walkthrough.sh >output.txt 2>&1 || { cat output.txt >&2; exit 1; }
text=$(pdftotext out.pdf -)
grep -q "Hello world" <<<"$text" || { echo "out.pdf says: $text" >&2; exit 1; }
echo "the README walk-through ran as written ($(grep -c . walkthrough.sh) lines)"
