"""Independent PyTorch reference of the txl model (doc/design.md, "The model").

Written from doc/design.md only, for checking the C implementation.  Clarity over
speed: every quantity of section 3 is formed as literally as practical.

Parameters live in a plain dict keyed by the checkpoint tensor names of
doc/design.md, "Checkpoints".  Linear weights are [out, in] (y = x @ W.T).  The model
runs in whatever dtype the parameters have (float64 for the fixtures).
Dropout is not modelled: this is the evaluation-mode network (dropout = 0).
With a Bf16 (forward's bf argument) it rounds the operands txl's bf16 precision rounds,
and only those (doc/design.md, "Precision"); everything else stays in the parameters'
dtype.

Only the standard library and torch are used.
"""

import gzip
import json
import math
import struct

import torch

V_DEFAULT = 256
LN_EPS = 1e-5

MODEL_DEFAULTS = {
    "n_layer": 4, "d_model": 256, "n_head": 4, "d_head": 64, "d_inner": 1024,
    "tgt_len": 128, "mem_len": 128, "pre_lnorm": False, "dropout": 0.1,
    "dropatt": 0.0, "pos_scheme": "xl", "clamp_len": 0, "untie_r": False, "xl_terms": "abcd",
    "mlp_num_freqs": 16, "mlp_max_dist": 4096, "mlp_hidden": 64,
    "hier_levels": ["token", "word", "sent", "para"], "hier_num_freqs": 8,
    "fire_hidden": 32, "fire_threshold": 512.0,
    "t5_buckets": 32, "t5_max_dist": 128, "t5_shared": True,
    "cutoffs": [], "div_val": 1, "d_embed": 0, "tie_projs": False,
}
SCHEMES = ("xl", "mlp", "rope", "alibi", "absolute", "none", "hier", "fire", "t5")
HIER_LEVELS = ("token", "word", "sent", "para")
HIER_DIV = {"token": 1, "word": 4, "sent": 32, "para": 128}


def model_cfg(cfg):
    """Model config with the section 4 defaults filled in."""
    out = dict(MODEL_DEFAULTS)
    out.update(cfg)
    if out["pos_scheme"] not in SCHEMES:
        raise ValueError("unknown pos_scheme %r" % (out["pos_scheme"],))
    return out


# ----------------------------------------------------------------------------
# the adaptive softmax and input (doc/design.md, "The model", adaptive softmax)

def adaptive(c):
    """Cutoffs, a d_embed other than d_model or a div_val above 1: the adaptive input and
    softmax replace the one tied embedding."""
    de = c["d_embed"] or c["d_model"]
    return bool(c["cutoffs"]) or de != c["d_model"] or c["div_val"] > 1


