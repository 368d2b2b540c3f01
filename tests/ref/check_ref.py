#!/usr/bin/python3
"""Self-checks of the reference (tests/ref/txl_ref.py) and of the fixtures.

usage: /usr/bin/python3 tests/ref/check_ref.py [FIXTURE_DIR]

(a) autograd gradients vs central finite differences (float64), memory held fixed
(b) memory consistency: segments with mem_len >= total == one long segment
(c) a second, naive per-(i, j) formula for every positional scheme
(d) the fixtures on disk re-read and recomputed (if FIXTURE_DIR is given)
(e) the optimiser step of torch.optim vs the written-out Adam/AdamW formulas
(f) the adaptive softmax against official's formula written out per token
(g) sensitivity: plausible implementation slips move the logits far more than float32 round-off
Exits non-zero on failure.
"""

import math
import os
import platform
import sys

# the OpenBLAS kernel the fixtures are written with (gen_fixtures.py), before torch loads it
if platform.machine() in ("x86_64", "AMD64"):
    os.environ["OPENBLAS_CORETYPE"] = "Prescott"

import torch  # noqa: E402

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import txl_ref as ref  # noqa: E402
import st_reader  # noqa: E402  (the config metadata: YAML, or JSON of older checkpoints)
import gen_fixtures as gf  # noqa: E402

FAIL = []


def check(cond, msg):
    print(("ok   " if cond else "FAIL ") + msg)
    if not cond:
        FAIL.append(msg)


def case(name):
    for n, mover, lens in gf.CASES:
        if n == name:
            m = dict(gf.BASE_MODEL)
            m.update(mover)
            return m, lens
    raise KeyError(name)


def case_data(name, model=None):
    """(model without its data, vocab, lens, segments [(x, y, coords)]) of case `name`, its
    streams as gen_fixtures.gen_case makes them; coords is the hier cases' window
    [memory; segment] of text coordinates (else None), for `model` (default the case's) and
    its memory length."""
    base, lens = case(name)
    model = dict(model or base)
    data = model.pop("data", None)
    streams, coords = gf.case_streams(name, model, data, sum(lens) + 1)
    M = model["mem_len"]
    segs, start = [], 0
    for x, y in gf.split_segments(streams, lens):
        m = min(start, M)
        win = coords[:, start - m:start + x.shape[1]] if model["pos_scheme"] == "hier" else None
        segs.append((x, y, win))
        start += x.shape[1]
    return model, 256 + (len(data["anchors"]) if data else 0), lens, segs


# ---------------------------------------------------------------------------- (a)

def fd_check(name, n_entries=300, eps=1e-3, seed=0):
    model, vocab, lens, segs = case_data(name)
    p32 = ref.random_params(model, gf.seed_of(name), vocab=vocab)
    P = gf.leaf_params(p32)
    # memories of the unperturbed parameters, held fixed (they are constants in the
    # gradient definition)
    mems_in = []
    mems = None
    total = 0.0
    for x, y, co in segs:
        mems_in.append(mems)
        logits, mems = ref.forward(P, model, x, mems, coords=co)
        total = total + ref.seg_loss(logits, y)
    total.backward()

    def objective(Q):
        with torch.no_grad():
            return sum(float(ref.seg_loss(ref.forward(Q, model, x, mm, coords=co)[0], y))
                       for (x, y, co), mm in zip(segs, mems_in))

    Q = {k: v.detach().clone() for k, v in P.items()}
    names = [k for k, _ in ref.param_shapes(model, vocab)]
    sizes = [Q[k].numel() for k in names]
    g = torch.Generator().manual_seed(seed)
    # every tensor at least twice, the rest at random weighted by size
    picks = [(k, int(torch.randint(0, Q[k].numel(), (1,), generator=g))) for k in names for _ in range(2)]
    tot = sum(sizes)
    while len(picks) < n_entries:
        r = int(torch.randint(0, tot, (1,), generator=g))
        for k, s in zip(names, sizes):
            if r < s:
                picks.append((k, r))
                break
            r -= s
    def fd_at(flat, idx, h):
        old = float(flat[idx])
        vals = []
        for dlt in (h, -h, 2 * h, -2 * h):
            flat[idx] = old + dlt
            vals.append(objective(Q))
        flat[idx] = old
        fp, fm, fpp, fmm = vals
        return (8 * (fp - fm) - (fpp - fmm)) / (12 * h)    # 4th-order central difference

    max_rel, max_abs, worst, kinks = 0.0, 0.0, None, 0
    num2 = den2 = 0.0
    for k, idx in picks:
        flat = Q[k].view(-1)
        fd = fd_at(flat, idx, eps)
        fd2 = fd_at(flat, idx, eps / 2)
        an = float(P[k].grad.view(-1)[idx])
        if abs(fd - fd2) > 1e-6 * max(abs(fd), 1e-3):
            kinks += 1       # a ReLU kink inside [-2eps, 2eps]: FD not meaningful here
            continue
        ae = abs(fd - an)
        num2 += ae * ae
        den2 += an * an
        max_abs = max(max_abs, ae)
        if abs(an) >= 1e-4:
            rel = ae / abs(an)
            if rel > max_rel:
                max_rel, worst = rel, (k, idx, an, fd)
    normrel = math.sqrt(num2 / den2)
    check(max_rel < 1e-6 and normrel < 1e-7,
          "FD %-15s %d entries (%d skipped at ReLU kinks): max rel err %.2e (|g|>=1e-4), "
          "normwise rel err %.2e, max abs err %.2e"
          % (name, len(picks) - kinks, kinks, max_rel, normrel, max_abs))
    return max_rel


