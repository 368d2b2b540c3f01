/* sampler.h: choosing the next token from its scores (temperature, top-k, top-p). The random
 * draw is an argument, so the sampler is a pure function (tests can fix it). */
#ifndef TXL_SAMPLER_H
#define TXL_SAMPLER_H

typedef struct {
    double temperature; /* 0: greedy (argmax) */
    int top_k;          /* 0: off */
    double top_p;       /* 1: off */
} sampler_opts;

/* logits [V]: the next token's scores, log-probabilities up to a constant (a full softmax's
 * logits or an adaptive softmax's log-probabilities: model_logprobs; p = softmax(logits / T)
 * either way); u uniform in [0, 1); scratch: 3*V doubles, idx: V ints. Returns the token:
 * candidates in the order of probability (descending, ties by token id), cut to top-k and
 * then to the smallest prefix of mass >= top_p, and the one where the cumulative mass of
 * that order first exceeds u times the prefix's mass. */
int sampler_pick(const float *logits, int V, const sampler_opts *o, double u, double *scratch,
                 int *idx);

#endif
