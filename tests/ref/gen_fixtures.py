#!/usr/bin/python3
"""Writes the reference fixtures for the C tests: one plain safetensors file per case.

usage: /usr/bin/python3 tests/ref/gen_fixtures.py OUTDIR [CASE ...]

Everything is computed in float64 from float32 parameters (stored as F32) by the
independent reference tests/ref/txl_ref.py.  See tests/fixtures/README.md.
"""

import json
import os
import platform
import sys
import zlib

# OpenBLAS's kernels sum in different orders, and which one runs depends on the CPU (one it
# does not recognise gets the generic Prescott): the fixtures are written (and check_ref.py
# re-reads them) under that one, which every x86-64 CPU runs, so that they are the same
# bytes on every machine (SkylakeX's and Prescott's differ by up to 1e-15, adamw_xl's final
# parameters by 1e-12). OpenBLAS reads it when torch loads it.
if platform.machine() in ("x86_64", "AMD64"):
    os.environ["OPENBLAS_CORETYPE"] = "Prescott"

import torch  # noqa: E402

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import txl_ref as ref  # noqa: E402

B = 2
BASE_MODEL = {
    "n_layer": 2, "d_model": 16, "n_head": 2, "d_head": 8, "d_inner": 32,
    "tgt_len": 5, "mem_len": 4, "pre_lnorm": False, "dropout": 0.0, "dropatt": 0.0,
    "pos_scheme": "xl", "clamp_len": 0, "untie_r": False,
    "mlp_num_freqs": 16, "mlp_max_dist": 4096, "mlp_hidden": 64,
}

# Which parameters weight decay applies to in the optimiser fixtures: "all" (as
# torch.optim over model.parameters()).  Recorded in the fixture metadata.
WD_SCOPE = "all"

