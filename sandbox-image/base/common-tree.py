#!/usr/bin/env python3
"""The common TeX Live: texmf-dist as pdfTeX passes first see it, without texlive-fonts-extra.

kpathsea reads a tree's whole file database (ls-R) at the first lookup of every run, and
texlive-fonts-extra is more than half of texmf-dist's: 101,000 font files of 178,000 entries.
pdfTeX passes search this tree instead (the driver sets TEXMFDIST to it), whose ls-R lacks
them, and run again with the complete tree when a document needs one
(supervisor/src/driver/tex_live.rs).

The tree is links into texmf-dist and a database of its own:
- texlive-fonts-extra's fonts are left out, but for their encodings and maps;
- its TeX files (packages, font definitions) are replaced by one file, under their names in
  tex/generic/texfleet-complete-only/, that stops the pass with a message the driver knows.
  A package that tests whether such a file exists then finds it, and inputting it stops the
  pass, so no document silently loads another package in the common tree (one that reads such
  a file line by line gets the stop's text instead, and no retry).

Usage: common-tree.py ROOT FONTS_EXTRA_FILES
  FONTS_EXTRA_FILES lists texlive-fonts-extra's files (dpkg -L), one absolute path a line.
"""

import os
import sys

DIST = "/usr/share/texlive/texmf-dist"
COMMON = "/usr/share/texfleet/texmf-common"
STOPS = "tex/generic/texfleet-complete-only"
# What reading a texlive-fonts-extra TeX file does in the common tree: an error the driver
# looks for (tex_live.rs), then the end of the run, in plain TeX as in LaTeX.
STOP = (
    b"\\errmessage{texfleet: this document needs the complete TeX Live}%\n"
    b"\\csname @@end\\endcsname\\end\n"
)
KEPT_FONT_FOLDERS = ("fonts/enc/", "fonts/map/")


def read_ls_r(path):
    """The folders of an ls-R, in order, each with its entries."""
    folders, current = [], None
    with open(path, "rb") as ls_r:
        for raw in ls_r:
            line = raw.rstrip(b"\n")
            if line.endswith(b":"):
                current = (line[:-1].decode("latin-1"), [])
                folders.append(current)
            elif line and not line.startswith(b"%") and current is not None:
                current[1].append(line.decode("latin-1"))
    return folders


def inside(root, path):
    """`path` of the image at `root`, its links followed inside the image (Debian links
    texmf-dist's ls-R to /var/lib/texmf)."""
    full = os.path.join(root, path.lstrip("/"))
    while os.path.islink(full):
        target = os.readlink(full)
        full = os.path.join(root, target.lstrip("/")) if target.startswith("/") else os.path.join(os.path.dirname(full), target)
    return full


def main(root, extra_list):
    extra = set()
    with open(extra_list) as listed:
        for line in listed:
            path = line.strip()
            if path.startswith(DIST + "/"):
                extra.add(path[len(DIST) + 1 :])
    folders = read_ls_r(inside(root, os.path.join(DIST, "ls-R")))

    kept, stopped = [], set()
    for folder, entries in folders:
        relative = folder[2:] if folder.startswith("./") else folder.lstrip(".")
        names = []
        for name in entries:
            path = f"{relative}/{name}" if relative else name
            if path not in extra:
                names.append(name)
            elif path.startswith("tex/"):
                stopped.add(name)
            elif not path.startswith("fonts/") or path.startswith(KEPT_FONT_FOLDERS):
                names.append(name)
        kept.append((folder, names))
    # A name another package also has is found as that package's file, not stopped.
    stopped -= {name for _, names in kept for name in names}

    common = os.path.join(root, COMMON.lstrip("/"))
    os.makedirs(os.path.join(common, STOPS))
    dist = os.path.join(root, DIST.lstrip("/"))
    # Links to texmf-dist's entries, but for what the tree makes itself: the folders on the way
    # to the stops, and its database.
    for folder, own in (("", {"tex", "ls-R"}), ("tex", {"generic"}), ("tex/generic", set())):
        for name in sorted(os.listdir(os.path.join(dist, folder))):
            if name not in own:
                os.symlink(os.path.join(DIST, folder, name), os.path.join(common, folder, name))
    stops = os.path.join(common, STOPS)
    first = None
    for name in sorted(stopped):
        path = os.path.join(stops, name)
        if first is None:
            with open(path, "wb") as stop:
                stop.write(STOP)
            os.chmod(path, 0o644)
            first = path
        else:
            os.link(first, path)

    with open(os.path.join(common, "ls-R"), "wb") as ls_r:
        ls_r.write(b"% ls-R -- filename database for kpathsea; do not change this line.\n")
        for folder, names in kept + [(f"./{STOPS}", sorted(stopped))]:
            ls_r.write(folder.encode("latin-1") + b":\n")
            for name in names:
                ls_r.write(name.encode("latin-1") + b"\n")
            ls_r.write(b"\n")
    print(f"common-tree.py: {len(stopped)} TeX files stop the pass, "
          f"{sum(len(n) for _, n in kept)} entries of {sum(len(e) for _, e in folders)} kept")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
