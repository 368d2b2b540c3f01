#!/usr/bin/python3
"""Independent evaluation of a txl checkpoint with the PyTorch reference.

usage: /usr/bin/python3 tests/ref/eval_ckpt.py CKPT --data FILE [--tgt-len N]
           [--mem-len N] [--clamp-len N] [--batch N] [--split-range BEGIN:END]
           [--same-length] [--dtype float32|float64] [--threads N]
           [--bf16 [--bf16-attention]]

CKPT is a .safetensors.gz or plain .safetensors txl checkpoint (optim.* and
state.* tensors are ignored); the model config comes from its `config`
metadata.  FILE is read as bytes (plain or gzip); --split-range takes bytes
[BEGIN, END) of the decompressed file.  Its tokens are the bytes with the
anchors of the checkpoint's data.anchors inserted (txl_ref.tokenize; the
hierarchical scheme also reads their text coordinates).  Every token after the
first is scored once (doc/design.md, "Evaluation"): B streams of n + 1 tokens,
n = floor((T-1)/B), stream b starting at token b n; segments at 0, Lq, 2Lq, ...
< n of length min(Lq, n - start), memory carried; then the T - 1 - B n tokens
left (the tail) continue the last stream alone, from its memory.  The loss is
the nats of all scored tokens (anchors included) per byte scored.
--same-length: every query sees the last mem_len keys, its own included (Dai et
al.'s evaluation mask; txl_ref.attention).
--bf16: with the roundings of `txl eval --precision bf16 --threads 1` (txl_ref.Bf16,
doc/design.md, "Precision"), everything else in --dtype: both operands of every
product gemm() runs in bf16, counted as txl's one thread counts them (the rows of
all the streams of a segment; the tail's one stream), and with --bf16-attention
(a CPU with AMX-BF16) the attention's queries, keys, values, positions and
probabilities.  The memory's keys and values are kept as their segment's product
made them, except at the tail's first segment (its memory is copied in) and for
rope (no cache): those project the whole window.

Prints one JSON line: loss (mean nats), bpc, ppl, tokens, tgt_len, mem_len,
clamp_len, batch (plus data, split_range, dtype, n_segments, bf16: "none", "gemm"
or "gemm+attention").
"""

import argparse
import json
import math
import os
import sys

import torch

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import txl_ref as ref  # noqa: E402
import st_reader  # noqa: E402  (the config metadata: YAML, or JSON of older checkpoints)


def die(msg, code=2):
    sys.stderr.write("eval_ckpt: %s\n" % msg)
    sys.exit(code)


def parse_range(s):
    try:
        a, b = s.split(":")
        a = int(a) if a else 0
        b = int(b) if b else None
    except ValueError:
        die("--split-range: expected BEGIN:END (bytes), got %r" % s)
    return a, b


def load_model(path, dtype):
    try:
        T, meta = ref.load_safetensors(path, skip_prefixes=("optim.", "state."))
    except (OSError, ValueError, KeyError) as e:
        die("%s: cannot read checkpoint: %s" % (path, e), 1)
    if "config" not in meta:
        die("%s: no `config` in the metadata" % path, 1)
    cfg = st_reader.config_text(meta["config"])
    model = ref.model_cfg(cfg["model"])
    if "word_emb.weight" not in T:
        die("%s: no word_emb.weight" % path, 1)
    vocab = T["word_emb.weight"].shape[0]
    P = {}
    for name, shape in ref.param_shapes(model, vocab):
        if name not in T:
            die("%s: missing tensor %s" % (path, name), 1)
        if tuple(T[name].shape) != tuple(shape):
            die("%s: %s has shape %s, config says %s" % (path, name, list(T[name].shape), list(shape)), 1)
        P[name] = T[name].to(dtype)
    extra = sorted(set(T) - set(P))
    if extra:
        sys.stderr.write("eval_ckpt: ignoring tensors %s\n" % ", ".join(extra[:8]))
    return cfg, model, P, meta


