/* evaluate.c: see evaluate.h. */
#include "evaluate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/dist.h"
#include "../common/par.h"
#include "../model/gemm.h"
#include "../common/sys.h"

typedef eval_pass pass;

static void pass_free(pass *p)
{
    free(p->x), free(p->y), free(p->yb), free(p->co);
    free(p->seg_nats), free(p->seg_anchor);
    mem_free(&p->mem);
    kv_cache_free(&p->kv);
    acts_free(&p->A);
    memset(p, 0, sizeof *p);
}

/* A pass over nb streams at once: with `run`, the activations and memory to run them (and,
 * with nseg > 0, its groups' per-segment sums); with `buffers`, the batch's token (and
 * coordinate) buffers. */
static int pass_init(pass *p, model *mdl, const model_config *cfg, const eval_opts *o, int nb,
                     int run, int buffers, size_t nseg, txl_err *e)
{
    memset(p, 0, sizeof *p);
    p->mdl = mdl;
    p->o = o;
    p->nb = nb;
    p->kv.m = -1;
    if (run && nseg) {
        p->seg_nats = calloc(nseg, sizeof *p->seg_nats);
        p->seg_anchor = calloc(nseg, sizeof *p->seg_anchor);
        if (!p->seg_nats || !p->seg_anchor)
            return err_set(e, ERR_RUNTIME, "out of memory");
    }
    /* the key cache first: with one, and no term statistics (which project the window),
     * the activations hold a segment (ACTS_CACHED) */
    if (run)
        kv_cache_init(&p->kv, cfg, nb, o->mem_len, o->tgt_len);
    int mode = run && kv_cache_on(&p->kv) && !o->stats ? ACTS_CACHED : 0;
    if (run && (acts_init(&p->A, cfg, nb, o->tgt_len, o->mem_len, mode, e) ||
                mem_init(&p->mem, cfg, nb, o->mem_len, e)))
        return -1;
    if (!buffers)
        return 0;
    size_t BL = (size_t)o->batch * o->tgt_len;
    p->x = malloc(BL * sizeof *p->x);
    p->y = malloc(BL * sizeof *p->y);
    p->yb = malloc(BL * sizeof *p->yb);
    p->co = pos_get(cfg->pos)->needs_coords ? malloc(BL * TXL_N_COORDS * sizeof *p->co) : NULL;
    if (!p->x || !p->y || !p->yb || (pos_get(cfg->pos)->needs_coords && !p->co))
        return err_set(e, ERR_RUNTIME, "out of memory");
    return 0;
}

/* An empty memory and no sums: the start of a pass. */
static void pass_reset(pass *p, size_t nseg)
{
    mem_reset(&p->mem);
    p->nats = p->anchor_nats = 0;
    p->tokens = p->anchors = p->bytes = 0;
    if (p->seg_nats) {
        memset(p->seg_nats, 0, nseg * sizeof *p->seg_nats);
        memset(p->seg_anchor, 0, nseg * sizeof *p->seg_anchor);
    }
}

/* One segment (number s of the pass) of this rank's rows (x, y, yb [nb, len] at rows b0..);
 * scored unless warming up. Anchor targets are summed apart (from the per-row losses), and
 * the bytes of text the targets cover (yb) are counted; without anchors the sum is
 * model_forward's own. With groups the segment's sums go on from the previous group's, row
 * by row as model_forward sums them, so each is the whole batch's to the bit. */
