#!/usr/bin/env python3
"""The tables, plots and per-claim comparisons of the study (scripts/study.sh).

    study_report.py OUT [DOC_DIR]

Reads OUT/CORPUS/CELL/sSEED/{train.json, sweep-*.jsonl, needle.jsonl, recall-m*.jsonl,
shift.jsonl}, writes OUT/results.jsonl (every row tagged with corpus, cell and seed) and
OUT/report/: tables.md, results.csv, claims.md and gnuplot plots (when gnuplot is there).
With DOC_DIR, copies the report there. Standard library only.

Intervals: mean over seeds and a 95% Student t interval; a difference of two cells is
"called" only when the Welch 95% interval of the difference excludes 0.
"""
import csv
import glob
import json
import math
import os
import shutil
import subprocess
import sys

# two-sided 95% quantiles of Student's t, by degrees of freedom
T975 = [None, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
        2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086]


def t975(df):
    if df < 1:
        return float("nan")
    if df >= len(T975):
        return 1.96 + 2.4 / df  # within 0.005 of the true quantile beyond 20
    lo = int(math.floor(df))
    hi = min(lo + 1, len(T975) - 1)
    return T975[lo] + (T975[hi] - T975[lo]) * (df - lo)  # Welch df are fractional


def mean_ci(xs):
    n = len(xs)
    if n == 0:
        return float("nan"), float("nan"), 0
    m = sum(xs) / n
    if n < 2:
        return m, float("nan"), n
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    return m, t975(n - 1) * sd / math.sqrt(n), n


def welch(a, b):
    """mean(a) - mean(b) and the half-width of its 95% interval."""
    na, nb = len(a), len(b)
    if na < 2 or nb < 2:
        return float("nan"), float("nan")
    ma, mb = sum(a) / na, sum(b) / nb
    va = sum((x - ma) ** 2 for x in a) / (na - 1) / na
    vb = sum((x - mb) ** 2 for x in b) / (nb - 1) / nb
    se = math.sqrt(va + vb)
    if se == 0:
        return ma - mb, 0.0
    df = (va + vb) ** 2 / ((va ** 2 / (na - 1) if va else 0) + (vb ** 2 / (nb - 1) if vb else 0))
    return ma - mb, t975(df) * se


