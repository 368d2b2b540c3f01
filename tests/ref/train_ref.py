#!/usr/bin/python3
"""Independent float32 PyTorch training loop for a txl config (doc/design.md, "The model" and
"Configuration").

usage: /usr/bin/python3 tests/ref/train_ref.py CONFIG.yaml [--set key=value ...]
           [--out LOG.jsonl] [--threads N] [--init-from CKPT] [--self-check]

Trains the model of tests/ref/txl_ref.py (its building blocks are imported, not
copied) with dropout at the places doc/design.md lists, so that a txl run and a
reference run of the same config and data can be compared curve to curve (same
final validation bpc within noise; not bit-exact: the initial weights and the
dropout masks come from different RNGs).

Data: byte tokens of data.train (plain or gzip).  With data.valid empty, train =
bytes [0, a) and valid = [a, b) of data.train, a = floor(f0*T), b = floor((f0+f1)*T).
Stream batching: batch_size streams of n = floor(T/B) tokens, segments of tgt_len
starting at 0, Lq, 2Lq, ... < n-1; one step = one segment of every stream; memory
carried (detached); at the end of the streams, back to 0 with empty memory.

Writes JSON lines (to --out, default stdout):
  {"event":"train","step","loss","bpc","lr","tok_per_s",...}   every log_interval steps
  {"event":"eval","split":"valid","step","loss","bpc","tokens",...} every eval_interval
                                                                 steps and at the end
--init-from CKPT starts from the weights of a txl checkpoint instead of the random
init (as txl train --init-from: fresh optimiser); with dropout 0 the two programs
then follow the same trajectory to float32 round-off.
Progress goes to stderr.  --self-check compares this module's forward in eval mode
(and with dropout 0 in training mode) against txl_ref.forward and exits.
"""

import argparse
import json
import math
import os
import sys
import time

import torch
import yaml

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import txl_ref as ref  # noqa: E402

# ----------------------------------------------------------------------------
# configuration (doc/design.md, "Configuration")

DEFAULTS = {
    "model": dict(ref.MODEL_DEFAULTS),
    "data": {"train": "", "valid": "", "test": "", "split": [0.9, 0.05, 0.05],
             "tokenizer": "byte"},
    "train": {"batch_size": 16, "max_steps": 2000, "max_minutes": 0.0, "lr": 2.5e-4,
              "schedule": "cosine", "warmup_steps": 0, "lr_min": 0.0, "clip": 0.25,
              "beta1": 0.9, "beta2": 0.999, "eps": 1.0e-8, "weight_decay": 0.0,
              "optimizer": "adam", "seed": 1, "log_interval": 10, "eval_interval": 200,
              "eval_tokens": 0, "ckpt_interval": 200, "ckpt_gzip": True,
              "out_dir": "runs/NAME", "threads": 0, "comm_overlap": "auto"},
}
SCHEDULES = ("constant", "cosine", "inv_sqrt")
OPTIMIZERS = ("adam", "adamw")


def die(msg, code=2):
    sys.stderr.write("train_ref: %s\n" % msg)
    sys.exit(code)


def typed(section, key, val):
    """Coerce val to the type of the default (ints may be given for floats)."""
    dflt = DEFAULTS[section][key]
    name = "%s.%s" % (section, key)
    if isinstance(dflt, bool):
        if not isinstance(val, bool):
            die("%s: expected a bool, found %r" % (name, val))
        return val
    if isinstance(dflt, int):
        if isinstance(val, bool) or not isinstance(val, int):
            die("%s: expected an integer, found %r" % (name, val))
        return val
    if isinstance(dflt, float):
        if isinstance(val, bool) or not isinstance(val, (int, float)):
            die("%s: expected a number, found %r" % (name, val))
        return float(val)
    if isinstance(dflt, list):
        if not isinstance(val, list) or not all(isinstance(v, (int, float)) for v in val):
            die("%s: expected a list of numbers, found %r" % (name, val))
        return [float(v) for v in val]
    if val is None:
        return ""
    return str(val)


