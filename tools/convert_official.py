#!/usr/bin/env python3
"""Convert a model trained with the official Transformer-XL PyTorch code into weights that
`txl import` accepts, plus a matching txl config.

    python3 tools/convert_official.py work_dir/model.pt -o official.safetensors \\
        [--vocab vocab.txt | --vocab cache.pt] [--official-dir transformer-xl/pytorch] \\
        [--tgt-len 512 --mem-len 512 --clamp-len 0 --pre-lnorm]
    txl import official.safetensors -c official.yaml -o official.safetensors.gz
    txl eval official.safetensors.gz --data enwik8_test_without_newlines.txt

The source is kimiyoung/transformer-xl, pytorch/mem_transformer.py (MemTransformerLM) with
the settings txl implements (doc/design.md, "The model"): attn_type 0 (relative positional attention
with the u, v biases), tie_weight (output layer = embedding), ext_len 0, and the full softmax
or the adaptive softmax and input (cutoffs, div_val, d_embed, tie_projs). Other settings are
refused with a message. MODEL.pt may be

  - the whole pickled model, as the official train.py saves it (torch.save(model, f)):
    unpickling needs mem_transformer.py importable (--official-dir DIR puts DIR on
    sys.path) and runs code from the file, so only load files you trust. tgt_len, mem_len,
    clamp_len, pre_lnorm, dropout and dropatt are then read from the model;
  - a state_dict (torch.save(model.state_dict(), f)), or a dict holding one under
    'model_state', 'state_dict' or 'model'; give the lengths and --pre-lnorm (post-LN is
    the default, as in the official scripts) on the command line, and --cutoffs for an
    adaptive model with div_val 1 (its one table does not show where the clusters start).

The other way, --to-official: a txl checkpoint (or `txl export` weights) -> a state_dict
that MemTransformerLM(...).load_state_dict() takes (torch.save; needs torch), every tied
tensor under both its names, as official's state_dict() writes them:

    python3 tools/convert_official.py --to-official CKPT -o model_state.pt

Tensor names (official -> txl; shapes are PyTorch's [out, in] on both sides, so no tensor
is transposed, only renamed):

  word_emb.emb_layers.0.weight [V, d]   -> word_emb.weight  AdaptiveEmbedding with div_val 1
        holds one nn.Embedding; it scales by sqrt(d_proj) = sqrt(d) like txl (doc/design.md, "The
        model")
  crit.out_layers.0.weight [V, d]       -> (dropped) tie_weight makes it the embedding
        itself; checked to be equal, since txl's output layer is always tied
  crit.out_layers.0.bias [V]            -> out.bias         the softmax bias b_out
  pos_emb.inv_freq [d/2]                -> (dropped) the buffer 1/10000^(2t/d): txl computes
        the same sinusoids (sin half first, positions klen-1 .. 0); checked
  r_w_bias [H, dh]                      -> r_w_bias         u, shared by all layers: the
        official code keeps it on the top model and passes it to every layer
  r_r_bias [H, dh]                      -> r_r_bias         v, likewise
  layers.{l}.dec_attn.r_w_bias|r_r_bias -> layers.{l}.attn.r_w_bias|r_r_bias  per-layer u, v
        (code with untie_r, e.g. the HuggingFace port): the config gets untie_r: true
  layers.{l}.dec_attn.qkv_net.weight [3*H*dh, d] -> layers.{l}.attn.qkv.weight
        Linear without bias; forward() does torch.chunk(w_heads, 3, -1) -> q, k, v and views
        each as [.., H, dh]: the same row order (q, k, v; head-major) as txl
  layers.{l}.dec_attn.r_net.weight [H*dh, d]    -> layers.{l}.attn.r.weight  W_R, no bias
  layers.{l}.dec_attn.o_net.weight [d, H*dh]    -> layers.{l}.attn.o.weight  no bias
  layers.{l}.dec_attn.layer_norm.weight|bias    -> layers.{l}.attn.ln.weight|bias
        LN after the residual (post-LN) or of the input (pre_lnorm), as in txl
  layers.{l}.pos_ff.CoreNet.0.weight|bias [di, d] -> layers.{l}.ff.0.weight|bias
        CoreNet = Sequential(Linear, ReLU, Dropout, Linear, Dropout): indices 0 and 3
  layers.{l}.pos_ff.CoreNet.3.weight|bias [d, di] -> layers.{l}.ff.3.weight|bias
  layers.{l}.pos_ff.layer_norm.weight|bias      -> layers.{l}.ff.ln.weight|bias

The adaptive softmax and input (doc/design.md, "The model"): txl keeps official's names
for them, so they are copied as they are, but for the tied ones:

  word_emb.emb_layers.{i}.weight  -> the same  (div_val 1: only .0, [V, d_embed]); the
        cutoffs and div_val follow from the shapes (div_val 1: from --cutoffs or the model)
  word_emb.emb_projs.{i}          -> the same  the input projections [d_model, d_i]
  crit.cluster_weight|bias        -> the same  the head's cluster logits, in official's order
  crit.out_layers.{i}.weight      -> (dropped) tie_weight: the embedding, checked equal
  crit.out_layers.{i}.bias        -> the same
  crit.out_projs.{i}              -> the same, but for the tails when every tail's is the
        input's (official's tie_projs [False, True, ...]: txl's model.tie_projs, one bool
        for all tails); the head's is always kept (a tied one as a copy), and so are the
        tails' when only some are tied (copies: txl then has tie_projs false, and training
        would untie them)

Any other tensor (r_emb/r_bias of attn_type 1-3, ...) is an error.

Vocabulary. txl's tokens are bytes (V = 256, id = byte value); the official corpus reader
numbers its symbols by frequency. For enwik8, prep_enwik8.py writes each byte as its
decimal value, so the symbols are "0".."255" (204 of them). --vocab gives the official
order: a text file with one symbol per line, line i = id i (a decimal byte value, or one
character), or the official corpus cache (cache.pt, needs data_utils.py on the path,
corpus.vocab.idx2sym). The rows of the embedding and the bias are then moved to their byte
values; bytes the vocabulary lacks get a zero embedding row and an output bias of
--absent-bias (default -30: probability about e^-30 of the others' scale). Without --vocab
the model must have V = 256 and id = byte. Note that the official enwik8 pipeline drops the
newlines (prep_enwik8.py writes byte 10 as a line break, which the reader strips), so its
numbers are comparable with `txl eval` on the data without newlines. text8's symbols are
letters and '_' for space: pass --underscore-is-space.

Needs torch (to read MODEL.pt) and numpy. Writes OUT (plain safetensors, F32) and the
config (--config-out, default OUT with .yaml). Tested by tools/test_convert_official.py on
a synthetic state_dict with the official names and shapes against a transcription of the
official forward pass.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_reader  # noqa: E402  (stdlib-only safetensors writer next to this file)


class ConvertError(Exception):
    pass


def torch_load(path, official_dir=None):
    """torch.load of a file of the official code (a pickled model or corpus needs its
    modules importable: official_dir goes on sys.path)."""
    try:
        import torch
    except ImportError:
        raise ConvertError("reading a .pt file needs torch (pip install torch, or "
                           "apt-get install python3-torch)") from None
    if official_dir:
        sys.path.insert(0, official_dir)
    try:
        try:
            return torch.load(path, map_location="cpu", weights_only=False)
        except TypeError:  # torch < 1.13 has no weights_only
            return torch.load(path, map_location="cpu")
    except (ModuleNotFoundError, AttributeError) as e:
        raise ConvertError(f"{path}: unpickling needs the official code ({e}); pass "
                           f"--official-dir transformer-xl/pytorch") from None
    except OSError as e:
        raise ConvertError(f"{path}: {e}") from None


def load_official(path, official_dir=None):
    """MODEL.pt -> (state_dict of numpy float arrays, hyperparameters known from the model)."""
    obj = torch_load(path, official_dir)
    hp = {}
    if hasattr(obj, "state_dict") and callable(obj.state_dict):
        for k in ("tgt_len", "mem_len", "ext_len", "clamp_len", "same_length", "attn_type",
                  "n_layer", "n_head", "d_head", "d_model", "d_embed"):
            if hasattr(obj, k):
                hp[k] = getattr(obj, k)
        crit = getattr(obj, "crit", None)
        if crit is not None and hasattr(crit, "cutoffs"):  # cutoffs + [n_token]
            hp["cutoffs"] = [int(c) for c in crit.cutoffs[:-1]]
        try:
            hp["pre_lnorm"] = bool(obj.layers[0].dec_attn.pre_lnorm)
            hp["dropout"] = float(obj.drop.p)
            hp["dropatt"] = float(obj.layers[0].dec_attn.dropatt.p)
        except (AttributeError, IndexError):
            pass
        sd = obj.state_dict()
    elif isinstance(obj, dict):
        sd = obj
        for k in ("model_state", "state_dict", "model"):
            if isinstance(obj.get(k), dict):
                sd = obj[k]
                break
    else:
        raise ConvertError(f"{path}: neither a model nor a state_dict ({type(obj).__name__})")
    out = {}
    for k, v in sd.items():
        if hasattr(v, "detach"):
            out[k] = v.detach().cpu().double().numpy()
    return out, hp


def load_vocab(path, official_dir=None, underscore_is_space=False):
    """-> list: byte value of each official id."""
    if path.endswith(".pt"):
        corpus = torch_load(path, official_dir)
        if not hasattr(corpus, "vocab"):
            raise ConvertError(f"{path}: not the official corpus cache (no .vocab)")
        symbols = list(corpus.vocab.idx2sym)
    else:
        with open(path, encoding="utf-8") as f:
            symbols = [line.rstrip("\n") for line in f]
        while symbols and symbols[-1] == "":
            symbols.pop()
    decimal = bool(symbols) and all(s.isdigit() for s in symbols)  # enwik8: "60", "109", ..
    out = []
    for i, s in enumerate(symbols):
        if underscore_is_space and s == "_":
            s = " "
        if decimal:
            b = int(s)
        elif len(s) == 1 and ord(s) < 256:
            b = ord(s)
        else:
            raise ConvertError(f"{path}: symbol {i} '{s}' is not a byte (expected decimal "
                               f"byte values, as in enwik8, or single characters)")
        if not 0 <= b <= 255:
            raise ConvertError(f"{path}: symbol {i} '{s}' is not a byte value 0..255")
        if b in out:
            raise ConvertError(f"{path}: byte {b} appears twice (symbol {i} '{s}')")
        out.append(b)
    return out


def is_adaptive(sd):
    """official's adaptive softmax or input: more than one table, cluster logits, or
    projections"""
    return any(k.startswith(("crit.cluster_", "word_emb.emb_projs.", "crit.out_projs."))
               for k in sd) or "word_emb.emb_layers.1.weight" in sd


LAYER_RENAME = [  # per layer: official suffix -> txl suffix (see the module docstring)
    ("dec_attn.qkv_net.weight", "attn.qkv.weight"),
    ("dec_attn.r_net.weight", "attn.r.weight"),
    ("dec_attn.o_net.weight", "attn.o.weight"),
    ("dec_attn.layer_norm.weight", "attn.ln.weight"),
    ("dec_attn.layer_norm.bias", "attn.ln.bias"),
    ("pos_ff.CoreNet.0.weight", "ff.0.weight"),
    ("pos_ff.CoreNet.0.bias", "ff.0.bias"),
    ("pos_ff.CoreNet.3.weight", "ff.3.weight"),
    ("pos_ff.CoreNet.3.bias", "ff.3.bias"),
    ("pos_ff.layer_norm.weight", "ff.ln.weight"),
    ("pos_ff.layer_norm.bias", "ff.ln.bias"),
]
UNTIE_RENAME = [("dec_attn.r_w_bias", "attn.r_w_bias"), ("dec_attn.r_r_bias", "attn.r_r_bias")]


def convert_adaptive(sd, cutoffs=None):
    """Takes official's adaptive tensors out of sd -> (txl tensors, facts: cutoffs, div_val,
    d_embed, tie_projs, V). The output weights must be the embeddings (tie_weight)."""
    import numpy as np
    tables = []
    while f"word_emb.emb_layers.{len(tables)}.weight" in sd:
        tables.append(sd.pop(f"word_emb.emb_layers.{len(tables)}.weight"))
    if not tables:
        raise ConvertError("missing tensor 'word_emb.emb_layers.0.weight'")
    d_embed = tables[0].shape[1]
    T = sd["crit.cluster_weight"].shape[0] if "crit.cluster_weight" in sd else 0
    if len(tables) > 1:  # div_val > 1: a table per cluster, its rows the cluster's tokens
        if len(tables) != T + 1:
            raise ConvertError(f"{len(tables)} embedding tables but {T} cluster logits "
                               f"(crit.cluster_weight): expected one table per cluster")
        div = d_embed // tables[1].shape[1]
        for i, e in enumerate(tables):
            if div < 2 or e.shape[1] != d_embed // div ** i:
                raise ConvertError(f"word_emb.emb_layers.{i}.weight has width {e.shape[1]}, "
                                   f"not d_embed / div_val^{i} ({d_embed} / {div}^{i})")
        ends = list(np.cumsum([e.shape[0] for e in tables]))
        if cutoffs is not None and list(cutoffs) != [int(x) for x in ends[:-1]]:
            raise ConvertError(f"--cutoffs {list(cutoffs)} disagree with the tables' rows "
                               f"(cutoffs {[int(x) for x in ends[:-1]]})")
        cutoffs, V = [int(x) for x in ends[:-1]], int(ends[-1])
    else:
        div, V = 1, tables[0].shape[0]
        cutoffs = list(cutoffs or [])
        if len(cutoffs) != T:
            raise ConvertError(f"an adaptive model with one table (div_val 1) and {T} cluster "
                               f"logits: give its {T} cutoffs (--cutoffs, official's "
                               f"[20000, 40000, 200000] for WikiText-103), found {cutoffs}")
    t = {}
    for i, e in enumerate(tables):
        w = sd.pop(f"crit.out_layers.{i}.weight", None)
        if w is not None and not np.array_equal(w, e):
            raise ConvertError(f"crit.out_layers.{i}.weight differs from word_emb.emb_layers."
                               f"{i}.weight: the model was trained with tie_weight off; txl "
                               f"ties them")
        if f"crit.out_layers.{i}.bias" not in sd:
            raise ConvertError(f"missing tensor 'crit.out_layers.{i}.bias'")
        t[f"word_emb.emb_layers.{i}.weight"] = e
    pin = []
    for i in range(len(tables)):
        if f"word_emb.emb_projs.{i}" in sd:
            pin.append(sd.pop(f"word_emb.emb_projs.{i}"))
            t[f"word_emb.emb_projs.{i}"] = pin[-1]
    if T > 0:
        t["crit.cluster_weight"] = sd.pop("crit.cluster_weight")
        t["crit.cluster_bias"] = sd.pop("crit.cluster_bias")
    for i in range(len(tables)):
        t[f"crit.out_layers.{i}.bias"] = sd.pop(f"crit.out_layers.{i}.bias")
    qout = {i: sd.pop(f"crit.out_projs.{i}") for i in range(T + 1) if f"crit.out_projs.{i}" in sd}
    twin = lambda i: pin[0 if div == 1 else i] if pin else None
    tied = [i for i in range(1, T + 1) if i in qout and twin(i) is not None and
            np.array_equal(qout[i], twin(i))]
    tie = T > 0 and len(tied) == T
    for i, q in sorted(qout.items()):
        if not (tie and i > 0):
            t[f"crit.out_projs.{i}"] = q
    return t, {"cutoffs": cutoffs, "div_val": div, "d_embed": d_embed, "tie_projs": tie}, V


def check_adaptive_width(t, ad, d):
    """The projections exist where txl has them: every cluster's with div_val > 1, P_0 (and
    every Q_i) with div_val 1 when d_embed != d_model."""
    need = ad["div_val"] > 1 or ad["d_embed"] != d
    n = len(ad["cutoffs"]) + 1
    tables = n if ad["div_val"] > 1 else 1
    for i in range(tables):
        if need != (f"word_emb.emb_projs.{i}" in t):
            raise ConvertError(f"word_emb.emb_projs.{i}: expected {'a' if need else 'no'} "
                               f"projection (div_val {ad['div_val']}, d_embed {ad['d_embed']}, "
                               f"d_model {d})")
    for i in range(n):
        has = f"crit.out_projs.{i}" in t or (ad["tie_projs"] and i > 0)
        if need != has:
            raise ConvertError(f"crit.out_projs.{i}: expected {'a' if need else 'no'} "
                               f"projection (div_val {ad['div_val']}, d_embed {ad['d_embed']}, "
                               f"d_model {d})")


def to_official(tensors, cfg):
    """txl's tensors (a checkpoint's or txl export's, numpy arrays) and its model config
    -> official MemTransformerLM's state_dict names, each tied tensor under both names."""
    import numpy as np
    sd = {}
    m = cfg["model"]
    d = m["d_model"]
    for k, v in tensors.items():
        if k.startswith(("optim.", "state.")) or k == "vocab":
            continue
        if k == "word_emb.weight":
            sd["word_emb.emb_layers.0.weight"] = sd["crit.out_layers.0.weight"] = v
        elif k == "out.bias":
            sd["crit.out_layers.0.bias"] = v
        elif k.startswith("word_emb.emb_layers."):
            i = int(k.split(".")[2])
            sd[k] = sd[f"crit.out_layers.{i}.weight"] = v
        elif k.startswith(("word_emb.", "crit.")) or k in ("r_w_bias", "r_r_bias"):
            sd[k] = v
        elif k.startswith("layers."):
            l, rest = k.split(".", 2)[1:]
            back = {b: a for a, b in LAYER_RENAME + UNTIE_RENAME}
            if rest not in back:
                raise ConvertError(f"tensor '{k}': official Transformer-XL has no place for it "
                                   f"(pos_scheme xl only)")
            sd[f"layers.{l}.{back[rest]}"] = v
        else:
            raise ConvertError(f"tensor '{k}': official Transformer-XL has no place for it")
    T = len(m.get("cutoffs") or [])
    if m.get("tie_projs") and T:
        div = max(1, m.get("div_val", 1))
        for i in range(1, T + 1):
            src = f"word_emb.emb_projs.{0 if div == 1 else i}"
            if src in sd:
                sd[f"crit.out_projs.{i}"] = sd[src]
    sd["pos_emb.inv_freq"] = (1 / (10000 ** (np.arange(0.0, d, 2.0) / d))).astype("<f4")
    return sd


