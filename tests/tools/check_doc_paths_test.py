#!/usr/bin/env python3
"""tools/check_doc_paths.py on a small git repository written here: cited paths that exist pass; a missing path
under any top-level folder (not only a fixed list), a bare Markdown name that is neither beside the citing file
nor at the root, and a Markdown path under a folder the repository does not have each fail with file:line.
URLs and string literals are not citations. Standard library only (needs git).
"""
import os
import subprocess
import sys
import tempfile
import unittest

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "check_doc_paths.py")
MD = ".md"  # the fixtures' Markdown names are built at run time, so this file cites none itself


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


class CheckDocPaths(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name
        write(self.root, "README" + MD, f"See docs/guide{MD} and `extra/tool.py`.\n")
        write(self.root, "docs/guide" + MD, f"Beside: other{MD}. Root: README{MD}. Web: https://example.com/a/N{MD}\n")
        write(self.root, "docs/other" + MD, f"Back to guide{MD}.\n")
        write(self.root, "extra/tool.py", f'NAME = "docs/absent{MD}"  # a string literal is data\n')
        write(self.root, "src/a.h", f"// Numerics: docs/guide{MD}; tested in extra/tool.py.\n")

    def tearDown(self):
        self.dir.cleanup()

    def run_check(self):
        subprocess.run(["git", "init", "-q", self.root], check=True)
        subprocess.run(["git", "-C", self.root, "add", "-A"], check=True)
        return subprocess.run([sys.executable, CHECK, self.root], capture_output=True, text=True)

    def test_existing_citations_pass(self):
        r = self.run_check()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_missing_path_under_any_top_level_folder_fails(self):
        write(self.root, "src/b.cpp", "// Tested in extra/missing_test.py.\n")
        r = self.run_check()
        self.assertEqual(r.returncode, 1)
        self.assertIn("src/b.cpp:1: extra/missing_test.py", r.stdout)

    def test_bare_markdown_name_fails(self):
        write(self.root, "src/c.h", f"// Rounding as NUMERICS{MD} says.\n")
        r = self.run_check()
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"src/c.h:1: NUMERICS{MD}", r.stdout)

    def test_markdown_path_outside_the_repository_fails(self):
        write(self.root, "docs/more" + MD, f"The layout (research/notes{MD} §2).\n")
        r = self.run_check()
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"docs/more{MD}:1: research/notes{MD}", r.stdout)


if __name__ == "__main__":
    unittest.main()
