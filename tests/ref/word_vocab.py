#!/usr/bin/env python3
"""The word tokenizer's reference: official Transformer-XL's Vocab (kimiyoung/transformer-xl,
pytorch/utils/vocabulary.py, as data_utils.py uses it for wt103/wt2: special=['<eos>'],
lower_case=False, count_file without <eos>, encode_file with add_eos=True), written again
plainly here, with txl's one addition: when the text has no "<unk>" of its own that was
kept, "<unk>" is inserted at id 1 (official would fail on a word outside the vocabulary,
which every held-out text has).

Writes tests/data/vocab/word_expected.json: for each case the symbols in id order and the
ids of the encoded file; tests/test_vocab.c builds and encodes the same with txl and
compares. Run from the repository's root: python3 tests/ref/word_vocab.py (make vocab-ref).
"""
import json
from collections import Counter

D = "tests/data/vocab/"
# (name, files counted, min_freq, max_size (None: all), file encoded)
CASES = [
    ("wt2_all", [D + "wt2_valid_head.txt"], 0, None, D + "wt2_test_head.txt"),
    ("wt2_top500", [D + "wt2_valid_head.txt"], 0, 500, D + "wt2_valid_head.txt"),
    ("wt2_min3_two_files", [D + "wt2_valid_head.txt", D + "wt2_test_head.txt"], 3, None,
     D + "wt2_test_head.txt"),
    ("edge_all", [D + "word_edge.txt"], 0, None, D + "word_edge.txt"),
    ("edge_min2", [D + "word_edge.txt"], 2, None, D + "word_edge.txt"),
    ("edge_top3", [D + "word_edge.txt"], 0, 3, D + "word_edge.txt"),
    ("edge_top8_eos_word", [D + "word_edge.txt"], 0, 8, D + "word_edge.txt"),
    ("edge_min2_then_wt2", [D + "word_edge.txt"], 2, None, D + "wt2_test_head.txt"),
]


def lines(path):
    # text mode, UTF-8, universal newlines: as official's count_file and encode_file
    with open(path, "r", encoding="utf-8") as f:
        for line in f:
            yield line


def build(files, min_freq, max_size):
    counter = Counter()
    for p in files:
        for line in lines(p):
            counter.update(line.strip().split())
    idx2sym, sym2idx = [], {}

    def add(sym):
        if sym not in sym2idx:
            idx2sym.append(sym)
            sym2idx[sym] = len(idx2sym) - 1

    add("<eos>")
    for sym, cnt in counter.most_common(max_size):
        if cnt < min_freq:
            break
        add(sym)
    if "<unk>" not in sym2idx:
        idx2sym.insert(1, "<unk>")
        sym2idx = {s: i for i, s in enumerate(idx2sym)}
    return idx2sym, sym2idx


def encode(path, sym2idx):
    unk = sym2idx.get("<unk>")
    ids = []
    for line in lines(path):
        for sym in line.strip().split() + ["<eos>"]:
            i = sym2idx.get(sym, unk)
            if i is None:
                raise SystemExit(f"{path}: '{sym}' is not in the vocabulary, which has no <unk>")
            ids.append(i)
    return ids


def main():
    out = []
    for name, files, min_freq, max_size, enc in CASES:
        idx2sym, sym2idx = build(files, min_freq, max_size)
        out.append({"name": name, "build": files, "min_freq": min_freq,
                    "max_size": max_size or 0, "encode": enc, "symbols": idx2sym,
                    "ids": encode(enc, sym2idx)})
    with open(D + "word_expected.json", "w", encoding="utf-8") as f:
        json.dump({"cases": out}, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
