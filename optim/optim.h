/* optim.h: Adam / AdamW over flat float arrays, global-norm clipping, and learning-rate
 * schedules. Knows nothing of tensors: the model's parameter table makes weights,
 * gradients and moments one array each (model/model.h). */
#ifndef TXL_OPTIM_H
#define TXL_OPTIM_H

#include <stddef.h>

typedef struct {
    double beta1, beta2, eps;
    double weight_decay;
    int decoupled; /* 0: Adam with L2 (wd * w added to the gradient), 1: AdamW */
} adam_hparams;

/* One Adam step t (1-based) at learning rate lr, as torch.optim.Adam / AdamW
 * (Kingma & Ba 2015, Alg. 1; Loshchilov & Hutter 2019 for the decoupled decay):
 *   g' = g + wd*w (Adam) | w *= 1 - lr*wd (AdamW)
 *   m = b1 m + (1-b1) g';  v = b2 v + (1-b2) g'^2
 *   w -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)  */
void adam_step(float *w, const float *g, float *m, float *v, size_t n, long t, double lr,
               const adam_hparams *h);
/* The same step on the gradient gscale * g, without writing g: clipping fused into the
 * update (bitwise equal to grad_clip, then adam_step). */
void adam_step_scaled(float *w, const float *g, float gscale, float *m, float *v, size_t n,
                      long t, double lr, const adam_hparams *h);

/* L2 norm of g (accumulated in double). */
double grad_norm(const float *g, size_t n);
/* The factor torch.nn.utils.clip_grad_norm_ scales g by: min(1, max_norm / (norm + 1e-6)),
 * rounded to float; 1 when max_norm <= 0 (no clipping). */
float clip_coef(double norm, double max_norm);
/* g *= clip_coef(grad_norm(g), max_norm). Returns the norm before clipping. */
double grad_clip(float *g, size_t n, double max_norm);

/* train.schedule: the config holds this enum too (one for the config and the optimiser). */
typedef enum { LR_CONSTANT, LR_COSINE, LR_INV_SQRT } lr_kind;

/* train.resume_schedule: what a run resumed with a changed schedule (train.max_steps
 * raised, say) does from the step S it resumes at: as_planned (the schedule of the config,
 * as if planned so from step 0: the lr may jump), continue (decay from the lr of step S),
 * restart (a new warmup from step S). */
typedef enum { LR_AS_PLANNED, LR_CONTINUE, LR_RESTART } lr_shape;

typedef struct {
    lr_kind kind;
    double lr, lr_min;
    long warmup, max_steps;
    lr_shape shape;           /* the default LR_AS_PLANNED (0) ignores the two below */
    long from_step;           /* S: the step the continued or restarted schedule starts at */
    double from_lr;           /* LR_CONTINUE: the lr at step S */
} lr_schedule;

/* Learning rate of step t (1-based), as planned:
 *   warmup (t <= warmup): lr * t / warmup                    (every schedule)
 *   constant: lr
 *   cosine:   lr_min + (lr - lr_min) * (1 + cos(pi * (t - warmup) / (max_steps - warmup))) / 2
 *   inv_sqrt: lr * sqrt(max(warmup, 1) / t)   (peak lr at the end of warmup)
 * LR_RESTART: the same of t - S, with max_steps - S steps. LR_CONTINUE, t > S, no warmup:
 *   constant: from_lr; cosine: lr_min + (from_lr - lr_min) * (1 + cos(pi (t-S) / (max_steps-S))) / 2;
 *   inv_sqrt: from_lr * sqrt(S / t). */
double lr_at(const lr_schedule *s, long t);

/* The same schedules over a progress p in [0, 1] instead of a step (train.schedule_by
 * time: p is the fraction of the budget used): warmup over p <= warmup / max_steps, cosine
 * from there to p = 1, inv_sqrt at t = p * max_steps. */
double lr_at_progress(const lr_schedule *s, double p);

#endif