def load_config(path, overrides):
    with open(path) as f:
        raw = yaml.safe_load(f) or {}
    cfg = {s: dict(d) for s, d in DEFAULTS.items()}
    for sec, body in raw.items():
        if sec not in cfg:
            die("unknown section %r" % sec)
        for k, v in (body or {}).items():
            if k not in cfg[sec]:
                die("unknown key '%s.%s'" % (sec, k))
            cfg[sec][k] = typed(sec, k, v)
    for ov in overrides:
        if "=" not in ov:
            die("--set: expected key.path=value, got %r" % ov)
        key, val = ov.split("=", 1)
        parts = key.split(".")
        if len(parts) != 2 or parts[0] not in cfg or parts[1] not in cfg[parts[0]]:
            die("--set %s: unknown key %r" % (ov, key))
        v = yaml.safe_load(val) if val != "" else ""
        cfg[parts[0]][parts[1]] = typed(parts[0], parts[1], v)
    m, t = cfg["model"], cfg["train"]
    if m["pos_scheme"] not in ref.SCHEMES:
        die("model.pos_scheme: expected one of %s" % ", ".join(ref.SCHEMES))
    if t["schedule"] not in SCHEDULES:
        die("train.schedule: expected one of %s" % ", ".join(SCHEDULES))
    if t["optimizer"] not in OPTIMIZERS:
        die("train.optimizer: expected one of %s" % ", ".join(OPTIMIZERS))
    if cfg["data"]["tokenizer"] != "byte":
        die("data.tokenizer: only byte is supported by the reference")
    if m["d_model"] % 2:
        die("model.d_model must be even")
    if not cfg["data"]["train"]:
        die("data.train is empty")
    return cfg


# ----------------------------------------------------------------------------
# data

def load_splits(dcfg):
    """Returns (train bytes, valid bytes) as uint8 tensors."""
    train = ref.read_maybe_gzip(dcfg["train"])
    if dcfg["valid"]:
        valid = ref.read_maybe_gzip(dcfg["valid"])
    else:
        T = len(train)
        f = dcfg["split"]
        a = int(math.floor(f[0] * T))
        b = int(math.floor((f[0] + f[1]) * T))
        train, valid = train[:a], train[a:b]
    as_t = lambda raw: torch.frombuffer(bytearray(raw), dtype=torch.uint8).to(torch.long)
    return as_t(train), as_t(valid)


def make_streams(tokens, B):
    n = tokens.numel() // B
    if n < 2:
        die("split too short for %d streams (%d tokens)" % (B, tokens.numel()))
    return tokens[: B * n].view(B, n)


def segments(streams, Lq):
    """(x, y) of every segment of one pass, in order."""
    n = streams.shape[1]
    start = 0
    while start < n - 1:
        L = min(Lq, n - 1 - start)
        yield streams[:, start:start + L], streams[:, start + 1:start + L + 1]
        start += Lq


# ----------------------------------------------------------------------------
# model with dropout (built from txl_ref's blocks; eval mode == txl_ref.forward)

def init_params(mcfg, seed):
    torch.manual_seed(seed)
    P = {}
    for name, shape in ref.param_shapes(mcfg):
        if name.endswith("ln.weight"):
            t = torch.ones(shape)
        elif name.endswith(".bias"):
            # LN biases, out.bias, ff.*.bias, attn.bias_mlp.*.bias (not r_w_bias / r_r_bias)
            t = torch.zeros(shape)
        else:
            t = torch.randn(shape) * 0.02     # weights, embedding, r_w_bias, r_r_bias
        P[name] = t.requires_grad_(True)
    return P


class Drop:
    """Dropout in training (p > 0), identity otherwise."""

    def __init__(self, p, training):
        self.p, self.on = p, training and p > 0

    def __call__(self, x):
        return torch.nn.functional.dropout(x, self.p, True) if self.on else x


