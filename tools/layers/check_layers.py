#!/usr/bin/env python3
"""The layer check every build runs (tools/layers/layers.cmake).

Each product library declares, with espvpn_layer() in its CMakeLists.txt, the folders it
owns and the layers it links PUBLIC or PRIVATE; CMake writes that table to the build tree
and this script holds every #include "src/..." / "protocols/..." / "crypto/..." of the
product (src/, protocols/, crypto/) to it. An include fails the build when:
  - it names a layer its own layer does not link (an upward or a sideways include);
  - it is in a header and names a layer linked only PRIVATE (the header's users would
    need the layer too: link it PUBLIC);
  - it stays in its own layer but reaches into a sibling or a child folder (a folder
    sees itself and the folders above it in its layer: datapath/esp/ never datapath/dtls/,
    session/ never session/gp/), unless the layer is declared OPEN_SUBFOLDERS (protocols/);
  - it closes a cycle of includes, or the declared links themselves form a cycle;
  - in an OPEN_SUBFOLDERS layer, it closes a cycle of folders (protocols/gp/ uses
    protocols/tunnel/, so protocols/tunnel/ may not use protocols/gp/);
  - it is quoted but outside the product (a test's or a tool's header).
A comment that cites docs/....md must name a file that exists, and with "§N.N" a heading
numbered N.N in it.
Exit 0 when all holds, 1 with one line per violation (file:line: what and why).
"""
import argparse
import os
import re
import sys

ROOTS = ("src", "protocols", "crypto")
SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cc")
HEADER_SUFFIXES = (".h", ".hpp")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
DOC_CITE = re.compile(r'\b(docs/[\w./-]+\.md)(?:\s*§\s*((?:[A-Z]|\d+)(?:\.\d+)*))?')


class Layer:
    def __init__(self, name, dirs, public, private, flags):
        self.name, self.dirs, self.public, self.private = name, dirs, public, private
        self.open_subfolders = "open_subfolders" in flags


def read_rules(path):
    """Lines 'name|dir,dir|public,deps|private,deps|flags' as espvpn_layer() writes them."""
    layers = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            fields = line.split("|")
            if len(fields) != 5:
                sys.exit(f"{path}: bad rule line: {line!r}")
            split = lambda s: [x for x in s.split(",") if x]
            name, dirs, public, private, flags = (fields[0], split(fields[1]), split(fields[2]),
                                                  split(fields[3]), split(fields[4]))
            layers[name] = Layer(name, [d.strip("/") for d in dirs], public, private, flags)
    for layer in layers.values():  # links to non-layers (GnuTLS, Threads) do not matter here
        layer.public = [d for d in layer.public if d in layers]
        layer.private = [d for d in layer.private if d in layers]
    return layers


def find_cycle(nodes, edges):
    """One cycle (a list of nodes, first == last) in the directed graph, or None."""
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in edges.get(n, ()):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                c = visit(m)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(nodes):
        if n not in state:
            c = visit(n)
            if c:
                return c
    return None


def owner(path, dir_owner):
    """The layer owning a file: the longest declared folder that holds it."""
    best = None
    for d, name in dir_owner.items():
        if path == d or path.startswith(d + "/"):
            if best is None or len(d) > len(best[0]):
                best = (d, name)
    return best


def doc_sections(path):
    """The numbers of a Markdown file's numbered headings ('## 3.2 Title' -> '3.2', '### B.4 …' -> 'B.4')."""
    numbers = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r'^#+\s+(?:§\s*)?((?:[A-Z]|\d+)(?:\.\d+)*)\.?\s', line)
            if m:
                numbers.add(m.group(1))
    return numbers


