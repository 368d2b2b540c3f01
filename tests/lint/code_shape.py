#!/usr/bin/env python3
"""Shape rules of txl's C sources (doc/design.md, "Module map"), checked by make test:

- no function outside tests/ is longer than MAX_LINES lines (signature to closing brace);
- the kernels (model/) read no environment variables: configuration comes in as arguments;
- every function a header declares is defined and used somewhere outside its definition.

Prints one line per violation and exits 1 if there is any."""
import os
import re
import sys

MAX_LINES = 100
SRC_DIRS = ["cmd", "api", "run", "eval", "config", "model", "data", "optim", "common", "io"]


def c_files(root, exts=(".c",)):
    for d in SRC_DIRS:
        p = os.path.join(root, d)
        if not os.path.isdir(p):
            continue
        for f in sorted(os.listdir(p)):
            if f.endswith(exts):
                yield os.path.join(p, f)


def strip_comments_strings(text):
    """Blanks out comments, string and char literals, keeping newlines (line numbers)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + c if j - i >= 2 else text[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


FUNC_RE = re.compile(r"^(?:static\s+|inline\s+|_Noreturn\s+)*[A-Za-z_][\w\s\*]*?\b(\w+)\s*\(")


def functions(path):
    """(name, first line, last line) of each top-level function definition."""
    text = strip_comments_strings(open(path, encoding="utf-8", errors="replace").read())
    lines = text.split("\n")
    depth, start, name, res = 0, None, None, []
    for i, line in enumerate(lines):
        if depth == 0 and start is None:
            m = FUNC_RE.match(line)
            if m and not line.rstrip().endswith(";") and not line.startswith(("typedef", "struct", "enum", "union")):
                start, name = i, m.group(1)
        opened = line.count("{")
        closed = line.count("}")
        if start is not None and depth == 0 and opened == 0 and line.rstrip().endswith(";"):
            start = None  # a prototype spread over lines
        depth += opened - closed
        if start is not None and depth == 0 and closed:
            res.append((name, start + 1, i + 1))
            start = None
    return res


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    bad = 0
    defined, sources = {}, {}
    for path in c_files(root):
        sources[path] = strip_comments_strings(open(path, encoding="utf-8", errors="replace").read())
        for name, a, b in functions(path):
            defined[name] = path
            if b - a + 1 > MAX_LINES:
                print(f"{path}:{a}: function {name} is {b - a + 1} lines (at most {MAX_LINES})")
                bad += 1
        if path.startswith(os.path.join(root, "model")) and "getenv" in sources[path]:
            print(f"{path}: reads the environment (getenv); pass configuration in as arguments")
            bad += 1
    # every declared function is defined and used
    headers = {}
    for path in c_files(root, (".h",)):
        text = strip_comments_strings(open(path, encoding="utf-8", errors="replace").read())
        for m in re.finditer(r"^[A-Za-z_][\w\s\*]*?\b(\w+)\s*\([^;{]*\)\s*(?:__attribute__\s*\(\(.*?\)\))?\s*;", text, re.M | re.S):
            if not m.group(0).startswith(("typedef", "#")):
                headers[m.group(1)] = path
    tests = [os.path.join(dp, f) for dp, _, fs in os.walk(os.path.join(root, "tests")) for f in fs if f.endswith(".c")]
    corpus = list(sources.values()) + [strip_comments_strings(open(t, errors="replace").read()) for t in tests]
    for name, hpath in sorted(headers.items()):
        if name not in defined:
            print(f"{hpath}: {name} is declared but not defined")
            bad += 1
            continue
        uses = sum(len(re.findall(r"\b%s\b" % re.escape(name), s)) for s in corpus)
        if uses < 2:  # the definition itself
            print(f"{hpath}: {name} is declared and defined but never used")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