def attention(P, c, l, h, mem, R, dropatt):
    """txl_ref.attention plus dropatt on the probabilities and R given (already
    dropped out) by the caller for xl."""
    pre = "layers.%d." % l
    B, Lq, d = h.shape
    H, dh = c["n_head"], c["d_head"]
    scheme = c["pos_scheme"]
    m = mem.shape[1]
    klen = m + Lq
    cat = torch.cat([mem, h], dim=1) if m > 0 else h
    if c["pre_lnorm"]:
        cat = ref.layer_norm(cat, P[pre + "attn.ln.weight"], P[pre + "attn.ln.bias"])
    heads = ref.linear(cat, P[pre + "attn.qkv.weight"])
    q = heads[:, m:, 0:H * dh].reshape(B, Lq, H, dh)
    k = heads[:, :, H * dh:2 * H * dh].reshape(B, klen, H, dh)
    v = heads[:, :, 2 * H * dh:3 * H * dh].reshape(B, klen, H, dh)

    ii = torch.arange(Lq)[:, None]
    jj = torch.arange(klen)[None, :]
    delta = (m + ii) - jj
    visible = jj <= m + ii
    scale = 1.0 / math.sqrt(dh)

    if scheme == "xl":
        if c["untie_r"]:
            u, vb = P[pre + "attn.r_w_bias"], P[pre + "attn.r_r_bias"]
        else:
            u, vb = P["r_w_bias"], P["r_r_bias"]
        rk = ref.linear(R, P[pre + "attn.r.weight"]).reshape(klen, H, dh)
        pidx = (Lq - 1 - ii + jj).clamp(max=klen - 1)
        AC = torch.einsum("bihd,bjhd->bhij", q + u, k)
        BDraw = torch.einsum("bihd,phd->bhip", q + vb, rk)
        BD = torch.gather(BDraw, 3, pidx.expand(B, H, Lq, klen))
        s = (AC + BD) * scale
    else:
        if scheme == "rope":
            q = ref.rope_rotate(q, torch.arange(m, m + Lq, dtype=torch.float64))
            k = ref.rope_rotate(k, torch.arange(0, klen, dtype=torch.float64))
        s = torch.einsum("bihd,bjhd->bhij", q, k) * scale
        if scheme == "mlp":
            btab = ref.mlp_bias_table(P, pre, c, klen, h.dtype)
            s = s + btab[delta.clamp(min=0)].permute(2, 0, 1)[None]
        elif scheme == "alibi":
            slopes = torch.tensor(ref.alibi_slopes(H), dtype=h.dtype)
            s = s + (-slopes[:, None, None] * delta.to(h.dtype)[None])[None]
    s = s.masked_fill(~visible, float("-inf"))
    a = dropatt(torch.softmax(s, dim=-1))
    o = torch.einsum("bhij,bjhd->bihd", a, v).reshape(B, Lq, H * dh)
    return ref.linear(o, P[pre + "attn.o.weight"])


def layer(P, c, l, h, mem, R, drop, dropatt):
    pre = "layers.%d." % l
    out = drop(attention(P, c, l, h, mem, R, dropatt))

    def ff(x):
        z = drop(torch.relu(ref.linear(x, P[pre + "ff.0.weight"], P[pre + "ff.0.bias"])))
        return drop(ref.linear(z, P[pre + "ff.3.weight"], P[pre + "ff.3.bias"]))

    lnf = (P[pre + "ff.ln.weight"], P[pre + "ff.ln.bias"])
    if c["pre_lnorm"]:
        h1 = h + out
        return h1 + ff(ref.layer_norm(h1, *lnf))
    h1 = ref.layer_norm(h + out, P[pre + "attn.ln.weight"], P[pre + "attn.ln.bias"])
    return ref.layer_norm(h1 + ff(h1), *lnf)


def forward(P, c, x, mems, training):
    """One segment; mems a list of N [B, m, d] tensors.  Returns (logits, new_mems)."""
    drop = Drop(c["dropout"], training)
    dropatt = Drop(c["dropatt"], training)
    E = P["word_emb.weight"]
    B, Lq = x.shape
    d, M = c["d_model"], c["mem_len"]
    h = E[x] * math.sqrt(d)
    if c["pos_scheme"] == "absolute":
        h = h + ref.sinusoid(torch.arange(Lq, dtype=torch.float64), d, h.dtype)[None]
    h = drop(h)
    R = None
    if c["pos_scheme"] == "xl":
        klen = mems[0].shape[1] + Lq
        R = drop(ref.xl_R(klen, d, c["clamp_len"], h.dtype))   # one mask for all layers
    new_mems = []
    for l in range(c["n_layer"]):
        mem = mems[l]
        full = torch.cat([mem, h], dim=1)
        start = max(0, full.shape[1] - M) if M > 0 else full.shape[1]
        new_mems.append(full[:, start:].detach())
        h = layer(P, c, l, h, mem, R, drop, dropatt)
    h = drop(h)
    return ref.linear(h, E, P["out.bias"]), new_mems