def check(root, layers):
    errors = []
    dir_owner = {}
    for layer in layers.values():
        for d in layer.dirs:
            if d in dir_owner:
                errors.append(f"{d}: owned by both {dir_owner[d]} and {layer.name}")
            dir_owner[d] = layer.name

    cycle = find_cycle(layers.keys(), {n: l.public + l.private for n, l in layers.items()})
    if cycle:
        errors.append("the declared links form a cycle: " + " -> ".join(cycle))

    files = []
    for r in ROOTS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, r)):
            dirnames.sort()
            for fn in sorted(filenames):
                if fn.endswith(SOURCE_SUFFIXES):
                    files.append(os.path.relpath(os.path.join(dirpath, fn), root).replace(os.sep, "/"))

    includes = {}  # file -> [included product files], for the cycle check
    folder_uses = {}  # (layer, folder) -> {folders of the same open layer it includes}
    docs = {}
    for path in files:
        own = owner(path, dir_owner)
        if own is None:
            errors.append(f"{path}: in no layer (declare its folder with espvpn_layer())")
            continue
        layer = layers[own[1]]
        here = os.path.dirname(path)
        is_header = path.endswith(HEADER_SUFFIXES)
        includes[path] = []
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
        for number, line in enumerate(lines, 1):
            for cite in DOC_CITE.finditer(line):
                docs.setdefault((cite.group(1), cite.group(2)), []).append(f"{path}:{number}")
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            where = f"{path}:{number}: #include \"{target}\""
            if not target.startswith(tuple(r + "/" for r in ROOTS)):
                errors.append(f"{where}: a product file includes only product headers, by their path from the root")
                continue
            if not os.path.isfile(os.path.join(root, target)):
                errors.append(f"{where}: no such file")
                continue
            includes[path].append(target)
            to = owner(target, dir_owner)
            if to is None:
                errors.append(f"{where}: the file is in no layer")
                continue
            if to[1] == layer.name:
                there = os.path.dirname(target)
                if layer.open_subfolders and there != here:
                    folder_uses.setdefault(here, set()).add(there)
                if not layer.open_subfolders and not (here == there or here.startswith(there + "/")):
                    errors.append(f"{where}: {there}/ is not {here}/ or a folder above it in {layer.name}"
                                  " (a folder uses itself and its parents, never a sibling or a child)")
                continue
            if to[1] in layer.public:
                continue
            if to[1] in layer.private:
                if is_header:
                    errors.append(f"{where}: a header of {layer.name} uses {to[1]}, which {layer.name} links"
                                  " PRIVATE only (link it PUBLIC, or include it from the .cpp)")
                continue
            uses = ", ".join(layer.public + layer.private) or "nothing"
            errors.append(f"{where}: {layer.name} may not use {to[1]} (it links: {uses})")

    cycle = find_cycle(includes.keys(), includes)
    if cycle:
        errors.append("include cycle: " + " -> ".join(cycle))
    cycle = find_cycle(sorted(folder_uses), {k: sorted(v) for k, v in folder_uses.items()})
    if cycle:
        errors.append("folder cycle: " + " -> ".join(f + "/" for f in cycle)
                      + " (sub-folders of one layer use each other one way only)")

    for (doc, section), places in sorted(docs.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        full = os.path.join(root, doc)
        if not os.path.isfile(full):
            errors.append(f"{places[0]}: cites {doc}, which does not exist"
                          + (f" (and {len(places) - 1} more places)" if len(places) > 1 else ""))
        elif section and section not in doc_sections(full):
            errors.append(f"{places[0]}: cites {doc} §{section}, which has no heading numbered {section}")
    return errors


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", required=True, help="the source tree (holds src/, protocols/, crypto/)")
    p.add_argument("--rules", required=True, help="the layer table CMake wrote (layers.txt)")
    p.add_argument("--stamp", help="touched when the check passes (for the build's dependency)")
    a = p.parse_args()
    errors = check(a.root, read_rules(a.rules))
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print(f"layer check: {len(errors)} violation(s); the rules: tools/layers/check_layers.py,"
              " the links: espvpn_layer() in the CMakeLists.txt files", file=sys.stderr)
        return 1
    if a.stamp:
        with open(a.stamp, "w", encoding="utf-8") as f:
            f.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