def attn_chunk(B, H, Lq, klen, dtype):
    """Batch elements per attention chunk so that the (b, H, Lq, klen) score
    tensors (about six alive at once) stay within ~1 GB."""
    per = H * Lq * klen * torch.tensor([], dtype=dtype).element_size() * 6
    return max(1, min(B, (1 << 30) // max(per, 1)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ckpt")
    ap.add_argument("--data", required=True)
    ap.add_argument("--tgt-len", type=int)
    ap.add_argument("--mem-len", type=int)
    ap.add_argument("--clamp-len", type=int)
    ap.add_argument("--batch", type=int)
    ap.add_argument("--split-range")
    ap.add_argument("--same-length", action="store_true")
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float64")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--bf16-attention", action="store_true")
    a = ap.parse_args(argv)
    if a.bf16_attention and not a.bf16:
        die("--bf16-attention needs --bf16")
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    dtype = torch.float64 if a.dtype == "float64" else torch.float32

    cfg, model, P, meta = load_model(a.ckpt, dtype)
    if a.tgt_len is not None:
        model["tgt_len"] = a.tgt_len
    if a.mem_len is not None:
        model["mem_len"] = a.mem_len
    if a.clamp_len is not None:
        model["clamp_len"] = a.clamp_len
    model["same_length"] = a.same_length
    B = a.batch if a.batch is not None else int(cfg.get("train", {}).get("batch_size", 0))
    Lq, M = model["tgt_len"], model["mem_len"]
    if B < 1 or Lq < 1 or M < 0:
        die("need batch >= 1, tgt_len >= 1, mem_len >= 0 (got %d, %d, %d)" % (B, Lq, M))
    if a.same_length and M == 0:
        die("--same-length needs mem_len > 0")
    tok = (cfg.get("data", {}) or {}).get("tokenizer", "byte")
    if tok != "byte":
        sys.stderr.write("eval_ckpt: warning: tokenizer %r, evaluating bytes as tokens\n" % tok)

    try:
        raw = ref.read_maybe_gzip(a.data)
    except OSError as e:
        die("%s: %s" % (a.data, e), 1)
    if a.split_range:
        b0, b1 = parse_range(a.split_range)
        raw = raw[b0:b1]
    vocab = P["word_emb.weight"].shape[0]
    data = cfg.get("data", {}) or {}
    anchors = data.get("anchors", []) or []
    toks, coords = ref.tokenize(raw, anchors, (data.get("doc_separator", "") or "").encode())
    tokens = torch.tensor(toks, dtype=torch.long)
    coords = torch.tensor(coords, dtype=torch.long).reshape(-1, 3)
    if tokens.numel() and int(tokens.max()) >= vocab:
        die("token %d >= vocab %d" % (int(tokens.max()), vocab), 1)
    T = tokens.numel()
    n = (T - 1) // B if T else 0
    if n < 1:
        die("%s: %d tokens are too few for batch %d" % (a.data, T, B), 1)
    hier = model["pos_scheme"] == "hier"
    bf = None
    if a.bf16:
        if ref.adaptive(model):
            die("%s: --bf16 does not model the adaptive softmax's products" % a.ckpt)
        bf = ref.Bf16(a.bf16_attention)

    H = model["n_head"]
    st = {"nats": 0.0, "anchor_nats": 0.0, "scored": 0, "anchors": 0, "nseg": 0}

    def run(starts, length, mems):
        """One segment of `length` inputs for the streams beginning at `starts`, whose
        rows [mem; segment] have the coordinates of the tokens before them."""
        idx = torch.tensor(starts)[:, None] + torch.arange(length)[None, :]
        x, y = tokens[idx], tokens[idx + 1]
        m = 0 if mems is None else mems[0].shape[1]
        cat = None
        if hier:
            cidx = torch.tensor(starts)[:, None] + torch.arange(-m, length)[None, :]
            cat = coords[cidx]
        chunk = attn_chunk(len(starts), H, length, m + length, dtype)
        logits, mems = ref.forward(P, model, x, mems, batch_chunk=chunk, coords=cat, bf=bf)
        ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(),
                                               y.reshape(-1), reduction="none")
        anchor = y.reshape(-1) >= 256
        st["nats"] += float(ce.sum())
        st["anchor_nats"] += float(ce[anchor].sum())
        st["scored"] += ce.numel()
        st["anchors"] += int(anchor.sum())
        st["nseg"] += 1
        return mems

    with torch.no_grad():
        mems = None
        start = 0
        while start < n:
            L = min(Lq, n - start)
            mems = run([b * n + start for b in range(B)], L, mems)
            start += Lq
        # the tail: the last stream goes on alone from its memory
        last = [mm[B - 1:B] for mm in mems]
        if bf is not None:  # txl copies the memory in: its first segment projects the window
            bf.kv = None
        pos, tail = B * n, T - 1 - B * n
        while tail > 0:
            L = min(Lq, tail)
            last = run([pos], L, last)
            pos += L
            tail -= L
    scored = st["scored"]
    assert scored == T - 1
    nbytes = scored - st["anchors"]
    total = st["nats"]
    nseg = st["nseg"]
    loss = total / nbytes
    out = {"loss": loss, "bpc": loss / math.log(2), "ppl": math.exp(loss), "tokens": scored,
           "bytes": nbytes, "anchor_tokens": st["anchors"],
           "anchor_bits": st["anchor_nats"] / math.log(2),
           "tgt_len": Lq, "mem_len": M, "clamp_len": model["clamp_len"], "batch": B,
           "data": a.data, "split_range": a.split_range, "dtype": a.dtype, "n_segments": nseg,
           "pos_scheme": model["pos_scheme"], "same_length": a.same_length,
           "bf16": "gemm+attention" if a.bf16_attention else "gemm" if a.bf16 else "none"}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