def convert(sd, vocab=None, absent_bias=-30.0, cutoffs=None, dtype="<f4"):
    """Official state_dict (numpy arrays) -> (txl tensors {name: float32 array, or dtype},
    model config facts derived from the shapes). Raises ConvertError naming the offending
    tensors."""
    import numpy as np
    sd = dict(sd)
    take = sd.pop

    def need(name):
        if name not in sd:
            raise ConvertError(f"missing tensor '{name}' (attn_type 0 and tied weights "
                               f"expected)")
        return take(name)

    d = None
    if is_adaptive(sd):
        t, ad, V = convert_adaptive(sd, cutoffs)
    else:
        ad = None
        emb = need("word_emb.emb_layers.0.weight")
        V, d = emb.shape
        out_w = take("crit.out_layers.0.weight", None)
        if out_w is not None and not np.array_equal(out_w, emb):
            raise ConvertError("crit.out_layers.0.weight differs from word_emb.emb_layers.0."
                               "weight: the model was trained with tie_weight off; txl ties them")
        bias = need("crit.out_layers.0.bias")
        t = {}
    if d is None:  # adaptive: d_model from the layers
        if "layers.0.dec_attn.qkv_net.weight" not in sd:
            raise ConvertError("no layers.0.dec_attn.qkv_net.weight: not a MemTransformerLM "
                               "with attn_type 0")
        d = sd["layers.0.dec_attn.qkv_net.weight"].shape[1]
        check_adaptive_width(t, ad, d)
    inv_freq = take("pos_emb.inv_freq", None)
    if inv_freq is not None:
        want = 1.0 / (10000 ** (np.arange(0.0, d, 2.0) / d))
        if inv_freq.shape != want.shape or not np.allclose(inv_freq, want, rtol=1e-6):
            raise ConvertError("pos_emb.inv_freq is not 1/10000^(2t/d_model): another "
                               "positional embedding than Transformer-XL's")
    n_layer = 0
    while f"layers.{n_layer}.dec_attn.qkv_net.weight" in sd:
        n_layer += 1
    if n_layer == 0:
        raise ConvertError("no layers.0.dec_attn.qkv_net.weight: not a MemTransformerLM "
                           "with attn_type 0")
    untie = "r_w_bias" not in sd and "layers.0.dec_attn.r_w_bias" in sd
    if untie:
        H, dh = sd["layers.0.dec_attn.r_w_bias"].shape
    else:
        t["r_w_bias"] = need("r_w_bias")  # u [H, dh]
        t["r_r_bias"] = need("r_r_bias")  # v [H, dh]
        H, dh = t["r_w_bias"].shape
    rename = LAYER_RENAME + (UNTIE_RENAME if untie else [])
    for l in range(n_layer):
        for a, b in rename:
            t[f"layers.{l}.{b}"] = need(f"layers.{l}.{a}")
    di = t["layers.0.ff.0.weight"].shape[0]
    if sd:
        raise ConvertError("tensors txl has no place for: " + ", ".join(sorted(sd)) +
                           " (attn_type 1-3 and untied output layers are not supported)")
    # shapes, checked here so that the message speaks the official names' language
    expect = {"attn.qkv.weight": (3 * H * dh, d), "attn.r.weight": (H * dh, d),
              "attn.o.weight": (d, H * dh), "ff.0.weight": (di, d), "ff.3.weight": (d, di)}
    for l in range(n_layer):
        for k, s in expect.items():
            if t[f"layers.{l}.{k}"].shape != s:
                raise ConvertError(f"layers.{l}.{k}: shape {t[f'layers.{l}.{k}'].shape}, "
                                   f"expected {s} (d_model {d}, n_head {H}, d_head {dh})")
    # vocabulary: official id -> byte value
    if ad is not None:
        if vocab is not None:
            raise ConvertError("--vocab maps byte symbols; an adaptive model's ids are taken "
                               "as they are (the vocabulary's order, e.g. txl's word tokenizer)")
    elif vocab is None:
        if V != 256:
            raise ConvertError(f"the model has {V} tokens, txl's byte vocabulary 256: pass "
                               f"--vocab (the official symbol of each id) to map them to bytes")
        t["word_emb.weight"], t["out.bias"] = emb, bias
    else:
        if len(vocab) != V:
            raise ConvertError(f"--vocab has {len(vocab)} symbols, the model {V} tokens")
        E = np.zeros((256, d))
        b = np.full(256, float(absent_bias))
        E[vocab] = emb
        b[vocab] = bias
        t["word_emb.weight"], t["out.bias"] = E, b
    facts = {"n_layer": n_layer, "d_model": d, "n_head": H, "d_head": dh, "d_inner": di,
             "untie_r": untie, "absent_bytes": 256 - (len(vocab) if vocab else 256), "V": V}
    if ad is not None:
        facts.update(ad)
    # the order of doc/design.md, "Checkpoints": the model-wide tensors, then the layers
    wide = [n for n in t if not n.startswith("layers.")]
    order = ["word_emb.weight", "out.bias"] + [n for n in wide if n not in ("r_w_bias", "r_r_bias")]
    order += ["r_w_bias", "r_r_bias"]
    names = [n for n in order if n in t] + [n for n in t if n not in order]
    return {n: np.ascontiguousarray(t[n], dtype=dtype) for n in names}, facts


