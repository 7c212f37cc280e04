#!/usr/bin/env python3
"""Every repository path that a comment or doc cites ("Tested in tests/...", "evidence: benchmarks/...") exists.
Scans the tracked sources, scripts and docs for tokens that start with a top-level folder of the repository (every
folder `git ls-files` shows) and end in a file extension, and for every other Markdown file name, bare or under a
folder, which must exist beside the citing file or at the repository root. String literals in code (a
token right after a double quote) are data, not citations, and are skipped, as are patterns (*, <...>) and URLs.
Prints each stale citation as file:line: path and exits 1 if there is any. Tested by
tests/tools/check_doc_paths_test.py.
Usage: tools/check_doc_paths.py [REPO]   (standard library only; needs git)
"""
import os
import re
import subprocess
import sys

EXT = ("cpp", "cu", "cuh", "h", "py", "sh", "md", "json", "jsonl", "log", "txt", "cmake")
# Any *.md name not inside a URL or a longer path: "docs/numerics.md", "research/x.md", "docs/lora.md".
MD_TOKEN = re.compile(r'(?<![\w/."<:-])([A-Za-z0-9_][\w.+-]*(?:/[\w.+-]+)*\.md)(?![\w*<])')
SCANNED = re.compile(r"\.(cpp|cu|cuh|h|py|sh|md|cmake)$|(^|/)CMakeLists\.txt$")


def path_token(top):
    """Tokens that start with one of the repository's top-level folders and end in a known extension."""
    return re.compile(r'(?<![\w/."<-])((?:%s)/[\w./+-]*\.(?:%s))(?![\w*<])' %
                      ("|".join(re.escape(t) for t in sorted(top)), "|".join(EXT)))


def main(argv):
    root = argv[0] if argv else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True, check=True).stdout.split()
    top = {f.split("/", 1)[0] for f in files if "/" in f}
    token = path_token(top)
    stale = []
    for rel in files:
        if not SCANNED.search(rel) or rel.startswith("benchmarks/"):
            continue
        path = os.path.join(root, rel)
        if not os.path.isfile(path):
            continue
        with open(path, errors="replace") as f:
            for n, line in enumerate(f, 1):
                cited = set()
                for m in token.finditer(line):
                    p = m.group(1).rstrip(".")
                    cited.add(m.start(1))
                    if not os.path.exists(os.path.join(root, p)):
                        stale.append(f"{rel}:{n}: {p}")
                for m in MD_TOKEN.finditer(line):
                    word_start = max(line.rfind(" ", 0, m.start(1)), line.rfind("(", 0, m.start(1))) + 1
                    if m.start(1) in cited or "://" in line[word_start:m.start(1)]:
                        continue
                    p = m.group(1)
                    here = os.path.join(root, os.path.dirname(rel), p)
                    if not os.path.exists(os.path.join(root, p)) and not os.path.exists(here):
                        stale.append(f"{rel}:{n}: {p}")
    for s in stale:
        print(s)
    if stale:
        print(f"{len(stale)} cited path(s) do not exist", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
