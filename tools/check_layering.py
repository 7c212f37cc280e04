#!/usr/bin/env python3
"""Layering check: every component under src/ includes and links only components declared before it.
The order is VORTEX_COMPONENT_ORDER in src/CMakeLists.txt (lowest first). A component's sources may include
"<other>/..." headers and name vortex_<other> targets in its CMakeLists.txt only when <other> comes earlier, and
include them only when <other> is among its DEPS, directly or through them (what its include path exports);
components in VORTEX_OUTSIDE_LIBRARY (measurement and tuning code) are not part of libvortex: they link all of
it, and no library component may include them. apps/, bench/, tests/ and fuzz/ sit above every component.
Prints each violation as file:line: message and exits 1 if there is any. --table prints the component table
built from the same files; --doc FILE also fails when the table between FILE's BEGIN/END component table
markers differs from it (docs/architecture.md), and --write-doc FILE rewrites it there.
Tested by tests/tools/check_layering_test.py.
Usage: tools/check_layering.py [--root REPO] [--table | --write-doc FILE] [--doc FILE]   (standard library only)
"""
import argparse
import os
import re
import sys

ORDER = re.compile(r"^\s*set\(VORTEX_COMPONENT_ORDER\s+([^)]*)\)", re.M)
OUTSIDE = re.compile(r"^\s*set\(VORTEX_OUTSIDE_LIBRARY\s+([^)]*)\)", re.M)
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([A-Za-z0-9_]+)/[^">]+[">]')
TARGET = re.compile(r"\bvortex_([a-z0-9_]+)\b")
SOURCE = re.compile(r"\.(h|hpp|cpp|cu|cuh)$")


def component_order(root):
    text = open(os.path.join(root, "src", "CMakeLists.txt")).read()
    m = ORDER.search(text)
    if not m:
        raise SystemExit("src/CMakeLists.txt: no set(VORTEX_COMPONENT_ORDER ...) line")
    return m.group(1).split()


def outside_library(root):
    """Components linked by apps/ and bench/ (and the tests of them) over libvortex, never into it."""
    m = OUTSIDE.search(open(os.path.join(root, "src", "CMakeLists.txt")).read())
    return m.group(1).split() if m else []


def cmake_deps(root, name, known):
    """vortex_<component> targets named in src/<name>/CMakeLists.txt, other than the component itself."""
    deps = []
    path = os.path.join(root, "src", name, "CMakeLists.txt")
    for n, line in enumerate(open(path), 1):
        code = line.split("#", 1)[0]
        for m in TARGET.finditer(code):
            dep = m.group(1)
            if dep != name and dep in known and (dep, n) not in deps:
                deps.append((dep, n))
    return deps


def reachable(root, order, rank):
    """Each component's declared dependencies, transitively: the headers its include path exports."""
    direct = {c: [d for d, _ in cmake_deps(root, c, rank)] for c in order
              if os.path.isfile(os.path.join(root, "src", c, "CMakeLists.txt"))}
    closure = {}
    for c in direct:
        seen, todo = set(), list(direct[c])
        while todo:
            d = todo.pop()
            if d not in seen:
                seen.add(d)
                todo.extend(direct.get(d, []))
        closure[c] = seen
    for c in outside_library(root):  # they link libvortex: every library component
        closure[c] = {d for d in order if d not in outside_library(root)}
    return closure