def read_jsonl(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    return rows


def collect(out):
    rows = []
    for run in sorted(glob.glob(os.path.join(out, "*", "*", "s*"))):
        corpus, cell, seed = run.split(os.sep)[-3:]
        if not os.path.isdir(run) or corpus == "report":
            continue
        tag = {"corpus": corpus, "cell": cell, "seed": int(seed[1:])}
        tj = os.path.join(run, "train.json")
        if os.path.exists(tj):
            for r in read_jsonl(tj):
                rows.append(dict(r, kind="train", **tag))
        for path in sorted(glob.glob(os.path.join(run, "*.jsonl"))):
            name = os.path.basename(path)[:-6]
            kind = name.split("-")[0]
            extra = {}
            if kind == "recall":
                extra["probe_mem_len"] = int(name.split("-m")[1])
            for r in read_jsonl(path):
                rows.append(dict(r, kind=kind, **tag, **extra))
    return rows


class Results:
    def __init__(self, rows):
        self.rows = rows
        self.corpora = sorted({r["corpus"] for r in rows})
        order = ["xl", "mlp", "hier", "rope", "alibi", "absolute", "none"]
        cells = {r["cell"] for r in rows}
        self.cells = sorted(cells, key=lambda c: (order.index(c.split("+")[0].split("@")[0])
                                                  if c.split("+")[0].split("@")[0] in order else 99, c))

    def values(self, corpus, cell, kind, field, **where):
        """One value per seed (the mean when several rows match a seed)."""
        by_seed = {}
        for r in self.rows:
            if r["corpus"] != corpus or r["cell"] != cell or r["kind"] != kind:
                continue
            if any(r.get(k) != v for k, v in where.items()):
                continue
            if field not in r or r[field] is None:
                continue
            by_seed.setdefault(r["seed"], []).append(float(r[field]))
        return [sum(v) / len(v) for _, v in sorted(by_seed.items())]

    def sweep(self, corpus, cell, mode, factor):
        return self.values(corpus, cell, "sweep", "bpc", sweep_mode=mode, factor=factor)

    def rise(self, corpus, cell, mode, factor):
        """bpc at factor minus bpc at 1x, per seed."""
        a = self.sweep(corpus, cell, mode, factor)
        b = self.sweep(corpus, cell, mode, 1)
        return [x - y for x, y in zip(a, b)]

    def needle(self, corpus, cell, field, mode, factor):
        by_seed = {}
        for r in self.rows:
            if (r["corpus"], r["cell"], r["kind"]) != (corpus, cell, "needle"):
                continue
            if r.get("mode") != mode or r.get("factor") != factor or field not in r:
                continue
            by_seed.setdefault(r["seed"], []).append(float(r[field]))
        return [sum(v) / len(v) for _, v in sorted(by_seed.items())]

    def effective(self, corpus, cell, mem):
        return self.values(corpus, cell, "recall", "effective_context", probe_mem_len=mem)

    def shift(self, corpus, cell):
        """The largest |delta| of the loss over the offsets, per seed."""
        by_seed = {}
        for r in self.rows:
            if (r["corpus"], r["cell"], r["kind"]) == (corpus, cell, "shift") and "delta" in r:
                by_seed.setdefault(r["seed"], []).append(abs(float(r["delta"])))
        return [max(v) for _, v in sorted(by_seed.items())]


def fmt(m, h, digits=3):
    if isinstance(m, float) and math.isnan(m):
        return "-"
    if isinstance(h, float) and math.isnan(h):
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} ± {h:.{digits}f}"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def write_tables(R, path):
    lines = ["# Study tables", "",
             "Mean over seeds ± the half-width of the 95% Student t interval. bpc: bits per byte "
             "of the test split (anchor tokens' bits included, divided by the original bytes).", ""]
    factors = sorted({r.get("factor") for r in R.rows if r["kind"] == "sweep" and r.get("factor")})
    for corpus in R.corpora:
        for mode in ("memory", "window"):
            lines += [f"## {corpus}: test bpc, {mode} sweep", ""]
            rows = []
            for cell in R.cells:
                vals = [R.sweep(corpus, cell, mode, f) for f in factors]
                n = max((len(v) for v in vals), default=0)
                rows.append([cell, str(n)] + [fmt(*mean_ci(v)[:2]) for v in vals])
            lines += [table(["cell", "seeds"] + [f"{f}x" for f in factors], rows), ""]
        needle_f = sorted({r.get("factor") for r in R.rows if r["kind"] == "needle"})
        mems = sorted({r.get("probe_mem_len") for r in R.rows if r["kind"] == "recall"})
        lines += [f"## {corpus}: probes", "",
                  "needle: exact-match accuracy and retrieval gain (bits) averaged over depths, "
                  "memory mode; recall: effective context (bytes) at probe mem_len "
                  + "/".join(str(m) for m in mems) +
                  "; shift: largest |change of loss| (nats) over the offsets.", ""]
        rows = []
        for cell in R.cells:
            row = [cell]
            row += [fmt(*mean_ci(R.needle(corpus, cell, "accuracy", "memory", f))[:2], 2) for f in needle_f]
            row += [fmt(*mean_ci(R.needle(corpus, cell, "gain_bits", "memory", f))[:2], 1) for f in needle_f]
            row += [fmt(*mean_ci(R.effective(corpus, cell, m))[:2], 0) for m in mems]
            row += [fmt(*mean_ci(R.shift(corpus, cell))[:2], 5)]
            rows.append(row)
        hdr = (["cell"] + [f"acc {f}x" for f in needle_f] + [f"gain {f}x" for f in needle_f] +
               [f"eff. ctx m{m}" for m in mems] + ["shift"])
        lines += [table(hdr, rows), ""]
        rows = []
        for cell in R.cells:
            sec = R.values(corpus, cell, "train", "train_seconds")
            if not sec:
                sec = []
            bv = R.values(corpus, cell, "train", "best_valid_bpc")
            rows.append([cell, fmt(*mean_ci(bv)[:2]), fmt(*mean_ci(sec)[:2], 0)])
        lines += [f"## {corpus}: training", "", table(["cell", "valid bpc", "train s"], rows), ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def compare(R, corpus, a, b, fn):
    """Welch difference fn(a) - fn(b) and a verdict string."""
    xa, xb = fn(corpus, a), fn(corpus, b)
    if len(xa) < 2 or len(xb) < 2:
        return f"{a} vs {b}: not enough seeds ({len(xa)}, {len(xb)})"
    d, h = welch(xa, xb)
    verdict = "no difference called" if abs(d) <= h else (f"{a} lower" if d < 0 else f"{b} lower")
    return f"{a} − {b} = {d:+.4f} ± {h:.4f}: {verdict}"


def write_claims(R, path):
    bpc1 = lambda mode: (lambda c, cell: R.sweep(c, cell, mode, 1))
    rise = lambda mode, f: (lambda c, cell: R.rise(c, cell, mode, f))
    lines = ["# Comparisons behind the claims", "",
             "Each line: difference of means (first − second) ± the Welch 95% half-width; a "
             "difference is called only when the interval excludes 0.", ""]
    have = set(R.cells)

    def pairs(title, fn, plist):
        out = [f"## {title}", ""]
        for corpus in R.corpora:
            for a, b in plist:
                if a in have and b in have:
                    out.append(f"- {corpus}: " + compare(R, corpus, a, b, fn))
        return out + [""] if len(out) > 2 else []

    rel = ["xl", "mlp", "hier", "rope", "alibi"]
    lines += pairs("1. Relative vs absolute positions (test bpc at 1x, memory mode)", bpc1("memory"),
                   [(r, "absolute") for r in rel] + [("absolute+a", "mlp+a"), ("absolute+a", "absolute"),
                                                       ("absolute", "none"), ("absolute+a", "none")])
    for f in (2, 4, 8):
        for mode in ("memory", "window"):
            lines += pairs(f"2. Extrapolation: rise of bpc from 1x to {f}x ({mode} sweep)", rise(mode, f),
                           [("mlp", s) for s in ("rope", "xl", "alibi")])
    lines += pairs("3. Anchors (test bpc at 1x, memory mode; bits per original byte)", bpc1("memory"),
                   [(s + "+a", s) for s in ("mlp", "hier", "rope", "absolute")])
    lines += pairs("4. Hierarchical bias vs mlp (test bpc at 1x, memory mode)", bpc1("memory"),
                   [("hier", "mlp"), ("hier+a", "mlp+a")])
    eff = lambda m: (lambda c, cell: R.effective(c, cell, m))
    mems = sorted({r.get("probe_mem_len") for r in R.rows if r["kind"] == "recall"})
    if len(mems) >= 2:
        lo, hi = mems[0], mems[-1]
        lines += [f"## 5. Effective context (recall probe), mem_len {hi} − mem_len {lo}", ""]
        for corpus in R.corpora:
            for cell in R.cells:
                a, b = R.effective(corpus, cell, hi), R.effective(corpus, cell, lo)
                if len(a) >= 2 and len(b) >= 2:
                    d, h = welch(a, b)
                    lines.append(f"- {corpus} {cell}: {d:+.0f} ± {h:.0f} bytes")
        lines.append("")
    for f in (2, 4, 8):
        lines += pairs(f"6. mlp_max_dist: rise of bpc from 1x to {f}x (memory sweep)", rise("memory", f),
                       [("mlp@128", "mlp"), ("mlp@512", "mlp"), ("mlp@128", "mlp@512")])
    with open(path, "w") as f:
        f.write("\n".join(lines))


def write_csv(R, path):
    keys = ["corpus", "cell", "seed", "kind", "sweep_mode", "mode", "factor", "depth",
            "distance", "probe_mem_len", "offset", "bpc", "loss", "accuracy", "gain_bits",
            "gain_bpc", "effective_context", "delta", "best_valid_bpc", "train_seconds"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(keys)
        for r in R.rows:
            w.writerow([r.get(k, "") for k in keys])


def needle_heatmap(R, corpus, mode, outdir):
    """The needle grid as a heatmap: one row per cell, one column per (length, depth), the
    mean retrieval gain (bits) over seeds."""
    rows = [r for r in R.rows if r["kind"] == "needle" and r["corpus"] == corpus and r.get("mode") == mode]
    factors = sorted({r["factor"] for r in rows})
    depths = sorted({r["depth"] for r in rows})
    cells = [c for c in R.cells if any(r["cell"] == c for r in rows)]
    if not cells or not factors or not depths:
        return
    dat = os.path.join(outdir, f".needle-{corpus}-{mode}.dat")
    vmax = 1e-9
    with open(dat, "w") as f:
        for y, cell in enumerate(cells):
            for x, (fac, dep) in enumerate((a, b) for a in factors for b in depths):
                v = [float(r["gain_bits"]) for r in rows if r["cell"] == cell and r["factor"] == fac
                     and r["depth"] == dep and r.get("gain_bits") is not None]
                m = sum(v) / len(v) if v else 0
                vmax = max(vmax, abs(m))
                f.write(f"{x} {y} {m}\n")
            f.write("\n")
    xt = ", ".join(f"'{fac}x {dep}%%' {i}" for i, (fac, dep) in
                   enumerate((a, b) for a in factors for b in depths))
    yt = ", ".join(f"'{c}' {i}" for i, c in enumerate(cells))
    png = os.path.join(outdir, f"needle-{corpus}-{mode}.png")
    script = (f"set terminal pngcairo size 1000,{160 + 28 * len(cells)} noenhanced; set output '{png}';"
              f"set xtics ({xt}) rotate by 60 right font ',8'; set ytics ({yt});"
              f"set cblabel 'retrieval gain (bits, mean over seeds)'; set palette defined "
              f"(-1 'blue', 0 'white', 1 'red'); set cbrange [{-vmax}:{vmax}]; set title '{corpus}: needle, {mode} mode "
              f"(context length x trained, depth)'; set view map; unset key;"
              f"plot '{dat}' using 1:2:3 with image")
    subprocess.run(["gnuplot", "-e", script], check=False)
    os.remove(dat)


def plots(R, outdir):
    if not shutil.which("gnuplot"):
        return
    factors = sorted({r.get("factor") for r in R.rows if r["kind"] == "sweep" and r.get("factor")})
    for corpus in R.corpora:
        for mode in ("memory", "window"):
            dat = os.path.join(outdir, f".bpc-{corpus}-{mode}.dat")
            series = []
            with open(dat, "w") as f:
                for cell in R.cells:
                    pts = [(fac, *mean_ci(R.sweep(corpus, cell, mode, fac))) for fac in factors]
                    pts = [(fac, m, h) for fac, m, h, n in pts if n]
                    if not pts:
                        continue  # a cell without results yet
                    f.write(f'"{cell}"\n')
                    for fac, m, h in pts:
                        f.write(f"{fac} {m} {0 if math.isnan(h) else h}\n")
                    f.write("\n\n")
                    series.append(cell)
            png = os.path.join(outdir, f"bpc-{corpus}-{mode}.png")
            plot = ", ".join(f"'{dat}' index {i} using 1:2:3 with yerrorlines title '{c}'"
                             for i, c in enumerate(series))
            script = (f"set terminal pngcairo size 900,560 noenhanced; set output '{png}'; set logscale x 2;"
                      f"set xlabel 'evaluated context / trained context ({mode} sweep)';"
                      f"set ylabel 'test bpc (mean, 95% interval)'; set key outside right;"
                      f"set title '{corpus}'; plot {plot}")
            subprocess.run(["gnuplot", "-e", script], check=False)
            os.remove(dat)
        for mode in ("memory", "window"):
            needle_heatmap(R, corpus, mode, outdir)
        mems = sorted({r.get("probe_mem_len") for r in R.rows if r["kind"] == "recall"})
        for mem in mems[-1:]:
            dat = os.path.join(outdir, f".recall-{corpus}.dat")
            dists = sorted({r["distance"] for r in R.rows if r["kind"] == "recall" and "distance" in r})
            series = []
            with open(dat, "w") as f:
                for cell in R.cells:
                    pts = [(d, *mean_ci(R.values(corpus, cell, "recall", "gain_bpc", distance=d,
                                                 probe_mem_len=mem))) for d in dists]
                    pts = [(d, m, h) for d, m, h, n in pts if n]
                    if not pts:
                        continue
                    f.write(f'"{cell}"\n')
                    for d, m, h in pts:
                        f.write(f"{d} {m} {0 if math.isnan(h) else h}\n")
                    f.write("\n\n")
                    series.append(cell)
            png = os.path.join(outdir, f"recall-{corpus}.png")
            plot = ", ".join(f"'{dat}' index {i} using 1:2:3 with yerrorlines title '{c}'"
                             for i, c in enumerate(series))
            script = (f"set terminal pngcairo size 900,560 noenhanced; set output '{png}'; set logscale x 2;"
                      f"set xlabel 'distance between the two occurrences (bytes)';"
                      f"set ylabel 'recall gain (bits per byte)'; set key outside right;"
                      f"set title '{corpus}: recall, probe mem_len {mem}'; plot {plot}")
            subprocess.run(["gnuplot", "-e", script], check=False)
            os.remove(dat)


def write_summary(R, path):
    """The README's table: per cell, test bpc at 1x and its rise at 8x (memory sweep) on each
    corpus, and the recall probe's effective context at the largest probe mem_len."""
    mems = sorted({r.get("probe_mem_len") for r in R.rows if r["kind"] == "recall"})
    hi = mems[-1] if mems else None
    header, rows = ["cell"], []
    for corpus in R.corpora:
        header += [f"{corpus} bpc 1x", f"{corpus} 8x − 1x"]
    if hi:
        header += [f"eff. ctx m{hi} ({c})" for c in R.corpora]
    for cell in R.cells:
        row = [cell]
        for corpus in R.corpora:
            row += [fmt(*mean_ci(R.sweep(corpus, cell, "memory", 1))[:2]),
                    fmt(*mean_ci(R.rise(corpus, cell, "memory", 8))[:2])]
        if hi:
            row += [fmt(*mean_ci(R.effective(c, cell, hi))[:2], 0) for c in R.corpora]
        rows.append(row)
    seeds = sorted({len(R.sweep(c, cell, "memory", 1)) for c in R.corpora for cell in R.cells})
    note = (f"Mean over {'/'.join(map(str, seeds))} seeds ± the half-width of the 95% t interval; "
            "test split, memory sweep; 8x − 1x: the rise of bpc from the trained context to 8 "
            "times it; eff. ctx: the recall probe's effective context in bytes.")
    with open(path, "w") as f:
        f.write(table(header, rows) + "\n\n" + note + "\n")


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: study_report.py OUT [DOC_DIR]")
    out = sys.argv[1]
    rows = collect(out)
    if not rows:
        sys.exit(f"study_report.py: {out}: no results yet")
    with open(os.path.join(out, "results.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    R = Results(rows)
    rep = os.path.join(out, "report")
    os.makedirs(rep, exist_ok=True)
    write_tables(R, os.path.join(rep, "tables.md"))
    write_claims(R, os.path.join(rep, "claims.md"))
    write_summary(R, os.path.join(rep, "summary.md"))
    write_csv(R, os.path.join(rep, "results.csv"))
    plots(R, rep)
    if len(sys.argv) > 2:
        os.makedirs(sys.argv[2], exist_ok=True)
        for name in os.listdir(rep):
            shutil.copy(os.path.join(rep, name), os.path.join(sys.argv[2], name))
        shutil.copy(os.path.join(out, "results.jsonl"), os.path.join(sys.argv[2], "results.jsonl"))
    print(f"study_report.py: {len(rows)} rows, {len(R.cells)} cells, {len(R.corpora)} corpora -> {rep}")


if __name__ == "__main__":
    main()
