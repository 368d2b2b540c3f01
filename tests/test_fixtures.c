/* test_fixtures.c: txl's model against the independent PyTorch reference (tests/ref/,
 * float64). For every tests/fixtures/<case>.safetensors: load the parameters, run the
 * stored segments with memory carried, and compare logits (an adaptive softmax's
 * log-probabilities: model_row_logprobs), loss and memory per segment and
 * every parameter gradient; for the adam cases, the per-step losses and final weights of
 * 5 optimiser steps. Prints the max error per tensor class; fails on any mismatch.
 *
 * Errors are norm-relative per tensor: max|txl - ref| / max|ref| (tl_max_rel_err), since
 * elementwise relative errors of entries near zero mean nothing. Tolerance 1e-5 (float32
 * against float64); losses are compared with plain relative error, also 1e-5.
 * Two tensors need a different yardstick, both because the true value is (near) zero:
 *  - a gradient that is zero by symmetry (the mlp bias's output bias b2 shifts every score
 *    of a row equally and softmax ignores it): its float32 value is pure round-off, so the
 *    floor of the denominator is 1e-3 of the largest gradient in the model;
 *  - Adam's final weights: Adam divides by sqrt(v), so an element whose gradient is
 *    round-off (e.g. xl's r.weight columns for the lowest frequencies, whose cos ~ 1 is
 *    constant over positions and cancels in the softmax) still moves by up to lr per step in
 *    a direction set by the round-off's sign. We therefore compare the final weights in
 *    units of the largest displacement Adam can make, lr * steps, at 2e-2, while the
 *    per-step losses (which such elements cannot affect) are held to 1e-5. The update
 *    formula itself is checked exactly against a double-precision twin in test_ops.c. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../data/units.h"
#include "../model/model.h"
#include "../io/safetensors.h"
#include "../optim/optim.h"
#include "testlib.h"

#define TOL 1e-5

static const char *dir = "tests/fixtures";

static int jint(cJSON *o, const char *k, int def)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valueint : cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}

static double jnum(cJSON *o, const char *k, double def)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

/* model.hier_levels: a list of level names -> HIER_* bits (all four when absent) */
static int jlevels(cJSON *o)
{
    static const char *const names[] = {"token", "word", "sent", "para"};
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "hier_levels");
    if (!cJSON_IsArray(v))
        return HIER_ALL;
    int bits = 0;
    for (cJSON *it = v->child; it; it = it->next)
        for (int k = 0; k < 4; k++)
            if (cJSON_IsString(it) && strcmp(it->valuestring, names[k]) == 0)
                bits |= 1 << k;
    return bits;
}

/* data.anchors and data.doc_separator of the cases with anchor tokens */
static units_config junits(cJSON *root)
{
    static const char *const names[] = {"bos", "para", "sent"};
    units_config u = {.anchors = 0};
    cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "data");
    cJSON *a = cJSON_GetObjectItemCaseSensitive(d, "anchors");
    cJSON *sep = cJSON_GetObjectItemCaseSensitive(d, "doc_separator");
    for (cJSON *it = cJSON_IsArray(a) ? a->child : NULL; it; it = it->next)
        for (unsigned k = 0; k < 3; k++)
            if (cJSON_IsString(it) && strcmp(it->valuestring, names[k]) == 0)
                u.anchors |= 1u << k;
    snprintf(u.sep, sizeof u.sep, "%s", cJSON_IsString(sep) ? sep->valuestring : "");
    return u;
}

/* model.xl_terms: the letters of the terms in use -> the bits of those switched off */
static int jxl_off(cJSON *o)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "xl_terms");
    const char *t = cJSON_IsString(v) ? v->valuestring : "abcd";
    int off = 0;
    for (int k = 0; k < 4; k++)
        if (!strchr(t, 'a' + k))
            off |= 1 << k;
    return off;
}

