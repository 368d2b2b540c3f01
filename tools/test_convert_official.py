#!/usr/bin/env python3
"""Manual test of tools/convert_official.py (needs torch; not run by `make test`, CI has no
torch):

    /usr/bin/python3 tools/test_convert_official.py        # from the repository root, after make

1. Builds a synthetic state_dict with the names and shapes of the official Transformer-XL
   PyTorch code (kimiyoung/transformer-xl, pytorch/mem_transformer.py, MemTransformerLM with
   attn_type 0, tie_weight, no adaptive softmax, div_val 1): random weights, a vocabulary of
   60 byte symbols numbered in a shuffled ("by frequency") order as the official corpus
   reader does, shared r_w_bias/r_r_bias on the top model; and a second, untied one
   (per-layer dec_attn.r_w_bias, pre-LN, V = 256 without --vocab).
2. Converts it (convert_official.py), imports it (txl import), evaluates it (txl eval,
   batch 1, memory carried, M != Lq, a short last segment).
3. Computes the same loss with a line-by-line transcription of the official forward pass
   (AdaptiveEmbedding, RelPartialLearnableMultiHeadAttn with _rel_shift, PositionwiseFF,
   _update_mems, ProjectedAdaptiveLogSoftmax) in float64 over the official token ids, and
   requires txl's loss to agree to float32 precision.
4. Checks the refusals: untied output layer, an unknown tensor, a missing tensor, V != 256
   without --vocab.
"""
import json
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TXL = os.environ.get("TXL_BIN", os.path.join(ROOT, "txl"))
CONVERT = os.path.join(ROOT, "tools", "convert_official.py")


def synthetic(n_layer, d, H, dh, di, V, untie=False, seed=0):
    """A state_dict named and shaped as MemTransformerLM.state_dict() of the official code."""
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape, s=0.15):
        return torch.randn(*shape, generator=g, dtype=torch.float64) * s

    emb = rnd(V, d, s=0.3)
    sd = {"word_emb.emb_layers.0.weight": emb}
    if not untie:
        sd["r_w_bias"] = rnd(H, dh)  # MemTransformerLM._create_params (attn_type 0)
        sd["r_r_bias"] = rnd(H, dh)
    for l in range(n_layer):
        p = f"layers.{l}."
        sd[p + "dec_attn.qkv_net.weight"] = rnd(3 * H * dh, d)
        sd[p + "dec_attn.o_net.weight"] = rnd(d, H * dh)
        sd[p + "dec_attn.layer_norm.weight"] = 1 + rnd(d, s=0.1)
        sd[p + "dec_attn.layer_norm.bias"] = rnd(d, s=0.1)
        sd[p + "dec_attn.r_net.weight"] = rnd(H * dh, d)
        if untie:
            sd[p + "dec_attn.r_w_bias"] = rnd(H, dh)
            sd[p + "dec_attn.r_r_bias"] = rnd(H, dh)
        sd[p + "pos_ff.CoreNet.0.weight"] = rnd(di, d)
        sd[p + "pos_ff.CoreNet.0.bias"] = rnd(di, s=0.1)
        sd[p + "pos_ff.CoreNet.3.weight"] = rnd(d, di)
        sd[p + "pos_ff.CoreNet.3.bias"] = rnd(d, s=0.1)
        sd[p + "pos_ff.layer_norm.weight"] = 1 + rnd(d, s=0.1)
        sd[p + "pos_ff.layer_norm.bias"] = rnd(d, s=0.1)
    sd["crit.out_layers.0.weight"] = emb  # tie_weight: the same Parameter
    sd["crit.out_layers.0.bias"] = rnd(V, s=0.5)
    sd["pos_emb.inv_freq"] = 1 / (10000 ** (torch.arange(0.0, d, 2.0, dtype=torch.float64) / d))
    return sd


# ---- the official forward pass, transcribed (float64, eval mode: dropout off) ----------

def _rel_shift(x):
    zero_pad = torch.zeros((x.size(0), 1, *x.size()[2:]), dtype=x.dtype)
    x_padded = torch.cat([zero_pad, x], dim=1)
    x_padded = x_padded.view(x.size(1) + 1, x.size(0), *x.size()[2:])
    return x_padded[1:].view_as(x)


