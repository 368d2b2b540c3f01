/* pos_none.c: no positional information at all (a baseline: causal masking alone tells the
 * model something about order). */
#include <stddef.h>

#include "pos.h"

static const char *const none_terms[] = {"content", NULL};

const pos_ops pos_none = {.name = "none", .term_names = none_terms};
