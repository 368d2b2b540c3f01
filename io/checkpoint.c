/* checkpoint.c: model <-> safetensors (see checkpoint.h). The table of params.c is walked
 * in order, so the checkpoint lists tensors in the order of doc/design.md, "Checkpoints". */
#include "checkpoint.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/sys.h"
#include "../model/gemm_bf16.h"
#include "../model/quant.h"

int ckpt_save(const char *path, const model *mdl, const float *adam_m, const float *adam_v,
              const model_mem *mem, const ckpt_vocab *vocab, const char *const *meta,
              int gzip_level, txl_err *e)
{
    st_writer w;
    st_writer_init(&w);
    int n_extra = (adam_m ? 2 * mdl->n_params : 0) + (mem ? mem->n_layer : 0) + mdl->n_params;
    int32_t *coordcopy = NULL;
    char **names = calloc((size_t)n_extra + 1, sizeof *names);
    float *memcopy = NULL;
    int rc = names ? 0 : -1, k = 0;
    if (rc == 0 && vocab && vocab->bytes) { /* first: its data starts the file's data */
        int64_t shape[1] = {(int64_t)vocab->len};
        rc = st_writer_add(&w, CKPT_VOCAB_TENSOR, ST_U8, 1, shape, vocab->bytes);
    }
    for (int i = 0; rc == 0 && i < mdl->n_params; i++) { /* each as stored (quant.h) */
        const param_entry *p = &mdl->table[i];
        const qmat *q = quant_of(mdl, i);
        int64_t shape[2] = {p->shape[0], p->shape[1]};
        if (!q) {
            rc = st_writer_add(&w, p->name, ST_F32, p->ndim, shape, mdl->w + p->offset);
        } else if (q->type == QT_BF16) {
            rc = st_writer_add(&w, p->name, ST_BF16, p->ndim, shape, q->bf16);
        } else {
            size_t len = strlen(p->name) + sizeof CKPT_SCALE_SUFFIX;
            int64_t sshape[2] = {p->shape[0], p->shape[1] / QK};
            if (!(names[k] = malloc(len))) {
                rc = -1;
                break;
            }
            snprintf(names[k], len, "%s%s", p->name, CKPT_SCALE_SUFFIX);
            rc = st_writer_add(&w, p->name, ST_I8, 2, shape, q->q) ||
                 st_writer_add(&w, names[k++], ST_BF16, 2, sshape, q->scale);
        }
    }
    for (int pass = 0; adam_m && rc == 0 && pass < 2; pass++)
        for (int i = 0; rc == 0 && i < mdl->n_params; i++) {
            const param_entry *p = &mdl->table[i];
            int64_t shape[2] = {p->shape[0], p->shape[1]};
            size_t len = strlen(p->name) + 16;
            names[k] = malloc(len);
            if (!names[k]) {
                rc = -1;
                break;
            }
            snprintf(names[k], len, "optim.%c.%s", pass ? 'v' : 'm', p->name);
            rc = st_writer_add(&w, names[k++], ST_F32, p->ndim, shape,
                               (pass ? adam_v : adam_m) + p->offset);
        }
    if (mem && rc == 0 && mem->m > 0) {
        /* stored packed [B, m, d] per layer (the buffer holds M rows per stream) */
        size_t per = (size_t)mem->B * mem->m * mem->d;
        memcopy = malloc((size_t)mem->n_layer * per * sizeof(float) + 1);
        if (!memcopy)
            rc = -1;
        for (int l = 0; rc == 0 && l < mem->n_layer; l++) {
            float *dst = memcopy + (size_t)l * per;
            for (int b = 0; b < mem->B; b++)
                memcpy(dst + (size_t)b * mem->m * mem->d,
                       mem_layer(mem, l) + (size_t)b * mem->M * mem->d,
                       (size_t)mem->m * mem->d * sizeof(float));
            names[k] = malloc(32);
            if (!names[k]) {
                rc = -1;
                break;
            }
            snprintf(names[k], 32, "state.mem.%d", l);
            int64_t shape[3] = {mem->B, mem->m, mem->d};
            rc = st_writer_add(&w, names[k++], ST_F32, 3, shape, dst);
        }
        if (rc == 0 && mem->coords) { /* the rows' text coordinates, packed [B, m, 3] */
            size_t row = TXL_N_COORDS * sizeof(int32_t);
            coordcopy = malloc((size_t)mem->B * mem->m * row);
            if (!coordcopy)
                rc = -1;
            for (int b = 0; rc == 0 && b < mem->B; b++)
                memcpy(coordcopy + (size_t)b * mem->m * TXL_N_COORDS,
                       mem->coords + (size_t)b * mem->M * TXL_N_COORDS, (size_t)mem->m * row);
            int64_t shape[3] = {mem->B, mem->m, TXL_N_COORDS};
            if (rc == 0)
                rc = st_writer_add(&w, "state.coords", ST_I32, 3, shape, coordcopy);
        }
    }
    for (int i = 0; rc == 0 && meta && meta[i]; i += 2)
        rc = st_writer_meta(&w, meta[i], meta[i + 1] ? meta[i + 1] : "");
    if (rc)
        err_set(e, ERR_RUNTIME, "%s: out of memory preparing the checkpoint", path);
    else
        rc = st_write(&w, path, gzip_level, e);
    for (int i = 0; names && i < k; i++)
        free(names[i]);
    free(names);
    free(memcopy);
    free(coordcopy);
    st_writer_free(&w);
    return rc;
}