CASES = [
    ("xl_post", dict(pos_scheme="xl", tgt_len=5, mem_len=3), [5, 5, 3]),
    ("xl_pre", dict(pos_scheme="xl", pre_lnorm=True, tgt_len=4, mem_len=7), [4, 4, 2]),
    ("xl_clamp_untie", dict(pos_scheme="xl", clamp_len=3, untie_r=True, tgt_len=4, mem_len=6,
                            n_head=3, d_head=8), [4, 4, 3]),
    ("xl_nomem", dict(pos_scheme="xl", tgt_len=5, mem_len=0), [5, 5, 2]),
    ("xl_terms_ab", dict(pos_scheme="xl", xl_terms="ab", tgt_len=5, mem_len=4), [5, 5, 3]),
    ("xl_terms_bcd", dict(pos_scheme="xl", xl_terms="bcd", pre_lnorm=True, tgt_len=4,
                          mem_len=5), [4, 4, 3]),
    ("mlp", dict(pos_scheme="mlp", mlp_num_freqs=4, mlp_max_dist=64, mlp_hidden=8,
                 tgt_len=5, mem_len=4), [5, 5, 3]),
    ("rope", dict(pos_scheme="rope", tgt_len=5, mem_len=6), [5, 5, 3]),
    ("alibi", dict(pos_scheme="alibi", n_head=3, tgt_len=5, mem_len=4), [5, 5, 3]),
    ("absolute", dict(pos_scheme="absolute", tgt_len=5, mem_len=4), [5, 5, 3]),
    ("none", dict(pos_scheme="none", pre_lnorm=True, tgt_len=5, mem_len=4), [5, 5, 3]),
    ("hier", dict(pos_scheme="hier", hier_num_freqs=3, mlp_max_dist=64, mlp_hidden=6,
                  tgt_len=6, mem_len=5), [6, 6, 6, 4]),
    ("hier_pre_sub", dict(pos_scheme="hier", pre_lnorm=True, hier_levels=["word", "para"],
                          hier_num_freqs=2, mlp_max_dist=256, mlp_hidden=5, n_head=3,
                          tgt_len=5, mem_len=7), [5, 5, 5]),
    # anchor tokens (vocab 256 + 2) and a document separator, with the coordinates
    ("hier_anchors", dict(pos_scheme="hier", hier_num_freqs=3, mlp_max_dist=64, mlp_hidden=6,
                          tgt_len=6, mem_len=5, data=dict(anchors=["para", "sent"],
                                                          doc_separator="!\n")),
     [6, 6, 5]),
    # FIRE: L = 4.5 (layer 0) and 7.5 (layer 1) inside the windows (txl_ref.random_params),
    # so queries fall on both sides of it; then pre-LN with anchor tokens (256, 257)
    ("fire", dict(pos_scheme="fire", fire_hidden=6, fire_threshold=10.0, tgt_len=5,
                  mem_len=4), [5, 5, 3]),
    ("fire_pre_anchors", dict(pos_scheme="fire", pre_lnorm=True, fire_hidden=5,
                              fire_threshold=10.0, n_head=3, tgt_len=6, mem_len=5,
                              data=dict(anchors=["bos", "sent"], doc_separator="!\n")),
     [6, 6, 5]),
    # T5's buckets, small enough that the windows reach the logarithmic ones and the last:
    # 6 buckets to distance 6 (exact 0..2, then 3, 4, and 5 from 5 on), one table for both
    # layers; 8 to 12 (exact 0..3, then 4-5, 6, 7-9, and 7 from 10 on), a table per layer
    ("t5", dict(pos_scheme="t5", t5_buckets=6, t5_max_dist=6, t5_shared=True, tgt_len=5,
                mem_len=4), [5, 5, 3]),
    ("t5_layers", dict(pos_scheme="t5", t5_buckets=8, t5_max_dist=12, t5_shared=False,
                       pre_lnorm=True, n_head=3, tgt_len=5, mem_len=7), [5, 5, 5]),
    # the adaptive softmax and input (clusters [0,30) [30,45) [45,100) [100,256)): official's
    # wt103 shape (one table, no projection); div_val 2 (widths 16, 8, 4, 2) with the tails'
    # output projections tied to the input's; one projected table (d_embed 12) with its own
    # output projections; and a projected full softmax (no cutoffs)
    ("adaptive_div1", dict(pos_scheme="xl", tgt_len=5, mem_len=3, cutoffs=[30, 45, 100],
                           tie_projs=True), [5, 5, 3]),
    ("adaptive_div2", dict(pos_scheme="xl", pre_lnorm=True, tgt_len=4, mem_len=5,
                           cutoffs=[30, 45, 100], div_val=2, tie_projs=True), [4, 4, 3]),
    ("adaptive_proj", dict(pos_scheme="rope", tgt_len=5, mem_len=4, cutoffs=[64], d_embed=12),
     [5, 5, 3]),
    ("adaptive_nocut", dict(pos_scheme="xl", tgt_len=5, mem_len=4, d_embed=8), [5, 5, 3]),
]
OPT_CASES = [
    ("adam_xl", dict(pos_scheme="xl", tgt_len=5, mem_len=3),
     dict(optimizer="adam", lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, clip=0.25,
          weight_decay=0.0)),
    ("adamw_xl", dict(pos_scheme="xl", tgt_len=5, mem_len=3),
     dict(optimizer="adamw", lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, clip=0.0,
          weight_decay=0.1)),
    ("adam_adaptive", dict(pos_scheme="xl", tgt_len=5, mem_len=3, cutoffs=[30, 45, 100],
                           div_val=2, d_embed=12, tie_projs=True),
     dict(optimizer="adam", lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, clip=0.25,
          weight_decay=0.0)),
]
N_OPT_STEPS = 5


def seed_of(name):
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def make_streams(name, n):
    """B random token streams of n tokens each (0..255)."""
    g = torch.Generator().manual_seed(seed_of(name) ^ 0x5EED)
    return torch.randint(0, 256, (B, n), generator=g, dtype=torch.int64)