/* model.cutoffs: a list of token ids (none when absent) */
static cutoff_list jcutoffs(cJSON *o)
{
    cutoff_list k = {0};
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "cutoffs");
    for (cJSON *it = cJSON_IsArray(v) ? v->child : NULL; it && k.n < MODEL_MAX_CUTOFFS;
         it = it->next)
        k.v[k.n++] = it->valueint;
    return k;
}

static double *get64(st_file *f, const char *name, size_t n)
{
    const st_tensor *t = st_find(f, name);
    txl_err e;
    if (!t) {
        CHECK(0, "%s: tensor %s present", f->path, name);
        return NULL;
    }
    double *out = malloc(n * sizeof *out);
    if (st_to_f64(f, t, out, n, &e)) {
        CHECK(0, "%s", e.msg);
        free(out);
        return NULL;
    }
    return out;
}

static txl_tok *get_tokens(st_file *f, const char *name, size_t n)
{
    double *d = get64(f, name, n);
    if (!d)
        return NULL;
    txl_tok *t = malloc(n * sizeof *t);
    for (size_t i = 0; i < n; i++)
        t[i] = (txl_tok)d[i];
    free(d);
    return t;
}

/* The reference computed the tokens (anchors inserted) and coordinates with its own rules
 * (tests/ref/txl_ref.py, tokenize): data/units.c must agree on every token. Per stream,
 * st[b] follows the reference's tokens (units_push: coordinates) and tk[b] tokenizes the
 * bytes alone (units_tokenize: where the anchors go), across segments (init: start them;
 * an anchor waits in pend[b] for the byte it announces). */
static void check_units(const char *name, const txl_tok *x, const int32_t *co, int B, int Ls,
                        int init, const units_config *uc)
{
    static units_state st[8], tk[8];
    static txl_tok pend[8][4];
    static int npend[8];
    if (init)
        for (int b = 0; b < B; b++) {
            units_init(&st[b], uc);
            units_init(&tk[b], uc);
            npend[b] = 0;
        }
    int coords_off = 0, anchors_off = 0;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < Ls; i++) {
            txl_tok t = x[(size_t)b * Ls + i];
            units_push(&st[b], t);
            coords_off += memcmp(st[b].count, co + ((size_t)b * Ls + i) * TXL_N_COORDS,
                                 sizeof st[b].count) != 0;
            if (t >= TXL_BYTES) {
                anchors_off += npend[b] == 4;
                if (npend[b] < 4)
                    pend[b][npend[b]++] = t;
                continue;
            }
            txl_tok out[2];
            uint8_t byte = (uint8_t)t;
            size_t n = units_tokenize(&tk[b], &byte, 1, out, NULL);
            anchors_off += n != (size_t)npend[b] + 1 || out[n - 1] != t ||
                           (n == 2 && out[0] != pend[b][0]);
            npend[b] = 0;
        }
    CHECK(coords_off == 0 && anchors_off == 0, "%-16s data/units.c gives the reference's "
          "coordinates (%d tokens differ) and anchors (%d bytes differ)", name, coords_off,
          anchors_off);
}