/* Every value of a tensor is finite: one NaN or infinity makes every loss nan (eval
 * printed "nan" and exited 0, `eval --json` wrote "loss":nan, sample emitted 0xFF bytes,
 * export passed it on). With `nonneg`, none is negative either (-0 is fine): Adam's second
 * moment is a running mean of squared gradients, and a negative one turned into NaN two
 * steps after a resume. The message names the tensor and the first bad value's index.
 * x: n floats, any alignment (a tensor's bytes in the file need not be aligned). Blocks
 * of 4096 are OR-reduced first (no early exit, so the loop vectorises). */
static int check_values(const st_file *f, const st_tensor *t, const void *x, size_t n,
                        int nonneg, txl_err *e)
{
    const uint8_t *p = x;
    /* inf or nan: exponent all ones; negative: the sign bit and a non-zero magnitude */
    const uint32_t neg = nonneg ? 0x80000000u : 0xffffffffu;
    for (size_t b = 0; b < n; b += 4096) {
        size_t end = n - b < 4096 ? n : b + 4096;
        uint32_t bad = 0, u = 0;
        for (size_t i = b; i < end; i++) {
            memcpy(&u, p + 4 * i, 4);
            bad |= ((u & 0x7f800000u) == 0x7f800000u) | (u > neg);
        }
        if (!bad)
            continue;
        size_t i = b;
        for (;; i++) {
            memcpy(&u, p + 4 * i, 4);
            if ((u & 0x7f800000u) == 0x7f800000u || u > neg)
                break;
        }
        float v;
        memcpy(&v, &u, 4);
        size_t idx[ST_MAX_DIMS] = {0}, rest = i; /* row-major: the last index moves fastest */
        for (int k = t->ndim - 1; k >= 0; k--) {
            size_t dim = t->shape[k] > 0 ? (size_t)t->shape[k] : 1;
            idx[k] = rest % dim;
            rest /= dim;
        }
        char at[200] = "";
        size_t o = 0;
        for (int k = 0; k < t->ndim && o < sizeof at - 24; k++)
            o += (size_t)snprintf(at + o, sizeof at - o, "%s%zu", k ? ", " : "", idx[k]);
        if (isfinite(v))
            return err_set(e, ERR_INPUT, "%s: tensor '%s' holds a negative value (%g) at index "
                           "[%s] (element %zu of %zu): an Adam second moment is a running mean "
                           "of squared gradients, never negative", f->path, t->name, v, at, i,
                           n);
        return err_set(e, ERR_INPUT, "%s: tensor '%s' holds a non-finite value (%g) at index "
                       "[%s] (element %zu of %zu)", f->path, t->name, v, at, i, n);
    }
    return 0;
}

static int check_finite(const st_file *f, const st_tensor *t, const void *x, size_t n,
                        txl_err *e)
{
    return check_values(f, t, x, n, 0, e);
}

/* Every bf16 value of a tensor is finite (the exponent of an infinity or a NaN is all
 * ones); else the message names the tensor and the first bad value's element. */
