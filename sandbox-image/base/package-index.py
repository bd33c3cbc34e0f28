#!/usr/bin/env python3
"""Writes the index of the LaTeX packages and classes of an image's TeX trees, for the API's
`GET /info/packages/{name}`: read once when the image is built, never by running TeX.

    package-index.py ROOT OUTPUT

One JSON object: {"<name>.sty" | "<name>.cls": "<version>"}, the version being what the file
says of itself in its \\ProvidesPackage / \\ProvidesClass line (date, version, description),
or "" when it says nothing that is found. The first file kpathsea would find wins: trees are
walked in TEXMF's order.
"""

import json
import os
import re
import sys

TREES = ["usr/local/share/texmf/tex", "usr/share/texmf/tex", "usr/share/texlive/texmf-dist/tex"]
# \ProvidesPackage{name}[2024/01/01 v1.0 What] (the bracket may follow comments and line
# breaks) and \ProvidesExplPackage{name}{date}{version}{description}.
CLASSIC = re.compile(
    r"\\Provides(?:Package|Class|File)\s*\{\s*([^}]*?)\s*\}(?:\s|%[^\n]*\n)*\[([^\]]{0,400})\]")
EXPL = re.compile(
    r"\\ProvidesExpl(?:Package|Class|File)\s*\{\s*([^}]*?)\s*\}\s*\{([^}]{0,40})\}\s*\{([^}]{0,40})\}"
    r"\s*\{([^}]{0,200})\}")
MAX_VERSION = 200


def version_of(path, stem, file):
    """What the file says of itself under its own name, else in its first such line."""
    with open(path, "rb") as handle:
        text = handle.read(32768).decode("latin-1")
    found = []
    for match in EXPL.finditer(text):
        found.append((match.group(1), " ".join(match.group(2, 3, 4))))
    for match in CLASSIC.finditer(text):
        found.append((match.group(1), re.sub(r"%[^\n]*\n", " ", match.group(2))))
    found.sort(key=lambda entry: entry[0] not in (stem, file))
    return " ".join(found[0][1].split())[:MAX_VERSION] if found else ""


def main(root, output):
    index = {}
    for tree in TREES:
        for directory, _, files in sorted(os.walk(os.path.join(root, tree))):
            for file in sorted(files):
                stem, dot, kind = file.rpartition(".")
                if dot and kind in ("sty", "cls") and file not in index:
                    index[file] = version_of(os.path.join(directory, file), stem, file)
    for expected in ("article.cls", "amsmath.sty", "hyperref.sty"):
        if expected not in index:
            sys.exit(f"package-index.py: {expected} is not in the trees of {root}")
    with open(output, "w") as handle:
        json.dump(index, handle, sort_keys=True, separators=(",", ":"))
    print(f"package-index.py: {len(index)} packages and classes", file=sys.stderr)


if __name__ == "__main__":
    main(*sys.argv[1:])
