#!/usr/bin/env python3
"""tools/check_layering.py on small repositories written here: a clean tree passes; an include that runs up
VORTEX_COMPONENT_ORDER, a CMake DEPS that does, an include of a component not among the DEPS, a library component
including the measurement component, and a component missing from the order each fail with the offending file and
line. Standard library only.
"""
import os
import subprocess
import sys
import tempfile
import unittest

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "check_layering.py")


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def make_tree(root):
    write(root, "src/CMakeLists.txt",
          "set(VORTEX_COMPONENT_ORDER core model engine\n    measure)\nset(VORTEX_OUTSIDE_LIBRARY measure)\n")
    write(root, "src/core/CMakeLists.txt", "# core: status and tensors.\nvortex_component(core SOURCES a.cpp)\n")
    write(root, "src/core/a.h", '#pragma once\n#include "vortex/status.h"\n')
    write(root, "src/model/CMakeLists.txt", "# model: the transformer.\nvortex_component(model DEPS vortex_core)\n")
    write(root, "src/model/m.cpp", '#include "core/a.h"\n#include "model/m.h"\n')
    write(root, "src/engine/CMakeLists.txt", "vortex_component(engine DEPS vortex_model vortex_core)\n")
    write(root, "src/engine/e.cpp", '#include "model/m.h"\n#include <core/a.h>\n')
    write(root, "src/measure/CMakeLists.txt", "add_library(vortex_measure STATIC b.cpp)\n")
    write(root, "src/measure/b.cpp", '#include "engine/e.h"\n#include "model/m.h"\n')
    write(root, "apps/vortex/main.cpp", '#include "measure/b.h"\n')


def run(root, *args):
    return subprocess.run([sys.executable, CHECK, "--root", root, *args], capture_output=True, text=True)


class CheckLayering(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name
        make_tree(self.root)

    def tearDown(self):
        self.dir.cleanup()

    def test_clean_tree_passes(self):
        r = run(self.root)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout, "")

    def test_upward_include_fails(self):
        write(self.root, "src/core/sub/b.cpp", '#include "vortex/status.h"\n\n#include "model/m.h"\n')
        r = run(self.root)
        self.assertEqual(r.returncode, 1)
        self.assertIn("src/core/sub/b.cpp:3: core includes model/", r.stdout)

    def test_upward_angle_include_fails(self):
        write(self.root, "src/model/n.h", "#include <engine/e.h>\n")
        r = run(self.root)
        self.assertEqual(r.returncode, 1)
        self.assertIn("src/model/n.h:1: model includes engine/", r.stdout)

    def test_upward_cmake_dependency_fails(self):
        write(self.root, "src/model/CMakeLists.txt", "vortex_component(model\n  DEPS vortex_engine vortex_core)\n")
        r = run(self.root)
        self.assertEqual(r.returncode, 1)
        self.assertIn("src/model/CMakeLists.txt:2: model links vortex_engine", r.stdout)

    def test_include_without_dependency_fails(self):
        write(self.root, "src/engine/CMakeLists.txt", "vortex_component(engine DEPS vortex_core)\n")
        r = run(self.root)
        self.assertEqual(r.returncode, 1)
        self.assertIn("src/engine/e.cpp:1: engine includes model/ without depending on vortex_model", r.stdout)

    def test_library_including_measurement_fails(self):
        write(self.root, "src/engine/f.cpp", '#include "measure/b.h"\n')
        r = run(self.root)
        self.assertEqual(r.returncode, 1)
        self.assertIn("src/engine/f.cpp:1: engine includes measure/", r.stdout)

    def test_component_missing_from_order_fails(self):
        write(self.root, "src/extra/CMakeLists.txt", "vortex_component(extra DEPS vortex_core)\n")
        r = run(self.root)
        self.assertEqual(r.returncode, 1)
        self.assertIn("component 'extra' is missing from VORTEX_COMPONENT_ORDER", r.stdout)

    def test_stale_doc_table_fails_and_write_doc_fixes_it(self):
        doc = os.path.join(self.root, "docs", "architecture.md")
        begin = "<!-- BEGIN component table: tools/check_layering.py --write-doc docs/architecture.md -->\n"
        write(self.root, "docs/architecture.md", "# A\n" + begin + "| old |\n<!-- END component table -->\nmore\n")
        r = run(self.root, "--doc", doc)
        self.assertEqual(r.returncode, 1)
        self.assertIn("the component table differs", r.stdout)
        self.assertEqual(run(self.root, "--write-doc", doc).returncode, 0)
        r = run(self.root, "--doc", doc)
        self.assertEqual(r.returncode, 0, r.stdout)
        text = open(doc).read()
        self.assertTrue(text.startswith("# A\n" + begin + "| component |"))
        self.assertTrue(text.endswith("<!-- END component table -->\nmore\n"))

    def test_table_lists_components_in_order(self):
        r = run(self.root, "--table")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[2], "| `src/core/` (libvortex) | - | status and tensors |")
        self.assertEqual(lines[3], "| `src/model/` (libvortex) | core | the transformer |")
        self.assertTrue(lines[5].startswith("| `src/measure/` (apps/, bench/, tests/ only) | vortex (all of the above) |"))


if __name__ == "__main__":
    unittest.main()