static int check_finite_bf16(const st_file *f, const st_tensor *t, txl_err *e)
{
    const uint8_t *p = st_data(f, t);
    uint16_t bad = 0, u;
    for (size_t i = 0; i < t->numel; i++) {
        memcpy(&u, p + 2 * i, 2);
        bad |= (u & 0x7f80u) == 0x7f80u;
    }
    for (size_t i = 0; bad && i < t->numel; i++) {
        memcpy(&u, p + 2 * i, 2);
        if ((u & 0x7f80u) == 0x7f80u)
            return err_set(e, ERR_INPUT, "%s: tensor '%s' holds a non-finite value (%g) at "
                           "element %zu of %zu", f->path, t->name, bf16_to_f32(u), i,
                           t->numel);
    }
    return 0;
}

static void fmt_dims(char *buf, size_t cap, const st_tensor *t)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < t->ndim && o < cap - 24; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
}

/* The scales of the q8 tensor t (parameter p, [rows, cols]): NAME_scale, BF16 [rows,
 * cols / QK]. A scale tensor of another width is a block size that does not divide the
 * row, or one that is not txl's (QK); of other rows, a truncated one. */
static int check_scales(const st_file *f, const st_tensor *t, const param_entry *p,
                        const st_tensor **out, txl_err *e)
{
    char nm[sizeof p->name + sizeof CKPT_SCALE_SUFFIX], got[128];
    snprintf(nm, sizeof nm, "%s%s", p->name, CKPT_SCALE_SUFFIX);
    const st_tensor *s = st_find(f, nm);
    int rows = p->shape[0], cols = p->shape[1];
    if (p->ndim != 2 || cols % QK)
        return err_set(e, ERR_INPUT, "%s: tensor '%s' is I8 (q8), but its rows of %d are not "
                       "whole blocks of %d (store it as BF16 or F32)", f->path, t->name,
                       p->ndim == 2 ? cols : p->shape[0], QK);
    if (!s)
        return err_set(e, ERR_INPUT, "%s: missing tensor '%s': the scales of the q8 tensor '%s' "
                       "(BF16 [%d, %d], one per block of %d weights of a row)", f->path, nm,
                       t->name, rows, cols / QK, QK);
    fmt_dims(got, sizeof got, s);
    if (s->dtype != ST_BF16)
        return err_set(e, ERR_INPUT, "%s: tensor '%s' has dtype %s: txl's q8 scales are BF16",
                       f->path, nm, st_dtype_name(s->dtype));
    if (s->ndim == 2 && s->shape[0] == rows && s->shape[1] > 0 && s->shape[1] != cols / QK) {
        if (cols % s->shape[1])
            return err_set(e, ERR_INPUT, "%s: tensor '%s' has shape [%s]: %lld scales a row "
                           "make blocks that do not divide the row of %d weights of '%s'",
                           f->path, nm, got, (long long)s->shape[1], cols, t->name);
        return err_set(e, ERR_INPUT, "%s: tensor '%s' has shape [%s]: blocks of %lld weights, "
                       "but txl's q8 blocks are %d (expected [%d, %d] for '%s' [%d, %d])",
                       f->path, nm, got, (long long)(cols / s->shape[1]), QK, rows, cols / QK,
                       t->name, rows, cols);
    }
    if (s->ndim != 2 || s->shape[0] != rows || s->shape[1] != cols / QK)
        return err_set(e, ERR_INPUT, "%s: tensor '%s' has shape [%s], but the q8 tensor '%s' "
                       "[%d, %d] needs [%d, %d] (one scale per block of %d weights of a row)",
                       f->path, nm, got, t->name, rows, cols, rows, cols / QK, QK);
    *out = s;
    return 0;
}

/* A parameter's tensor: the table's shape; F32, or (quant_ok) BF16 or I8 with its scales
 * (quant.h), any parameter, as other tools may store them. Training (!quant_ok) refuses a
 * quantized checkpoint by the first tensor that is not F32. */