def make_text_streams(name, n):
    """B streams of n bytes of random text with structure: short words, spaces, sentence
    ends ('. ', '!\\n') and blank lines, so every coordinate level changes within a few
    bytes (the hierarchical scheme's fixtures)."""
    g = torch.Generator().manual_seed(seed_of(name) ^ 0x7E47)
    rows = []
    for _ in range(B):
        out = bytearray()
        while len(out) < n:
            r = float(torch.rand(1, generator=g))
            if r < 0.55:
                out += bytes([97 + int(torch.randint(0, 10, (1,), generator=g))])
            elif r < 0.75:
                out += b" "
            elif r < 0.85:
                out += b". "
            elif r < 0.92:
                out += b"!\n"
            else:
                out += b"\n\n"
        rows.append(list(out[:n]))
    return torch.tensor(rows, dtype=torch.int64)


def anchor_streams(name, n, data):
    """B streams of n tokens: random text with the anchors of `data` inserted
    (txl_ref.tokenize), and their [B, n, 3] coordinates."""
    text = make_text_streams(name, 2 * n)
    toks, coords = [], []
    for row in text:
        t, c = ref.tokenize(bytes(row.tolist()), data["anchors"],
                            data["doc_separator"].encode())
        toks.append(t[:n])
        coords.append(c[:n])
    return torch.tensor(toks, dtype=torch.int64), torch.tensor(coords, dtype=torch.int64)


def stream_coords(streams):
    """[B, n, 3] text coordinates of each stream (txl_ref.text_coords)."""
    return torch.tensor([ref.text_coords(bytes(row.tolist())) for row in streams],
                        dtype=torch.int64)


def case_streams(name, model, data, n):
    """(streams [B, n], coords [B, n, 3] or None) of a case: random bytes; the hier cases'
    random text and its coordinates; with data (anchors), the text's tokens with the
    anchors inserted and their coordinates."""
    if data:
        return anchor_streams(name, n, data)
    if model["pos_scheme"] == "hier":
        streams = make_text_streams(name, n)
        return streams, stream_coords(streams)
    return make_streams(name, n), None


def split_segments(streams, lens):
    """Stream batching: x = stream[s:s+L], y = stream[s+1:s+L+1]."""
    out, start = [], 0
    for L in lens:
        out.append((streams[:, start:start + L], streams[:, start + 1:start + L + 1]))
        start += L
    return out


def leaf_params(p32):
    return {k: v.to(torch.float64).clone().requires_grad_(True) for k, v in p32.items()}


def gen_case(outdir, name, mover, lens):
    model = dict(BASE_MODEL)
    model.update(mover)
    data = model.pop("data", None)
    vocab = 256 + (len(data["anchors"]) if data else 0)
    p32 = ref.random_params(model, seed_of(name), vocab=vocab)
    P = leaf_params(p32)
    hier = model["pos_scheme"] == "hier"
    streams, coords = case_streams(name, model, data, sum(lens) + 1)
    segs = split_segments(streams, lens)

    tensors = dict(p32)
    mems = None
    total = 0.0
    start = 0
    for s, (x, y) in enumerate(segs):
        L = x.shape[1]
        m = mems[0].shape[1] if mems else 0
        cat = coords[:, start - m:start + L] if hier else None
        logits, mems = ref.forward(P, model, x, mems, coords=cat)
        loss = ref.seg_loss(logits, y)
        total = total + loss
        tensors["seg%d.x" % s] = x.to(torch.int32)
        tensors["seg%d.y" % s] = y.to(torch.int32)
        if coords is not None:  # with anchors, test_fixtures checks txl puts them at the same places
            tensors["seg%d.coords" % s] = coords[:, start:start + L].to(torch.int32).contiguous()
        start += L
        tensors["seg%d.logits" % s] = logits.detach().clone()
        tensors["seg%d.loss" % s] = loss.detach().reshape(1).clone()
        for l, mm in enumerate(mems):
            tensors["seg%d.mem.%d" % (s, l)] = mm.detach().clone()
    total.backward()
    for k, _ in ref.param_shapes(model, vocab):
        tensors["grad." + k] = P[k].grad.detach().clone()
    config = {"model": model, "train": {"batch_size": B}}
    if data:
        config["data"] = data
    meta = {
        "config": json.dumps(config),
        "n_segments": str(len(lens)),
        "segment_lengths": ",".join(str(L) for L in lens),
        "description": "txl reference fixture %s: float64 forward/backward of %d segments "
                       "from F32 params; grad = d(sum of segment mean losses), memory "
                       "carried detached" % (name, len(lens)),
    }
    path = os.path.join(outdir, name + ".safetensors")
    ref.save_safetensors(path, tensors, meta)
    return path, [float(tensors["seg%d.loss" % s]) for s in range(len(lens))]


