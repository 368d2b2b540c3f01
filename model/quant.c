/* quant.c: see quant.h. */
#include "quant.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../common/sys.h"
#include "gemm_bf16.h"

const char *qtype_name(qtype t)
{
    return t == QT_Q8 ? "q8" : t == QT_BF16 ? "bf16" : "fp32";
}

size_t qtype_bytes(qtype t, size_t rows, size_t cols)
{
    if (t == QT_Q8)
        return rows * cols + rows * (cols / QK) * sizeof(uint16_t);
    return rows * cols * (t == QT_BF16 ? 2 : 4);
}

size_t quant_place(qmat *m, qtype t, int rows, int cols, unsigned char *buf)
{
    size_t n = (size_t)rows * cols, nb = (size_t)rows * (cols / QK);
    size_t a = (qtype_bytes(t, (size_t)rows, (size_t)cols) + 63) / 64 * 64;
    /* q8: the file's q and scales, then the panels (qmat.h) */
    size_t pr = ((size_t)rows + QP - 1) / QP * QP; /* the panels' rows */
    size_t at_s = (n + 63) / 64 * 64, at_qp = at_s + (nb * 2 + 63) / 64 * 64;
    size_t at_sp = at_qp + (pr * cols + 63) / 64 * 64;
    if (t == QT_Q8)
        a = at_sp + (pr * (cols / QK) * 2 + 63) / 64 * 64;
    if (!buf)
        return a;
    *m = (qmat){.type = t, .rows = rows, .cols = cols};
    if (t == QT_BF16) {
        m->bf16 = (const uint16_t *)buf;
    } else if (t == QT_Q8) {
        m->q = (const int8_t *)buf;
        m->scale = (const uint16_t *)(buf + at_s);
        m->qp = (const int8_t *)(buf + at_qp);
        m->sp = (const uint16_t *)(buf + at_sp);
    }
    return a;
}

void quant_finish(qmat *m)
{
    if (m->type != QT_Q8)
        return;
    const size_t rows = (size_t)m->rows, K = (size_t)m->cols, nb = K / QK;
    const size_t np = (rows + QP - 1) / QP;
    int8_t *qp = (int8_t *)m->qp;
    uint16_t *sp = (uint16_t *)m->sp;
    for (size_t p = 0; p < np; p++)
        for (size_t r = 0; r < QP; r++) {
            size_t o = p * QP + r;
            for (size_t k = 0; k < K; k++)
                qp[(p * K + k) * QP + r] = o < rows ? m->q[o * K + k] : 0;
            for (size_t b = 0; b < nb; b++)
                sp[(p * nb + b) * QP + r] = o < rows ? m->scale[o * nb + b] : 0;
        }
}

void quant_q8_row(int8_t *q, uint16_t *scale, const float *w, int cols)
{
    for (int b = 0; b < cols / QK; b++) {
        const float *x = w + (size_t)b * QK;
        float amax = 0;
        for (int i = 0; i < QK; i++)
            amax = fmaxf(amax, fabsf(x[i]));
        float s = amax / 127.0f;
        uint16_t sb = s >= FLT_MIN ? bf16_from_f32(s) : 0; /* below: a block of zeros */
        float sf = bf16_to_f32(sb);
        scale[b] = sb;
        for (int i = 0; i < QK; i++) {
            float v = sf > 0 ? nearbyintf(x[i] / sf) : 0.0f; /* the default rounding mode:
                                                                 to nearest even */
            q[(size_t)b * QK + i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
    }
}

void quant_bf16(uint16_t *dst, const float *w, size_t n)
{
    /* bf16_from_f32 (gemm_bf16.h) without its branch, so the loop vectorises: round to
     * nearest even, a NaN kept quiet */
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &w[i], sizeof u);
        uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, q = (u >> 16) | 0x40u;
        dst[i] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? q : r);
    }
}

void quant_dequant(float *w, const qmat *m)
{
    size_t rows = (size_t)m->rows, cols = (size_t)m->cols, nb = cols / QK;
    if (m->type == QT_BF16) {
        for (size_t i = 0; i < rows * cols; i++)
            w[i] = bf16_to_f32(m->bf16[i]);
        return;
    }
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b < nb; b++) {
            float s = bf16_to_f32(m->scale[r * nb + b]);
            for (size_t i = 0; i < QK; i++) {
                size_t k = r * cols + b * QK + i;
                w[k] = (float)m->q[k] * s;
            }
        }
}

#define LAYER_FIELD(f) ((int)(offsetof(layer_tensors, f) / sizeof(float *)))
#define MODEL_FIELD(f) ((int)(offsetof(model_tensors, f) / sizeof(float *)))