def rel_attn(sd, p, w, r, r_w_bias, r_r_bias, attn_mask, mems, H, dh, pre_lnorm):
    qlen, rlen, bsz = w.size(0), r.size(0), w.size(1)
    ln = lambda x: F.layer_norm(x, (x.size(-1),), sd[p + "layer_norm.weight"],
                                sd[p + "layer_norm.bias"])
    cat = torch.cat([mems, w], 0)
    w_heads = F.linear(ln(cat) if pre_lnorm else cat, sd[p + "qkv_net.weight"])
    r_head_k = F.linear(r, sd[p + "r_net.weight"])
    w_head_q, w_head_k, w_head_v = torch.chunk(w_heads, 3, dim=-1)
    w_head_q = w_head_q[-qlen:]
    klen = w_head_k.size(0)
    w_head_q = w_head_q.view(qlen, bsz, H, dh)
    w_head_k = w_head_k.view(klen, bsz, H, dh)
    w_head_v = w_head_v.view(klen, bsz, H, dh)
    r_head_k = r_head_k.view(rlen, H, dh)
    AC = torch.einsum("ibnd,jbnd->ijbn", (w_head_q + r_w_bias, w_head_k))
    BD = _rel_shift(torch.einsum("ibnd,jnd->ijbn", (w_head_q + r_r_bias, r_head_k)))
    attn_score = (AC + BD) * (1 / dh ** 0.5)
    attn_score = attn_score.masked_fill(attn_mask[:, :, :, None], -float("inf"))
    attn_prob = F.softmax(attn_score, dim=1)
    attn_vec = torch.einsum("ijbn,jbnd->ibnd", (attn_prob, w_head_v))
    attn_vec = attn_vec.contiguous().view(qlen, bsz, H * dh)
    attn_out = F.linear(attn_vec, sd[p + "o_net.weight"])
    return w + attn_out if pre_lnorm else ln(w + attn_out)


def pos_ff(sd, p, inp, pre_lnorm):
    ln = lambda x: F.layer_norm(x, (x.size(-1),), sd[p + "layer_norm.weight"],
                                sd[p + "layer_norm.bias"])
    core = lambda x: F.linear(F.relu(F.linear(x, sd[p + "CoreNet.0.weight"],
                                              sd[p + "CoreNet.0.bias"])),
                              sd[p + "CoreNet.3.weight"], sd[p + "CoreNet.3.bias"])
    return core(ln(inp)) + inp if pre_lnorm else ln(inp + core(inp))


def official_loss(sd, ids, n_layer, H, dh, tgt_len, mem_len, pre_lnorm, untie):
    """Mean NLL (nats) over ids[1:], batch 1, segments of tgt_len with memory mem_len, as
    the official eval loop (LMOrderedIterator, model.reset_length, mems carried)."""
    d = sd["word_emb.emb_layers.0.weight"].size(1)
    data = torch.tensor(ids).view(-1, 1)
    mems = [torch.empty(0, 1, d, dtype=torch.float64) for _ in range(n_layer + 1)]
    total, count = 0.0, 0
    for i in range(0, data.size(0) - 1, tgt_len):
        seq_len = min(tgt_len, data.size(0) - 1 - i)
        inp, target = data[i:i + seq_len], data[i + 1:i + 1 + seq_len]
        qlen, mlen = inp.size(0), mems[0].size(0)
        klen = mlen + qlen
        word_emb = F.embedding(inp, sd["word_emb.emb_layers.0.weight"]) * d ** 0.5
        dec_attn_mask = torch.triu(torch.ones(qlen, klen), diagonal=1 + mlen).bool()[:, :, None]
        pos_seq = torch.arange(klen - 1, -1, -1.0, dtype=torch.float64)
        sinusoid = torch.ger(pos_seq, sd["pos_emb.inv_freq"])
        pos_emb = torch.cat([sinusoid.sin(), sinusoid.cos()], dim=-1)[:, None, :]
        core_out, hids = word_emb, [word_emb]
        for l in range(n_layer):
            p = f"layers.{l}."
            rw = sd[p + "dec_attn.r_w_bias"] if untie else sd["r_w_bias"]
            rr = sd[p + "dec_attn.r_r_bias"] if untie else sd["r_r_bias"]
            core_out = rel_attn(sd, p + "dec_attn.", core_out, pos_emb, rw, rr, dec_attn_mask,
                                mems[l], H, dh, pre_lnorm)
            core_out = pos_ff(sd, p + "pos_ff.", core_out, pre_lnorm)
            hids.append(core_out)
        with torch.no_grad():  # _update_mems, ext_len 0
            end_idx = mlen + max(0, qlen)
            beg_idx = max(0, end_idx - mem_len)
            mems = [torch.cat([mems[k], hids[k]], dim=0)[beg_idx:end_idx]
                    for k in range(len(hids))]
        logit = F.linear(core_out.view(-1, d), sd["crit.out_layers.0.weight"],
                         sd["crit.out_layers.0.bias"])
        nll = -F.log_softmax(logit, dim=-1).gather(1, target.view(-1, 1)).squeeze(1)
        total += nll.sum().item()
        count += nll.numel()
    return total / count


