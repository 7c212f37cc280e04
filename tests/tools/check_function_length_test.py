#!/usr/bin/env python3
"""tools/check_function_length.py on small sources written here: short functions pass; a function one line over the
limit fails naming its file, line and name; comments, string literals (braces inside them too), a raw string,
preprocessor lines and a constructor's brace initializers do not confuse the brace matching; lambdas inside a
function count toward it; functions inside namespaces and classes are found. Standard library only.
"""
import os
import subprocess
import sys
import tempfile
import unittest

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "check_function_length.py")


def body(lines):
    return "".join(f"  x += {i};\n" for i in range(lines))


def run(*args):
    return subprocess.run([sys.executable, CHECK, *args], capture_output=True, text=True)


class CheckFunctionLength(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, text):
        path = os.path.join(self.root, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_short_functions_pass(self):
        self.write("a.cpp", "namespace v {\nint f(int x) {\n" + body(5) + "  return x;\n}\n}  // namespace v\n")
        r = run("--max", "10", self.root)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_long_function_fails_with_location(self):
        # 1 signature line + 9 body lines + 1 closing brace = 11 lines > 10.
        path = self.write("b.cpp", "// header\nnamespace v {\nclass C {\n  int g(int x) {\n" + body(9) + "  }\n};\n}\n")
        r = run("--max", "10", path)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn(f"{path}:4: g is 11 lines (max 10)", r.stdout)
        # Exactly at the limit passes.
        self.assertEqual(run("--max", "11", path).returncode, 0)

    def test_multi_line_signature_counts_from_its_first_line(self):
        path = self.write("c.cpp", "Result<int> Pipeline::run(int a,\n                          int b) {\n" + body(7) + "}\n")
        self.assertIn(f"{path}:1: Pipeline::run is 10 lines", run("--max", "9", path).stdout)
        self.assertEqual(run("--max", "10", path).returncode, 0)

    def test_braces_in_comments_literals_and_preprocessor_are_ignored(self):
        text = ("#define OPEN {\n"
                "int f() {\n"
                "  // } a brace in a comment\n"
                "  /* { */ const char* s = \"}}{\";\n"
                "  const char* r = R\"x(}})x\";\n"
                "  char c = '}';\n"
                "  return 1;\n"
                "}\n"
                "int g() {\n" + body(12) + "  return 0;\n}\n")
        path = self.write("d.cpp", text)
        r = run("--max", "10", "--list", path)
        self.assertIn(f"{path}:2: f 7", r.stdout)
        self.assertIn(f"{path}:9: g is 15 lines", r.stdout)
        self.assertEqual(r.returncode, 1)

    def test_lambdas_count_toward_their_function(self):
        text = "void f() {\n  auto l = [&](int y) {\n" + body(10) + "  };\n  l(1);\n}\n"
        path = self.write("e.cpp", text)
        r = run("--max", "10", path)
        self.assertIn(f"{path}:1: f is 15 lines", r.stdout)

    def test_constructor_brace_initializers(self):
        text = ("struct S {\n  S(int a) : a_{a}, b_{a + 1} {\n" + body(10) + "  }\n  int a_, b_;\n};\n"
                "enum class E { kA, kB };\nconst int kTable[] = {1, 2, 3};\n")
        path = self.write("f.h", text)
        r = run("--max", "10", "--list", path)
        self.assertIn(f"{path}:2: S is 12 lines", r.stdout)
        self.assertEqual(r.stdout.count("\n"), 2, r.stdout)  # the enum and the table are no functions


if __name__ == "__main__":
    unittest.main()