def gen_opt_case(outdir, name, mover, train):
    model = dict(BASE_MODEL)
    model.update(mover)
    Lq = model["tgt_len"]
    lens = [Lq] * N_OPT_STEPS
    p32 = ref.random_params(model, seed_of(name))
    P = leaf_params(p32)
    names = [k for k, _ in ref.param_shapes(model)]
    plist = [P[k] for k in names]
    opt = ref.make_optimizer(plist, train)
    streams = make_streams(name, sum(lens) + 1)
    segs = split_segments(streams, lens)

    tensors = dict(p32)
    losses = []
    mems = None
    for t, (x, y) in enumerate(segs):
        opt.zero_grad(set_to_none=True)
        logits, mems = ref.forward(P, model, x, mems)
        loss = ref.seg_loss(logits, y)
        losses.append(float(loss))
        loss.backward()
        ref.clip_and_step(plist, opt, train["clip"])
        tensors["seg%d.x" % t] = x.to(torch.int32)
        tensors["seg%d.y" % t] = y.to(torch.int32)
    tensors["adam.loss"] = torch.tensor(losses, dtype=torch.float64)
    for k in names:
        tensors["final." + k] = P[k].detach().clone()
    tr = {"batch_size": B}
    tr.update(train)
    meta = {
        "config": json.dumps({"model": model, "train": tr}),
        "n_segments": str(len(lens)),
        "segment_lengths": ",".join(str(L) for L in lens),
        "weight_decay_params": WD_SCOPE,
        "description": "txl reference optimiser fixture %s: %d steps of forward (loss before "
                       "the update), backward, clip_grad_norm_ (coef clip/(norm+1e-6), only if "
                       "<1; 0 = off), torch.optim.%s over all parameters, float64, memory "
                       "carried" % (name, N_OPT_STEPS, "Adam" if train["optimizer"] == "adam"
                                    else "AdamW"),
    }
    path = os.path.join(outdir, name + ".safetensors")
    ref.save_safetensors(path, tensors, meta)
    return path, losses


def main(argv):
    if len(argv) < 2:
        sys.stderr.write("usage: gen_fixtures.py OUTDIR [CASE ...]\n")
        return 2
    outdir = argv[1]
    only = set(argv[2:])
    os.makedirs(outdir, exist_ok=True)
    torch.set_num_threads(1)
    for name, mover, lens in CASES:
        if only and name not in only:
            continue
        path, losses = gen_case(outdir, name, mover, lens)
        print("%-20s %7d bytes  losses %s" % (os.path.basename(path), os.path.getsize(path),
                                             " ".join("%.6f" % v for v in losses)))
    for name, mover, train in OPT_CASES:
        if only and name not in only:
            continue
        path, losses = gen_opt_case(outdir, name, mover, train)
        print("%-20s %7d bytes  losses %s" % (os.path.basename(path), os.path.getsize(path),
                                             " ".join("%.6f" % v for v in losses)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