static void run_segment(pass *p, const txl_tok *x, const txl_tok *y, const uint32_t *yb,
                        const int32_t *co, int len, size_t s)
{
    int full = p->mem.m >= p->o->mem_len;
    fwd_opts fo = {.training = 0, .stats = p->o->stats, .pos_offset = p->o->pos_offset,
                   .coords = co, .kv = &p->kv,
                   .same_len = p->o->same_length ? p->o->mem_len : 0};
    double l = model_forward(p->mdl, &p->A, &p->mem, x, y, len, &fo);
    if (p->o->warmup && !full)
        return;
    size_t rows = (size_t)p->nb * len;
    txl_tok base = p->o->anchor_base ? p->o->anchor_base : TXL_BYTES;
    double *an = p->seg_anchor ? &p->seg_anchor[s] : &p->anchor_nats;
    for (size_t i = 0; i < rows; i++) {
        if (y[i] >= base) {
            *an += p->A.row_loss[i];
            p->anchors++;
        }
        p->bytes += yb[i];
    }
    if (p->seg_nats) /* xent_forward's sum, in row order, from the previous group's */
        for (size_t i = 0; i < rows; i++)
            p->seg_nats[s] += p->A.row_loss[i];
    else
        p->nats += l;
    p->tokens += rows;
}

/* The groups' per-segment sums into p's, in segment order (as the whole batch adds them). */
static void add_segments(pass *p, size_t nseg)
{
    for (size_t s = 0; p->seg_nats && s < nseg; s++) {
        p->nats += p->seg_nats[s];
        p->anchor_nats += p->seg_anchor[s];
    }
}

/* Replica r of the plan's pass (itself when there are none). */
static pass *replica(eval_plan *ep, int r)
{
    return ep->R > 1 ? &ep->rep[r] : &ep->p;
}

/* done of nseg segments (of every group) */
static void progress_line(eval_plan *ep, size_t done, size_t nseg, double t0, double *last_draw)
{
    const pass *p = &ep->p;
    double now = sys_now();
    if (!p->o->progress || now - *last_draw <= 0.25)
        return;
    *last_draw = now;
    double nats = 0;
    size_t bytes = 0;
    for (int i = 0; i < ep->R; i++) {
        const pass *q = replica(ep, i);
        nats += q->nats, bytes += q->bytes;
        for (size_t s = 0; q->seg_nats && s < ep->nseg; s++)
            nats += q->seg_nats[s];
    }
    double el = now - t0, eta = el / done * (nseg - done);
    char etas[32];
    sys_fmt_duration(etas, sizeof etas, eta);
    fprintf(stderr, "\r\033[K%s: segment %zu/%zu  bpc %.4f  %.0f tok/s  ETA %s",
            p->o->label ? p->o->label : "eval", done, nseg,
            bytes ? nats / bytes / M_LN2 : 0.0,
            (double)done * p->o->batch * p->o->tgt_len / ep->ng / (el > 0 ? el : 1e-9), etas);
}

/* Segment s of this rank's rows (of group g's streams): by the replicas side by side, each
 * its own streams on one thread, or by the one pass. */
static void run_rows(eval_plan *ep, int len, int g, size_t s)
{
    pass *p = &ep->p;
    if (ep->R == 1) {
        size_t off = (p->b0 + (size_t)g * p->nb) * (size_t)len;
        run_segment(p, p->x + off, p->y + off, p->yb + off,
                    p->co ? p->co + off * TXL_N_COORDS : NULL, len, s);
        return;
    }
#pragma omp parallel for schedule(static, 1) num_threads(ep->R)
    for (int r = 0; r < ep->R; r++) {
        pass *q = &ep->rep[r];
        size_t off = (p->b0 + q->b0 + (size_t)g * q->nb) * (size_t)len;
        run_segment(q, p->x + off, p->y + off, p->yb + off,
                    p->co ? p->co + off * TXL_N_COORDS : NULL, len, s);
    }
}

/* The replicas' sums into p, in replica order (the end of the streams' part of a pass). */
static void gather_sums(eval_plan *ep)
{
    pass *p = &ep->p;
    for (int r = 0; r < ep->R; r++)
        add_segments(replica(ep, r), ep->nseg);
    for (int r = 0; ep->R > 1 && r < ep->R; r++) {
        const pass *q = &ep->rep[r];
        p->nats += q->nats, p->anchor_nats += q->anchor_nats;
        p->tokens += q->tokens, p->anchors += q->anchors, p->bytes += q->bytes;
    }
}

/* The tail (data/tokens.h): the last stream goes on alone over the tokens after the
 * streams, from its memory, in the planned one-stream pass. */
