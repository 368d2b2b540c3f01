#!/usr/bin/env python3
"""Shape rules of txl's C sources (doc/design.md, "Module map"), checked by make test:

- no function outside tests/ is longer than MAX_LINES lines (signature to closing brace);
- no source file outside tests/ is longer than MAX_FILE_LINES lines;
- the kernels (model/) read no environment variables: configuration comes in as arguments;
- every function a header declares is defined and used somewhere outside its definition;
- cmd/ stands on the public API alone: its quoted #includes name include/txl.h, common/ or
  cmd/'s own headers, and it declares no function that cmd/ does not define (a prototype
  of a library's function, say);
- no include circle: in the graph of quoted #includes between files (a.c, a.h and a_impl.h
  are one node) no file reaches itself; EXCUSED names the circles not broken yet, and why.

Prints one line per violation and exits 1 if there is any."""
import os
import re
import sys

MAX_LINES = 100
MAX_FILE_LINES = 1000
SRC_DIRS = ["cmd", "api", "run", "eval", "config", "model", "data", "optim", "common", "io"]
# every folder of source outside tests/ (the file-length rule)
ALL_DIRS = SRC_DIRS + ["include", "examples", "bench", "scripts", "tools", "contrib"]
SRC_EXTS = (".c", ".h", ".py", ".sh", ".js", ".awk")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


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


# a function's prototype at the start of a line: NAME is group 1
DECL_RE = re.compile(r"^[A-Za-z_][\w\s\*]*?\b(\w+)\s*\([^;{]*\)\s*(?:__attribute__\s*\(\(.*?\)\))?\s*;",
                     re.M | re.S)
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


def long_files(root):
    """Rule: no source file outside tests/ over MAX_FILE_LINES lines."""
    bad = 0
    for d in ALL_DIRS:
        for dp, _, fs in os.walk(os.path.join(root, d)):
            for f in sorted(fs):
                if not f.endswith(SRC_EXTS):
                    continue
                path = os.path.join(dp, f)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    n = sum(1 for _ in fh)
                if n > MAX_FILE_LINES:
                    print(f"{path}: {n} lines (a file outside tests/ has at most {MAX_FILE_LINES}: "
                          "split it by concept)")
                    bad += 1
    return bad


def quoted_includes(root):
    """{file: [included file, ...]} of every quoted #include of SRC_DIRS and include/, the
    paths relative to root (resolved against the including file's folder)."""
    res = {}
    for d in SRC_DIRS + ["include"]:
        p = os.path.join(root, d)
        if not os.path.isdir(p):
            continue
        for f in sorted(os.listdir(p)):
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(p, f)
            text = open(path, encoding="utf-8", errors="replace").read()
            rel = os.path.relpath(path, root)
            res[rel] = [os.path.normpath(os.path.join(d, inc)) for inc in INCLUDE_RE.findall(text)]
    return res


def cmd_on_api(root, includes):
    """Rule: cmd/ includes only include/txl.h, common/ and its own headers (system headers
    are <...>), and declares no function that cmd/ does not define."""
    bad = 0
    for path, incs in sorted(includes.items()):
        if not path.startswith("cmd" + os.sep):
            continue
        for inc in incs:
            if inc != os.path.join("include", "txl.h") and not inc.startswith(("common" + os.sep, "cmd" + os.sep)):
                print(f"{os.path.join(root, path)}: includes {inc}: cmd/ calls include/txl.h and common/ only")
                bad += 1
    cmd_dir = os.path.join(root, "cmd")
    if not os.path.isdir(cmd_dir):
        return bad
    defined = set()
    for f in sorted(os.listdir(cmd_dir)):
        if f.endswith(".c"):
            defined.update(name for name, _, _ in functions(os.path.join(cmd_dir, f)))
    for f in sorted(os.listdir(cmd_dir)):
        if not f.endswith((".c", ".h")):
            continue
        text = strip_comments_strings(open(os.path.join(cmd_dir, f), encoding="utf-8", errors="replace").read())
        for m in DECL_RE.finditer(text):
            if not m.group(0).startswith(("typedef", "#", "return")) and m.group(1) not in defined:
                print(f"{os.path.join(cmd_dir, f)}: declares {m.group(1)}, which cmd/ does not define: "
                      "call the library through include/txl.h")
                bad += 1
    return bad


# Include circles known and not broken yet, each with the reason and the way out. An entry
# whose circle is gone is itself reported, so the list cannot go stale.
EXCUSED = {
    ("model/attention", "model/attn_amx", "model/attn_fused"):
        "attn_fused.h and attn_amx.h include attention.h for attn_args while attention.c calls "
        "their kernels: attn_args belongs in a header below them all (attn_* is the bf16 "
        "rework's)",
}


def node(path):
    """A file's node in the include graph: a.c, a.h and a_impl.h (the private half of a's
    header, what a's files share) are one, "dir/a"."""
    base = os.path.splitext(path)[0]
    return base[:-len("_impl")] if base.endswith("_impl") else base


def include_circles(root, includes):
    """Rule: no circle in the graph of quoted #includes (a.c, a.h and a_impl.h one node)."""
    graph = {}
    for path, incs in includes.items():
        edges = graph.setdefault(node(path), set())
        for inc in incs:
            if node(inc) != node(path):
                edges.add(node(inc))
    # Tarjan's strongly connected components; each of more than one node is a circle
    index, low, on, stack, sccs = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    bad = 0
    found = set()
    for comp in sccs:
        if tuple(comp) in EXCUSED:
            found.add(tuple(comp))
            continue
        ties = [f"{a} -> {b}" for a in comp for b in sorted(graph.get(a, ())) if b in comp]
        print(f"{root}: include circle of {len(comp)} files ({', '.join(comp)}): {'; '.join(ties)}")
        bad += 1
    for comp in sorted(set(EXCUSED) - found):
        if all(v in graph for v in comp):
            print(f"{root}: the include circle {' <-> '.join(comp)} is gone: strike it from EXCUSED")
            bad += 1
    return bad


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
        for m in DECL_RE.finditer(text):
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
    bad += long_files(root)
    includes = quoted_includes(root)
    bad += cmd_on_api(root, includes)
    bad += include_circles(root, includes)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
