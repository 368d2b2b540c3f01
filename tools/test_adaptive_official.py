#!/usr/bin/env python3
"""txl's adaptive softmax and input against official Transformer-XL's own code. Run by hand
(not by make test: it needs the official repository and torch), from the repository root:

    make build/tests/test_fixtures
    /usr/bin/python3 tools/test_adaptive_official.py OFFICIAL [--keep DIR]

OFFICIAL is kimiyoung/transformer-xl: a checkout (its pytorch/ directory), or its git
directory (a bare clone, as the `fetch` tool leaves it: pytorch/ is taken out with git
archive). Its pytorch/mem_transformer.py and pytorch/utils/proj_adaptive_softmax.py are
imported unchanged (torch.version.cuda, which proj_adaptive_softmax.py reads at import for a
code path it has commented out, is given a value on a CPU-only torch).

For each case (official's MemTransformerLM with attn_type 0, tie_weight, its adaptive
softmax and input: cutoffs, div_val, d_embed, tie_projs [False, tie, tie, ...], pre- or
post-LN, dropout 0, 2 streams, 3 segments of tgt_len (the last shorter), memory carried):

1. the official model in float64, every parameter drawn again from a seed (float32 values,
   N(0, 0.1), layer norm gains 1 + N(0, 0.1), larger than official's init so that every path
   matters); tied parameters are drawn once;
2. official's forward per segment: model(data, target, *mems) gives the losses (its crit's
   NLL) and the memories; the log-probabilities of every token are its crit's pieces
   (_compute_logit over the head and each tail, head_logprob[:, -i], as crit.forward combines
   them) for all targets at once, checked against crit's own NLL at the real targets and,
   for the small vocabularies, against crit called with every token as the target;
   backward of the sum of the segments' mean losses gives every gradient;
3. tools/convert_official.py maps the weights and the gradients to txl's names (official ->
   txl), and back (--to-official's to_official: the state_dict loads into a fresh
   MemTransformerLM with strict=True and equals the original);
4. writes them as a fixture in tests/fixtures' format (the weights F32, official's results
   F64) and runs build/tests/test_fixtures on it: txl (float32) against official (float64):
   log-probabilities, memories, losses and every gradient, each as a max relative error
   (norm-relative, as test_fixtures prints), held to test_fixtures' 1e-5;
5. the command line once, on a byte-level adaptive model: official's state_dict saved as a
   .pt, converted by convert_official.py (tensors and config), `txl import`ed and `txl
   eval`ed (batch 1) on a text, against official's mean NLL over the same text in segments
   of tgt_len with its memory carried (its eval loop), to 2e-6.

Exit status 0 when every case agrees. --keep DIR keeps the fixtures."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))
import convert_official as conv  # noqa: E402
import txl_ref as ref  # noqa: E402  (its safetensors writer)

FIXTURES = os.path.join(ROOT, "build", "tests", "test_fixtures")

# name, V, cutoffs, div_val, d_embed (None: d_model), tie_projs, pre_lnorm
CASES = [
    ("wt103_shape", 300, [40, 80, 200], 1, None, True, False),  # one table, no projection
    ("div2_tied_pre", 300, [40, 80, 200], 2, None, True, True),
    ("div1_proj_tied", 300, [60], 1, 12, True, False),
    ("div1_proj_untied_pre", 300, [60, 150], 1, 12, False, True),
    ("nocut_proj", 300, [], 1, 8, False, False),              # a projected full softmax
    ("v70000_div2", 70000, [20, 200, 66000], 2, 32, True, False),  # ids past 65535, chunks
]
D, H, DH, DI, N_LAYER, B, LQ, M, LENS = 16, 2, 8, 32, 2, 2, 5, 4, [5, 5, 3]


def official_pytorch(path, tmp):
    """The directory of official's mem_transformer.py: a checkout's, or one taken out of a
    git directory."""
    for p in (os.path.join(path, "pytorch"), path):
        if os.path.exists(os.path.join(p, "mem_transformer.py")):
            return p
    out = os.path.join(tmp, "official")
    os.makedirs(out)
    arch = subprocess.run(["git", "--git-dir", path, "archive", "HEAD", "pytorch"],
                          capture_output=True)
    if arch.returncode:
        sys.exit(f"{path}: neither a checkout of kimiyoung/transformer-xl nor its git "
                 f"directory ({arch.stderr.decode().strip()})")
    subprocess.run(["tar", "-x", "-C", out], input=arch.stdout, check=True)
    return os.path.join(out, "pytorch")


def import_official(pydir):
    if torch.version.cuda is None:  # read at import by proj_adaptive_softmax.py only
        torch.version.cuda = "0.0"
    sys.path[:0] = [pydir, os.path.join(pydir, "utils")]
    import warnings
    warnings.filterwarnings("ignore", message=".*uint8.*")  # official's byte() masks
    import mem_transformer
    return mem_transformer


def build(mt, V, cutoffs, div, d_embed, tie, pre, seed):
    model = mt.MemTransformerLM(V, N_LAYER, H, D, DH, DI, 0.0, 0.0, tie_weight=True,
                                d_embed=d_embed, div_val=div,
                                tie_projs=[False] + [tie] * len(cutoffs), pre_lnorm=pre,
                                tgt_len=LQ, ext_len=0, mem_len=M, cutoffs=list(cutoffs),
                                same_length=False, attn_type=0, clamp_len=-1)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():  # tied parameters once
            w = torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.1
            if name.endswith("layer_norm.weight"):
                w = w + 1
            p.data = w.float().double()  # float32 values, computed in float64
    return model.double()


def official_weights(model):
    """{state_dict name: the Parameter} (tied parameters under each name)"""
    out = {}
    for k in model.state_dict():
        try:
            out[k] = model.get_parameter(k)
        except AttributeError:  # a buffer (pos_emb.inv_freq)
            pass
    return out


def full_logprobs(crit, hidden):
    """log p of every token [rows, V], from crit's own pieces as ProjectedAdaptiveLogSoftmax
    .forward combines them: the head's log_softmax (shortlist, then the cluster logits),
    head_logprob[:, -i] plus tail i's log_softmax."""
    if crit.n_clusters == 0:
        return torch.log_softmax(crit._compute_logit(hidden, crit.out_layers[0].weight,
                                                     crit.out_layers[0].bias,
                                                     crit.out_projs[0]), -1)
    weights, biases = [], []
    for i in range(len(crit.cutoffs)):
        if crit.div_val == 1:
            lo, hi = crit.cutoff_ends[i], crit.cutoff_ends[i + 1]
            w, b = crit.out_layers[0].weight[lo:hi], crit.out_layers[0].bias[lo:hi]
        else:
            w, b = crit.out_layers[i].weight, crit.out_layers[i].bias
        if i == 0:
            w, b = torch.cat([w, crit.cluster_weight], 0), torch.cat([b, crit.cluster_bias], 0)
        weights.append(w)
        biases.append(b)
    head = torch.log_softmax(crit._compute_logit(hidden, weights[0], biases[0],
                                                 crit.out_projs[0]), 1)
    outs = [head[:, :crit.shortlist_size]]
    for i in range(1, len(crit.cutoffs)):
        tail = torch.log_softmax(crit._compute_logit(hidden, weights[i], biases[i],
                                                     crit.out_projs[i]), 1)
        outs.append(head[:, -i, None] + tail)
    return torch.cat(outs, 1)