static void run_fixture(const char *path, const char *name, int row_block, int blas)
{
    st_file f;
    txl_err e;
    if (st_read(&f, path, &e)) {
        CHECK(0, "read %s: %s", path, e.msg);
        return;
    }
    cJSON *root = cJSON_Parse(st_meta(&f, "config") ? st_meta(&f, "config") : "");
    cJSON *jm = cJSON_GetObjectItemCaseSensitive(root, "model");
    cJSON *jt = cJSON_GetObjectItemCaseSensitive(root, "train");
    if (!jm) {
        CHECK(0, "%s: metadata config.model", name);
        cJSON_Delete(root);
        st_free(&f);
        return;
    }
    units_config uc = junits(root);
    model_config c = {
        .n_layer = jint(jm, "n_layer", 0), .d_model = jint(jm, "d_model", 0),
        .n_head = jint(jm, "n_head", 0), .d_head = jint(jm, "d_head", 0),
        .d_inner = jint(jm, "d_inner", 0), .tgt_len = jint(jm, "tgt_len", 0),
        .mem_len = jint(jm, "mem_len", 0), .pre_lnorm = jint(jm, "pre_lnorm", 0),
        .clamp_len = jint(jm, "clamp_len", 0), .untie_r = jint(jm, "untie_r", 0),
        .mlp_num_freqs = jint(jm, "mlp_num_freqs", 16),
        .mlp_max_dist = (float)jnum(jm, "mlp_max_dist", 4096),
        .mlp_hidden = jint(jm, "mlp_hidden", 64),
        /* the fixtures' V: bytes and anchors (model.vocab is not a key: a fixture of another
         * vocabulary, tools/test_adaptive_official.py's, names it) */
        .vocab = jint(jm, "vocab", TXL_BYTES + units_n_anchors(uc.anchors)),
        .hier_levels = jlevels(jm), .hier_num_freqs = jint(jm, "hier_num_freqs", 8),
        .fire_hidden = jint(jm, "fire_hidden", 32),
        .fire_threshold = (float)jnum(jm, "fire_threshold", 512),
        .t5_buckets = jint(jm, "t5_buckets", 32), .t5_max_dist = jint(jm, "t5_max_dist", 128),
        .t5_shared = jint(jm, "t5_shared", 1),
        .xl_off = jxl_off(jm), .cutoffs = jcutoffs(jm), .div_val = jint(jm, "div_val", 1),
        .d_embed = jint(jm, "d_embed", 0), .tie_projs = jint(jm, "tie_projs", 0)};
    cJSON *ps = cJSON_GetObjectItemCaseSensitive(jm, "pos_scheme");
    if (!cJSON_IsString(ps) || pos_scheme_parse(ps->valuestring, &c.pos)) {
        CHECK(0, "%s: pos_scheme", name);
        cJSON_Delete(root);
        st_free(&f);
        return;
    }
    int B = jint(jt, "batch_size", 2);
    const char *nseg_s = st_meta(&f, "n_segments");
    int nseg = nseg_s ? atoi(nseg_s) : 3;
    int adam = st_find(&f, "adam.loss") != NULL;

    model mdl;
    model_acts A;
    model_mem mem;
    if (model_init(&mdl, &c, &e) || model_alloc_grads(&mdl, &e) ||
        acts_init(&A, &c, B, c.tgt_len, c.mem_len, 1, &e) ||
        mem_init(&mem, &c, B, c.mem_len, &e)) {
        CHECK(0, "%s: setup: %s", name, e.msg);
        cJSON_Delete(root);
        st_free(&f);
        return;
    }
    A.attn_row_block = row_block;
    A.attn_blas = blas;
    int ok_params = 1;
    for (int i = 0; i < mdl.n_params; i++) {
        const param_entry *p = &mdl.table[i];
        const st_tensor *t = st_find(&f, p->name);
        if (!t || st_to_f32(&f, t, mdl.w + p->offset, p->numel, &e)) {
            CHECK(0, "%s: parameter %s: %s", name, p->name, t ? e.msg : "missing");
            ok_params = 0;
        }
    }
    float *m = calloc(mdl.n_floats, sizeof(float)), *v = calloc(mdl.n_floats, sizeof(float));
    adam_hparams ah = {.beta1 = jnum(jt, "beta1", 0.9), .beta2 = jnum(jt, "beta2", 0.999),
                       .eps = jnum(jt, "eps", 1e-8), .weight_decay = jnum(jt, "weight_decay", 0)};
    cJSON *opt = cJSON_GetObjectItemCaseSensitive(jt, "optimizer");
    ah.decoupled = cJSON_IsString(opt) && strcmp(opt->valuestring, "adamw") == 0;
    double lr = jnum(jt, "lr", 1e-2), clip = jnum(jt, "clip", 0);
    double *ref_losses = adam ? get64(&f, "adam.loss", (size_t)nseg) : NULL;

    double worst_logit = 0, worst_mem = 0, worst_loss = 0, worst_grad = 0;
    const char *worst_grad_name = "";
    model_zero_grads(&mdl);
    for (int s = 0; ok_params && s < nseg; s++) {
        char nm[96];
        snprintf(nm, sizeof nm, "seg%d.x", s);
        const st_tensor *tx = st_find(&f, nm);
        if (!tx || tx->ndim != 2) {
            CHECK(0, "%s: %s", name, nm);
            break;
        }
        int Ls = (int)tx->shape[1];
        size_t BL = (size_t)B * Ls;
        txl_tok *x = get_tokens(&f, nm, BL);
        snprintf(nm, sizeof nm, "seg%d.y", s);
        txl_tok *y = get_tokens(&f, nm, BL);
        if (!x || !y) {
            free(x);
            free(y);
            break;
        }
        if (adam)
            model_zero_grads(&mdl);
        int32_t *co = NULL;
        snprintf(nm, sizeof nm, "seg%d.coords", s);
        if (st_find(&f, nm)) { /* hier: the reference's text coordinates of the segment */
            double *cd = get64(&f, nm, BL * TXL_N_COORDS);
            co = malloc(BL * TXL_N_COORDS * sizeof *co);
            for (size_t k = 0; cd && k < BL * TXL_N_COORDS; k++)
                co[k] = (int32_t)cd[k];
            free(cd);
            check_units(name, x, co, B, Ls, s == 0, &uc);
        }
        fwd_opts o = {.training = 1, .drop_key = 0, .coords = co};
        double loss = model_forward(&mdl, &A, &mem, x, y, Ls, &o) / (double)BL;
        if (!adam) {
            snprintf(nm, sizeof nm, "seg%d.logits", s);
            /* the full softmax's logits, or an adaptive model's log-probabilities */
            double *rl = get64(&f, nm, BL * c.vocab);
            float *lp = malloc(BL * c.vocab * sizeof *lp);
            model_row_logprobs(&mdl, &A, 0, (int)BL, lp);
            if (rl)
                worst_logit = fmax(worst_logit, tl_max_rel_err(lp, rl, BL * c.vocab, 1e-30));
            free(rl);
            free(lp);
            snprintf(nm, sizeof nm, "seg%d.loss", s);
            double *rloss = get64(&f, nm, 1);
            if (rloss)
                worst_loss = fmax(worst_loss, fabs(loss - rloss[0]) / fabs(rloss[0]));
            free(rloss);
        } else if (ref_losses) {
            worst_loss = fmax(worst_loss, fabs(loss - ref_losses[s]) / fabs(ref_losses[s]));
        }
        model_backward(&mdl, &A, &mem, 1.0f / (float)BL);
        model_mem_update(&A, &mem);
        if (!adam) {
            for (int l = 0; l < c.n_layer; l++) {
                snprintf(nm, sizeof nm, "seg%d.mem.%d", s, l);
                const st_tensor *tm = st_find(&f, nm);
                size_t rows = tm && tm->ndim == 3 ? (size_t)tm->shape[1] : 0;
                if (!tm || (int)rows != mem.m)
                    CHECK(0, "%s: %s has %zu rows, txl keeps %d", name, nm, rows, mem.m);
                if (!tm || (int)rows != mem.m)
                    continue;
                double *rm = get64(&f, nm, (size_t)B * rows * c.d_model);
                float *mine = malloc((size_t)B * rows * c.d_model * sizeof(float));
                for (int b = 0; b < B; b++)
                    memcpy(mine + (size_t)b * rows * c.d_model,
                           mem_layer(&mem, l) + (size_t)b * mem.M * c.d_model,
                           rows * c.d_model * sizeof(float));
                if (rm)
                    worst_mem = fmax(worst_mem,
                                     tl_max_rel_err(mine, rm, (size_t)B * rows * c.d_model, 1e-30));
                free(rm);
                free(mine);
            }
        } else {
            /* as run/step.c: the clip fused into the update */
            float cc = clip_coef(grad_norm(mdl.g, mdl.n_floats), clip);
            adam_step_scaled(mdl.w, mdl.g, cc, m, v, mdl.n_floats, s + 1, lr, &ah);
        }
        free(x);
        free(y);
        free(co);
    }
    if (ok_params) {
        const char *prefix = adam ? "final." : "grad.";
        double gscale = 0;
        for (int i = 0; !adam && i < mdl.n_params; i++) {
            const param_entry *p = &mdl.table[i];
            char nm[96];
            snprintf(nm, sizeof nm, "grad.%s", p->name);
            double *rg = get64(&f, nm, p->numel);
            for (size_t k = 0; rg && k < p->numel; k++)
                gscale = fmax(gscale, fabs(rg[k]));
            free(rg);
        }
        for (int i = 0; i < mdl.n_params; i++) {
            const param_entry *p = &mdl.table[i];
            char nm[96];
            snprintf(nm, sizeof nm, "%s%s", prefix, p->name);
            double *rg = get64(&f, nm, p->numel);
            if (!rg)
                continue;
            const float *mine = adam ? mdl.w + p->offset : mdl.g + p->offset;
            double err;
            if (adam) {
                err = 0;
                for (size_t k = 0; k < p->numel; k++)
                    err = fmax(err, fabs(mine[k] - rg[k]) / (lr * nseg));
            } else {
                err = tl_max_rel_err(mine, rg, p->numel, 1e-3 * gscale);
            }
            if (err > worst_grad) {
                worst_grad = err;
                worst_grad_name = p->name;
            }
            free(rg);
        }
        if (!adam) {
            CHECK(worst_logit < TOL, "%-16s logits   max rel err %.2e", name, worst_logit);
            CHECK(worst_mem < TOL, "%-16s memories max rel err %.2e", name, worst_mem);
        }
        CHECK(worst_loss < TOL, "%-16s losses   max rel err %.2e", name, worst_loss);
        if (adam)
            CHECK(worst_grad < 2e-2, "%-16s weights after %d steps: max err %.2e of lr*steps (%s)",
                  name, nseg, worst_grad, worst_grad_name);
        else
            CHECK(worst_grad < TOL, "%-16s gradients max rel err %.2e (%s)", name, worst_grad,
                  worst_grad_name);
    }
    free(ref_losses);
    free(m);
    free(v);
    mem_free(&mem);
    acts_free(&A);
    model_free(&mdl);
    cJSON_Delete(root);
    st_free(&f);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        dir = argv[1];
    DIR *dp = opendir(dir);
    if (!dp) {
        CHECK(0, "open fixture directory %s", dir);
        return tl_done("test_fixtures");
    }
    char *names[256];
    int n = 0;
    struct dirent *de;
    while ((de = readdir(dp)) && n < 256) {
        size_t l = strlen(de->d_name);
        if (l > 12 && strcmp(de->d_name + l - 12, ".safetensors") == 0)
            names[n++] = strdup(de->d_name);
    }
    closedir(dp);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    CHECK(n >= (argc > 1 ? 1 : 10), "found %d fixture files in %s", n, dir);
    for (int i = 0; i < n; i++) {
        char path[1024], label[64];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        snprintf(label, sizeof label, "%.*s", (int)(strlen(names[i]) - 12), names[i]);
        char lb[96];
        /* each attention kernel (the fused one, the default, and OpenBLAS's), then again
         * with its query rows in blocks of 2: the blocked, masked-skipping products */
        for (int blas = 0; blas < 2; blas++)
            for (int rb = 0; rb <= 2; rb += 2) {
                snprintf(lb, sizeof lb, "%s%s%s", label, blas ? " blas" : "", rb ? " rb2" : "");
                run_fixture(path, lb, rb, blas);
            }
        free(names[i]);
    }
    return tl_done("test_fixtures");
}