static int run_tail(eval_plan *ep, const batcher *bt, txl_err *e)
{
    pass *p = &ep->p, *q = &ep->tail;
    if (!ep->has_tail)
        return 0;
    size_t first, n;
    batcher_tail(bt, &first, &n);
    int last = p->o->batch - 1 - (int)p->b0; /* the last stream: this rank's (eval_plan_init) */
    const pass *o = replica(ep, ep->R - 1); /* its pass: the last replica's (last group's) */
    last -= (int)(ep->R > 1 ? o->b0 : 0) + (ep->ng - 1) * o->nb;
    size_t rows = (size_t)o->mem.M * o->mem.d;
    pass_reset(q, 0); /* then the last stream's memory (states and coordinates) */
    for (int l = 0; l < ep->cfg->n_layer; l++)
        memcpy(mem_layer(&q->mem, l), mem_layer(&o->mem, l) + (size_t)last * rows,
               rows * sizeof(float));
    if (q->mem.coords)
        memcpy(q->mem.coords, o->mem.coords + (size_t)last * o->mem.M * TXL_N_COORDS,
               (size_t)o->mem.M * TXL_N_COORDS * sizeof(int32_t));
    q->mem.m = o->mem.m;
    kv_cache_invalidate(&q->kv); /* its memory was copied in */
    int rc = 0;
    for (size_t at = 0; !rc && at < n; at += (size_t)p->o->tgt_len) {
        int len = n - at < (size_t)p->o->tgt_len ? (int)(n - at) : p->o->tgt_len;
        rc = tok_stream_read(bt->ts, first + at, q->x, q->co, (size_t)len, e) ||
             tok_stream_read(bt->ts, first + at + 1, q->y, NULL, (size_t)len, e);
        if (!rc) {
            tok_stream_bytes(bt->ts, first + at + 1, q->yb, (size_t)len);
            run_segment(q, q->x, q->y, q->yb, q->co, len, 0);
        }
    }
    p->nats += q->nats, p->anchor_nats += q->anchor_nats;
    p->tokens += q->tokens, p->anchors += q->anchors, p->bytes += q->bytes;
    return rc ? -1 : 0;
}

/* Whether a pass of o over bt goes on to the tail: it runs every segment of the streams. */
static int reaches_tail(const eval_opts *o, const batcher *bt)
{
    return !o->max_segments || batcher_segments(bt) < o->max_segments;
}

static int plan_batcher(const tok_stream *ts, const eval_opts *o, batcher *bt, txl_err *e)
{
    return batcher_init(bt, ts, o->batch, o->tgt_len, 1, 2, o->label ? o->label : "evaluation",
                        e);
}

/* The segments of the streams, group after group, each group from an empty memory (and the
 * tail), until the pass or max_segments ends. */
static int score_streams(eval_plan *ep, batcher *bt, eval_result *r, txl_err *e)
{
    pass *p = &ep->p;
    double t0 = sys_now(), last_draw = 0;
    int len = 0;
    for (int g = 0; g < ep->ng && len >= 0; g++) {
        if (g > 0) { /* the next streams, from the start of the text */
            if (plan_batcher(&ep->ts, p->o, bt, e))
                return -1;
            for (int i = 0; i < ep->R; i++)
                mem_reset(&replica(ep, i)->mem);
        }
        size_t s = 0;
        while ((len = batcher_next(bt, p->x, p->y, p->co, p->yb, e)) > 0) {
            run_rows(ep, len, g, s++);
            if (p->o->max_segments && s >= p->o->max_segments)
                break;
            progress_line(ep, (size_t)g * ep->nseg + s, (size_t)ep->ng * ep->nseg, t0,
                          &last_draw);
        }
        r->segments = s;
    }
    gather_sums(ep);
    if (p->o->progress && last_draw > 0)
        fprintf(stderr, "\r\033[K");
    if (len < 0) /* the corpus could not be read (e.g. truncated meanwhile): e names it */
        return -1;
    return reaches_tail(p->o, bt) ? run_tail(ep, bt, e) : 0;
}