def violations(root):
    order = component_order(root)
    rank = {c: i for i, c in enumerate(order)}
    closure = reachable(root, order, rank)
    outside = outside_library(root)
    found = []
    on_disk = sorted(d for d in os.listdir(os.path.join(root, "src"))
                     if os.path.isfile(os.path.join(root, "src", d, "CMakeLists.txt")))
    for d in on_disk:
        if d not in rank:
            found.append(f"src/{d}/CMakeLists.txt:1: component '{d}' is missing from VORTEX_COMPONENT_ORDER")
    for c in order:
        if c not in on_disk:
            found.append(f"src/CMakeLists.txt:1: VORTEX_COMPONENT_ORDER names '{c}', which has no src/{c}/CMakeLists.txt")
    for c in order:
        if c not in on_disk:
            continue
        for dep, n in cmake_deps(root, c, rank):
            if rank[dep] > rank[c]:
                found.append(f"src/{c}/CMakeLists.txt:{n}: {c} links vortex_{dep}, which comes after it in "
                             "VORTEX_COMPONENT_ORDER")
        for dirpath, _, files in os.walk(os.path.join(root, "src", c)):
            for f in sorted(files):
                if not SOURCE.search(f):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                for n, line in enumerate(open(path, errors="replace"), 1):
                    m = INCLUDE.match(line)
                    if not m or m.group(1) not in rank or m.group(1) == c:
                        continue
                    dep = m.group(1)
                    if dep in outside and c not in outside:
                        found.append(f"{rel}:{n}: {c} includes {dep}/, which only apps/, bench/ and tests/ may use")
                    elif rank[dep] > rank[c]:
                        found.append(f"{rel}:{n}: {c} includes {dep}/, which comes after it in VORTEX_COMPONENT_ORDER")
                    elif dep not in closure.get(c, ()):
                        found.append(f"{rel}:{n}: {c} includes {dep}/ without depending on vortex_{dep} (DEPS in "
                                     f"src/{c}/CMakeLists.txt)")
    return found


def first_comment(root, name):
    """The first comment line of src/<name>/CMakeLists.txt: what the component holds."""
    lines = []
    for line in open(os.path.join(root, "src", name, "CMakeLists.txt")):
        if not line.startswith("#"):
            break
        lines.append(line[1:].strip())
    text = re.sub(r"^\w+( component)?: ", "", " ".join(lines))
    return text.split(". ")[0].rstrip(".") if text else ""


def table(root):
    order = component_order(root)
    rank = {c: i for i, c in enumerate(order)}
    rows = ["| component | links (direct) | holds |", "|---|---|---|"]
    for c in order:
        deps = sorted({d for d, _ in cmake_deps(root, c, rank)}, key=lambda d: rank[d])
        if c in outside_library(root):
            deps = ["vortex (all of the above)"]
        where = "apps/, bench/, tests/ only" if c in outside_library(root) else "libvortex"
        rows.append(f"| `src/{c}/` ({where}) | {', '.join(deps) or '-'} | {first_comment(root, c)} |")
    return "\n".join(rows) + "\n"


BEGIN = "<!-- BEGIN component table: tools/check_layering.py --write-doc docs/architecture.md -->\n"
END = "<!-- END component table -->"


def doc_table(path):
    text = open(path).read()
    i, j = text.find(BEGIN), text.find(END)
    if i < 0 or j < i:
        return None, text
    return text[i + len(BEGIN):j], text


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--table", action="store_true", help="print the component table instead of checking")
    ap.add_argument("--doc", help="also check the component table in this Markdown file")
    ap.add_argument("--write-doc", help="write the component table into this Markdown file")
    args = ap.parse_args(argv)
    if args.table:
        sys.stdout.write(table(args.root))
        return 0
    if args.write_doc:
        old, text = doc_table(args.write_doc)
        if old is None:
            raise SystemExit(f"{args.write_doc}: no {BEGIN.strip()} ... {END} markers")
        with open(args.write_doc, "w") as f:
            f.write(text.replace(BEGIN + old + END, BEGIN + table(args.root) + END))
        return 0
    found = violations(args.root)
    if args.doc:
        old, _ = doc_table(args.doc)
        if old != table(args.root):
            found.append(f"{args.doc}:1: the component table differs from the build's; run "
                         f"tools/check_layering.py --write-doc {args.doc}")
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} layering violation(s); the order is VORTEX_COMPONENT_ORDER in src/CMakeLists.txt",
              file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