static int check_shape(const st_file *f, const st_tensor *t, const param_entry *p, int quant_ok,
                       txl_err *e)
{
    int ok = t->ndim == p->ndim && t->shape[0] == p->shape[0] &&
             (p->ndim == 1 || t->shape[1] == p->shape[1]);
    int quant = t->dtype == ST_BF16 || t->dtype == ST_I8;
    if (quant && !quant_ok)
        return err_set(e, ERR_INPUT, "%s: quantized (tensor '%s' is %s), use the original to "
                       "train (--init-from reads a quantized checkpoint's weights, dequantized)",
                       f->path, t->name, st_dtype_name(t->dtype));
    if (t->dtype != ST_F32 && !quant)
        return err_set(e, ERR_INPUT, "%s: tensor '%s' has dtype %s, expected F32%s", f->path,
                       t->name, st_dtype_name(t->dtype),
                       quant_ok ? " (or BF16, or I8 with its scales: a quantized checkpoint)" : "");
    if (!ok) {
        char got[128] = "", want[64];
        fmt_dims(got, sizeof got, t);
        if (p->ndim == 1)
            snprintf(want, sizeof want, "%d", p->shape[0]);
        else
            snprintf(want, sizeof want, "%d, %d", p->shape[0], p->shape[1]);
        return err_set(e, ERR_INPUT,
                       "%s: tensor '%s' has shape [%s], but the config in the checkpoint "
                       "implies [%s]", f->path, t->name, got, want);
    }
    const st_tensor *sc;
    return t->dtype == ST_I8 ? check_scales(f, t, p, &sc, e) : 0;
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int ckpt_is_i8_scale(const st_file *f, const char *nm)
{
    size_t n = strlen(nm), ns = strlen(CKPT_SCALE_SUFFIX);
    char base[256];
    if (n <= ns || n - ns >= sizeof base || strcmp(nm + n - ns, CKPT_SCALE_SUFFIX) != 0)
        return 0;
    memcpy(base, nm, n - ns);
    base[n - ns] = 0;
    const st_tensor *t = st_find(f, base);
    return t && t->dtype == ST_I8;
}

/* Every tensor of f in a class is one this model has: with `prefix` NULL, every tensor
 * outside optim.* and state.* is a parameter; with "optim.", every optim.* tensor is
 * optim.m.<parameter> or optim.v.<parameter>. The parameter names are sorted once and
 * each tensor is a binary search: O(n log P), where a scan of the table for each of n
 * tensors was O(n P). The message names the first stranger in header order. */
static int check_names(const model *mdl, const st_file *f, const char *prefix, txl_err *e)
{
    const char **names = malloc(((size_t)mdl->n_params + 1) * sizeof *names);
    if (!names)
        return err_set(e, ERR_RUNTIME, "%s: out of memory", f->path);
    for (int i = 0; i < mdl->n_params; i++)
        names[i] = mdl->table[i].name;
    qsort(names, (size_t)mdl->n_params, sizeof *names, cmp_str_ptr);
    int rc = 0;
    for (int i = 0; i < f->n && rc == 0; i++) {
        const char *nm = f->t[i].name, *key = nm;
        int optim = strncmp(nm, "optim.", 6) == 0, state = strncmp(nm, "state.", 6) == 0;
        if (prefix ? !optim : optim || state || strcmp(nm, CKPT_VOCAB_TENSOR) == 0)
            continue;
        if (prefix) /* optim.m.<name>, optim.v.<name> */
            key = (nm[6] == 'm' || nm[6] == 'v') && nm[7] == '.' ? nm + 8 : NULL;
        if (!prefix && ckpt_is_i8_scale(f, nm))
            continue;
        if (!key || !bsearch(&key, names, (size_t)mdl->n_params, sizeof *names, cmp_str_ptr))
            rc = err_set(e, ERR_INPUT, "%s: unexpected tensor '%s' (not %s of a pos_scheme %s "
                         "model with this config)", f->path, nm,
                         prefix ? "an Adam moment of a parameter" : "a parameter",
                         pos_scheme_name(mdl->cfg.pos));
    }
    free(names);
    return rc;
}

/* The tensor of parameter p in f, of p's shape (and dtype: F32, or with quant_ok a
 * quantized one); NULL with e when it is missing or not. */
static const st_tensor *param_tensor(const model *mdl, const st_file *f, const param_entry *p,
                                     int quant_ok, txl_err *e)
{
    const st_tensor *t = st_find(f, p->name);
    if (!t) {
        err_set(e, ERR_INPUT, "%s: missing tensor '%s' (required by pos_scheme %s with this "
                "config)", f->path, p->name, pos_scheme_name(mdl->cfg.pos));
        return NULL;
    }
    return check_shape(f, t, p, quant_ok, e) ? NULL : t;
}

int ckpt_load_weights(model *mdl, const st_file *f, int keep, txl_err *e)
{
    size_t qbytes = 0;
    for (int i = 0; i < mdl->n_params; i++) {
        const param_entry *p = &mdl->table[i];
        const st_tensor *t = param_tensor(mdl, f, p, 1, e);
        if (!t)
            return -1;
        qtype qt = t->dtype == ST_I8 ? QT_Q8 : t->dtype == ST_BF16 ? QT_BF16 : QT_F32;
        if (qt != QT_F32)
            qbytes += quant_place(NULL, qt, p->shape[0], p->ndim == 2 ? p->shape[1] : 1, NULL);
    }
    if (check_names(mdl, f, NULL, e))
        return -1;
    qmat *qm = NULL;
    unsigned char *qbuf = NULL;
    if (qbytes && (!(qm = calloc((size_t)mdl->n_params, sizeof *qm)) ||
                   !(qbuf = sys_alloc(qbytes + 64)))) {
        free(qm);
        return err_set(e, ERR_RUNTIME, "%s: out of memory for the quantized weights", f->path);
    }
    size_t at = 0;
    int rc = 0;
    for (int i = 0; rc == 0 && i < mdl->n_params; i++) {
        const param_entry *p = &mdl->table[i];
        const st_tensor *t = st_find(f, p->name), *s = NULL;
        float *w = mdl->w + p->offset;
        if (t->dtype == ST_F32) {
            if (!(rc = check_finite(f, t, st_data(f, t), p->numel, e)))
                memcpy(w, st_data(f, t), p->numel * sizeof(float));
            continue;
        }
        qmat *m = &qm[i];
        at += quant_place(m, t->dtype == ST_I8 ? QT_Q8 : QT_BF16, p->shape[0],
                          p->ndim == 2 ? p->shape[1] : 1, qbuf + at);
        if (t->dtype == ST_BF16) {
            rc = check_finite_bf16(f, t, e);
            memcpy((void *)m->bf16, st_data(f, t), p->numel * 2);
        } else {
            rc = check_scales(f, t, p, &s, e) || check_finite_bf16(f, s, e) ? -1 : 0;
            memcpy((void *)m->q, st_data(f, t), p->numel);
            if (rc == 0)
                memcpy((void *)m->scale, st_data(f, s), s->numel * 2);
        }
        if (rc == 0) {
            quant_finish(m);
            quant_dequant(w, m);
        }
    }
    free(mdl->qm);
    free(mdl->qbuf);
    mdl->qm = rc == 0 && keep ? qm : NULL;
    mdl->qbuf = rc == 0 && keep ? qbuf : NULL;
    if (!mdl->qm) {
        free(qm);
        free(qbuf);
    }
    return rc;
}

int ckpt_load_optim(const model *mdl, const st_file *f, float *m, float *v, txl_err *e)
{
    char nm[128];
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < mdl->n_params; i++) {
            const param_entry *p = &mdl->table[i];
            snprintf(nm, sizeof nm, "optim.%c.%s", pass ? 'v' : 'm', p->name);
            const st_tensor *t = st_find(f, nm);
            if (!t)
                return err_set(e, ERR_INPUT, "%s: missing tensor '%s': this checkpoint has no "
                               "optimiser state to resume from (use --init-from to start a new "
                               "run from its weights)", f->path, nm);
            if (check_shape(f, t, p, 0, e))
                return -1;
            if (check_values(f, t, st_data(f, t), p->numel, pass, e))
                return -1;
            memcpy((pass ? v : m) + p->offset, st_data(f, t), p->numel * sizeof(float));
        }
    return check_names(mdl, f, "optim.", e);
}

