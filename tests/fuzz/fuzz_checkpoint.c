/* fuzz_checkpoint.c: the checkpoint reader as `txl eval|sample|info|train --resume` use it.
 *
 * Input: a file, plain or gzip'd safetensors. st_read must accept it whole or reject it with
 * a message naming the file; what it accepts must be consistent (every tensor inside the
 * data, sizes matching shapes). Then ckpt_open builds the model from the config
 * in the metadata and loads the weights; when that succeeds the Adam moments and memory are
 * loaded as --resume does, and a small model runs two segments forward and a few decoding
 * steps, so whatever the loader accepts is usable (a quantized one: its stored matrices are
 * what its weights dequantize from, and it decodes with them and a bf16 cache). Accepted
 * files hold exactly the data their header describes (within the caps) and only finite
 * weights, moments and memory. */
#include <math.h>
#include <string.h>

#include "../../config/config.h"
#include "../../io/ckpt_open.h"
#include "../../data/units.h"
#include "../../io/checkpoint.h"
#include "../../model/decode.h"
#include "../../model/model.h"
#include "../../model/quant.h"
#include "../../io/safetensors.h"
#include "fuzz.h"

static size_t dtype_size(st_dtype d)
{
    switch (d) {
    case ST_F64: case ST_I64: return 8;
    case ST_F32: case ST_I32: return 4;
    case ST_F16: case ST_BF16: return 2;
    case ST_U8: case ST_I8: return 1;
    }
    return 0;
}

static void check_err(const txl_err *e, const char *path)
{
    FUZZ_CHECK(e->kind == ERR_INPUT || e->kind == ERR_RUNTIME, "kind %d", e->kind);
    FUZZ_CHECK(strnlen(e->msg, sizeof e->msg) < sizeof e->msg && e->msg[0], "empty message");
    if (e->kind == ERR_INPUT)
        FUZZ_CHECK(strncmp(e->msg, path, strlen(path)) == 0, "message does not name the file: %s",
                   e->msg);
}

/* Every float of x[0..n) is finite (what the loaders promise for what they accept). */
static void check_finite(const float *x, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(isfinite(x[i]), "%s[%zu] = %g accepted", what, i, x[i]);
}

static void check_file(const st_file *f)
{
    FUZZ_CHECK(f->data_start >= 8 && f->data_start <= f->len, "data_start %zu of %zu",
               f->data_start, f->len);
    FUZZ_CHECK(f->n <= ST_MAX_TENSORS && f->data_start - 8 <= ST_MAX_HEADER, "caps");
    size_t data_len = f->len - f->data_start, end = 0;
    for (int i = 0; i < f->n; i++) {
        const st_tensor *t = &f->t[i];
        FUZZ_CHECK(t->name != NULL, "tensor %d has no name", i);
        FUZZ_CHECK(t->ndim >= 0 && t->ndim <= ST_MAX_DIMS, "%s: ndim %d", t->name, t->ndim);
        FUZZ_CHECK(t->begin <= t->end && t->end <= data_len, "%s: [%zu, %zu) of %zu", t->name,
                   t->begin, t->end, data_len);
        size_t numel = 1;
        for (int k = 0; k < t->ndim; k++)
            numel *= (size_t)t->shape[k];
        FUZZ_CHECK(numel == t->numel, "%s: numel", t->name);
        FUZZ_CHECK(t->end - t->begin == t->numel * dtype_size(t->dtype), "%s: byte size",
                   t->name);
        FUZZ_CHECK(st_find(f, t->name) == t, "%s: duplicate name", t->name);
        end = t->end > end ? t->end : end;
    }
    FUZZ_CHECK(end == data_len, "data of %zu bytes, the tensors end at %zu", data_len, end);
    for (int i = 0; i < f->n_meta; i++)
        FUZZ_CHECK(st_meta(f, f->meta_keys[i]) != NULL, "meta %d", i);
}

/* --resume: moments and memory, when the buffers are small. */
static void load_state(const model *mdl, const st_file *f, const run_config *cfg,
                       const char *path)
{
    txl_err e = {0};
    float *m = calloc(mdl->n_floats + 1, sizeof(float));
    float *v = calloc(mdl->n_floats + 1, sizeof(float));
    if (m && v && ckpt_load_optim(mdl, f, m, v, &e)) {
        check_err(&e, path);
    } else if (m && v) {
        check_finite(m, mdl->n_floats, "optim.m");
        check_finite(v, mdl->n_floats, "optim.v");
    }
    free(m);
    free(v);
    const model_config *c = &cfg->model;
    double n = (double)c->n_layer * cfg->train.batch_size * c->mem_len * c->d_model;
    model_mem mem;
    if (n > (1 << 22) || mem_init(&mem, c, cfg->train.batch_size, c->mem_len, &e))
        return;
    if (ckpt_load_mem(f, &mem, 0, mem.B, &e))
        check_err(&e, path);
    else
        FUZZ_CHECK(mem.m >= 0 && mem.m <= mem.M, "mem.m %d of %d", mem.m, mem.M);
    for (int l = 0; l < mem.n_layer && mem.m > 0; l++)
        for (int b = 0; b < mem.B; b++)
            check_finite(mem_layer(&mem, l) + (size_t)b * mem.M * mem.d, (size_t)mem.m * mem.d,
                         "state.mem");
    mem_free(&mem);
}