# ----------------------------------------------------------------------------
# schedule, evaluation, loop

def lr_at(t, tc):
    lr, w, T = tc["lr"], tc["warmup_steps"], tc["max_steps"]
    if w > 0 and t <= w:
        return lr * t / w
    if tc["schedule"] == "constant":
        return lr
    if tc["schedule"] == "cosine":
        lo = tc["lr_min"]
        return lo + (lr - lo) * (1.0 + math.cos(math.pi * (t - w) / max(T - w, 1))) / 2.0
    return lr * math.sqrt(max(w, 1) / t)      # inv_sqrt


def evaluate(P, c, streams):
    B = streams.shape[0]
    mems = ref.empty_mems(c, B, torch.float32)
    tot, n = 0.0, 0
    with torch.no_grad():
        for x, y in segments(streams, c["tgt_len"]):
            logits, mems = forward(P, c, x, mems, False)
            k = y.numel()
            tot += float(ref.seg_loss(logits, y)) * k
            n += k
    return tot / n, n


def self_check():
    torch.set_num_threads(2)
    worst = 0.0
    for scheme in ref.SCHEMES:
        for pre_ln in (False, True):
            c = ref.model_cfg({"n_layer": 2, "d_model": 16, "n_head": 2, "d_head": 8,
                               "d_inner": 32, "tgt_len": 5, "mem_len": 7, "dropout": 0.3,
                               "dropatt": 0.2, "pos_scheme": scheme, "pre_lnorm": pre_ln})
            P = ref.random_params(c, 3)
            g = torch.Generator().manual_seed(4)
            toks = torch.randint(0, 256, (3, 18), generator=g)
            m_ref, m_me, m_me0 = None, ref.empty_mems(c, 3, torch.float32), None
            c0 = dict(c, dropout=0.0, dropatt=0.0)
            m_me0 = ref.empty_mems(c, 3, torch.float32)
            for s in range(0, 17, 5):
                x = toks[:, s:min(s + 5, 17)]
                lr_, m_ref = ref.forward(P, c, x, m_ref)
                le, m_me = forward(P, c, x, m_me, False)
                lt, m_me0 = forward(P, c0, x, m_me0, True)
                worst = max(worst, float((lr_ - le).abs().max()), float((lr_ - lt).abs().max()))
    print("self-check: max |logit diff| vs txl_ref.forward = %.3g" % worst)
    return 0 if worst < 1e-5 else 1