/* l when name is exactly "state.mem.<l>" (decimal, no sign or leading zero), else -1. */
static long mem_layer_of(const char *name)
{
    const char *d = name + 10;
    if (strncmp(name, "state.mem.", 10) != 0 || *d < '0' || *d > '9' || (d[0] == '0' && d[1]))
        return -1;
    long l = 0;
    for (; *d >= '0' && *d <= '9' && l < INT_MAX; d++)
        l = 10 * l + (*d - '0');
    return *d ? -1 : l;
}

/* The state tensors of f against what a model of n_layer layers of width d may hold (see
 * ckpt_state). Every state.* is state.mem.<l> (l < n_layer) or state.coords. Loaded
 * (s->exact): the memory of every layer or of none, each F32 [streams, m, d] with the same
 * m <= mem_len; none only without memory (mem_len 0: a training step always leaves rows in
 * it, and a checkpoint with state is written after a step); state.coords I32 [streams, m,
 * 3] exactly when there is memory and the scheme reads coordinates. Not loaded: each of its
 * dtype and rank, and no larger than that memory. */
static int check_state(const st_file *f, int n_layer, int d, const ckpt_state *s, txl_err *e)
{
    int n_mem = 0, m = -1;
    for (int i = 0; i < f->n; i++) {
        const st_tensor *t = &f->t[i];
        if (strncmp(t->name, "state.", 6) != 0)
            continue;
        int coords = strcmp(t->name, "state.coords") == 0;
        long l = coords ? 0 : mem_layer_of(t->name);
        if (l < 0 || l >= n_layer)
            return err_set(e, ERR_INPUT, "%s: unexpected tensor '%s' (the memory of a %d-layer "
                           "model is state.mem.0 to state.mem.%d)", f->path, t->name, n_layer,
                           n_layer - 1);
        if (!coords && m < 0 && t->ndim == 3)
            m = (int)(t->shape[1] < INT_MAX ? t->shape[1] : INT_MAX);
        n_mem += !coords;
        int w = coords ? TXL_N_COORDS : d;
        if (!s->exact && (t->dtype != (coords ? ST_I32 : ST_F32) || t->ndim != 3 ||
                          t->shape[2] != w ||
                          (double)t->numel > (double)s->streams * s->mem_len * w))
            return err_set(e, ERR_INPUT, "%s: tensor '%s' is not the %s of this config's memory "
                           "(%s [%d, <= %d, %d]: train.batch_size x grad_accum streams, at most "
                           "model.mem_len rows, %s)", f->path, t->name,
                           coords ? "text coordinates" : "layer input",
                           coords ? "I32" : "F32", s->streams, s->mem_len, w,
                           coords ? "3 coordinates" : "d_model");
    }
    if (!s->exact)
        return 0;
    const st_tensor *tc = st_find(f, "state.coords");
    if (n_mem == 0 && s->mem_len > 0)
        return err_set(e, ERR_INPUT, "%s: missing tensor 'state.mem.0': a checkpoint to resume "
                       "from holds the memory of every layer (state.mem.0 to state.mem.%d) "
                       "when model.mem_len > 0 (%d), and this one has none", f->path,
                       n_layer - 1, s->mem_len);
    for (int l = 0; n_mem > 0 && l < n_layer; l++) {
        char nm[32];
        snprintf(nm, sizeof nm, "state.mem.%d", l);
        const st_tensor *t = st_find(f, nm);
        if (!t || t->dtype != ST_F32 || t->ndim != 3 || t->shape[0] != s->streams ||
            t->shape[1] != m || m > s->mem_len || t->shape[2] != d)
            return err_set(e, ERR_INPUT, "%s: memory tensor '%s' missing or not [%d, %d, %d] "
                           "F32 (batch, rows <= mem_len %d, d_model)", f->path, nm, s->streams,
                           m, d, s->mem_len);
    }
    if (!s->coords || n_mem == 0 || m == 0)
        return tc ? err_set(e, ERR_INPUT, "%s: unexpected tensor 'state.coords' (the model "
                            "reads no text coordinates, or the checkpoint has no memory)",
                            f->path) : 0;
    if (!tc || tc->dtype != ST_I32 || tc->ndim != 3 || tc->shape[0] != s->streams ||
        tc->shape[1] != m || tc->shape[2] != TXL_N_COORDS)
        return err_set(e, ERR_INPUT, "%s: tensor 'state.coords' missing or not [%d, %d, %d] I32 "
                       "(the text coordinates of the memory rows)", f->path, s->streams, m,
                       TXL_N_COORDS);
    return 0;
}