/* How a pass of o over ts (the view of its first max_tokens tokens) is laid out on this
 * rank: eval_plan_init follows it, eval_plan_bytes sizes it. */
typedef struct {
    int nr, rank; /* the ranks the streams are split over, and this one */
    int nb, R;    /* this rank's streams, and the replicas running them */
    int ng;       /* the groups each pass runs its streams in (eval_plan.ng) */
    size_t nseg;  /* segments of a pass */
    int has_tail; /* this rank runs the tail (the last stream's) */
} plan_layout;

/* A product of a group's rows (G len for a segment of len rows) gives each row the bits the
 * whole batch's product gives it only where the BLAS runs both on the same kernels: not on
 * its small-matrix ones, nor as a vector. OpenBLAS 0.3.21 (SkylakeX, sgemm x W^T, N 16-2048
 * outputs, K 16-1024, M 1-600 rows against 1024) gave other bits only for M N <= 1200, and M
 * 1 is sgemv: so every segment's products of a group keep at least GROUP_OUT floats of output
 * (the narrowest is d_model or n_head d_head wide) and 2 rows. That also keeps bf16's
 * products of 2^15 multiply-adds or more (GEMM_BF16_MIN) in bf16 for K >= 8. */
#define GROUP_OUT 4096

/* Groups: a pass of nbp streams whose memory is longer than a segment runs them G at a
 * time, each group over every segment from an empty memory, G the largest divisor of nbp
 * with G M <= nbp Lq: a group holds no more memory rows (states and their keys and values)
 * than all nbp streams hold at mem_len = tgt_len, and its activations are a group's (S at 8x
 * memory: doc/performance.md, "Evaluation's memory"). But a group's shortest segment
 * (min_len rows a stream: the last one, or tgt_len) keeps the products GROUP_OUT asks for,
 * with the smallest G that does when the budget's does not. Each stream's rows are computed
 * as in the whole batch, and a segment's sums are added in its rows' order (run_segment), so
 * the results are the whole batch's bit for bit on OpenBLAS's SkylakeX kernels (checked:
 * every scheme's fixtures and S, fp32 and bf16); its Haswell and Zen kernels round a
 * group's smaller products otherwise (1e-10 relative in the loss). Not with the term statistics (one accumulator, which groups would fill in
 * another order), nor for a scheme whose tables span the batch (pos_ops.batch_tables:
 * hier), nor with the adaptive softmax (its blocks of rows, and the cluster products over the
 * rows of a block, would fall otherwise in a group). */
static int groups_of(const model_config *cfg, const eval_opts *o, int nbp, int min_len)
{
    if (o->stats || o->whole_batch || o->mem_len <= o->tgt_len ||
        pos_get(cfg->pos)->batch_tables || adapt_in_use(cfg))
        return 1;
    long long w = cfg->d_model < cfg->n_head * cfg->d_head ? cfg->d_model
                                                           : cfg->n_head * cfg->d_head;
    int G = nbp;
    for (int g = nbp; g >= 1; g--) {
        if (nbp % g)
            continue;
        long long rows = (long long)g * min_len;
        if (rows < 2 || rows * w < GROUP_OUT)
            break; /* smaller groups have fewer rows still */
        G = g;
        if ((long long)g * o->mem_len <= (long long)nbp * o->tgt_len)
            break;
    }
    return nbp / G;
}