def config_yaml(facts, hp, args):
    def pick(key, default):
        v = getattr(args, key)
        return v if v is not None else hp.get(key, default)
    clamp = pick("clamp_len", 0)
    m = {
        "n_layer": facts["n_layer"], "d_model": facts["d_model"], "n_head": facts["n_head"],
        "d_head": facts["d_head"], "d_inner": facts["d_inner"],
        "tgt_len": pick("tgt_len", 512), "mem_len": pick("mem_len", 512),
        "pre_lnorm": "true" if (args.pre_lnorm or hp.get("pre_lnorm")) else "false",
        "dropout": hp.get("dropout", 0.1), "dropatt": hp.get("dropatt", 0.0),
        "pos_scheme": "xl", "clamp_len": clamp if clamp > 0 else 0,
        "untie_r": "true" if facts["untie_r"] else "false",
    }
    if "cutoffs" in facts:  # the adaptive softmax and input
        m.update({"cutoffs": "[" + ", ".join(str(c) for c in facts["cutoffs"]) + "]",
                  "div_val": facts["div_val"], "d_embed": facts["d_embed"],
                  "tie_projs": "true" if facts["tie_projs"] else "false"})
    lines = [f"# converted by tools/convert_official.py from {args.model}",
             "# (official Transformer-XL, attn_type 0, tied weights; lengths: the evaluation",
             "# defaults of txl eval, change them freely)", "model:"]
    lines += [f"  {k}: {v}" for k, v in m.items()]
    if "cutoffs" in facts:
        lines += [f"# the adaptive model has {facts['V']} tokens, numbered as the official",
                  "# vocabulary numbers them: the data section must give txl that vocabulary"]
    lines += ["data:", f"  train: {args.data_train}  # used by txl eval --split and txl train",
              "train:", f"  out_dir: {args.out_dir}", ""]
    return "\n".join(lines)


