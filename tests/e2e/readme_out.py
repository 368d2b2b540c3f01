#!/usr/bin/env python3
"""The README's shown output against the output of its commands (tests/e2e/readme.sh).

usage: readme_out.py check|write README.md OUT_DIR

OUT_DIR holds blocks (lines "N LINE run|skip": the README's ```sh blocks, as readme.sh
numbers them) and out.N (block N's stdout and stderr, in order). The ```text block right
after an ```sh block (blank lines and a <!-- output: ... --> line may come between) shows
its output: a template, matched line by line against out.N.

- A template line matches a line of the output when they are the same but for numbers,
  durations (1m22s, 0.5s, 5 min 17 s), the machine's words (OpenBLAS's core) and the width
  of blanks; "..." inside a line
  stands for any text. Template lines match consecutive output lines, in order; a line
  "..." alone skips any number of them (also at the start and the end).
- <!-- output: sample --> before the block: sampled text; only the start of its first line
  (the prompt, echoed: the template's first word) is matched, the rest is the model's. <!-- output: free -->: all of it is
  the model's (JSON of samples): the output must not be empty.

check: exit 1 naming each template line that matches nowhere (the output changed shape:
regenerate with TXL_README=write sh tests/e2e/readme.sh, which runs the commands in full).
write: the README's templates get the numbers, durations and words of this output (a
line with "..." inside keeps its "..." where the template had it) and README.md is
rewritten; exit 1, writing nothing, when a template does not match."""

import re
import sys

NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
DUR = r"(?:(?:\d+h)?(?:\d+m)?\d+(?:\.\d+)?s|(?:\d+ h )?(?:\d+ min )?\d+(?:\.\d+)? s(?![a-z]))"
# words that name the machine rather than txl's output: OpenBLAS's core (SkylakeX on one
# CPU, Cooperlake or Haswell on another)
MACHINE = r"(?<=OpenBLAS core )[A-Za-z]\w*"
TOKEN = re.compile(MACHINE + r"|\.\.\.|" + DUR + r"|" + NUM + r"|\s+|.", re.S)


def line_regex(t):
    """The template line as a regex: its numbers, durations and blank runs generalised,
    each "..." a group of its own (so write can keep them)."""
    parts, literal = [], []
    for m in TOKEN.finditer(t):
        s = m.group(0)
        if s == "...":
            parts.append("(.*?)")
        elif len(s) > 1 and s[0].isalpha():  # a MACHINE word
            parts.append(r"\w+")
        elif re.fullmatch(DUR, s) and re.search(r"[smh]", s):
            parts.append("(?:" + DUR + ")")
        elif re.fullmatch(NUM, s):
            parts.append("(?:" + NUM + ")")
        elif s.isspace():
            parts.append(r"\s+")
        else:
            parts.append(re.escape(s))
    return re.compile("".join(parts) + r"\s*")


def blocks(readme):
    """[(sh block number, first line of its template (0-based), template lines, mode)]"""
    out, n, i = [], 0, 0
    lines = readme
    while i < len(lines):
        if re.match(r"^```sh\s*$", lines[i]):
            n += 1
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            k, mode = j + 1, "match"
            while k < len(lines) and (not lines[k].strip() or lines[k].startswith("<!-- output")):
                if "output: sample" in lines[k]:
                    mode = "sample"
                elif "output: free" in lines[k]:
                    mode = "free"
                k += 1
            if k < len(lines) and re.match(r"^```text\s*$", lines[k]):
                e = k + 1
                while e < len(lines) and not lines[e].startswith("```"):
                    e += 1
                out.append((n, k + 1, lines[k + 1:e], mode))
            i = j + 1
        else:
            i += 1
    return out


def align(tmpl, got):
    """Template lines to output line indices ("..." lines to None), or the index of the
    first template line that cannot be placed (as an int)."""
    regs = [None if t.strip() == "..." else line_regex(t) for t in tmpl]
    memo, reached = {}, [0]

    def go(a, b):  # template from a, output from b: a list of indices or None
        key = (a, b)
        if key in memo:
            return memo[key]
        if a == len(tmpl):
            r = [] if b == len(got) else None
        elif regs[a] is None:  # skip any number of output lines
            r = None
            for c in range(b, len(got) + 1):
                rest = go(a + 1, c)
                if rest is not None:
                    r = [None] + rest
                    break
        else:
            r = None
            if b < len(got) and regs[a].fullmatch(got[b]):
                reached[0] = max(reached[0], a + 1)
                rest = go(a + 1, b + 1)
                if rest is not None:
                    r = [b] + rest
        memo[key] = r
        return r

    res = go(0, 0)
    if res is not None:
        return res
    # the first template line that matches no output line at all, else the first one that
    # could not be placed after the lines before it
    for a, rg in enumerate(regs):
        if rg is not None and not any(rg.fullmatch(g) for g in got):
            return a
    a = reached[0]
    while a < len(tmpl) and regs[a] is None:
        a += 1
    return min(a, len(tmpl) - 1)


def rewrite(t, g):
    """Template line t, matched by output line g: g's text, with "..." where t had it."""
    if "..." not in t:
        return g.rstrip()
    m = line_regex(t).fullmatch(g)
    pieces, last = [], 0
    for k in range(1, (m.lastindex or 0) + 1):
        pieces.append(g[last:m.start(k)])
        pieces.append("...")
        last = m.end(k)
    pieces.append(g[last:])
    return "".join(pieces).rstrip()


def main(argv):
    mode, path, outdir = argv[1], argv[2], argv[3]
    readme = open(path, encoding="utf-8").read().split("\n")
    ran = {}
    for l in open(outdir + "/blocks"):
        n, line, what = l.split()
        ran[int(n)] = what == "run"
    bad, edits = 0, {}
    for n, first, tmpl, kind in blocks(readme):
        if not ran.get(n):
            continue
        try:
            got = open("%s/out.%d" % (outdir, n), encoding="utf-8", errors="replace").read()
        except OSError:
            continue  # skipped by readme.sh (a tool it needs is missing)
        got = got.split("\n")
        if got and got[-1] == "":
            got.pop()
        if kind in ("sample", "free"):
            shown = [t for t in tmpl if t.strip() != "..."]
            word = shown[0].split()[0] if shown and shown[0].split() else ""
            ok = bool(got) and bool(shown) and (kind == "free" or got[0].startswith(word))
            if not ok:
                print("README.md:%d: the sample does not start with %r, the output's first "
                      "line is %r" % (first + 1, word if shown else "", got[0] if got else ""))
                bad += 1
                continue
            new = got[:len(shown)] + (["..."] if tmpl and tmpl[-1].strip() == "..." else [])
            edits[first] = (len(tmpl), new)
            continue
        res = align(tmpl, got)
        if isinstance(res, int):
            print("README.md:%d: %r is not in the output of the block above (or not in its "
                  "place); the output:\n%s" % (first + 1 + res, tmpl[res],
                                               "\n".join("        | " + g for g in got)))
            bad += 1
            continue
        edits[first] = (len(tmpl), [t if i is None else rewrite(t, got[i])
                                    for t, i in zip(tmpl, res)])
    if bad:
        return 1
    if mode == "write":
        for first in sorted(edits, reverse=True):
            n, new = edits[first]
            readme[first:first + n] = new
        open(path, "w", encoding="utf-8").write("\n".join(readme))
        print("wrote the output of %d blocks into %s" % (len(edits), path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
