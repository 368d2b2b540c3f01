#!/usr/bin/env python3
"""The bpe trainer's reference: txl's merge rule written naively (every pair counted again
before each merge). Pre-tokenization is GPT-2's regex through the `regex` module (the texts
here are valid UTF-8, where it cuts as PCRE2 does); tokens 0..255 are the bytes; each merge
takes the adjacent pair with the highest count (pairs weighted by their piece's count),
ties to the smaller left id, then the smaller right id; a pair whose bytes joined are
already a token is never merged; the new token is the next id. Stops at `size` tokens or
when no pair is left.

Writes tests/data/vocab/bpe_train_expected.json: per case the merges as [left, right]
ids; tests/test_bpe.c trains txl on the same text and compares. Run from the repository's
root with /usr/bin/python3 (make vocab-ref)."""
import json
from collections import Counter

import regex

PAT = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
D = "tests/data/vocab/"
CASES = [("prose_800", [D + "gpt2/prose.txt"], 800),
         ("mixed_1200", [D + "gpt2/prose.txt", D + "gpt2/scripts.txt", D + "gpt2/code.txt",
                         D + "gpt2/spaces.txt"], 1200)]


def train(files, size):
    pieces = Counter()
    for f in files:
        text = open(f, "rb").read().decode("utf-8")
        for m in PAT.finditer(text):
            pieces[m.group(0).encode("utf-8")] += 1
    tokens = [bytes([b]) for b in range(256)]
    known = set(tokens)
    words = [(list(p), c) for p, c in pieces.items()]
    merges, banned = [], set()
    while len(tokens) < size:
        pairs = Counter()
        for seq, c in words:
            for x, y in zip(seq, seq[1:]):
                pairs[(x, y)] += c
        best = None
        for (x, y), c in pairs.items():
            if (x, y) in banned:
                continue
            if tokens[x] + tokens[y] in known:
                banned.add((x, y))
                continue
            if best is None or (c, -x, -y) > (best[0], -best[1], -best[2]):
                best = (c, x, y)
        if best is None:
            break
        _, a, b = best
        t = len(tokens)
        tokens.append(tokens[a] + tokens[b])
        known.add(tokens[t])
        merges.append([a, b])
        for k, (seq, c) in enumerate(words):
            out, i = [], 0
            while i < len(seq):
                if i + 1 < len(seq) and seq[i] == a and seq[i + 1] == b:
                    out.append(t)
                    i += 2
                else:
                    out.append(seq[i])
                    i += 1
            words[k] = (out, c)
    return merges, len(banned)


def main():
    out = []
    for name, files, size in CASES:
        merges, banned = train(files, size)
        out.append({"name": name, "files": files, "size": size, "merges": merges,
                    "banned": banned})
    with open(D + "bpe_train_expected.json", "w") as f:
        json.dump({"cases": out}, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
