/* checkpoint.c: model <-> safetensors (see checkpoint.h). The table of params.c is walked
 * in order, so the checkpoint lists tensors in the order of doc/design.md, "Checkpoints". */
#include "checkpoint.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ckpt_save(const char *path, const model *mdl, const float *adam_m, const float *adam_v,
              const model_mem *mem, const ckpt_vocab *vocab, const char *const *meta,
              int gzip_level, txl_err *e)
{
    st_writer w;
    st_writer_init(&w);
    int n_extra = (adam_m ? 2 * mdl->n_params : 0) + (mem ? mem->n_layer : 0);
    int32_t *coordcopy = NULL;
    char **names = calloc((size_t)n_extra + 1, sizeof *names);
    float *memcopy = NULL;
    int rc = names ? 0 : -1, k = 0;
    if (rc == 0 && vocab && vocab->bytes) { /* first: its data starts the file's data */
        int64_t shape[1] = {(int64_t)vocab->len};
        rc = st_writer_add(&w, CKPT_VOCAB_TENSOR, ST_U8, 1, shape, vocab->bytes);
    }
    for (int i = 0; rc == 0 && i < mdl->n_params; i++) {
        const param_entry *p = &mdl->table[i];
        int64_t shape[2] = {p->shape[0], p->shape[1]};
        rc = st_writer_add(&w, p->name, ST_F32, p->ndim, shape, mdl->w + p->offset);
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

static int check_shape(const st_file *f, const st_tensor *t, const param_entry *p, txl_err *e)
{
    int ok = t->ndim == p->ndim && t->shape[0] == p->shape[0] &&
             (p->ndim == 1 || t->shape[1] == p->shape[1]);
    if (t->dtype != ST_F32)
        return err_set(e, ERR_INPUT, "%s: tensor '%s' has dtype %s, expected F32", f->path,
                       t->name, st_dtype_name(t->dtype));
    if (!ok) {
        char got[128] = "", want[64];
        size_t o = 0;
        for (int i = 0; i < t->ndim && o < sizeof got - 24; i++)
            o += (size_t)snprintf(got + o, sizeof got - o, "%s%lld", i ? ", " : "",
                                  (long long)t->shape[i]);
        if (p->ndim == 1)
            snprintf(want, sizeof want, "%d", p->shape[0]);
        else
            snprintf(want, sizeof want, "%d, %d", p->shape[0], p->shape[1]);
        return err_set(e, ERR_INPUT,
                       "%s: tensor '%s' has shape [%s], but the config in the checkpoint "
                       "implies [%s]", f->path, t->name, got, want);
    }
    return 0;
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
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
        if (!key || !bsearch(&key, names, (size_t)mdl->n_params, sizeof *names, cmp_str_ptr))
            rc = err_set(e, ERR_INPUT, "%s: unexpected tensor '%s' (not %s of a pos_scheme %s "
                         "model with this config)", f->path, nm,
                         prefix ? "an Adam moment of a parameter" : "a parameter",
                         pos_scheme_name(mdl->cfg.pos));
    }
    free(names);
    return rc;
}

/* The tensor of parameter p in f, of p's shape; NULL with e when it is missing or not. */
static const st_tensor *param_tensor(const model *mdl, const st_file *f, const param_entry *p,
                                     txl_err *e)
{
    const st_tensor *t = st_find(f, p->name);
    if (!t) {
        err_set(e, ERR_INPUT, "%s: missing tensor '%s' (required by pos_scheme %s with this "
                "config)", f->path, p->name, pos_scheme_name(mdl->cfg.pos));
        return NULL;
    }
    return check_shape(f, t, p, e) ? NULL : t;
}

int ckpt_load_weights(model *mdl, const st_file *f, txl_err *e)
{
    for (int i = 0; i < mdl->n_params; i++) {
        const param_entry *p = &mdl->table[i];
        const st_tensor *t = param_tensor(mdl, f, p, e);
        if (!t)
            return -1;
        if (check_finite(f, t, st_data(f, t), p->numel, e))
            return -1;
        memcpy(mdl->w + p->offset, st_data(f, t), p->numel * sizeof(float));
    }
    return check_names(mdl, f, NULL, e);
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
            if (check_shape(f, t, p, e))
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
        if (!param_tensor(mdl, f, p, e))
            return -1;
        for (int pass = 0; pass < 2; pass++) { /* its Adam moments: all of them to resume */
            snprintf(nm, sizeof nm, "optim.%c.%s", pass ? 'v' : 'm', p->name);
            const st_tensor *o = st_find(f, nm);
            if (!o && s->exact)
                return err_set(e, ERR_INPUT, "%s: missing tensor '%s': this checkpoint has no "
                               "optimiser state to resume from (use --init-from to start a new "
                               "run from its weights)", f->path, nm);
            if (o && check_shape(f, o, p, e))
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
