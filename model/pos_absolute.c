/* pos_absolute.c: absolute sinusoidal positions (Vaswani et al. 2017) added to the scaled
 * embeddings: h_i = E[x_i] sqrt(d) + P[i + offset], with segment positions i = 0..Lq-1
 * restarting every segment (the memory rows keep the positions they were seen with). The
 * scores are plain content terms. No parameters. */
#include <stddef.h>

#include "model.h"
#include "posenc.h"

enum { B_P };

static const char *const abs_terms[] = {"content", NULL};

static void abs_plan(const model_config *c, const pos_dims *d, pos_alloc *a, pos_acts *acts,
                     pos_layer *bw)
{
    (void)bw;
    acts->buf[B_P] = a->take(a->arena, (double)d->Lq * c->d_model);
}

static void abs_embed(const pos_seg *s, float *h0)
{
    int d = s->c->d_model;
    float *P = s->acts->buf[B_P];
    pos_sinusoid(P, s->Lq, d, (int)s->pos_offset, 1, 0);
    for (int b = 0; b < s->B; b++)
        for (size_t i = 0; i < (size_t)s->Lq * d; i++)
            h0[(size_t)b * s->Lq * d + i] += P[i];
}

const pos_ops pos_absolute = {
    .name = "absolute",
    .term_names = abs_terms,
    .plan = abs_plan,
    .embed = abs_embed,
};