static int layout_of(const model_config *cfg, const tok_stream *ts, const eval_opts *o,
                     plan_layout *L, txl_err *e)
{
    batcher bt;
    if (plan_batcher(ts, o, &bt, e))
        return -1;
    /* distributed: each rank runs its share of the streams (all of them when the batch does
     * not split evenly), and the sums are combined at the end */
    L->nr = o->distributed ? dist_self()->size : 1;
    L->rank = o->distributed ? dist_self()->rank : 0;
    if (o->batch % L->nr) {
        L->nr = 1;
        L->rank = 0;
    }
    /* replicas: one per thread when the threads divide this rank's streams; not with the
     * term statistics (one accumulator) */
    int T = par_threads();
    L->nb = o->batch / L->nr;
    L->R = T > 1 && L->nb % T == 0 && !o->stats ? T : 1;
    size_t first, n;
    batcher_tail(&bt, &first, &n);
    int last = o->batch - 1 - L->rank * L->nb; /* the last stream, if it is this rank's */
    L->has_tail = reaches_tail(o, &bt) && n > 0 && last >= 0 && last < L->nb;
    L->nseg = batcher_segments(&bt);
    /* the shortest segment a pass runs: the last, unless max_segments stops before it */
    size_t last_len = L->nseg ? bt.n - (L->nseg - 1) * (size_t)o->tgt_len : 0;
    if (o->max_segments && L->nseg > o->max_segments) {
        L->nseg = o->max_segments;
        last_len = (size_t)o->tgt_len;
    }
    L->ng = groups_of(cfg, o, L->nb / L->R, (int)last_len);
    return 0;
}

/* The bytes pass_init allocates for the same arguments. */
static int pass_bytes(const model_config *cfg, const eval_opts *o, int nb, int run, int buffers,
                      size_t nseg, double *bytes, txl_err *e)
{
    double act = 0;
    if (run && acts_plan_floats(cfg, nb, o->tgt_len, o->mem_len, o->stats ? 0 : ACTS_CACHED,
                                &act, e))
        return -1;
    if (run)
        *bytes += 4.0 * act + 4.0 * kv_cache_plan_floats(cfg, nb, o->mem_len, o->tgt_len) +
                  mem_plan_bytes(cfg, nb, o->mem_len) + 2.0 * sizeof(double) * nseg;
    if (buffers)
        *bytes += (double)o->batch * o->tgt_len *
                  (2 * sizeof(txl_tok) + sizeof(uint32_t) +
                   (pos_get(cfg->pos)->needs_coords ? TXL_N_COORDS * sizeof(int32_t) : 0));
    return 0;
}

int eval_plan_bytes(const model_config *cfg, const tok_stream *ts, const eval_opts *o,
                    double *bytes, txl_err *e)
{
    tok_stream view = *ts;
    plan_layout L;
    *bytes = 0;
    if (o->max_tokens && view.n > o->max_tokens)
        view.n = o->max_tokens;
    eval_opts one = *o;
    one.batch = 1;
    if (layout_of(cfg, &view, o, &L, e))
        return -1;
    int G = L.nb / L.R / L.ng;                /* the streams a pass runs at once */
    size_t ns = L.ng > 1 ? L.nseg : 0;        /* its groups' per-segment sums */
    if (pass_bytes(cfg, o, L.R == 1 ? G : L.nb, L.R == 1, 1, ns, bytes, e))
        return -1;
    for (int r = 0; L.R > 1 && r < L.R; r++)
        if (pass_bytes(cfg, o, G, 1, 0, ns, bytes, e))
            return -1;
    return L.has_tail ? pass_bytes(cfg, &one, 1, 1, 1, 0, bytes, e) : 0;
}

