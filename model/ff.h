/* ff.h: the position-wise feed-forward activation: a = dropout(relu(z)).
 * The two linear layers around it (ff.0 [di,d] and ff.3 [d,di]) use gemm.h's linear pair. */
#ifndef TXL_FF_H
#define TXL_FF_H

#include <stddef.h>
#include <stdint.h>

/* a[n] = relu(z[n]) * mask / (1-p) (mask from dropout.h's counter-based draw). a may alias z.
 * Only `a` is kept for the backward: a != 0 exactly where both relu and mask pass. */
void ff_act_forward(float *a, const float *z, size_t n, float p, uint64_t key, uint64_t base);
/* dz[n] = da[n] / (1-p) where a != 0, else 0. dz may alias da. */
void ff_act_backward(float *dz, const float *da, const float *a, size_t n, float p);

#endif