int ckpt_check_header(const model *mdl, const st_file *f, const ckpt_state *s, txl_err *e)
{
    char nm[128];
    for (int i = 0; i < mdl->n_params; i++) {
        const param_entry *p = &mdl->table[i];
        if (!param_tensor(mdl, f, p, !s->exact, e))
            return -1;
        for (int pass = 0; pass < 2; pass++) { /* its Adam moments: all of them to resume */
            snprintf(nm, sizeof nm, "optim.%c.%s", pass ? 'v' : 'm', p->name);
            const st_tensor *o = st_find(f, nm);
            if (!o && s->exact)
                return err_set(e, ERR_INPUT, "%s: missing tensor '%s': this checkpoint has no "
                               "optimiser state to resume from (use --init-from to start a new "
                               "run from its weights)", f->path, nm);
            if (o && check_shape(f, o, p, 0, e))
                return -1;
        }
    }
    const st_tensor *v = st_find(f, CKPT_VOCAB_TENSOR);
    if (v && (v->dtype != ST_U8 || v->ndim != 1 || v->numel > CKPT_VOCAB_MAX))
        return err_set(e, ERR_INPUT, "%s: tensor '%s' is not a vocabulary (U8 [n], at most %d "
                       "MiB)", f->path, CKPT_VOCAB_TENSOR, CKPT_VOCAB_MAX >> 20);
    return check_names(mdl, f, NULL, e) || check_names(mdl, f, "optim.", e) ||
           check_state(f, mdl->cfg.n_layer, mdl->cfg.d_model, s, e) ? -1 : 0;
}