qtype quant_type_for(const param_entry *p, qtype target)
{
    if (target == QT_F32 || p->ndim != 2)
        return QT_F32;
    int f = p->field;
    if (p->layer >= 0 && strstr(p->name, ".attn.r.weight")) /* xl's projection of positions */
        return QT_BF16;
    if (p->layer >= 0) {
        int linear = f == LAYER_FIELD(qkv_w) || f == LAYER_FIELD(o_w) ||
                     f == LAYER_FIELD(ff0_w) || f == LAYER_FIELD(ff3_w);
        if (!linear)
            return QT_F32;
        return target == QT_Q8 && p->shape[1] % QK == 0 ? QT_Q8 : QT_BF16;
    }
    int emb = f == MODEL_FIELD(word_emb) ||
              (f >= MODEL_FIELD(ad_emb) && f < MODEL_FIELD(ad_emb) + ADAPT_MAX_CLUSTERS) ||
              (f >= MODEL_FIELD(ad_pin) && f < MODEL_FIELD(ad_pin) + ADAPT_MAX_CLUSTERS) ||
              (f >= MODEL_FIELD(ad_pout) && f < MODEL_FIELD(ad_pout) + ADAPT_MAX_CLUSTERS);
    /* the adaptive softmax's cluster weights are an output layer's rows too */
    emb |= f == MODEL_FIELD(ad_cw);
    return emb ? QT_BF16 : QT_F32;
}

int quant_model(model *mdl, qtype target, txl_err *e)
{
    qmat *qm = NULL;
    unsigned char *buf = NULL;
    if (target != QT_F32) {
        size_t bytes = 0;
        for (int i = 0; i < mdl->n_params; i++) {
            const param_entry *p = &mdl->table[i];
            qtype t = quant_type_for(p, target);
            bytes += t == QT_F32 ? 0 : quant_place(NULL, t, p->shape[0], p->shape[1], NULL);
        }
        qm = calloc((size_t)mdl->n_params, sizeof *qm);
        buf = sys_alloc(bytes + 64);
        if (!qm || !buf) {
            free(qm);
            free(buf);
            return err_set(e, ERR_RUNTIME, "out of memory for the quantized weights");
        }
        size_t at = 0;
        for (int i = 0; i < mdl->n_params; i++) {
            const param_entry *p = &mdl->table[i];
            qtype t = quant_type_for(p, target);
            if (t == QT_F32)
                continue;
            int rows = p->shape[0], cols = p->shape[1];
            const float *w = mdl->w + p->offset;
            qmat *m = &qm[i];
            at += quant_place(m, t, rows, cols, buf + at);
            if (t == QT_BF16)
                quant_bf16((uint16_t *)m->bf16, w, p->numel);
            for (int r = 0; t == QT_Q8 && r < rows; r++)
                quant_q8_row((int8_t *)m->q + (size_t)r * cols,
                             (uint16_t *)m->scale + (size_t)r * (cols / QK),
                             w + (size_t)r * cols, cols);
            quant_finish(m);
        }
    }
    free(mdl->qm);
    free(mdl->qbuf);
    mdl->qm = qm;
    mdl->qbuf = buf;
    for (int i = 0; qm && i < mdl->n_params; i++)
        if (qm[i].type != QT_F32)
            quant_dequant(mdl->w + mdl->table[i].offset, &qm[i]);
    return 0;
}

qtype quant_model_type(const model *mdl)
{
    qtype t = QT_F32;
    for (int i = 0; mdl->qm && i < mdl->n_params; i++)
        if (mdl->qm[i].type == QT_Q8 || (mdl->qm[i].type == QT_BF16 && t == QT_F32))
            t = mdl->qm[i].type;
    return t;
}

void quant_views(const model *mdl, layer_qmats *lq, const qmat **out_emb)
{
    memset(lq, 0, (size_t)mdl->cfg.n_layer * sizeof *lq);
    *out_emb = NULL;
    for (int i = 0; mdl->qm && i < mdl->n_params; i++) {
        const param_entry *p = &mdl->table[i];
        const qmat *m = quant_of(mdl, i);
        if (!m)
            continue;
        if (p->layer < 0) {
            if (p->field == MODEL_FIELD(word_emb))
                *out_emb = m;
            continue;
        }
        layer_qmats *l = &lq[p->layer];
        if (p->field == LAYER_FIELD(qkv_w))
            l->m[LIN_QKV] = m;
        else if (p->field == LAYER_FIELD(o_w))
            l->m[LIN_O] = m;
        else if (p->field == LAYER_FIELD(ff0_w))
            l->m[LIN_FF0] = m;
        else if (p->field == LAYER_FIELD(ff3_w))
            l->m[LIN_FF3] = m;
    }
}
