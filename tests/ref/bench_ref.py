#!/usr/bin/python3
"""Timing baseline: a lean float32 PyTorch Transformer-XL (xl scheme, post-LN,
dropout 0.1, Adam, clip 0.25) trained on random bytes.

usage: /usr/bin/python3 tests/ref/bench_ref.py --config S|M --steps N --threads T
       /usr/bin/python3 tests/ref/bench_ref.py --check   # equals txl_ref (float64, dropout 0)
       /usr/bin/python3 tests/ref/bench_ref.py --config S --data FILE --minutes M [--lr X]
           # quality per minute (make bench-quality): trains on the bytes of FILE (split
           # 0.9/0.05/0.05, batch streams and segments as txl, memory carried, no dropout,
           # constant lr, clip 0.25) for M minutes of wall clock, then prints the valid bpc

Prints one JSON line with tokens/s of training (forward + backward + clip + Adam)
and of evaluation (no_grad forward), memory carried in both.
"""

import argparse
import contextlib
import json
import math
import os
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {
    "S": dict(n_layer=4, d_model=256, n_head=4, d_head=64, d_inner=1024, tgt_len=128, mem_len=128, batch=16),
    "M": dict(n_layer=8, d_model=512, n_head=8, d_head=64, d_inner=2048, tgt_len=256, mem_len=256, batch=8),
}


class Layer(nn.Module):
    def __init__(self, d, H, dh, di, dropout, dropatt):
        super().__init__()
        self.H, self.dh = H, dh
        self.qkv = nn.Linear(d, 3 * H * dh, bias=False)
        self.r = nn.Linear(d, H * dh, bias=False)
        self.o = nn.Linear(H * dh, d, bias=False)
        self.ln1 = nn.LayerNorm(d, eps=1e-5)
        self.ff1 = nn.Linear(d, di)
        self.ff2 = nn.Linear(di, d)
        self.ln2 = nn.LayerNorm(d, eps=1e-5)
        self.drop = nn.Dropout(dropout)
        self.dropatt = nn.Dropout(dropatt)

    @staticmethod
    def rel_shift(x):
        # x [B, H, Lq, klen] indexed by p (pos klen-1-p); returns y[i, j] = x[i, j + Lq-1-i]
        # on the visible region j <= m + i (the rest is garbage, masked later).
        B, H, Lq, klen = x.shape
        xp = F.pad(x, (1, 0))                                    # [B, H, Lq, klen+1]
        return xp.view(B, H, klen + 1, Lq)[:, :, 1:].reshape(B, H, Lq, klen)

    def forward(self, h, mem, R, u, v, mask):
        B, Lq, _ = h.shape
        H, dh = self.H, self.dh
        cat = torch.cat([mem, h], 1) if mem.shape[1] else h
        klen = cat.shape[1]
        w = self.qkv(cat)
        q, k, vv = w[:, -Lq:, :H * dh], w[:, :, H * dh:2 * H * dh], w[:, :, 2 * H * dh:]
        q = q.view(B, Lq, H, dh).transpose(1, 2)                 # [B, H, Lq, dh]
        k = k.view(B, klen, H, dh).transpose(1, 2)               # [B, H, klen, dh]
        vv = vv.view(B, klen, H, dh).transpose(1, 2)
        rk = self.r(R).view(klen, H, dh).permute(1, 2, 0)        # [H, dh, klen]
        AC = torch.matmul(q + u[:, None, :], k.transpose(-1, -2))
        BD = self.rel_shift(torch.matmul(q + v[:, None, :], rk))
        s = (AC + BD) * (1.0 / math.sqrt(dh))
        s = s.masked_fill(mask, float("-inf"))
        a = self.dropatt(torch.softmax(s, -1))
        o = torch.matmul(a, vv).transpose(1, 2).reshape(B, Lq, H * dh)
        h1 = self.ln1(h + self.drop(self.o(o)))
        f = self.drop(self.ff2(self.drop(F.relu(self.ff1(h1)))))
        return self.ln2(h1 + f)