int eval_plan_init(eval_plan *ep, model *mdl, const model_config *cfg, const tok_stream *ts,
                   const eval_opts *o, txl_err *e)
{
    memset(ep, 0, sizeof *ep);
    ep->cfg = cfg;
    ep->ts = *ts; /* a view: --max-tokens keeps the first tokens */
    if (o->max_tokens && ep->ts.n > o->max_tokens)
        ep->ts.n = o->max_tokens;
    ep->o = *o;
    plan_layout L;
    if (layout_of(cfg, &ep->ts, o, &L, e))
        return -1;
    ep->nr = L.nr;
    ep->rank = L.rank;
    ep->R = L.R;
    ep->ng = L.ng;
    ep->nseg = L.nseg;
    int nb = L.nb, G = nb / ep->R / ep->ng;
    size_t ns = ep->ng > 1 ? ep->nseg : 0;
    if (pass_init(&ep->p, mdl, cfg, &ep->o, ep->R == 1 ? G : nb, ep->R == 1, 1, ns, e))
        return -1;
    ep->p.b0 = (size_t)ep->rank * nb;
    if (ep->R > 1) {
        ep->rep = calloc((size_t)ep->R, sizeof *ep->rep);
        if (!ep->rep)
            return err_set(e, ERR_RUNTIME, "out of memory");
        for (int r = 0; r < ep->R; r++) {
            if (pass_init(&ep->rep[r], mdl, cfg, &ep->o, G, 1, 0, ns, e))
                return -1;
            ep->rep[r].b0 = (size_t)r * (nb / ep->R); /* within this rank's streams */
        }
    }
    ep->has_tail = L.has_tail;
    ep->o_tail = ep->o;
    ep->o_tail.batch = 1;
    if (ep->has_tail && pass_init(&ep->tail, mdl, cfg, &ep->o_tail, 1, 1, 1, 0, e))
        return -1;
    return 0;
}

int eval_plan_run(eval_plan *ep, eval_result *r, txl_err *e)
{
    *r = (eval_result){0};
    batcher bt;
    pass *p = &ep->p;
    double t0 = sys_now(), g0 = gemm_thread_seconds(), c0 = sys_cpu_now();
    if (plan_batcher(&ep->ts, &ep->o, &bt, e))
        return -1;
    pass_reset(p, ep->nseg);
    for (int i = 0; ep->R > 1 && i < ep->R; i++)
        pass_reset(&ep->rep[i], ep->nseg);
    int rc = score_streams(ep, &bt, r, e);
    if (ep->nr > 1) {
        double v[5] = {p->nats, p->anchor_nats, (double)p->tokens, (double)p->anchors,
                       (double)p->bytes};
        dist_sum_f64(v, 5);
        p->nats = v[0], p->anchor_nats = v[1];
        p->tokens = (size_t)v[2], p->anchors = (size_t)v[3], p->bytes = (size_t)v[4];
    }
    if (rc)
        return -1;
    r->seconds = sys_now() - t0;
    r->cpu_seconds = sys_cpu_now() - c0;
    r->gemm_share = (gemm_thread_seconds() - g0) /
                    ((r->seconds > 1e-9 ? r->seconds : 1e-9) * par_max_threads());
    r->tokens = p->tokens;
    r->anchor_tokens = p->anchors;
    r->bytes = p->bytes;
    r->anchor_bits = p->anchor_nats / M_LN2;
    r->loss = r->tokens ? p->nats / (double)r->tokens : NAN;
    /* bits over bytes, as (nats per token) / ln 2 x tokens per byte: for bytes without
     * anchors the factor is exactly 1, and the number is the nats per byte / ln 2 it was */
    r->bpc = r->bytes ? r->loss / M_LN2 * ((double)r->tokens / (double)r->bytes) : NAN;
    if (!r->tokens)
        return err_set(e, ERR_INPUT, "%s: no tokens scored (with --warmup, the memory of %d "
                       "tokens must fill before scoring starts; the streams are too short)",
                       ep->ts.span.path, ep->o.mem_len);
    return 0;
}

void eval_plan_free(eval_plan *ep)
{
    for (int r = 0; ep->rep && r < ep->R; r++)
        pass_free(&ep->rep[r]);
    free(ep->rep);
    ep->rep = NULL;
    pass_free(&ep->p);
    pass_free(&ep->tail);
}

int eval_stream(model *mdl, const model_config *cfg, const tok_stream *ts, const eval_opts *o,
                eval_result *r, txl_err *e)
{
    *r = (eval_result){0};
    eval_plan ep;
    int rc = eval_plan_init(&ep, mdl, cfg, ts, o, e);
    if (!rc) {
        rc = eval_plan_run(&ep, r, e);
    } else if (ep.nr > 1) { /* out of memory on this rank: the others wait in the sum */
        double v[5] = {0, 0, 0, 0, 0};
        dist_sum_f64(v, 5);
    }
    eval_plan_free(&ep);
    return rc;
}