def main_to_official(args):
    """--to-official: a txl checkpoint -> official's state_dict (torch.save)."""
    try:
        import torch
    except ImportError:
        print("convert_official: --to-official needs torch (apt-get install python3-torch)",
              file=sys.stderr)
        return 2
    try:
        tensors, meta = st_reader.load(args.model)
        cfg = st_reader.config(meta)
        if cfg["model"].get("pos_scheme", "xl") != "xl":
            raise ConvertError(f"pos_scheme {cfg['model']['pos_scheme']}: official "
                               f"Transformer-XL has xl only")
        sd = to_official(st_reader.to_numpy(tensors), cfg)
    except (ConvertError, OSError, ValueError, KeyError) as e:
        print(f"convert_official: {args.model}: {e}", file=sys.stderr)
        return 2
    torch.save({k: torch.from_numpy(v.copy()) for k, v in sd.items()}, args.output)
    print(f"convert_official: {args.model} -> {args.output} ({len(sd)} state_dict entries)",
          file=sys.stderr)
    return 0


def main(argv):
    ap = argparse.ArgumentParser(
        description="Official Transformer-XL PyTorch model -> safetensors for `txl import`.",
        epilog="See the module docstring (head of this file) for the tensor mapping.")
    ap.add_argument("model", help="model.pt of the official train.py, or a state_dict")
    ap.add_argument("-o", "--output", required=True, help="OUT.safetensors (plain)")
    ap.add_argument("--config-out", help="the txl YAML config (default: OUT with .yaml)")
    ap.add_argument("--vocab", help="official vocabulary: text file (one symbol per line, in "
                    "id order) or corpus cache.pt")
    ap.add_argument("--underscore-is-space", action="store_true", help="text8: '_' is ' '")
    ap.add_argument("--absent-bias", type=float, default=-30.0,
                    help="output bias of bytes the vocabulary lacks (default -30)")
    ap.add_argument("--official-dir", help="directory of mem_transformer.py / data_utils.py")
    ap.add_argument("--cutoffs", type=lambda x: [int(c) for c in x.split(",") if c],
                    help="an adaptive model's cutoffs, e.g. 20000,40000,200000 (a state_dict "
                    "with div_val 1; a whole model and div_val > 1 show them)")
    ap.add_argument("--to-official", action="store_true", help="the other way: MODEL is a "
                    "txl checkpoint or txl export's weights, OUT the state_dict of official's "
                    "MemTransformerLM (torch.save)")
    ap.add_argument("--tgt-len", type=int, help="default: the model's, else 512")
    ap.add_argument("--mem-len", type=int, help="default: the model's, else 512")
    ap.add_argument("--clamp-len", type=int, help="default: the model's, else 0 (off)")
    ap.add_argument("--pre-lnorm", action="store_true", help="the model was trained with "
                    "--pre_lnorm (read from a whole pickled model)")
    ap.add_argument("--data-train", default="data/enwik8.txt",
                    help="data.train of the config (default data/enwik8.txt)")
    ap.add_argument("--out-dir", default="runs/official", help="train.out_dir of the config")
    args = ap.parse_args(argv)
    if args.to_official:
        return main_to_official(args)
    try:
        sd, hp = load_official(args.model, args.official_dir)
        if hp.get("attn_type", 0) != 0:
            raise ConvertError(f"attn_type {hp['attn_type']}: only 0 (Transformer-XL's "
                               f"relative attention) is supported")
        if hp.get("ext_len", 0):
            print(f"convert_official: note: ext_len {hp['ext_len']} is ignored (txl has none)",
                  file=sys.stderr)
        vocab = (load_vocab(args.vocab, args.official_dir, args.underscore_is_space)
                 if args.vocab else None)
        tensors, facts = convert(sd, vocab, args.absent_bias,
                                 args.cutoffs if args.cutoffs is not None else hp.get("cutoffs"))
    except ConvertError as e:
        print(f"convert_official: {e}", file=sys.stderr)
        return 2
    st_reader.save(args.output, {k: ("F32", list(v.shape), v.tobytes())
                                 for k, v in tensors.items()},
                   {"source": os.path.basename(args.model),
                    "converted_by": "txl tools/convert_official.py"})
    cfg_path = args.config_out or (args.output[:-len(".safetensors")] if
                                   args.output.endswith(".safetensors") else args.output) + ".yaml"
    with open(cfg_path, "w") as f:
        f.write(config_yaml(facts, hp, args))
    n = sum(v.size for v in tensors.values())
    print(f"convert_official: {args.model} -> {args.output} ({len(tensors)} tensors, {n} "
          f"values; {facts['n_layer']} layers, d_model {facts['d_model']}, "
          f"{facts['n_head']} heads x {facts['d_head']}"
          + (f"; {facts['absent_bytes']} bytes absent from the vocabulary" if vocab else "")
          + f") and {cfg_path}\nnext: txl import {args.output} -c {cfg_path} -o "
          f"{os.path.splitext(args.output)[0]}.safetensors.gz", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