/* state.coords [B_total, m, 3] I32 (check_state has checked its shape): counts of units, so
 * >= 0 and non-decreasing along the rows. */
static int load_coords(const st_file *f, model_mem *mem, size_t b_offset, txl_err *e)
{
    const st_tensor *t = st_find(f, "state.coords");
    int m = mem->m;
    if (!t)
        return 0;
    const unsigned char *src = (const unsigned char *)st_data(f, t);
    for (size_t i = 0; i < (size_t)t->numel; i++) { /* any alignment: byte copies */
        int32_t x, prev = 0;
        memcpy(&x, src + 4 * i, 4);
        if (i % ((size_t)m * TXL_N_COORDS) >= TXL_N_COORDS)
            memcpy(&prev, src + 4 * (i - TXL_N_COORDS), 4);
        if (x < 0 || x < prev)
            return err_set(e, ERR_INPUT, "%s: 'state.coords' value %ld is %ld: coordinates "
                           "count units, so are >= 0 and non-decreasing along the rows",
                           f->path, (long)i, (long)x);
    }
    for (int b = 0; b < mem->B; b++)
        memcpy(mem->coords + (size_t)b * mem->M * TXL_N_COORDS,
               src + ((b_offset + (size_t)b) * m * TXL_N_COORDS) * 4,
               (size_t)m * TXL_N_COORDS * 4);
    return 0;
}

int ckpt_load_mem(const st_file *f, model_mem *mem, size_t b_offset, int B_total, txl_err *e)
{
    ckpt_state s = {.streams = B_total, .mem_len = mem->M, .coords = mem->coords != NULL,
                    .exact = 1};
    mem_reset(mem);
    if (b_offset + (size_t)mem->B > (size_t)B_total)
        return err_set(e, ERR_RUNTIME, "%s: streams %zu to %zu of a memory of %d", f->path,
                       b_offset, b_offset + (size_t)mem->B, B_total);
    if (check_state(f, mem->n_layer, mem->d, &s, e))
        return -1;
    const st_tensor *t0 = st_find(f, "state.mem.0");
    if (!t0)
        return 0;
    int m = (int)t0->shape[1];
    for (int l = 0; l < mem->n_layer; l++) {
        char nm[32];
        snprintf(nm, sizeof nm, "state.mem.%d", l);
        const st_tensor *t = st_find(f, nm);
        if (check_finite(f, t, st_data(f, t), t->numel, e))
            return -1;
        const float *src = (const float *)st_data(f, t) + b_offset * (size_t)m * mem->d;
        for (int b = 0; b < mem->B; b++)
            memcpy(mem_layer(mem, l) + (size_t)b * mem->M * mem->d,
                   src + (size_t)b * m * mem->d, (size_t)m * mem->d * sizeof(float));
    }
    mem->m = m;
    return load_coords(f, mem, b_offset, e);
}