FAKE_MODULE = """
import torch, torch.nn as nn
class _Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.pre_lnorm = True
        self.dropatt = nn.Dropout(0.05)
class _Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.dec_attn = _Attn()
class MemTransformerLM(nn.Module):
    # stands in for the official class: the attributes the converter reads, and a
    # state_dict with the official names (built by the test's synthetic())
    def __init__(self):
        super().__init__()
        import sys; sys.path.insert(0, %r)
        from test_convert_official import synthetic
        self.tgt_len, self.mem_len, self.ext_len, self.clamp_len = 48, 96, 0, 400
        self.attn_type, self.same_length = 0, False
        self.drop = nn.Dropout(0.2)
        self.layers = nn.ModuleList([_Layer()])
        self.sd = {k: v.float() for k, v in synthetic(1, 16, 2, 8, 32, 256).items()}
    def state_dict(self):
        return self.sd
""" % os.path.dirname(os.path.abspath(__file__))


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


fails = 0


def check(what, ok, detail=""):
    global fails
    print(f"  {'ok  ' if ok else 'FAIL'} {what}{(': ' + detail) if detail else ''}")
    fails += not ok


def case(tmp, name, n_layer, d, H, dh, di, vocab_bytes, text, tgt_len, mem_len, pre_lnorm,
         untie):
    V = len(vocab_bytes) if vocab_bytes else 256
    sd = synthetic(n_layer, d, H, dh, di, V, untie=untie, seed=len(name))
    pt = os.path.join(tmp, name + ".pt")
    torch.save({k: v.float() for k, v in sd.items()}, pt)  # as trained: float32
    sd = {k: v.float().double() for k, v in sd.items()}
    cmd = [sys.executable, CONVERT, pt, "-o", os.path.join(tmp, name + ".safetensors"),
           "--tgt-len", str(tgt_len), "--mem-len", str(mem_len), "--data-train", text]
    if vocab_bytes:
        vf = os.path.join(tmp, name + ".vocab")
        with open(vf, "w") as f:
            f.write("".join(f"{b}\n" for b in vocab_bytes))  # enwik8 style: decimal bytes
        cmd += ["--vocab", vf]
    if pre_lnorm:
        cmd += ["--pre-lnorm"]
    r = run(cmd)
    check(f"{name}: convert", r.returncode == 0, r.stderr.strip()[-300:])
    ckpt = os.path.join(tmp, name + ".safetensors.gz")
    r = run([TXL, "import", os.path.join(tmp, name + ".safetensors"), "-c",
             os.path.join(tmp, name + ".yaml"), "-o", ckpt])
    check(f"{name}: txl import", r.returncode == 0, r.stderr.strip()[-300:])
    r = run([TXL, "eval", ckpt, "--data", text, "--batch", "1", "--json", "-q"])
    check(f"{name}: txl eval", r.returncode == 0, r.stderr.strip()[-300:])
    if r.returncode:
        return
    got = json.loads(r.stdout)
    raw = open(text, "rb").read()
    ids = [vocab_bytes.index(b) for b in raw] if vocab_bytes else list(raw)
    want = official_loss(sd, ids, n_layer, H, dh, tgt_len, mem_len, pre_lnorm, untie)
    rel = abs(got["loss"] - want) / want
    check(f"{name}: txl eval loss {got['loss']:.8f} == official forward {want:.8f} "
          f"({got['tokens']} tokens, tgt_len {got['tgt_len']}, mem_len {got['mem_len']})",
          rel < 2e-6 and got["tokens"] == len(ids) - 1, f"rel {rel:.2e}")