/* eval and sample on a few tokens: 2 segments of at most 4, then 3 decoding steps. */
static void run_small(model *mdl, const run_config *cfg, const uint8_t *tok, size_t ntok)
{
    const model_config *c = &cfg->model;
    if (mdl->n_weights > (1u << 20) || (double)c->n_layer * c->d_inner > (1 << 20) ||
        (c->pos == POS_MLP && (double)c->mlp_hidden * c->mlp_num_freqs > (1 << 20)))
        return;
    int Lq = c->tgt_len < 4 ? c->tgt_len : 4, M = c->mem_len < 4 ? c->mem_len : 4;
    model_acts A;
    model_mem mem;
    txl_err e = {0};
    if (acts_init(&A, c, 1, Lq, M, 0, &e))
        return;
    if (mem_init(&mem, c, 1, M, &e)) {
        acts_free(&A);
        return;
    }
    txl_tok x[8] = {0}, y[8] = {0};
    for (size_t i = 0; i < 8 && i < ntok; i++)
        x[i] = tok[i];
    for (int i = 0; i < 7; i++)
        y[i] = x[i + 1];
    int32_t co[8][TXL_N_COORDS]; /* text coordinates (schemes that read them) */
    units_state us;
    units_init(&us, &(units_config){.anchors = 0});
    for (int i = 0; i < 8; i++) { /* the bytes' coordinates */
        units_push(&us, x[i]);
        memcpy(co[i], us.count, sizeof co[i]);
    }
    fwd_opts fo = {.training = 0, .coords = &co[0][0]};
    model_forward(mdl, &A, &mem, x, y, Lq, &fo);
    fo.coords = &co[4][0];
    model_forward(mdl, &A, &mem, x + 4, y + 4, Lq, &fo);
    /* sample's default cache, then a q8 one (its scales from whatever the weights give:
     * NaN and infinities included) */
    decode_cache caches[2] = {mdl->qm ? DECODE_CACHE_BF16 : DECODE_CACHE_FP32, DECODE_CACHE_Q8};
    for (int k = 0; k < 2; k++) {
        decode_state ds;
        if (decode_init(&ds, mdl, 1, M, caches[k], &e))
            continue;
        decode_prime(&ds, mdl, &mem, 2L * Lq);
        for (int i = 0; i < 3; i++)
            decode_step(&ds, mdl, &x[i], co[i]);
        decode_sync_mem(&ds, &mem);
        decode_free(&ds);
    }
    mem_free(&mem);
    acts_free(&A);
}

int txl_fuzz_checkpoint(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("ckpt", ".safetensors", data, size);
    if (!path)
        return 0;
    st_file f;
    txl_err e = {0};
    if (st_read(&f, path, &e)) {
        check_err(&e, path);
        FUZZ_CHECK(f.buf == NULL && f.t == NULL && f.n == 0, "failed read left state behind");
        return 0;
    }
    check_file(&f);
    st_free(&f);

    run_config cfg;
    model mdl;
    if (ckpt_open(path, NULL, &f, &cfg, &mdl, NULL, &e)) {
        check_err(&e, path);
        return 0;
    }
    FUZZ_CHECK(cfg_validate(&cfg, path, &e) == 0, "loaded config does not validate: %s", e.msg);
    check_finite(mdl.w, mdl.n_floats, "weights");
    for (int i = 0; i < mdl.n_params; i++) { /* a quantized tensor's weights are its values */
        const qmat *q = quant_of(&mdl, i);
        float *d = q ? malloc(mdl.table[i].numel * sizeof(float) + 1) : NULL;
        if (d) {
            quant_dequant(d, q);
            FUZZ_CHECK(memcmp(d, mdl.w + mdl.table[i].offset, mdl.table[i].numel * sizeof(float)) == 0,
                       "%s: the weights are not the stored tensor's dequantization",
                       mdl.table[i].name);
        }
        free(d);
    }
    load_state(&mdl, &f, &cfg, path);
    run_small(&mdl, &cfg, data, size);
    model_free(&mdl);
    st_free(&f);
    return 0;
}

FUZZ_ENTRY(txl_fuzz_checkpoint)
