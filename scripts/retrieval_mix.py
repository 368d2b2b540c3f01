#!/usr/bin/env python3
"""Text that rewards retrieval: a corpus with facts planted early and asked for late.

    retrieval_mix.py IN OUT [--seed S] [--gap A,B] [--dist A,B]

Reads IN (plain or gzip), writes OUT (gzip -9 without name or time: the same bytes for the
same input and arguments; through OUT.partPID, so OUT is whole or absent). Walking through the text, an item starts every A..B bytes
(uniform; --gap, default 256,1280): at the first word start from there the sentence
"The secret number of KEY is VALUE. " is inserted (the fact), and the same sentence again
at the first word start D bytes later (the question with its answer), D drawn
log-uniformly from --dist (default 32,2048 bytes). KEY is 7 letters, consonant and vowel
alternating, capitalised; VALUE 6 digits: the needle probe's sentence (`txl probe needle`,
doc/design.md section 9), with keys and values of this script's own random stream. Items
overlap (another item's fact may come between a fact and its question). The inserted
sentences are the only change; a summary (items, bytes, the share of inserted bytes, the
distances' quartiles) goes to stderr. Standard library only.
"""
import argparse
import gzip
import math
import os
import random
import sys

CONS, VOW = "bcdfghjklmnprstvz", "aeiou"


def key(rng):
    k = "".join(rng.choice(VOW) if i % 2 else rng.choice(CONS) for i in range(7))
    return k[0].upper() + k[1:]


SPACE = " \t\n\v\f\r"  # txl's whitespace (doc/design.md section 5); not str.isspace: a
# UTF-8 continuation byte 0x85 or 0xa0 read as latin-1 would count as a space


def word_start(text, i):
    """The first index >= i where a word starts (a non-space after whitespace), or len."""
    n, i = len(text), max(i, 1)
    while i < n and (text[i] in SPACE or text[i - 1] not in SPACE):
        i += 1
    return i


def pair(s):
    a, b = (int(x) for x in s.split(","))
    if not 0 < a <= b:
        raise argparse.ArgumentTypeError(f"'{s}': want A,B with 0 < A <= B")
    return a, b


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("inp")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--gap", type=pair, default=(256, 1280))
    ap.add_argument("--dist", type=pair, default=(32, 2048))
    a = ap.parse_args()
    try:
        with open(a.inp, "rb") as f:
            raw = f.read()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except OSError as e:
        sys.exit(f"retrieval_mix.py: {a.inp}: {e.strerror}")
    text = raw.decode("latin-1")  # bytes as they are, one char per byte
    rng = random.Random(a.seed)
    inserts = []  # (position, order, sentence)
    dists = []
    p = word_start(text, rng.randint(*a.gap))
    while p < len(text):
        s = f"The secret number of {key(rng)} is {rng.randrange(1000000):06d}. "
        d = round(math.exp(rng.uniform(math.log(a.dist[0]), math.log(a.dist[1]))))
        q = word_start(text, p + d)
        if q >= len(text):
            break
        inserts += [(p, len(inserts), s), (q, len(inserts) + 1, s)]
        dists.append(q - p)
        p = word_start(text, p + rng.randint(*a.gap))
    inserts.sort()
    out, last = [], 0
    for pos, _, s in inserts:
        out += [text[last:pos], s]
        last = pos
    out.append(text[last:])
    data = "".join(out).encode("latin-1")
    part = f"{a.out}.part{os.getpid()}"  # OUT whole or not at all, whoever else writes it
    with open(part, "wb") as f:
        f.write(gzip.compress(data, 9, mtime=0))
    os.replace(part, a.out)
    added = len(data) - len(raw)
    dists.sort()
    q = lambda x: dists[min(len(dists) - 1, int(x * len(dists)))] if dists else 0
    print(f"retrieval_mix.py: {a.out}: {len(dists)} items, {len(data)} bytes "
          f"({added} inserted, {100 * added / max(1, len(data)):.1f}%), fact-to-question "
          f"distance quartiles {q(0.25)}/{q(0.5)}/{q(0.75)} bytes (of the original text)",
          file=sys.stderr)


if __name__ == "__main__":
    main()