def clusters(c, vocab):
    """[(lo, hi, width)] of cluster 0 (the shortlist) and the tails: the cutoffs cut
    [0, vocab); cluster i has width d_embed // div_val**i."""
    ends = [0] + list(c["cutoffs"]) + [vocab]
    de, div = c["d_embed"] or c["d_model"], max(1, c["div_val"])
    return [(ends[i], ends[i + 1], de // div ** i) for i in range(len(ends) - 1)]


def adaptive_shapes(c, vocab):
    d, cl = c["d_model"], clusters(c, vocab)
    one = max(1, c["div_val"]) == 1
    tables = cl[:1] if one else cl
    has_proj = [(not one) or w != d for (_, _, w) in cl]  # one table: one P_0 at most
    out = [("word_emb.emb_layers.%d.weight" % i, (vocab if one else hi - lo, w))
           for i, (lo, hi, w) in enumerate(tables)]
    out += [("word_emb.emb_projs.%d" % i, (d, w)) for i, (_, _, w) in enumerate(tables)
            if has_proj[i]]
    if len(cl) > 1:
        out += [("crit.cluster_weight", (len(cl) - 1, cl[0][2])),
                ("crit.cluster_bias", (len(cl) - 1,))]
    out += [("crit.out_layers.%d.bias" % i, (vocab if one else hi - lo,))
            for i, (lo, hi, _) in enumerate(tables)]
    out += [("crit.out_projs.%d" % i, (d, w)) for i, (_, _, w) in enumerate(cl)
            if has_proj[i] and not (c["tie_projs"] and i > 0)]
    return out


def adaptive_parts(P, c, vocab):
    """Per cluster (E_i, b_i, P_i, Q_i): the embedding rows (also the output weight), the
    output bias, the input and the output projection (None where there is none; a tied
    Q_i is the input's P: P_0 with one table, else P_i)."""
    one = max(1, c["div_val"]) == 1
    out = []
    for i, (lo, hi, _) in enumerate(clusters(c, vocab)):
        k = 0 if one else i
        E = P["word_emb.emb_layers.%d.weight" % k]
        b = P["crit.out_layers.%d.bias" % k]
        if one:
            E, b = E[lo:hi], b[lo:hi]
        Pin = P.get("word_emb.emb_projs.%d" % k)
        Q = P.get("crit.out_projs.%d" % i)
        if Q is None and c["tie_projs"] and i > 0:
            Q = Pin
        out.append((E, b, Pin, Q))
    return out


def adaptive_embed(P, c, x, vocab):
    """h = sqrt(d) (E_i[t - lo_i] P_i^T) for each token t of cluster i (no P: E_i[t])."""
    d = c["d_model"]
    h = None
    for (lo, hi, _), (E, _, Pin, _) in zip(clusters(c, vocab), adaptive_parts(P, c, vocab)):
        mask = (x >= lo) & (x < hi)
        e = E[(x - lo).clamp(0, hi - lo - 1)]
        if Pin is not None:
            e = linear(e, Pin)
        if h is None:
            h = torch.zeros(e.shape[:-1] + (d,), dtype=e.dtype)
        h = torch.where(mask[..., None], e, h)
    return h * math.sqrt(d)


def adaptive_logprobs(P, c, x, vocab):
    """log p of every token [.., vocab] for top states x [.., d]: the head's log-softmax
    over the shortlist and one logit per tail (tail i's at column n_0 + T - i, row T - i of
    the cluster weight), a tail's token adding its own cluster's log-softmax."""
    cl, parts = clusters(c, vocab), adaptive_parts(P, c, vocab)
    T, n0 = len(cl) - 1, cl[0][1]

    def proj(Q):
        return x if Q is None else torch.matmul(x, Q)
    E0, b0, _, Q0 = parts[0]
    W, bb = E0, b0
    if T > 0:
        W = torch.cat([E0, P["crit.cluster_weight"]], 0)
        bb = torch.cat([b0, P["crit.cluster_bias"]], 0)
    head = torch.log_softmax(linear(proj(Q0), W, bb), dim=-1)
    outs = [head[..., :n0]]
    for i in range(1, T + 1):
        E, b, _, Q = parts[i]
        tail = torch.log_softmax(linear(proj(Q), E, b), dim=-1)
        outs.append(head[..., n0 + T - i:n0 + T - i + 1] + tail)
    return torch.cat(outs, dim=-1)


# ----------------------------------------------------------------------------
# parameters

def param_shapes(cfg, vocab=V_DEFAULT):
    """Ordered list of (name, shape) of every parameter, as in the checkpoint."""
    c = model_cfg(cfg)
    d, H, dh, di = c["d_model"], c["n_head"], c["d_head"], c["d_inner"]
    xl = c["pos_scheme"] == "xl"
    if adaptive(c):
        out = adaptive_shapes(c, vocab)
    else:
        out = [("word_emb.weight", (vocab, d)), ("out.bias", (vocab,))]
    if xl and not c["untie_r"]:
        out += [("r_w_bias", (H, dh)), ("r_r_bias", (H, dh))]
    if c["pos_scheme"] == "t5" and c["t5_shared"]:
        out.append(("t5.rel_bias", (H, c["t5_buckets"])))
    for l in range(c["n_layer"]):
        p = "layers.%d." % l
        out.append((p + "attn.qkv.weight", (3 * H * dh, d)))
        if xl:
            out.append((p + "attn.r.weight", (H * dh, d)))
            if c["untie_r"]:
                out += [(p + "attn.r_w_bias", (H, dh)), (p + "attn.r_r_bias", (H, dh))]
        out.append((p + "attn.o.weight", (d, H * dh)))
        out += [(p + "attn.ln.weight", (d,)), (p + "attn.ln.bias", (d,))]
        if c["pos_scheme"] == "mlp":
            K, hid = c["mlp_num_freqs"], c["mlp_hidden"]
            out += [(p + "attn.bias_mlp.0.weight", (hid, 2 * K)),
                    (p + "attn.bias_mlp.0.bias", (hid,)),
                    (p + "attn.bias_mlp.2.weight", (H, hid)),
                    (p + "attn.bias_mlp.2.bias", (H,))]
        if c["pos_scheme"] == "hier":
            K, hid, lv = c["hier_num_freqs"], c["mlp_hidden"], hier_levels(c)
            for name in lv:
                q = p + "attn.hier.%s." % name
                out += [(q + "0.weight", (hid, 2 * K)), (q + "0.bias", (hid,)),
                        (q + "2.weight", (H, hid)), (q + "2.bias", (H,))]
            out += [(p + "attn.hier.mix.weight", (H, len(lv) * H)),
                    (p + "attn.hier.mix.bias", (H,))]
        if c["pos_scheme"] == "fire":
            hid = c["fire_hidden"]
            out += [(p + "attn.fire.mlp.0.weight", (hid, 1)), (p + "attn.fire.mlp.0.bias", (hid,)),
                    (p + "attn.fire.mlp.2.weight", (H, hid)), (p + "attn.fire.mlp.2.bias", (H,)),
                    (p + "attn.fire.c", (1,)), (p + "attn.fire.L_mult", (1,))]
        if c["pos_scheme"] == "t5" and not c["t5_shared"]:
            out.append((p + "attn.t5.rel_bias", (H, c["t5_buckets"])))
        out += [(p + "ff.0.weight", (di, d)), (p + "ff.0.bias", (di,)),
                (p + "ff.3.weight", (d, di)), (p + "ff.3.bias", (d,)),
                (p + "ff.ln.weight", (d,)), (p + "ff.ln.bias", (d,))]
    return out


def random_params(cfg, seed, std=0.1, vocab=V_DEFAULT):
    """Fixture parameters (float32): larger-than-init scales so that every path
    matters.  Weights, embedding, biases, u, v ~ N(0, std); LN gains ~ N(1, std).
    FIRE: its first layer (fan-in 1, init U(-1, 1)) ~ N(0, 10 std), so that its inputs'
    differences show; c and L_mult of layer l fixed at (-1)^l (0.3 + 0.3 l) and
    (-1)^l (0.45 + 0.3 l), negative in odd layers (the absolute values), so that with the
    fixtures' fire_threshold 10, L = 4.5 and 7.5 falls inside the windows (queries on both
    sides of it)."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in param_shapes(cfg, vocab):
        t = torch.randn(shape, generator=g, dtype=torch.float64) * std
        if name.endswith("ln.weight"):
            t = t + 1.0
        if ".attn.fire.mlp.0." in name:
            t = t * 10.0
        if name.endswith(".attn.fire.c") or name.endswith(".attn.fire.L_mult"):
            l = int(name.split(".")[1])
            base = 0.3 if name.endswith(".c") else 0.45
            t = torch.full(shape, (-1.0) ** l * (base + 0.3 * l), dtype=torch.float64)
        out[name] = t.to(torch.float32)
    return out


# ----------------------------------------------------------------------------
# txl's bf16 precision (doc/design.md, "Precision")

BF16_MIN = 1 << 15  # multiply-adds below which a product stays fp32


def bf16(x):
    """x rounded to bfloat16, to nearest even, and back to x's dtype.  (torch rounds a
    float64 through float32, as txl rounds its fp32 values.)"""
    return x.to(torch.bfloat16).to(x.dtype)


class Bf16:
    """The operands txl's bf16 precision rounds, and nothing else:
    - gemm()'s products: both operands of an [M, K] x [K, N] product when M > 1, N > 1 and
      M N K >= BF16_MIN (else it stays fp32).  A product's M is the rows of one call: the
      segment's rows of all its streams (B Lq); for the keys and values, rope's whole
      window (B klen; no cache), and a memory not cached (see kv) tgt_len of its rows per
      stream at a time; the D distances of an MLP bias; a block of FIRE_BLOCK of fire's
      inputs (fire_rounded).  The mlp and hier biases' output layers and fire's hidden
      layer are no gemm() and stay exact.
    - attention=True (a CPU with AMX-BF16): the attention's scale (q + u), scale (q + v),
      k, v, rk and the probabilities after the softmax; the scores, the biases and the
      softmax stay exact.  False: the attention is exact.
    kv: inference's key cache, per layer the keys and values [B, m, 2 H dh] of the memory's
    rows as the product that projected them made them; None (a memory copied in): they are
    projected again, tgt_len rows per stream at a time.  forward() keeps it in step with
    the memory; rope (whose keys turn with the window) and a model without memory have
    none."""

    def __init__(self, attention):
        self.attention = attention
        self.kv = None
        self.kv_next = []

    @staticmethod
    def product(M, N, K):
        return M > 1 and N > 1 and M * N * K >= BF16_MIN


# ----------------------------------------------------------------------------
# building blocks

def linear(x, w, b=None, bf=None):
    """x @ w.T (+ b): one product of x's rows, in bf16 when bf says so."""
    if bf is not None and bf.product(x.numel() // max(1, x.shape[-1]), w.shape[0], w.shape[1]):
        x, w = bf16(x), bf16(w)
    y = torch.matmul(x, w.t())
    return y if b is None else y + b


def layer_norm(x, w, b):
    mu = x.mean(dim=-1, keepdim=True)
    xc = x - mu
    var = (xc * xc).mean(dim=-1, keepdim=True)
    return xc / torch.sqrt(var + LN_EPS) * w + b


def gelu_erf(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def inv_freq(n_half, width):
    """f_t = 10000^(-2t/width), t < n_half, in double."""
    t = torch.arange(n_half, dtype=torch.float64)
    return torch.pow(torch.tensor(10000.0, dtype=torch.float64), -2.0 * t / width)


def sinusoid(pos, d, dtype):
    """[sin(pos*f), cos(pos*f)] (sin half first), pos a float64 vector; angles in
    double, rounded to dtype once."""
    assert d % 2 == 0
    ang = pos.to(torch.float64)[:, None] * inv_freq(d // 2, d)[None, :]
    return torch.cat([torch.sin(ang), torch.cos(ang)], dim=1).to(dtype)


def alibi_slopes(H):
    def pow2(n):
        return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]
    if H & (H - 1) == 0:
        return pow2(H)
    n = 2 ** int(math.floor(math.log2(H)))
    return pow2(n) + pow2(2 * n)[0::2][: H - n]


def mlp_phi(delta, K, max_dist, dtype):
    """phi(delta) = [sin(delta/tau_k) for k<K, cos(delta/tau_k) for k<K] (sin half
    first, as for xl's R), tau = exp(linspace(0, ln max_dist, K)); double, then dtype."""
    tau = torch.exp(torch.linspace(0.0, math.log(max_dist), K, dtype=torch.float64))
    ang = delta.to(torch.float64)[:, None] / tau[None, :]
    return torch.cat([torch.sin(ang), torch.cos(ang)], dim=1).to(dtype)


def mlp_bias_table(P, pre, c, n_dist, dtype, bf=None):
    """b(delta) for delta = 0..n_dist-1, shape [n_dist, H]."""
    delta = torch.arange(n_dist, dtype=torch.float64)
    phi = mlp_phi(delta, c["mlp_num_freqs"], c["mlp_max_dist"], dtype)
    hid = gelu_erf(linear(phi, P[pre + "attn.bias_mlp.0.weight"], P[pre + "attn.bias_mlp.0.bias"],
                          bf))
    # hidden -> H: not a gemm() in txl, exact in bf16 too
    return linear(hid, P[pre + "attn.bias_mlp.2.weight"], P[pre + "attn.bias_mlp.2.bias"])


FIRE_BLOCK = 1024  # fire's inputs per product of its MLP's output layer


def fire_rounded(c, m, Lq, L, H, bf):
    """[Lq, klen] bool: whether query p = m+i's bias at key j comes from a bf16 product.
    txl's inputs of the MLP are, in order, one shared row of distances 0..n0-1 for the
    queries p <= L, then a row of distances 0..p for each query p > L; its output layer
    is one product per block of FIRE_BLOCK inputs [n, hidden] x [hidden, H]."""
    klen, p1 = m + Lq, m + Lq - 1
    if m > L:
        n0, p0 = 0, m
    elif p1 <= L:
        n0 = p0 = p1 + 1
    else:
        p0 = int(math.floor(L)) + 1
        n0 = p0
    R = n0 + sum(p + 1 for p in range(p0, p1 + 1))
    out = torch.zeros(Lq, klen, dtype=torch.bool)
    for i in range(Lq):
        p = m + i
        for j in range(p + 1):
            r = p - j if p < p0 else n0 + (p - p0) * (p + p0 + 1) // 2 + p - j
            b0 = r // FIRE_BLOCK * FIRE_BLOCK
            out[i, j] = bf.product(min(FIRE_BLOCK, R - b0), H, c["fire_hidden"])
    return out


def fire_bias(P, pre, c, m, Lq, bf=None):
    """FIRE (Li et al. 2023, eq. for b(i, j) with progressive interpolation) for the
    queries at window rows p = m..m+Lq-1 (counted from the window's first key) and keys
    j = 0..m+Lq-1: b(p, j) = f(psi(p - j) / psi(max(L, p))), psi(x) = log(c x + 1), with
    the published listing's parameterisation: c -> |c|, L = |L_mult| fire_threshold, 1e-6
    added to the normaliser; f = Linear(1, hidden), ReLU, Linear(hidden, H).  A tie p = L
    takes L.  Returns [H, Lq, klen]; entries j > p are masked by the caller."""
    klen = m + Lq
    dt = P[pre + "attn.fire.c"].dtype
    p = torch.arange(m, klen, dtype=dt)[:, None]
    j = torch.arange(klen, dtype=dt)[None, :]
    rel = (p - j).clamp(min=0.0)
    cc = torch.abs(P[pre + "attn.fire.c"])
    L = torch.abs(P[pre + "attn.fire.L_mult"]) * c["fire_threshold"]
    norm = torch.where(p > L, p, L)                               # [Lq, 1]
    x = torch.log(cc * rel + 1.0) / (torch.log(cc * norm + 1.0) + 1e-6)
    hid = torch.relu(linear(x[..., None], P[pre + "attn.fire.mlp.0.weight"],
                            P[pre + "attn.fire.mlp.0.bias"]))
    W2, b2 = P[pre + "attn.fire.mlp.2.weight"], P[pre + "attn.fire.mlp.2.bias"]
    out = linear(hid, W2, b2)
    if bf is not None:
        rnd = fire_rounded(c, m, Lq, float(L), W2.shape[0], bf)
        if bool(rnd.any()):
            out = torch.where(rnd[..., None], torch.matmul(bf16(hid), bf16(W2).t()) + b2, out)
    return out.permute(2, 0, 1)


def t5_bucket(n, num_buckets, max_distance):
    """T5's relative position bucket, causal (bidirectional=False): n = query - key >= 0
    (LongTensor).  Half the buckets are single distances, the other half logarithmically
    wider up to max_distance; larger distances share the last bucket."""
    max_exact = num_buckets // 2
    nn = n.clamp(min=max_exact).to(torch.float64)
    large = max_exact + (torch.log(nn / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.clamp(large, max=num_buckets - 1)
    return torch.where(n < max_exact, n, large)


def hier_levels(c):
    """The levels in use, in the order token, word, sent, para."""
    return [n for n in HIER_LEVELS if n in c["hier_levels"]]


def hier_max_dist(c, name):
    return max(2.0, float(c["mlp_max_dist"]) / HIER_DIV[name])


def text_coords(data):
    """Per byte of `data` (no anchors): the number of words, sentences and paragraphs
    started at or before it (doc/design.md, "Anchors and text structure"): units start only
    at non-whitespace bytes; the first word of the text starts a paragraph; a paragraph
    starts after a whitespace run with at least two newlines; a sentence starts with a
    paragraph or after '.', '!' or '?' followed by whitespace; a word starts with a sentence
    or after whitespace."""
    ws = set(b" \t\n\r\x0b\x0c")
    words = sents = paras = 0
    out = []
    first = True
    prev_ws = True
    newlines = 0
    stop = False
    for b in data:
        if b in ws:
            newlines += b == 10
            prev_ws = True
        else:
            para = first or (prev_ws and newlines >= 2)
            sent = para or (prev_ws and stop)
            word = sent or prev_ws
            paras += para
            sents += sent
            words += word
            first = False
            prev_ws = False
            newlines = 0
            stop = b in b".!?"
        out.append((words, sents, paras))
    return out


ANCHOR_KINDS = ("bos", "para", "sent")


def tokenize(data, anchors=(), sep=b""):
    """The tokens of `data` (bytes) with anchor tokens inserted, and the text coordinates
    of every token (doc/design.md, "Anchors and text structure").  anchors: the enabled
    kinds among bos, para, sent, whose ids are 256, 257, ... in that order.  A document
    starts at the first non-whitespace byte of the text and at the first one after each
    occurrence of `sep` (non-overlapping, scanned left to right); a paragraph at a document
    start and after a blank line; a sentence at a paragraph start and after '.', '!' or
    '?' followed by whitespace; a word at a sentence start and after whitespace.  Before a
    byte where units start, the anchor of the highest enabled kind among them goes in; it
    carries the coordinates of that byte.  Returns (tokens, coords) lists."""
    ids = {}
    for k in ANCHOR_KINDS:
        if k in anchors:
            ids[k] = 256 + len(ids)
    toks, coords = [], []
    count = [0, 0, 0]
    after_ws, blank, stop, doc = True, False, False, True
    newlines = 0
    window = b""
    for b in data:
        if b in b" \t\n\r\x0b\x0c":
            newlines += b == 10
            blank = newlines >= 2
            after_ws = True
            toks.append(b)
            coords.append(tuple(count))
        else:
            para = doc or (after_ws and blank)
            sent = para or (after_ws and stop)
            word = sent or after_ws
            count = [count[0] + word, count[1] + sent, count[2] + para]
            kind = ("bos" if doc and "bos" in ids else "para" if para and "para" in ids
                    else "sent" if sent and "sent" in ids else None)
            if kind:
                toks.append(ids[kind])
                coords.append(tuple(count))
            toks.append(b)
            coords.append(tuple(count))
            doc, after_ws, blank, newlines = False, False, False, 0
            stop = b in b".!?"
        if sep:
            window = (window + bytes([b]))[-len(sep):]
            if window == sep:
                doc, window = True, b""
    return toks, coords


def hier_bias(P, pre, c, coords, m, Lq, dtype, bf=None):
    """bias [B, H, Lq, klen] of the hierarchical scheme; coords LongTensor [B, klen, 3]
    (word, sent, para counts of the rows [mem; segment])."""
    H = c["n_head"]
    B, klen, _ = coords.shape
    ii = torch.arange(Lq)[:, None]
    jj = torch.arange(klen)[None, :]
    visible = (jj <= m + ii)
    C = P[pre + "attn.hier.mix.weight"]                         # [H, L*H]
    total = torch.zeros(B, H, Lq, klen, dtype=dtype)
    for li, name in enumerate(hier_levels(c)):
        if name == "token":
            delta = ((m + ii) - jj).expand(B, Lq, klen)
        else:
            col = {"word": 0, "sent": 1, "para": 2}[name]
            cq = coords[:, m:, col][:, :, None]                   # [B, Lq, 1]
            ck = coords[:, :, col][:, None, :]                    # [B, 1, klen]
            delta = cq - ck
        delta = torch.where(visible[None], delta, torch.zeros_like(delta))
        n_dist = int(delta.max()) + 1
        q = pre + "attn.hier.%s." % name
        phi = mlp_phi(torch.arange(n_dist, dtype=torch.float64), c["hier_num_freqs"],
                      hier_max_dist(c, name), dtype)
        hid = gelu_erf(linear(phi, P[q + "0.weight"], P[q + "0.bias"], bf))
        b = linear(hid, P[q + "2.weight"], P[q + "2.bias"])       # [n_dist, H] (exact, as mlp's)
        Cl = C[:, li * H:(li + 1) * H]                            # [H, H]
        if bf is not None and bf.product(H, n_dist, H):           # the table C_l b_l^T
            Cl, b = bf16(Cl), bf16(b)
        total = total + torch.einsum("gh,bijh->bgij", Cl, b[delta])
    return total + P[pre + "attn.hier.mix.bias"][None, :, None, None]


def rope_rotate(x, pos):
    """x [B, L, H, dh], pos float64 [L]: rot(x) = [x1 cos - x2 sin, x2 cos + x1 sin]."""
    dh = x.shape[-1]
    half = dh // 2
    ang = pos.to(torch.float64)[:, None] * inv_freq(half, dh)[None, :]
    cos = torch.cos(ang).to(x.dtype)[None, :, None, :]
    sin = torch.sin(ang).to(x.dtype)[None, :, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def xl_R(klen, d, clamp_len, dtype):
    """R[p], p = 0..klen-1, pos[p] = klen-1-p clamped to clamp_len when > 0."""
    pos = torch.arange(klen - 1, -1, -1, dtype=torch.float64)
    if clamp_len > 0:
        pos = pos.clamp(max=float(clamp_len))
    return sinusoid(pos, d, dtype)


# ----------------------------------------------------------------------------
# attention

def attention(P, c, l, h, mem, batch_chunk=None, coords=None, bf=None):
    """Multi-head attention of layer l.  h [B, Lq, d] is the layer input, mem
    [B, m, d] its memory (pre_lnorm's LN of cat is applied here).  Returns the
    attention output after Wo, [B, Lq, d].  batch_chunk bounds the size of the
    (b, H, Lq, klen) score tensors.  coords [B, m+Lq, 3]: the rows' text
    coordinates (hier).  bf: txl's bf16 roundings (Bf16; its kv_next gets this
    layer's keys and values of the rows the memory keeps)."""
    pre = "layers.%d." % l
    B, Lq, d = h.shape
    H, dh = c["n_head"], c["d_head"]
    scheme = c["pos_scheme"]
    m = mem.shape[1]
    klen = m + Lq
    cat = torch.cat([mem, h], dim=1) if m > 0 else h
    if c["pre_lnorm"]:
        cat = layer_norm(cat, P[pre + "attn.ln.weight"], P[pre + "attn.ln.bias"])
    if bf is None:
        heads = linear(cat, P[pre + "attn.qkv.weight"])        # [B, klen, 3*H*dh]
        q = heads[:, m:, 0:H * dh].reshape(B, Lq, H, dh)
        kv = heads[:, :, H * dh:]
    else:  # q of the segment's rows, and k, v of the rows the cache does not hold
        W = P[pre + "attn.qkv.weight"]
        q = linear(cat[:, m:], W[:H * dh], bf=bf).reshape(B, Lq, H, dh)
        M, T = c["mem_len"], c["tgt_len"]
        if scheme == "rope" or M == 0:  # no cache: the whole window
            kv = linear(cat, W[H * dh:], bf=bf)
        else:
            if m == 0:
                parts = []
            elif bf.kv is not None:
                parts = [bf.kv[l]]
            else:  # the cache primed: the memory's rows, a segment's worth at a time
                parts = [linear(cat[:, r0:min(m, r0 + T)], W[H * dh:], bf=bf) for r0 in range(0, m, T)]
            kv = torch.cat(parts + [linear(cat[:, m:], W[H * dh:], bf=bf)], dim=1)
            bf.kv_next.append(kv[:, max(0, klen - M):])
    k = kv[:, :, 0:H * dh].reshape(B, klen, H, dh)
    v = kv[:, :, H * dh:2 * H * dh].reshape(B, klen, H, dh)

    dev = h.device
    ii = torch.arange(Lq, device=dev)[:, None]
    jj = torch.arange(klen, device=dev)[None, :]
    delta = (m + ii) - jj                                        # [Lq, klen]
    visible = jj <= m + ii
    if c.get("same_length"):
        # Dai et al.'s evaluation mask (official mem_transformer.py, dec_attn_mask with
        # mask_shift_len): each query sees the last mem_len keys, its own included
        visible = visible & (jj >= m + ii + 1 - c["mem_len"])
    scale = 1.0 / math.sqrt(dh)

    if scheme == "xl":
        if c["untie_r"]:
            u, vb = P[pre + "attn.r_w_bias"], P[pre + "attn.r_r_bias"]
        else:
            u, vb = P["r_w_bias"], P["r_r_bias"]
        # ablations: each of the four terms (a) q.k, (b) q.rk, (c) u.k, (d) v.rk on or off
        on = {t: float(t in c["xl_terms"]) for t in "abcd"}
        R = xl_R(klen, d, c["clamp_len"], h.dtype)                # [klen, d]
        rk = linear(R, P[pre + "attn.r.weight"], bf=bf).reshape(klen, H, dh)
        # p = Lq-1-i+j; for masked (i, j) it may run past klen-1: clamp (masked anyway)
        pidx = (Lq - 1 - ii + jj).clamp(max=klen - 1)             # [Lq, klen]
    elif scheme == "mlp":
        btab = mlp_bias_table(P, pre, c, klen, h.dtype, bf)      # [klen, H]
        bias = btab[delta.clamp(min=0)].permute(2, 0, 1)          # [H, Lq, klen]
    elif scheme == "alibi":
        slopes = torch.tensor(alibi_slopes(H), dtype=h.dtype, device=dev)
        bias = -slopes[:, None, None] * delta.to(h.dtype)[None]   # [H, Lq, klen]
    elif scheme == "rope":
        q = rope_rotate(q, torch.arange(m, m + Lq, dtype=torch.float64))
        k = rope_rotate(k, torch.arange(0, klen, dtype=torch.float64))
    elif scheme == "hier":
        hbias = hier_bias(P, pre, c, coords, m, Lq, h.dtype, bf)   # [B, H, Lq, klen]
    elif scheme == "fire":
        bias = fire_bias(P, pre, c, m, Lq, bf)                      # [H, Lq, klen]
    elif scheme == "t5":
        T = P["t5.rel_bias"] if c["t5_shared"] else P[pre + "attn.t5.rel_bias"]  # [H, NB]
        bk = t5_bucket(delta.clamp(min=0), c["t5_buckets"], c["t5_max_dist"])
        bias = T[:, bk]                                             # [H, Lq, klen]

    # bf16 on AMX: the products' operands rounded, the scale inside the queries' rounding
    ra = bf is not None and bf.attention
    if ra:
        k, v = bf16(k), bf16(v)
        if scheme == "xl":
            rk = bf16(rk)
    outs = []
    step = B if not batch_chunk else batch_chunk
    for b0 in range(0, B, step):
        sl = slice(b0, min(B, b0 + step))
        qb, kb, vbv = q[sl], k[sl], v[sl]
        nb = qb.shape[0]
        if scheme == "xl" and ra:
            AC = torch.einsum("bihd,bjhd->bhij", bf16(scale * (on["a"] * qb + on["c"] * u)), kb)
            BDraw = torch.einsum("bihd,phd->bhip", bf16(scale * (on["b"] * qb + on["d"] * vb)), rk)
            s = AC + torch.gather(BDraw, 3, pidx.expand(nb, H, Lq, klen))
        elif scheme == "xl":
            AC = torch.einsum("bihd,bjhd->bhij", on["a"] * qb + on["c"] * u, kb)
            BDraw = torch.einsum("bihd,phd->bhip", on["b"] * qb + on["d"] * vb, rk)
            BD = torch.gather(BDraw, 3, pidx.expand(nb, H, Lq, klen))
            s = (AC + BD) * scale
        else:
            if ra:
                s = torch.einsum("bihd,bjhd->bhij", bf16(scale * qb), kb)
            else:
                s = torch.einsum("bihd,bjhd->bhij", qb, kb) * scale
            if scheme in ("mlp", "alibi", "fire", "t5"):
                s = s + bias[None]
            if scheme == "hier":
                s = s + hbias[sl]
        s = s.masked_fill(~visible, float("-inf"))
        a = torch.softmax(s, dim=-1)
        if ra:
            a = bf16(a)
        o = torch.einsum("bhij,bjhd->bihd", a, vbv)
        outs.append(o.reshape(nb, Lq, H * dh))
    o = torch.cat(outs, dim=0) if len(outs) > 1 else outs[0]
    return linear(o, P[pre + "attn.o.weight"], bf=bf)


def feed_forward(P, pre, x, bf=None):
    return linear(torch.relu(linear(x, P[pre + "ff.0.weight"], P[pre + "ff.0.bias"], bf)),
                  P[pre + "ff.3.weight"], P[pre + "ff.3.bias"], bf)


def layer(P, c, l, h, mem, batch_chunk=None, coords=None, bf=None):
    pre = "layers.%d." % l
    out = attention(P, c, l, h, mem, batch_chunk, coords, bf)
    if c["pre_lnorm"]:
        h1 = h + out
        x = layer_norm(h1, P[pre + "ff.ln.weight"], P[pre + "ff.ln.bias"])
        return h1 + feed_forward(P, pre, x, bf)
    h1 = layer_norm(h + out, P[pre + "attn.ln.weight"], P[pre + "attn.ln.bias"])
    return layer_norm(h1 + feed_forward(P, pre, h1, bf), P[pre + "ff.ln.weight"],
                      P[pre + "ff.ln.bias"])


def empty_mems(c, B, dtype, device=None):
    c = model_cfg(c)
    return [torch.zeros(B, 0, c["d_model"], dtype=dtype, device=device) for _ in range(c["n_layer"])]


def adaptive_vocab(P):
    """V of an adaptive model's parameters: its output biases' lengths."""
    return sum(v.shape[0] for k, v in P.items() if k.startswith("crit.out_layers."))


def forward(P, cfg, x, mems=None, batch_chunk=None, coords=None, bf=None):
    """One segment.  x LongTensor [B, Lq]; mems list of N tensors [B, m, d] (or
    None: empty); coords LongTensor [B, m+Lq, 3], the text coordinates of the rows
    [mem; segment] (hier only).  Returns (logits [B, Lq, V], new_mems); an adaptive
    model's "logits" are its log-probabilities (a softmax of either is the model's
    distribution).  bf: a Bf16, txl's bf16 roundings (not of the adaptive softmax);
    its key cache follows the new memory."""
    c = model_cfg(cfg)
    ad = adaptive(c)
    if bf is not None:
        assert not ad, "the bf16 roundings of the adaptive softmax are not modelled"
        bf.kv_next = []
    E = P["word_emb.emb_layers.0.weight" if ad else "word_emb.weight"]
    dtype = E.dtype
    B, Lq = x.shape
    d, M = c["d_model"], c["mem_len"]
    if mems is None:
        mems = empty_mems(c, B, dtype, E.device)
    vocab = adaptive_vocab(P) if ad else E.shape[0]
    h = adaptive_embed(P, c, x, vocab) if ad else E[x] * math.sqrt(d)
    if c["pos_scheme"] == "absolute":
        h = h + sinusoid(torch.arange(Lq, dtype=torch.float64), d, dtype)[None]
    new_mems = []
    for l in range(c["n_layer"]):
        mem = mems[l]
        full = torch.cat([mem, h], dim=1)
        start = max(0, full.shape[1] - M) if M > 0 else full.shape[1]
        new_mems.append(full[:, start:].detach())
        h = layer(P, c, l, h, mem, batch_chunk, coords, bf)
    logits = adaptive_logprobs(P, c, h, vocab) if ad else linear(h, E, P["out.bias"], bf)
    if bf is not None:  # rope's keys depend on the window: no cache (nor without a memory)
        bf.kv = bf.kv_next if c["pos_scheme"] != "rope" and M > 0 else None
    return logits, new_mems


def seg_loss(logits, y):
    """Mean cross-entropy in nats over all targets."""
    V = logits.shape[-1]
    return torch.nn.functional.cross_entropy(logits.reshape(-1, V), y.reshape(-1))


# ----------------------------------------------------------------------------
# optimiser step (as torch.optim + clip_grad_norm_)

def make_optimizer(params_list, train):
    kind = train.get("optimizer", "adam")
    kw = dict(lr=train["lr"], betas=(train["beta1"], train["beta2"]), eps=train["eps"],
              weight_decay=train.get("weight_decay", 0.0))
    if kind == "adam":
        return torch.optim.Adam(params_list, **kw)
    if kind == "adamw":
        return torch.optim.AdamW(params_list, **kw)
    raise ValueError("unknown optimizer %r" % kind)


def clip_and_step(params_list, opt, clip):
    """Global-norm clip (torch.nn.utils.clip_grad_norm_: coef = clip/(norm+1e-6),
    applied only when < 1; clip <= 0 is off), then the optimiser step.
    Returns the pre-clip global gradient norm."""
    norm = torch.sqrt(sum((p.grad.detach() ** 2).sum() for p in params_list))
    if clip > 0:
        torch.nn.utils.clip_grad_norm_(params_list, clip)
    opt.step()
    return float(norm)


# ----------------------------------------------------------------------------
# safetensors (stdlib struct + json; torch for the bytes)

_DT = {"F32": torch.float32, "F64": torch.float64, "I32": torch.int32, "I64": torch.int64,
       "F16": torch.float16, "BF16": torch.bfloat16, "U8": torch.uint8, "I8": torch.int8,
       "I16": torch.int16}
_DT_INV = {v: k for k, v in _DT.items()}


def save_safetensors(path, tensors, metadata=None):
    """tensors: ordered dict name -> torch tensor (written in dict order)."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    off = 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        raw = t.numpy().tobytes() if t.numel() else b""
        if t.numel() and t.element_size() > 1 and struct.pack("=H", 1) != struct.pack("<H", 1):
            raise RuntimeError("big-endian host not supported")
        header[name] = {"dtype": _DT_INV[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((8 - len(hj) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)


def read_maybe_gzip(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw


def load_safetensors(path, skip_prefixes=()):
    """Returns (ordered dict name -> tensor, metadata dict).  Plain or gzip'd."""
    raw = read_maybe_gzip(path)
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    base = 8 + n
    out = {}
    for name, info in header.items():
        if any(name.startswith(s) for s in skip_prefixes):
            continue
        b, e = info["data_offsets"]
        dt = _DT[info["dtype"]]
        shape = info["shape"]
        buf = bytearray(raw[base + b:base + e])
        if len(buf) == 0:
            t = torch.zeros(shape, dtype=dt)
        else:
            t = torch.frombuffer(buf, dtype=dt).reshape(shape).clone()
        out[name] = t
    return out, meta
