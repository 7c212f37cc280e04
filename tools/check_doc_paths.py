#!/usr/bin/env python3
"""Every repository path that a comment or doc cites ("Tested in tests/...", "evidence: benchmarks/...") exists.
Scans the tracked sources, scripts and docs for tokens that start with a top-level folder of the repository and end
in a file extension; string literals in code (a token right after a double quote) are data, not citations, and are
skipped, as are patterns (*, <...>). Prints each stale citation as file:line: path and exits 1 if there is any.
Usage: tools/check_doc_paths.py [REPO]   (standard library only; needs git)
"""
import os
import re
import subprocess
import sys

TOP = ("apps", "bench", "benchmarks", "cmake", "data", "docs", "fuzz", "include", "scripts", "src", "tests", "tools")
EXT = ("cpp", "cu", "cuh", "h", "py", "sh", "md", "json", "jsonl", "log", "txt", "cmake")
TOKEN = re.compile(r'(?<![\w/."<-])((?:%s)/[\w./+-]*\.(?:%s))(?![\w*<])' % ("|".join(TOP), "|".join(EXT)))
SCANNED = re.compile(r"\.(cpp|cu|cuh|h|py|sh|md|cmake)$|(^|/)CMakeLists\.txt$")


def main(argv):
    root = argv[0] if argv else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True, check=True).stdout.split()
    stale = []
    for rel in files:
        if not SCANNED.search(rel) or rel.startswith("benchmarks/"):
            continue
        path = os.path.join(root, rel)
        if not os.path.isfile(path):
            continue
        with open(path, errors="replace") as f:
            for n, line in enumerate(f, 1):
                for m in TOKEN.finditer(line):
                    p = m.group(1).rstrip(".")
                    if not os.path.exists(os.path.join(root, p)):
                        stale.append(f"{rel}:{n}: {p}")
    for s in stale:
        print(s)
    if stale:
        print(f"{len(stale)} cited path(s) do not exist", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