# ---------------------------------------------------------------------------- (b)

def consistency_check(name, pre_lnorm=None):
    model, lens = case(name)
    model = dict(model)
    model["clamp_len"] = 0
    if pre_lnorm is not None:
        model["pre_lnorm"] = pre_lnorm
    total = sum(lens)
    model["mem_len"] = total + 2
    model, vocab, lens, segs = case_data(name, model)
    P = {k: v.double() for k, v in ref.random_params(model, gf.seed_of(name), vocab=vocab).items()}
    with torch.no_grad():
        mems = None
        outs = []
        for x, y, co in segs:
            lg, mems = ref.forward(P, model, x, mems, coords=co)
            outs.append(lg)
        seg_logits = torch.cat(outs, dim=1)
        one = dict(model, tgt_len=total)
        x = torch.cat([x for x, _, _ in segs], 1)
        full, _ = ref.forward(P, one, x, None, coords=segs[-1][2])
    err = float((seg_logits - full).abs().max())
    check(err < 1e-12, "consistency %-9s pre_lnorm=%-5s segments %s vs one segment of %d: max |dlogit| %.2e"
          % (model["pos_scheme"], model["pre_lnorm"], lens, total, err))
    return err


# ---------------------------------------------------------------------------- (c)

def naive_attention(P, c, l, h, mem, batch_chunk=None, coords=None, bf=None):
    """Scores per (b, h, i, j) from scalar formulas (sin/cos of the distance
    itself, explicit 2x2 rotations), loops everywhere (exact: no bf16 roundings)."""
    assert bf is None
    pre = "layers.%d." % l
    B, Lq, d = h.shape
    H, dh = c["n_head"], c["d_head"]
    m = mem.shape[1]
    klen = m + Lq
    cat = torch.cat([mem, h], 1)
    if c["pre_lnorm"]:
        cat = ref.layer_norm(cat, P[pre + "attn.ln.weight"], P[pre + "attn.ln.bias"])
    Wqkv = P[pre + "attn.qkv.weight"]
    Wq, Wk, Wv = Wqkv[0:H * dh], Wqkv[H * dh:2 * H * dh], Wqkv[2 * H * dh:]
    scheme = c["pos_scheme"]
    out = torch.zeros(B, Lq, H * dh, dtype=h.dtype)
    if scheme == "xl":
        u = P[pre + "attn.r_w_bias"] if c["untie_r"] else P["r_w_bias"]
        vv = P[pre + "attn.r_r_bias"] if c["untie_r"] else P["r_r_bias"]
        Wr = P[pre + "attn.r.weight"]
    if scheme == "alibi":
        slopes = ref.alibi_slopes(H)

    def mlp_bias(q, dist, K, md):
        """W2 GELU(W1 phi(dist) + b1) + b2 [H] of the MLP q (its tensors q0.weight, ...)."""
        taus = [math.exp(math.log(md) * kk / (K - 1)) if K > 1 else 1.0 for kk in range(K)]
        phi = torch.tensor([math.sin(dist / tt) for tt in taus]
                           + [math.cos(dist / tt) for tt in taus], dtype=h.dtype)
        z = phi @ P[q + "0.weight"].t() + P[q + "0.bias"]
        z = torch.tensor([0.5 * float(zz) * (1 + math.erf(float(zz) / math.sqrt(2)))
                          for zz in z], dtype=h.dtype)
        return z @ P[q + "2.weight"].t() + P[q + "2.bias"]
    for b in range(B):
        for hh in range(H):
            hs = slice(hh * dh, (hh + 1) * dh)
            for i in range(Lq):
                qi = cat[b, m + i] @ Wq[hs].t()
                sc = []
                for j in range(klen):
                    if j > m + i:
                        sc.append(torch.tensor(float("-inf"), dtype=h.dtype))
                        continue
                    kj = cat[b, j] @ Wk[hs].t()
                    dist = m + i - j
                    if scheme == "xl":
                        pd = min(dist, c["clamp_len"]) if c["clamp_len"] > 0 else dist
                        Rv = torch.tensor([math.sin(pd * 10000.0 ** (-2.0 * t / d)) for t in range(d // 2)]
                                          + [math.cos(pd * 10000.0 ** (-2.0 * t / d)) for t in range(d // 2)],
                                          dtype=h.dtype)
                        rkv = Rv @ Wr[hs].t()
                        # the terms model.xl_terms keeps: (a) q.k, (b) q.rk, (c) u.k, (d) v.rk
                        terms = {"a": qi @ kj, "b": qi @ rkv, "c": u[hh] @ kj, "d": vv[hh] @ rkv}
                        s = sum((terms[t] for t in c["xl_terms"]), torch.zeros((), dtype=h.dtype))
                        s = s / math.sqrt(dh)
                    elif scheme == "rope":
                        def rot(x, pos):
                            y = x.clone()
                            for t in range(dh // 2):
                                a = pos * 10000.0 ** (-2.0 * t / dh)
                                y[t] = x[t] * math.cos(a) - x[t + dh // 2] * math.sin(a)
                                y[t + dh // 2] = x[t + dh // 2] * math.cos(a) + x[t] * math.sin(a)
                            return y
                        s = rot(qi, m + i) @ rot(kj, j) / math.sqrt(dh)
                    else:
                        s = qi @ kj / math.sqrt(dh)
                        if scheme == "alibi":
                            s = s - slopes[hh] * dist
                        elif scheme == "mlp":
                            bb = mlp_bias(pre + "attn.bias_mlp.", dist, c["mlp_num_freqs"], c["mlp_max_dist"])
                            s = s + bb[hh]
                        elif scheme == "hier":
                            # sum over the levels (in the order token, word, sent, para) of
                            # C[h, l H + h'] b_l,h'(delta_l), plus c_h; delta of a word, sentence
                            # or paragraph level: the query's coordinate minus the key's
                            bb = P[pre + "attn.hier.mix.bias"].clone()
                            lv = [n for n in ("token", "word", "sent", "para") if n in c["hier_levels"]]
                            for li, lname in enumerate(lv):
                                if lname == "token":
                                    dl = dist
                                else:
                                    col = {"word": 0, "sent": 1, "para": 2}[lname]
                                    dl = int(coords[b, m + i, col]) - int(coords[b, j, col])
                                md = max(2.0, c["mlp_max_dist"] / {"token": 1, "word": 4, "sent": 32,
                                                                   "para": 128}[lname])
                                bl = mlp_bias(pre + "attn.hier.%s." % lname, dl, c["hier_num_freqs"], md)
                                bb = bb + P[pre + "attn.hier.mix.weight"][:, li * H:(li + 1) * H] @ bl
                            s = s + bb[hh]
                        elif scheme == "fire":
                            p, a = m + i, abs(float(P[pre + "attn.fire.c"]))
                            Lt = abs(float(P[pre + "attn.fire.L_mult"])) * c["fire_threshold"]
                            norm = p if p > Lt else Lt
                            xx = math.log(a * dist + 1) / (math.log(a * norm + 1) + 1e-6)
                            z = torch.relu(P[pre + "attn.fire.mlp.0.weight"][:, 0] * xx
                                           + P[pre + "attn.fire.mlp.0.bias"])
                            bb = z @ P[pre + "attn.fire.mlp.2.weight"].t() + P[pre + "attn.fire.mlp.2.bias"]
                            s = s + bb[hh]
                        elif scheme == "t5":
                            NB, E = c["t5_buckets"], c["t5_buckets"] // 2
                            bk = dist if dist < E else min(NB - 1, E + int(
                                math.log(dist / E) / math.log(c["t5_max_dist"] / E) * (NB - E)))
                            T = P["t5.rel_bias"] if c["t5_shared"] else P[pre + "attn.t5.rel_bias"]
                            s = s + T[hh, bk]
                    sc.append(s)
                a = torch.softmax(torch.stack(sc), 0)
                for j in range(m + i + 1):
                    out[b, i, hs] += a[j] * (cat[b, j] @ Wv[hs].t())
    return out @ P[pre + "attn.o.weight"].t()


def naive_check(name):
    model, vocab, lens, segs = case_data(name)
    P = {k: v.double() for k, v in ref.random_params(model, gf.seed_of(name), vocab=vocab).items()}
    orig = ref.attention
    worst = 0.0
    with torch.no_grad():
        ma = mb = None
        for x, y, co in segs:
            la, ma = ref.forward(P, model, x, ma, coords=co)
            ref.attention = naive_attention
            try:
                lb, mb = ref.forward(P, model, x, mb, coords=co)
            finally:
                ref.attention = orig
            worst = max(worst, float((la - lb).abs().max()))
    check(worst < 1e-12, "naive per-(i,j) formula %-15s (%s): max |dlogit| %.2e"
          % (name, model["pos_scheme"], worst))


# ---------------------------------------------------------------------------- (d)

def fixture_check(fdir):
    for name, mover, lens in gf.CASES:
        path = os.path.join(fdir, name + ".safetensors")
        if not os.path.exists(path):
            check(False, "fixture %s missing" % path)
            continue
        T, meta = ref.load_safetensors(path)
        cfg = st_reader.config_text(meta["config"])
        model = cfg["model"]
        ns = int(meta["n_segments"])
        P = {k: T[k].double().requires_grad_(True) for k, _ in ref.param_shapes(model)}
        check(all(T[k].dtype == torch.float32 for k in P), "fixture %s params F32" % name)
        coords = fixture_coords(T, ns, cfg.get("data"))
        mems = None
        tot = 0.0
        err = 0.0
        start = 0
        for s in range(ns):
            x, y = T["seg%d.x" % s].long(), T["seg%d.y" % s].long()
            m = mems[0].shape[1] if mems else 0
            win = coords[0][:, start - m:start + x.shape[1]] if coords else None
            start += x.shape[1]
            lg, mems = ref.forward(P, model, x, mems, coords=win)
            loss = ref.seg_loss(lg, y)
            tot = tot + loss
            err = max(err, float((lg - T["seg%d.logits" % s]).abs().max()),
                      abs(float(loss) - float(T["seg%d.loss" % s])))
            for l in range(model["n_layer"]):
                mt = T["seg%d.mem.%d" % (s, l)]
                err = max(err, float((mems[l] - mt).abs().max()) if mt.numel() else 0.0)
                if mems[l].shape != mt.shape:
                    err = float("inf")
        tot.backward()
        for k in P:
            err = max(err, float((P[k].grad - T["grad." + k]).abs().max()))
        # stream structure: x of s+1 continues x of s, y = x shifted by one
        ok = True
        for s in range(ns):
            x, y = T["seg%d.x" % s], T["seg%d.y" % s]
            ok &= bool((x[:, 1:] == y[:, :-1]).all())
            if s + 1 < ns:
                ok &= bool((T["seg%d.x" % (s + 1)][:, 0] == y[:, -1]).all())
        if coords:
            ok &= coords[1]
        check(err == 0.0 and ok, "fixture %-15s reread and recomputed: max diff %.1e, stream%s ok %s, "
              "%d bytes" % (name, err, " and coords" if coords else "", ok, os.path.getsize(path)))


def fixture_coords(T, ns, data):
    """(coords [B, n, 3] of the fixture's n = sum of its segments' tokens, whether they
    and the tokens are what the reference's own rules give), or None without seg*.coords.
    The hier cases' streams are text (txl_ref.text_coords); with data.anchors the tokens
    are the text's bytes with the anchors txl_ref.tokenize inserted, from which the text is
    recovered by dropping the ids >= 256. Both rules are causal: a prefix of the stream
    gets the prefix of the stream's coordinates."""
    if "seg0.coords" not in T:
        return None
    coords = torch.cat([T["seg%d.coords" % s].long() for s in range(ns)], 1)
    xs = torch.cat([T["seg%d.x" % s].long() for s in range(ns)], 1)
    n = xs.shape[1]
    ok = True
    for b in range(xs.shape[0]):
        toks = xs[b].tolist()
        if data:  # (the stream's last token too: it may be the byte after an anchor)
            text = bytes(t for t in toks + [int(T["seg%d.y" % (ns - 1)][b, -1])] if t < 256)
            want_t, want_c = ref.tokenize(text, data["anchors"], data["doc_separator"].encode())
        else:
            want_t, want_c = toks, ref.text_coords(bytes(toks))
        ok &= want_t[:n] == toks and [list(c) for c in want_c[:n]] == coords[b].tolist()
    return coords, ok


# ---------------------------------------------------------------------------- (e)

def manual_opt(name, mover, train):
    """Adam/AdamW written out, compared with the fixture's final parameters."""
    model = dict(gf.BASE_MODEL)
    model.update(mover)
    lens = [model["tgt_len"]] * gf.N_OPT_STEPS
    p32 = ref.random_params(model, gf.seed_of(name))
    names = [k for k, _ in ref.param_shapes(model)]
    P = gf.leaf_params(p32)
    segs = gf.split_segments(gf.make_streams(name, sum(lens) + 1), lens)
    m1 = {k: torch.zeros_like(P[k]) for k in names}
    m2 = {k: torch.zeros_like(P[k]) for k in names}
    lr, b1, b2, eps, wd, clip = (train[k] for k in ("lr", "beta1", "beta2", "eps", "weight_decay", "clip"))
    mems = None
    losses = []
    for t, (x, y) in enumerate(segs, start=1):
        for k in names:
            P[k].grad = None
        lg, mems = ref.forward(P, model, x, mems)
        loss = ref.seg_loss(lg, y)
        losses.append(float(loss))
        loss.backward()
        with torch.no_grad():
            G = {k: P[k].grad.clone() for k in names}
            norm = math.sqrt(sum(float((G[k] ** 2).sum()) for k in names))
            if clip > 0:
                coef = clip / (norm + 1e-6)
                if coef < 1:
                    for k in names:
                        G[k] *= coef
            for k in names:
                p, g = P[k], G[k]
                if train["optimizer"] == "adam":
                    g = g + wd * p
                else:
                    p.mul_(1 - lr * wd)
                m1[k] = b1 * m1[k] + (1 - b1) * g
                m2[k] = b2 * m2[k] + (1 - b2) * g * g
                mhat = m1[k] / (1 - b1 ** t)
                denom = torch.sqrt(m2[k]) / math.sqrt(1 - b2 ** t) + eps
                p.sub_(lr * mhat / denom)
    return names, P, losses


def opt_check(fdir):
    for name, mover, train in gf.OPT_CASES:
        names, P, losses = manual_opt(name, mover, train)
        if fdir is None:
            continue
        T, meta = ref.load_safetensors(os.path.join(fdir, name + ".safetensors"))
        err = max(float((P[k] - T["final." + k]).abs().max()) for k in names)
        lerr = float((torch.tensor(losses, dtype=torch.float64) - T["adam.loss"]).abs().max())
        moved = max(float((T["final." + k] - T[k].double()).abs().max()) for k in names)
        check(err < 1e-12 and lerr < 1e-12,
              "optimiser %-9s written-out formula vs fixture: params %.1e, losses %.1e (max param move %.3f)"
              % (name, err, lerr, moved))


# ---------------------------------------------------------------------------- (f)

def sensitivity_check():
    """Plausible implementation slips must move the fixture logits far more than
    float32 round-off (so that the C tests, at float32 tolerance, catch them)."""
    def run(name, model_over=None, param_fn=None):
        model, lens = case(name)
        model = dict(model, **(model_over or {}))
        P = {k: v.double() for k, v in ref.random_params(model, gf.seed_of(name)).items()}
        if param_fn:
            param_fn(P)
        segs = gf.split_segments(gf.make_streams(name, sum(lens) + 1), lens)
        outs, mems = [], None
        with torch.no_grad():
            for x, y in segs:
                lg, mems = ref.forward(P, model, x, mems)
                outs.append(lg)
        return outs

    def diff(a, b):
        return max(float((x - y).abs().max()) for x, y in zip(a, b))

    def patched(name, attr, fn, **kw):
        old = getattr(ref, attr)
        setattr(ref, attr, fn)
        try:
            return run(name, **kw)
        finally:
            setattr(ref, attr, old)

    orig_sin, orig_R, orig_phi, orig_rot = ref.sinusoid, ref.xl_R, ref.mlp_phi, ref.rope_rotate
    orig_fire, orig_bucket = ref.fire_bias, ref.t5_bucket

    def sin_cos_swapped(pos, d, dtype):
        r = orig_sin(pos, d, dtype)
        return torch.cat([r[:, d // 2:], r[:, :d // 2]], 1)

    def R_off_by_one(klen, d, clamp, dtype):
        pos = torch.arange(klen, 0, -1, dtype=torch.float64)
        if clamp > 0:
            pos = pos.clamp(max=float(clamp))
        return orig_sin(pos, d, dtype)

    def R_clamp_ignored(klen, d, clamp, dtype):
        return orig_R(klen, d, 0, dtype)

    def phi_interleaved(delta, K, md, dtype):
        r = orig_phi(delta, K, md, dtype)
        return torch.stack([r[:, :K], r[:, K:]], 2).reshape(r.shape[0], 2 * K)

    def rot_interleaved(x, pos):
        dh = x.shape[-1]
        y = x.reshape(*x.shape[:-1], dh // 2, 2).transpose(-1, -2).reshape(x.shape)
        r = orig_rot(y, pos)
        return r.reshape(*x.shape[:-1], 2, dh // 2).transpose(-1, -2).reshape(x.shape)

    def swap_uv(P):
        P["r_w_bias"], P["r_r_bias"] = P["r_r_bias"], P["r_w_bias"]

    rows = []
    for name in ("xl_post", "xl_clamp_untie", "mlp", "rope", "alibi", "absolute", "none", "xl_pre",
                 "fire", "t5"):
        base = run(name)
        model, _ = case(name)
        rows.append((name, "memory dropped (mem_len 0)", diff(base, run(name, {"mem_len": 0}))))
        rows.append((name, "pre/post LN swapped", diff(base, run(name, {"pre_lnorm": not model["pre_lnorm"]}))))
        if model["pos_scheme"] in ("xl", "absolute"):
            rows.append((name, "sin/cos halves swapped", diff(base, patched(name, "sinusoid", sin_cos_swapped))))
        if model["pos_scheme"] == "xl":
            rows.append((name, "relative distance off by one", diff(base, patched(name, "xl_R", R_off_by_one))))
            if not model["untie_r"]:
                rows.append((name, "u and v swapped", diff(base, run(name, param_fn=swap_uv))))
            if model["clamp_len"] > 0:
                rows.append((name, "clamp_len ignored", diff(base, patched(name, "xl_R", R_clamp_ignored))))
        if model["pos_scheme"] == "mlp":
            rows.append((name, "phi sin/cos interleaved", diff(base, patched(name, "mlp_phi", phi_interleaved))))
        if model["pos_scheme"] == "fire":
            rows.append((name, "query counted from 1, not 0", diff(base, patched(
                name, "fire_bias", lambda P, pre, c, m, Lq, bf: orig_fire(P, pre, c, m + 1, Lq, bf)[:, :, 1:]))))
            rows.append((name, "threshold ignored (L = 0)", diff(base, run(name, {"fire_threshold": 0.0}))))
        if model["pos_scheme"] == "t5":
            rows.append((name, "buckets of distance + 1", diff(base, patched(
                name, "t5_bucket", lambda n, nb, md: orig_bucket(n + 1, nb, md)))))
        if model["pos_scheme"] == "rope":
            rows.append((name, "rope pairs interleaved", diff(base, patched(name, "rope_rotate", rot_interleaved))))
        if model["pos_scheme"] == "alibi":
            old = ref.alibi_slopes
            rows.append((name, "power-of-two slope rule for H=3",
                         diff(base, patched(name, "alibi_slopes", lambda H: [2.0 ** (-8.0 * (h + 1) / H) for h in range(H)]))))
            ref.alibi_slopes = old
    for name, what, dv in rows:
        check(dv > 1e-4, "sensitivity %-15s %-32s max |dlogit| %.2e" % (name, what, dv))


# ---------------------------------------------------------------------------- (f)

def adaptive_check(name, V=256, rows=7):
    """log p of every token for random top states against official
    ProjectedAdaptiveLogSoftmax's formula, token by token: a shortlist token's
    head_logprob[t]; tail i's token head_logprob[-i] (Python's negative index into the
    head's shortlist + cluster logits) + its tail's log_softmax; and each row sums to 1."""
    model, _ = case(name)
    c = ref.model_cfg(model)
    P = {k: v.double() for k, v in ref.random_params(model, gf.seed_of(name)).items()}
    x = torch.randn(rows, c["d_model"], generator=torch.Generator().manual_seed(7),
                    dtype=torch.float64)
    lp = ref.adaptive_logprobs(P, c, x, V)
    cl, parts = ref.clusters(c, V), ref.adaptive_parts(P, c, V)
    Q0 = parts[0][3]
    hx = x if Q0 is None else x @ Q0
    W = torch.cat([parts[0][0]] + ([P["crit.cluster_weight"]] if len(cl) > 1 else []))
    b = torch.cat([parts[0][1]] + ([P["crit.cluster_bias"]] if len(cl) > 1 else []))
    head = torch.log_softmax(hx @ W.t() + b, -1)
    worst = 0.0
    for r in range(rows):
        for t in range(V):
            i = max(k for k, (lo, _, _) in enumerate(cl) if t >= lo)
            if i == 0:
                want = head[r, t]
            else:
                E, bi, _, Q = parts[i]
                hq = x[r] if Q is None else x[r] @ Q
                want = head[r, -i] + torch.log_softmax(hq @ E.t() + bi, -1)[t - cl[i][0]]
            worst = max(worst, abs(float(lp[r, t] - want)))
    norm = float((torch.logsumexp(lp, -1)).abs().max())
    check(worst < 1e-12 and norm < 1e-12, "adaptive %-15s official's per-token formula: max "
          "|dlogp| %.2e, rows sum to 1 within %.1e" % (name, worst, norm))


def main(argv):
    # one thread: its tensors are tiny (d_model 16), and a second thread costs each of the
    # ~200 ops of a forward an OpenMP fork and join (its finite differences took 20x the CPU
    # time with two, ~12 minutes of it; more on a busy machine)
    torch.set_num_threads(1)
    fdir = argv[1] if len(argv) > 1 else None
    for n in ("xl_post", "mlp", "xl_pre", "xl_clamp_untie", "xl_nomem", "rope", "alibi", "absolute",
              "none", "hier", "fire", "t5", "t5_layers"):
        fd_check(n, n_entries=300 if n in ("xl_post", "mlp", "fire") else 100)
    for n in ("xl_post", "mlp", "rope", "alibi", "none", "hier", "fire", "t5"):
        for pl in (False, True):
            consistency_check(n, pl)
    for n in ("adaptive_div2", "adaptive_proj"):
        fd_check(n, n_entries=100)
    for n, _, _ in gf.CASES:
        naive_check(n)
        if n.startswith("adaptive"):
            adaptive_check(n)
    if fdir:
        fixture_check(fdir)
    opt_check(fdir)
    sensitivity_check()
    print("%d failure(s)" % len(FAIL))
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
