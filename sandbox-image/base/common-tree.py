#!/usr/bin/env python3
"""The common TeX Live: texmf-dist as pdfTeX passes first see it, without texlive-fonts-extra.

kpathsea reads a tree's whole file database (ls-R) at the first lookup of every run, and
texlive-fonts-extra is more than half of texmf-dist's: 101,000 font files of 178,000 entries.
pdfTeX passes search this tree instead (the driver sets TEXMFDIST to it), whose ls-R lacks
them, and run again with the complete tree when a document needs one
(supervisor/src/driver/tex_live.rs).

The tree is hard links to texmf-dist's files, in folders of its own, and a database of its own:
- texlive-fonts-extra's fonts are left out, but for their encodings and maps, and so are the
  folders that hold nothing else;
- its TeX files (packages, font definitions: TEX_INPUTS) are replaced by one file, under
  their names in tex/generic/texfleet-complete-only/, that stops the pass with a message the
  driver knows. A package that tests whether such a file exists then finds it, and inputting
  it stops the pass, so no document silently loads another package in the common tree (one
  that reads such a file line by line gets the stop's text instead, and no retry);
- a folder of more than BUCKET_OVER folders (tex/latex holds thousands) has them in buckets,
  a few dozen folders each: a container's root filesystem (overlayfs, or fuse-overlayfs, which
  reads a whole folder at its first lookup) looks a path up one folder at a time, and every
  compile starts in a new container, so the first lookup in tex/latex cost tens of
  milliseconds of each compile. kpathsea finds files through the database at any depth below
  tex/latex//, and `folder/name` lookups match a path's last folders, which buckets keep.

Usage: common-tree.py ROOT FONTS_EXTRA_FILES
  FONTS_EXTRA_FILES lists texlive-fonts-extra's files (dpkg -L), one absolute path a line.
"""

import hashlib
import math
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
# What TeX reads of texlive-fonts-extra's tex/ folders: these stop the pass; its other files
# there (images, Lua, CMaps) are few and stay, since reading a stop's text as one would fail
# without the message the driver knows.
TEX_INPUTS = (".sty", ".cls", ".fd", ".def", ".tex", ".cfg", ".clo", ".ldf", ".dfu")
BUCKET_OVER = 64
BUCKET_PREFIX = "texfleet-bucket-"


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


def inside(root, path, links=0):
    """`path` of the image at `root`, every link on the way followed inside the image (Debian
    links texmf-dist's ls-R, and some of its files, to /var/lib/texmf and /etc/texmf)."""
    parts = [part for part in path.split("/") if part]
    resolved = ""
    for index, part in enumerate(parts):
        full = root + resolved + "/" + part
        if os.path.islink(full):
            if links == 40:
                raise RuntimeError(f"common-tree.py: too many links at {path}")
            target = os.readlink(full)
            if not target.startswith("/"):
                target = os.path.normpath(resolved + "/" + target)
            return inside(root, "/".join([target] + parts[index + 1 :]), links + 1)
        resolved += "/" + part
    return root + resolved


def bucket(name, count):
    """The bucket of a folder among `count` folders: about the square root of `count` buckets,
    by a hash of the name, so that each holds a few dozen whatever the names."""
    buckets = math.isqrt(count - 1) + 1
    return f"{BUCKET_PREFIX}{int(hashlib.sha256(name.encode('latin-1')).hexdigest(), 16) % buckets:02d}"


def main(root, extra_list):
    extra = set()
    with open(extra_list) as listed:
        for line in listed:
            path = line.strip()
            if path.startswith(DIST + "/"):
                extra.add(path[len(DIST) + 1 :])
    folders = read_ls_r(inside(root, os.path.join(DIST, "ls-R")))
    folder_paths = {normal(folder) for folder, _ in folders}

    files, stopped = {}, set()
    for folder, entries in folders:
        relative = normal(folder)
        names = []
        for name in entries:
            path = f"{relative}/{name}" if relative else name
            if path in folder_paths:
                continue
            if path not in extra:
                names.append(name)
            elif path.startswith("tex/") and name.endswith(TEX_INPUTS):
                stopped.add(name)
            elif path.startswith("tex/"):
                names.append(name)
            elif not path.startswith("fonts/") or path.startswith(KEPT_FONT_FOLDERS):
                names.append(name)
        files[relative] = names
    # A name another package also has is found as that package's file, not stopped.
    stopped -= {name for names in files.values() for name in names}

    # The folders that hold a kept file, at any depth, and each one's kept subfolders.
    kept = {""}
    for relative, names in files.items():
        if names:
            parts = relative.split("/") if relative else []
            kept.update("/".join(parts[:depth]) for depth in range(len(parts) + 1))
    subfolders = {folder: [] for folder in kept}
    for folder in sorted(kept - {""}):
        parent, _, name = folder.rpartition("/")
        subfolders[parent].append(name)

    # Where each kept folder goes, parents first.
    placed = {"": ""}
    for folder in sorted(kept, key=lambda f: (f.count("/"), f)):
        names = subfolders[folder]
        for name in names:
            child = f"{folder}/{name}" if folder else name
            if len(names) > BUCKET_OVER:
                place = f"{placed[folder]}/{bucket(name, len(names))}/{name}"
            else:
                place = f"{placed[folder]}/{name}" if folder else name
            placed[child] = place.lstrip("/")

    common = os.path.join(root, COMMON.lstrip("/"))
    dist = os.path.join(root, DIST.lstrip("/"))
    database = {}
    linked = 0
    for folder in sorted(kept):
        target = os.path.join(common, placed[folder])
        os.makedirs(target, exist_ok=True)
        names = []
        for name in files.get(folder, []):
            source = inside(root, os.path.join(DIST, folder, name))
            # The tree's database is its own.
            if not os.path.isfile(source) or (folder, name) == ("", "ls-R"):
                continue
            os.link(source, os.path.join(target, name))
            names.append(name)
            linked += 1
        database[placed[folder]] = names
    stops = os.path.join(common, STOPS)
    os.makedirs(stops)
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
    database[STOPS] = sorted(stopped)
    # Every folder's entries: its files and the folders in it (buckets too), as mktexlsr
    # writes them.
    for place in sorted(database, key=lambda p: -p.count("/")):
        while place:
            parent, _, name = place.rpartition("/")
            entries = database.setdefault(parent, [])
            if name in entries:
                break
            entries.append(name)
            place = parent

    with open(os.path.join(common, "ls-R"), "xb") as ls_r:
        ls_r.write(b"% ls-R -- filename database for kpathsea; do not change this line.\n")
        for place in sorted(database):
            ls_r.write(f"./{place}:\n".encode("latin-1"))
            for name in sorted(database[place]):
                ls_r.write(name.encode("latin-1") + b"\n")
            ls_r.write(b"\n")
    print(f"common-tree.py: {len(stopped)} TeX files stop the pass, "
          f"{linked} files of texmf-dist linked in {len(kept)} folders "
          f"({sum(len(e) for _, e in folders)} entries in texmf-dist)")


def normal(folder):
    """An ls-R folder line as a path relative to the tree: `./tex/latex` is `tex/latex`."""
    return folder[2:] if folder.startswith("./") else folder.lstrip(".")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