class TXL(nn.Module):
    def __init__(self, V, n_layer, d_model, n_head, d_head, d_inner, mem_len, dropout=0.1, dropatt=0.0,
                 **_):
        super().__init__()
        self.d, self.M = d_model, mem_len
        self.emb = nn.Embedding(V, d_model)
        self.out_bias = nn.Parameter(torch.zeros(V))
        self.u = nn.Parameter(torch.randn(n_head, d_head) * 0.02)
        self.v = nn.Parameter(torch.randn(n_head, d_head) * 0.02)
        self.layers = nn.ModuleList(Layer(d_model, n_head, d_head, d_inner, dropout, dropatt)
                                    for _ in range(n_layer))
        self.drop = nn.Dropout(dropout)
        for p in self.modules():
            if isinstance(p, (nn.Linear, nn.Embedding)):
                nn.init.normal_(p.weight, 0.0, 0.02)
                if getattr(p, "bias", None) is not None:
                    nn.init.zeros_(p.bias)
        self.inv_freq = 1.0 / torch.pow(torch.tensor(10000.0, dtype=torch.float64),
                                        torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)

    def forward(self, x, mems):
        B, Lq = x.shape
        m = mems[0].shape[1]
        klen = m + Lq
        dt = self.emb.weight.dtype
        h = self.drop(self.emb(x) * math.sqrt(self.d))
        pos = torch.arange(klen - 1, -1, -1, dtype=torch.float64)
        ang = pos[:, None] * self.inv_freq[None]
        R = self.drop(torch.cat([ang.sin(), ang.cos()], 1).to(dt))
        mask = torch.ones(Lq, klen, dtype=torch.bool).triu_(m + 1)
        new = []
        for l, layer in enumerate(self.layers):
            with torch.no_grad():
                new.append(torch.cat([mems[l], h], 1)[:, -self.M:].detach() if self.M else mems[l])
            h = layer(h, mems[l], R, self.u, self.v, mask)
        logits = F.linear(self.drop(h), self.emb.weight, self.out_bias)
        return logits, new

    def load_ref(self, P):
        """Copy parameters from a txl_ref / checkpoint dict."""
        with torch.no_grad():
            self.emb.weight.copy_(P["word_emb.weight"])
            self.out_bias.copy_(P["out.bias"])
            self.u.copy_(P["r_w_bias"])
            self.v.copy_(P["r_r_bias"])
            for l, L in enumerate(self.layers):
                p = "layers.%d." % l
                for mod, name in ((L.qkv, "attn.qkv"), (L.r, "attn.r"), (L.o, "attn.o"),
                                  (L.ln1, "attn.ln"), (L.ff1, "ff.0"), (L.ff2, "ff.3"), (L.ln2, "ff.ln")):
                    mod.weight.copy_(P[p + name + ".weight"])
                    if mod.bias is not None:
                        mod.bias.copy_(P[p + name + ".bias"])


def check():
    """The bench model (float64, dropout 0) against txl_ref on random data."""
    sys.dont_write_bytecode = True
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import txl_ref as ref
    model = dict(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32, tgt_len=5, mem_len=7, pos_scheme="xl")
    P = {k: v.double() for k, v in ref.random_params(model, 11).items()}
    net = TXL(256, dropout=0.0, **model).double()
    net.load_ref(P)
    net.eval()
    g = torch.Generator().manual_seed(5)
    xs = torch.randint(0, 256, (3, 20), generator=g)
    worst = 0.0
    ma = mb = None
    mb = [torch.zeros(3, 0, 16, dtype=torch.float64)] * 2
    with torch.no_grad():
        for s, L in ((0, 5), (5, 5), (10, 5), (15, 3)):
            x = xs[:, s:s + L]
            la, ma = ref.forward(P, model, x, ma)
            lb, mb = net(x, mb)
            worst = max(worst, float((la - lb).abs().max()))
    print(json.dumps({"check": "bench model vs txl_ref", "max_abs_logit_diff": worst}))
    return 0 if worst < 1e-12 else 1


AUTOCAST = None  # --autocast bf16: torch.bfloat16
CLOCK = time.perf_counter  # --clock cpu: time.process_time


def amp():
    """The forward's context: torch.autocast("cpu", bf16) under --autocast bf16 (what a user
    with a bf16 CPU reaches for), else nothing."""
    if AUTOCAST is None:
        return contextlib.nullcontext()
    return torch.autocast("cpu", dtype=AUTOCAST)