def main():
    if not os.access(TXL, os.X_OK):
        print(f"{TXL}: build txl first (make)")
        return 2
    g = torch.Generator().manual_seed(1)
    with tempfile.TemporaryDirectory() as tmp:
        # 60 byte values, ids in a shuffled order (the official reader sorts by frequency)
        letters = list(range(97, 123)) + list(range(65, 91)) + [32, 46, 44, 10, 33, 63, 39, 45]
        vocab = [letters[i] for i in torch.randperm(len(letters), generator=g).tolist()]
        text = os.path.join(tmp, "text.txt")
        words = "the quick brown fox jumps over the lazy dog. And God said, Let there be light!"
        with open(text, "wb") as f:
            f.write((words + "\n") .encode() * 4)  # 4*81 = 324 bytes: segments of 24, last 12
        case(tmp, "tied_post_ln", 2, 32, 2, 16, 64, vocab, text, 24, 40, False, False)
        case(tmp, "untied_pre_ln_v256", 3, 32, 4, 8, 48, None, text, 16, 16, True, True)

        # a whole pickled model (torch.save(model, f), as the official train.py does): the
        # lengths and pre_lnorm come from its attributes; unpickling needs its module, which
        # a stand-in mem_transformer.py provides (--official-dir)
        fake = os.path.join(tmp, "official")
        os.makedirs(fake)
        with open(os.path.join(fake, "mem_transformer.py"), "w") as f:
            f.write(FAKE_MODULE)
        r = run([sys.executable, "-c", f"import sys, torch; sys.path.insert(0, {fake!r}); "
                 f"import mem_transformer as m; torch.save(m.MemTransformerLM(), "
                 f"{os.path.join(tmp, 'whole.pt')!r})"])
        check("pickle a stand-in MemTransformerLM", r.returncode == 0, r.stderr[-300:])
        r = run([sys.executable, CONVERT, os.path.join(tmp, "whole.pt"), "-o",
                 os.path.join(tmp, "whole.safetensors")])
        check("whole model without --official-dir: exit 2, names the flag",
              r.returncode == 2 and "--official-dir" in r.stderr, r.stderr.strip()[-200:])
        r = run([sys.executable, CONVERT, os.path.join(tmp, "whole.pt"), "-o",
                 os.path.join(tmp, "whole.safetensors"), "--official-dir", fake])
        cfg = open(os.path.join(tmp, "whole.yaml")).read() if r.returncode == 0 else ""
        check("whole model: lengths, clamp_len, pre_lnorm, dropout read from it",
              all(k in cfg for k in ("tgt_len: 48", "mem_len: 96", "clamp_len: 400",
                                     "pre_lnorm: true", "dropout: 0.2")), r.stderr[-300:])
        r = run([TXL, "import", os.path.join(tmp, "whole.safetensors"), "-c",
                 os.path.join(tmp, "whole.yaml"), "-o", os.path.join(tmp, "whole.st")])
        check("whole model: txl import", r.returncode == 0, r.stderr.strip()[-300:])

        # refusals
        base = synthetic(1, 16, 2, 8, 32, 256)
        bad = {
            "untied output layer": dict(base, **{"crit.out_layers.0.weight":
                                                 base["crit.out_layers.0.weight"] + 1}),
            "unknown tensor": dict(base, **{"r_emb": torch.zeros(1, 2, 8)}),
            "missing tensor": {k: v for k, v in base.items() if "CoreNet.3.bias" not in k},
            "V != 256 without --vocab": synthetic(1, 16, 2, 8, 32, 100),
        }
        for what, sd in bad.items():
            pt = os.path.join(tmp, "bad.pt")
            torch.save(sd, pt)
            r = run([sys.executable, CONVERT, pt, "-o", os.path.join(tmp, "bad.safetensors")])
            msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
            check(f"refuses: {what} (exit 2)", r.returncode == 2, msg)
        # a whole pickled object that is not a model
        pt = os.path.join(tmp, "list.pt")
        torch.save([1, 2], pt)
        r = run([sys.executable, CONVERT, pt, "-o", os.path.join(tmp, "x.safetensors")])
        check("refuses: a .pt that is neither a model nor a state_dict", r.returncode == 2,
              r.stderr.strip())
    print(f"test_convert_official: {fails} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