def main():
    ap = argparse.ArgumentParser(description="float32 PyTorch reference training of a txl config")
    ap.add_argument("config", nargs="?")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", default=None)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--init-from", default=None, metavar="CKPT")
    ap.add_argument("--self-check", action="store_true")
    a = ap.parse_args()
    if a.self_check:
        sys.exit(self_check())
    if not a.config:
        ap.error("CONFIG.yaml is required")
    cfg = load_config(a.config, a.set)
    torch.set_num_threads(a.threads or 2)
    c = ref.model_cfg(cfg["model"])
    tc = cfg["train"]
    B, Lq = tc["batch_size"], c["tgt_len"]

    train_tok, valid_tok = load_splits(cfg["data"])
    if tc["eval_tokens"] > 0:
        valid_tok = valid_tok[: tc["eval_tokens"]]
    tr_streams = make_streams(train_tok, B)
    va_streams = make_streams(valid_tok, B)

    P = init_params(c, tc["seed"])
    if a.init_from:
        W, _ = ref.load_safetensors(a.init_from, skip_prefixes=("optim.", "state."))
        if set(W) != set(P):
            die("--init-from: parameter names differ: %s" % sorted(set(W) ^ set(P)))
        for k in P:
            if tuple(W[k].shape) != tuple(P[k].shape):
                die("--init-from: %s has shape %s, config says %s" % (
                    k, tuple(W[k].shape), tuple(P[k].shape)))
            P[k] = W[k].to(torch.float32).clone().requires_grad_(True)
    plist = list(P.values())
    opt = ref.make_optimizer(plist, tc)
    out = open(a.out, "w") if a.out else sys.stdout

    def emit(rec):
        out.write(json.dumps(rec) + "\n")
        out.flush()

    nparams = sum(p.numel() for p in plist)
    sys.stderr.write("train_ref: %s, %d layers, d_model %d, %d params; train %d bytes, "
                     "valid %d bytes; %d threads\n" % (c["pos_scheme"], c["n_layer"],
                     c["d_model"], nparams, train_tok.numel(), valid_tok.numel(),
                     torch.get_num_threads()))
    emit({"event": "start", "step": 0, "params": nparams, "train_tokens": train_tok.numel(),
          "valid_tokens": valid_tok.numel(), "config": cfg})

    seg_iter = segments(tr_streams, Lq)
    mems = ref.empty_mems(c, B, torch.float32)
    t0 = time.time()
    deadline = t0 + 60.0 * tc["max_minutes"] if tc["max_minutes"] > 0 else None
    int_loss, int_tok, int_t0 = 0.0, 0, time.time()
    last_eval = -1
    step = 0
    seen = 0
    while step < tc["max_steps"]:
        try:
            x, y = next(seg_iter)
        except StopIteration:
            seg_iter = segments(tr_streams, Lq)
            mems = ref.empty_mems(c, B, torch.float32)
            x, y = next(seg_iter)
        step += 1
        lr = lr_at(step, tc)
        for g in opt.param_groups:
            g["lr"] = lr
        logits, mems = forward(P, c, x, mems, True)
        loss = ref.seg_loss(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = ref.clip_and_step(plist, opt, tc["clip"])
        lv = float(loss)
        if not math.isfinite(lv):
            die("step %d: non-finite loss" % step, 1)
        int_loss += lv * y.numel()
        int_tok += y.numel()
        seen += y.numel()
        if step % tc["log_interval"] == 0:
            now = time.time()
            ml = int_loss / int_tok
            emit({"event": "train", "step": step, "tokens": seen, "loss": ml,
                  "bpc": ml / math.log(2), "lr": lr, "grad_norm": gnorm,
                  "tok_per_s": int_tok / max(now - int_t0, 1e-9),
                  "elapsed_s": round(now - t0, 1), "step_loss": lv})
            sys.stderr.write("step %d/%d | loss %.4f | bpc %.4f | lr %.3g | %.0f tok/s\n" % (
                step, tc["max_steps"], ml, ml / math.log(2), lr,
                int_tok / max(now - int_t0, 1e-9)))
            int_loss, int_tok, int_t0 = 0.0, 0, time.time()
        stop = deadline is not None and time.time() >= deadline
        if step % tc["eval_interval"] == 0 or step == tc["max_steps"] or stop:
            te = time.time()
            vl, nt = evaluate(P, c, va_streams)
            emit({"event": "eval", "split": "valid", "step": step, "loss": vl,
                  "bpc": vl / math.log(2), "ppl": math.exp(vl), "tokens": nt,
                  "elapsed_s": round(time.time() - t0, 1)})
            sys.stderr.write("step %d: valid loss %.4f, bpc %.4f (%d tokens, %.1fs)\n" % (
                step, vl, vl / math.log(2), nt, time.time() - te))
            last_eval = step
            int_t0 = time.time()     # keep eval time out of tok_per_s
        if stop:
            break
    if last_eval != step:
        vl, nt = evaluate(P, c, va_streams)
        emit({"event": "eval", "split": "valid", "step": step, "loss": vl,
              "bpc": vl / math.log(2), "ppl": math.exp(vl), "tokens": nt})
    if out is not sys.stdout:
        out.close()


if __name__ == "__main__":
    main()