def train_step(net, opt, x, y, mems):
    """Forward, backward, clip 0.25, Adam: one step; returns (loss, new mems)."""
    with amp():
        logits, mems = net(x, mems)
    loss = F.cross_entropy(logits.float().reshape(-1, 256), y.reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(net.parameters(), 0.25)
    opt.step()
    return loss, mems


def quality(a, c):
    """Trains the lean model on real bytes for a wall-clock budget; the final valid bpc."""
    sys.dont_write_bytecode = True
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import train_ref as tr   # its data split, streams and segments: txl's batching
    train, valid = tr.load_splits({"train": a.data, "valid": "", "split": [0.9, 0.05, 0.05]})
    B, Lq = c["batch"], c["tgt_len"]
    trs, vas = tr.make_streams(train, B), tr.make_streams(valid, B)
    torch.manual_seed(1)
    net = TXL(256, dropout=0.0, **c)
    opt = torch.optim.Adam(net.parameters(), lr=a.lr)

    def empty():
        return [torch.zeros(B, 0, c["d_model"]) for _ in range(c["n_layer"])]

    net.train()
    t0 = time.perf_counter()
    step = 0
    while time.perf_counter() - t0 < 60.0 * a.minutes:
        mems = empty()
        for x, y in tr.segments(trs, Lq):
            loss, mems = train_step(net, opt, x, y, mems)
            step += 1
            if time.perf_counter() - t0 >= 60.0 * a.minutes:
                break
    t_train = time.perf_counter() - t0
    net.eval()
    mems = empty()
    tot, n = 0.0, 0
    with torch.no_grad():
        for x, y in tr.segments(vas, Lq):
            logits, mems = net(x, mems)
            tot += float(F.cross_entropy(logits.reshape(-1, 256), y.reshape(-1), reduction="sum"))
            n += y.numel()
    print(json.dumps({"impl": "pytorch-ref", "torch": torch.__version__, "config": a.config,
                      "threads": torch.get_num_threads(), "steps": step, "train_s": t_train,
                      "valid_tokens": n, "valid_bpc": tot / n / math.log(2)}))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", choices=sorted(CONFIGS), default="S")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--data", default=None)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--autocast", choices=["off", "bf16"], default="off",
                    help="bf16: the forward under torch.autocast('cpu', torch.bfloat16)")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="cpu: tokens per CPU second of the process (a busy machine)")
    a = ap.parse_args()
    global CLOCK
    CLOCK = time.process_time if a.clock == "cpu" else time.perf_counter
    global AUTOCAST
    AUTOCAST = torch.bfloat16 if a.autocast == "bf16" else None
    if a.check:
        return check()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    c = CONFIGS[a.config]
    if a.data:
        return quality(a, c)
    torch.manual_seed(0)
    net = TXL(256, dropout=0.1, **c)
    opt = torch.optim.Adam(net.parameters(), lr=2.5e-4)
    B, Lq = c["batch"], c["tgt_len"]
    gen = torch.Generator().manual_seed(1)

    def batch():
        s = torch.randint(0, 256, (B, Lq + 1), generator=gen)
        return s[:, :-1], s[:, 1:]

    def empty():
        return [torch.zeros(B, 0, c["d_model"]) for _ in range(c["n_layer"])]

    net.train()
    mems = empty()
    t0 = None
    for it in range(a.warmup + a.steps):
        if it == a.warmup:
            t0 = CLOCK()
        x, y = batch()
        loss, mems = train_step(net, opt, x, y, mems)
    t_train = CLOCK() - t0

    net.eval()
    mems = empty()
    with torch.no_grad():
        for it in range(a.warmup + a.steps):
            if it == a.warmup:
                t0 = CLOCK()
            x, y = batch()
            with amp():
                logits, mems = net(x, mems)
            float(F.cross_entropy(logits.float().reshape(-1, 256), y.reshape(-1)))
    t_eval = CLOCK() - t0
    ntok = B * Lq * a.steps
    print(json.dumps({"impl": "pytorch-ref", "torch": torch.__version__, "config": a.config,
                      "autocast": a.autocast, "clock": a.clock,
                      "threads": torch.get_num_threads(), "steps": a.steps, "batch": B, "tgt_len": Lq,
                      "mem_len": c["mem_len"], "train_tokens_per_s": ntok / t_train,
                      "eval_tokens_per_s": ntok / t_eval, "last_loss": float(loss),
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
