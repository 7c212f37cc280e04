#!/usr/bin/env python3
"""Function-length check: no function definition in the given C++/CUDA files or folders is longer than --max lines
(default 120), counted from the first line of its signature to its closing brace, comments and blank lines included.
Functions are found by brace matching after comments, string/character literals and preprocessor lines are blanked:
a brace block opened at namespace or class scope whose header holds a parameter list is a function (a lambda at
namespace scope too); lambdas and local classes inside a function count toward it. Prints each violation as
file:line: name is N lines (max M) and exits 1 if there is any; --list prints every function's length.
Tested by tests/tools/check_function_length_test.py; run over src/engine by .ci/run and the function_length ctest.
Usage: tools/check_function_length.py [--max N] [--list] PATH...   (standard library only)
"""
import argparse
import os
import re
import sys

SOURCE = re.compile(r"\.(h|hpp|cc|cpp|cu|cuh)$")
RAW_STRING = re.compile(r'R"([^()\\ ]{0,16})\(')


def blank(text):
    """`text` with comments, literals and preprocessor lines replaced by spaces (newlines kept, so lines stay)."""
    out = list(text)
    i, n = 0, len(text)

    def wipe(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c == "#":  # a preprocessor line, with its continuations
            j = i
            while j < n:
                e = text.find("\n", j)
                e = n if e < 0 else e
                if e > 0 and text[e - 1] == "\\":
                    j = e + 1
                    continue
                j = e
                break
            wipe(i, j)
            i = j
            continue
        if c == "\n":
            at_line_start = True
            i += 1
            continue
        if c in " \t":
            i += 1
            continue
        at_line_start = False
        if text.startswith("//", i):
            e = text.find("\n", i)
            e = n if e < 0 else e
            wipe(i, e)
            i = e
        elif text.startswith("/*", i):
            e = text.find("*/", i + 2)
            e = n if e < 0 else e + 2
            wipe(i, e)
            i = e
        elif c == "R" and (m := RAW_STRING.match(text, i)) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = text.find(")" + m.group(1) + '"', m.end())
            end = n if end < 0 else end + len(m.group(1)) + 2
            wipe(i + 1, end)
            i = end
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            wipe(i + 1, min(j, n))
            i = j + 1
        else:
            i += 1
    return "".join(out)


def match_braces(code):
    """Position of each brace's partner."""
    partner, stack = {}, []
    for i, c in enumerate(code):
        if c == "{":
            stack.append(i)
        elif c == "}" and stack:
            j = stack.pop()
            partner[j], partner[i] = i, j
    return partner


def strip_template(header):
    h = header.lstrip()
    if not h.startswith("template"):
        return h
    k = h.find("<")
    depth = 0
    for j in range(k, len(h)):
        if h[j] == "<":
            depth += 1
        elif h[j] == ">":
            depth -= 1
            if depth == 0:
                return strip_template(h[j + 1:])
    return h


def kind_of(header):
    h = strip_template(header)
    paren = h.find("(")
    before = h if paren < 0 else h[:paren]
    if re.search(r"\bnamespace\b", before) or re.match(r'\s*extern\s*"', header):
        return "namespace"
    if re.search(r"\benum\b", before):
        return "other"
    if re.search(r"\b(class|struct|union)\b", before):
        return "class"
    if paren >= 0 and ")" in h[paren:]:
        return "function"
    return "other"


def function_name(header):
    h = re.sub(r"__launch_bounds__\s*\([^)]*\)|__attribute__\s*\(\([^)]*\)\)", " ", strip_template(header))
    paren = h.find("(")
    if paren < 0:
        return "?"
    m = re.search(r"([A-Za-z_~][A-Za-z0-9_:~<>]*|operator\s*\S+)\s*$", h[:paren])
    return m.group(1) if m else "(lambda)" if "[" in h[:paren] else "?"


def functions(text):
    """(name, first line, last line) of every function definition in `text`."""
    code = blank(text)
    partner = match_braces(code)
    line_of = [0] * (len(code) + 1)
    line = 1
    for i, c in enumerate(code):
        line_of[i] = line
        if c == "\n":
            line += 1
    line_of[len(code)] = line
    found = []

    def scan(start, end):
        head = start
        i = start
        while i < end:
            c = code[i]
            if c in ";}":
                head = i + 1
            elif c == "{":
                close = partner.get(i, end)
                after = code[close + 1:close + 200].lstrip()
                header = code[head:i]
                kind = kind_of(header)
                if kind == "function" and after[:1] in (",", "{"):  # a member initializer's braces
                    i = close + 1
                    continue
                if kind == "namespace" or kind == "class":
                    scan(i + 1, close)
                elif kind == "function":
                    first = head + (len(header) - len(header.lstrip()))
                    found.append((function_name(header), line_of[first], line_of[close]))
                i = close + 1
                head = i
                continue
            i += 1

    scan(0, len(code))
    return found


def source_files(paths):
    for p in paths:
        if os.path.isdir(p):
            for dirpath, _, names in os.walk(p):
                for name in sorted(names):
                    if SOURCE.search(name):
                        yield os.path.join(dirpath, name)
        else:
            yield p


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, default=120, help="longest function allowed, in lines (default 120)")
    ap.add_argument("--list", action="store_true", help="print every function's length")
    ap.add_argument("paths", nargs="+")
    args = ap.parse_args(argv)
    bad = 0
    for path in source_files(args.paths):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for name, first, last in functions(text):
            lines = last - first + 1
            if args.list:
                print(f"{path}:{first}: {name} {lines}")
            if lines > args.max:
                print(f"{path}:{first}: {name} is {lines} lines (max {args.max})")
                bad += 1
    if bad:
        print(f"{bad} function(s) longer than {args.max} lines", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
