/* optim.c: see optim.h. Each element's update is computed in float from float state, as
 * PyTorch does, so 5-step losses match the reference to float round-off. */
#include "optim.h"

#include <math.h>

#include "../common/par.h"
#include "../common/vmath.h"

void adam_step_scaled(float *w, const float *g, float gscale, float *m, float *v, size_t n,
                      long t, double lr, const adam_hparams *h)
{
    /* 1 - beta rounded from double, as torch does: 1 - (float)0.999 is 1.3e-5 off */
    const float b1 = (float)h->beta1, b2 = (float)h->beta2, eps = (float)h->eps;
    const float c1 = (float)(1.0 - h->beta1), c2 = (float)(1.0 - h->beta2);
    const float wd = h->decoupled ? 0.0f : (float)h->weight_decay;
    const double bc1 = 1.0 - pow(h->beta1, (double)t), bc2 = 1.0 - pow(h->beta2, (double)t);
    const float step = (float)(lr / bc1), rbc2 = (float)(1.0 / sqrt(bc2));
    const float decay = h->decoupled ? (float)(1.0 - lr * h->weight_decay) : 1.0f;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * gscale; /* exact when gscale is 1 */
        float wi = w[i] * decay; /* decay is exactly 1 for Adam */
        gi += wd * wi;           /* wd is 0 for AdamW */
        float mi = b1 * m[i] + c1 * gi;
        float vi = b2 * v[i] + c2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        w[i] = wi - step * mi / (sqrtf(vi) * rbc2 + eps);
    }
}

void adam_step(float *w, const float *g, float *m, float *v, size_t n, long t, double lr,
               const adam_hparams *h)
{
    adam_step_scaled(w, g, 1.0f, m, v, n, t, lr, h);
}

double grad_norm(const float *g, size_t n)
{
    /* per-thread partial sums over static blocks, combined in thread order */
    enum { MAXT = 256 };
    double part[MAXT] = {0};
    int nt = n > 65536 ? par_threads() : 1;
    if (nt > MAXT)
        nt = MAXT;
#pragma omp parallel num_threads(nt)
    {
        size_t i0, i1;
        int t = par_thread_id();
        par_range(n, t, nt, &i0, &i1);
        part[t] = vm_sumsq(g + i0, i1 - i0, 0.0);
    }
    double s = 0;
    for (int t = 0; t < nt; t++)
        s += part[t];
    return sqrt(s);
}

float clip_coef(double norm, double max_norm)
{
    double coef = max_norm / (norm + 1e-6);
    return max_norm > 0 && coef < 1.0 ? (float)coef : 1.0f;
}

double grad_clip(float *g, size_t n, double max_norm)
{
    double norm = grad_norm(g, n);
    float c = clip_coef(norm, max_norm);
    if (c != 1.0f) {
#pragma omp parallel for schedule(static) if (n > 65536)
        for (size_t i = 0; i < n; i++)
            g[i] *= c;
    }
    return norm;
}

/* LR_CONTINUE past S: from from_lr, along the schedule's own decay. */
static double lr_continued(const lr_schedule *s, long t)
{
    long S = s->from_step;
    switch (s->kind) {
    case LR_COSINE: {
        long span = s->max_steps - S;
        double prog = span > 0 ? (double)(t - S) / (double)span : 1.0;
        if (prog > 1.0)
            prog = 1.0;
        return s->lr_min + (s->from_lr - s->lr_min) * 0.5 * (1.0 + cos(M_PI * prog));
    }
    case LR_INV_SQRT:
        return s->from_lr * sqrt((double)(S > 0 ? S : 1) / (double)t);
    case LR_CONSTANT:
    default:
        return s->from_lr;
    }
}

double lr_at_progress(const lr_schedule *s, double p)
{
    p = p < 0 ? 0 : p > 1 ? 1 : p;
    double fw = s->max_steps > 0 ? (double)s->warmup / (double)s->max_steps : 0;
    if (fw > 0 && p <= fw)
        return s->lr * p / fw;
    switch (s->kind) {
    case LR_COSINE: {
        double prog = fw < 1 ? (p - fw) / (1 - fw) : 1.0;
        return s->lr_min + (s->lr - s->lr_min) * 0.5 * (1.0 + cos(M_PI * prog));
    }
    case LR_INV_SQRT: {
        double t = p * (double)s->max_steps;
        return s->lr * sqrt((double)(s->warmup > 0 ? s->warmup : 1) / (t > 1 ? t : 1));
    }
    case LR_CONSTANT:
    default:
        return s->lr;
    }
}

double lr_at(const lr_schedule *s, long t)
{
    if (s->shape == LR_RESTART && s->from_step > 0 && t > s->from_step) {
        lr_schedule r = *s;
        r.shape = LR_AS_PLANNED;
        r.max_steps = s->max_steps - s->from_step;
        return lr_at(&r, t - s->from_step);
    }
    if (s->shape == LR_CONTINUE && t > s->from_step)
        return lr_continued(s, t);
    if (s->warmup > 0 && t <= s->warmup)
        return s->lr * (double)t / (double)s->warmup;
    switch (s->kind) {
    case LR_COSINE: {
        long span = s->max_steps - s->warmup;
        double prog = span > 0 ? (double)(t - s->warmup) / (double)span : 1.0;
        if (prog > 1.0)
            prog = 1.0;
        return s->lr_min + (s->lr - s->lr_min) * 0.5 * (1.0 + cos(M_PI * prog));
    }
    case LR_INV_SQRT:
        return s->lr * sqrt((double)(s->warmup > 0 ? s->warmup : 1) / (double)t);
    case LR_CONSTANT:
    default:
        return s->lr;
    }
}