def streams(V, cutoffs, seed):
    """B streams of ids: half drawn near the front (as text is), the rest over every
    cluster, the last id and each cluster's first id among them"""
    g = torch.Generator().manual_seed(seed)
    n = sum(LENS) + 1
    near = torch.randint(0, 2 * cutoffs[0] if cutoffs else max(2, V // 20), (B, n), generator=g)
    far = torch.randint(0, V, (B, n), generator=g)
    x = torch.where(torch.rand(B, n, generator=g) < 0.5, near, far)
    x[0, 3] = V - 1
    for k, c in enumerate([0] + list(cutoffs)):
        x[1, 1 + k % (n - 1)] = c
    return x


def run_case(mt, tmp, name, V, cutoffs, div, d_embed, tie, pre, report):
    seed = sum(map(ord, name))
    model = build(mt, V, cutoffs, div, d_embed, tie, pre, seed)
    params = official_weights(model)
    sd = {k: p.detach().numpy() for k, p in params.items()}
    sd["pos_emb.inv_freq"] = model.pos_emb.inv_freq.numpy()
    tensors, facts = conv.convert(sd, cutoffs=cutoffs or None)
    # the other way: txl's tensors back to a state_dict that a fresh model loads, equal
    cfg = {"model": {"d_model": D, "cutoffs": facts["cutoffs"], "div_val": facts["div_val"],
                     "tie_projs": facts["tie_projs"]}}
    back = conv.to_official(tensors, cfg)
    fresh = build(mt, V, cutoffs, div, d_embed, tie, pre, seed + 1)
    fresh.load_state_dict({k: torch.from_numpy(v).double() for k, v in back.items()},
                          strict=True)
    rt = max(float((fresh.state_dict()[k] - model.state_dict()[k]).abs().max())
             for k in model.state_dict() if k != "pos_emb.inv_freq")
    x = streams(V, cutoffs, seed)
    out = {k: torch.from_numpy(v) for k, v in tensors.items()}
    mems, start, total, worst_nll, worst_brute = tuple(), 0, 0.0, 0.0, 0.0
    for s, L in enumerate(LENS):
        xs, ys = x[:, start:start + L], x[:, start + 1:start + L + 1]
        data, target = xs.t().contiguous(), ys.t().contiguous()  # official: [len, batch]
        with torch.no_grad():
            hidden, _ = model._forward(data, mems=list(mems) if mems else model.init_mems())
            rows = hidden.reshape(-1, D)
            lp = full_logprobs(model.crit, rows)                  # [L*B, V]
            nll = model.crit(rows, target.reshape(-1), keep_order=True)
            worst_nll = max(worst_nll, float((lp.gather(1, target.reshape(-1, 1))[:, 0]
                                              + nll).abs().max()))
            if V <= 1000:  # crit itself with every token as the target
                allv = torch.arange(V).repeat(rows.shape[0])
                brute = -model.crit(rows.repeat_interleave(V, 0), allv, keep_order=True)
                worst_brute = max(worst_brute, float((brute.view(-1, V) - lp).abs().max()))
        ret = model(data, target, *mems)
        loss, mems = ret[0].mean(), tuple(ret[1:])
        total = total + loss
        out[f"seg{s}.x"], out[f"seg{s}.y"] = xs.to(torch.int32), ys.to(torch.int32)
        out[f"seg{s}.logits"] = lp.view(L, B, V).transpose(0, 1).contiguous()
        out[f"seg{s}.loss"] = loss.detach().reshape(1).clone()
        for l in range(N_LAYER):  # official's mems[l]: [m, batch, d], the input of layer l
            out[f"seg{s}.mem.{l}"] = mems[l].transpose(0, 1).contiguous().clone()
        start += L
    total.backward()
    # a tensor official did not reach (a cluster without tokens) has no gradient: zero
    grads = {k: (p.grad if p.grad is not None else torch.zeros_like(p)).numpy()
             for k, p in params.items()}
    gt, _ = conv.convert(grads, cutoffs=cutoffs or None, dtype="<f8")
    for k, v in gt.items():
        out["grad." + k] = torch.from_numpy(v)
    model_cfg = {"n_layer": N_LAYER, "d_model": D, "n_head": H, "d_head": DH, "d_inner": DI,
                 "tgt_len": LQ, "mem_len": M, "pre_lnorm": pre, "dropout": 0.0,
                 "dropatt": 0.0, "pos_scheme": "xl", "clamp_len": 0, "untie_r": False,
                 "cutoffs": facts["cutoffs"], "div_val": facts["div_val"],
                 "d_embed": facts["d_embed"], "tie_projs": facts["tie_projs"], "vocab": V}
    meta = {"config": json.dumps({"model": model_cfg, "train": {"batch_size": B}}),
            "n_segments": str(len(LENS)), "segment_lengths": ",".join(map(str, LENS)),
            "description": f"official Transformer-XL ({name}) in float64"}
    ref.save_safetensors(os.path.join(tmp, name + ".safetensors"), out, meta)
    report.append((name, V, facts, rt, worst_nll, worst_brute))
    return rt == 0 and worst_nll < 1e-12 and worst_brute < 1e-12


def cli_case(mt, tmp):
    """convert_official.py -> txl import -> txl eval on a byte-level adaptive model, against
    official's eval loop over the same bytes. Returns (ok, message)."""
    txl = os.path.join(ROOT, "txl")
    V, cutoffs, lq, mem = 256, [64, 128], 6, 9
    model = build(mt, V, cutoffs, 2, 16, True, False, 99)
    text = os.path.join(tmp, "text.txt")
    with open(text, "wb") as f:
        f.write(b"In the beginning God created the heaven and the earth. And the earth was "
                b"without form, and void; and darkness was upon the face of the deep.\n" * 2)
    ids = torch.tensor(list(open(text, "rb").read()))
    pt = os.path.join(tmp, "cli.pt")
    torch.save({k: v.float() for k, v in model.state_dict().items()}, pt)
    out = os.path.join(tmp, "cli.safetensors")
    r = subprocess.run([sys.executable, conv.__file__, pt, "-o", out, "--tgt-len", str(lq),
                        "--mem-len", str(mem), "--data-train", text], capture_output=True,
                       text=True)
    if r.returncode:
        return False, "convert_official.py: " + r.stderr.strip()
    ck = os.path.join(tmp, "cli.safetensors.gz")
    r = subprocess.run([txl, "import", out, "-c", out[:-12] + ".yaml", "-o", ck, "-q"],
                       capture_output=True, text=True)
    if r.returncode:
        return False, "txl import: " + r.stderr.strip()
    r = subprocess.run([txl, "eval", ck, "--data", text, "--batch", "1", "--json", "-q"],
                       capture_output=True, text=True)
    if r.returncode:
        return False, "txl eval: " + r.stderr.strip()
    got = json.loads(r.stdout)
    with torch.no_grad():  # official's eval loop: batch 1, segments of tgt_len, memory carried
        model.reset_length(lq, 0, mem)
        mems, total, count = tuple(), 0.0, 0
        for i in range(0, len(ids) - 1, lq):
            n = min(lq, len(ids) - 1 - i)
            ret = model(ids[i:i + n, None], ids[i + 1:i + 1 + n, None], *mems)
            total += float(ret[0].sum())
            count += n
            mems = tuple(ret[1:])
    want = total / count
    rel = abs(got["loss"] - want) / want
    return (rel < 2e-6 and got["tokens"] == count,
            f"convert_official.py, txl import, txl eval --batch 1: loss {got['loss']:.8f} vs "
            f"official's eval loop {want:.8f} (rel {rel:.1e}, {count} tokens, tgt_len {lq}, "
            f"mem_len {mem})")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("official", help="kimiyoung/transformer-xl: a checkout or its git dir")
    ap.add_argument("--keep", help="write the fixtures here (kept)")
    args = ap.parse_args(argv)
    if not os.access(FIXTURES, os.X_OK):
        sys.exit(f"{FIXTURES}: build it first (make build/tests/test_fixtures)")
    torch.set_num_threads(1)
    tmp = tempfile.mkdtemp(prefix="txl_official_")
    try:
        mt = import_official(official_pytorch(args.official, tmp))
        fx = args.keep or os.path.join(tmp, "fixtures")
        os.makedirs(fx, exist_ok=True)
        report, ok = [], True
        for c in CASES:
            ok &= run_case(mt, fx, *c, report)
        for name, V, f, rt, wn, wb in report:
            print(f"{name}: V {V}, cutoffs {f['cutoffs']}, div_val {f['div_val']}, d_embed "
                  f"{f['d_embed']}, tie_projs {f['tie_projs']}: to_official round trip "
                  f"{rt:.1e}; all-token log-probs vs crit's NLL {wn:.1e}"
                  + (f", vs crit over every token {wb:.1e}" if V <= 1000 else ""))
        r = subprocess.run([FIXTURES, fx], capture_output=True, text=True, cwd=ROOT)
        lines = [l for l in r.stdout.splitlines() if "rb2" not in l and "found" not in l]
        print("\n".join(lines))
        worst = {}
        for l in lines:
            m = re.search(r"(logits|memories|losses|gradients)\s+max rel err (\S+)", l)
            if m:
                worst[m.group(1)] = max(worst.get(m.group(1), 0.0), float(m.group(2)))
        print("txl (float32) vs official (float64), max over the cases: " +
              ", ".join(f"{k} {v:.2e}" for k, v in worst.items()))
        ok &= r.returncode == 0
        cli_ok, msg = cli_case(mt, tmp)
        print(("  ok   " if cli_ok else "  FAIL ") + msg)
        ok &= cli_ok
        print("test_adaptive_official: " + ("ok" if ok else "FAILED"))
        return 0 if ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
