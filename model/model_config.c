/* model_config.c: names of the positional schemes (configs and checkpoints use them). */
#include "model_config.h"

#include <string.h>

static const char *const pos_names[] = {
    [POS_XL] = "xl", [POS_MLP] = "mlp", [POS_ROPE] = "rope",
    [POS_ALIBI] = "alibi", [POS_ABSOLUTE] = "absolute", [POS_NONE] = "none",
};

const char *pos_scheme_name(pos_scheme p)
{
    if ((unsigned)p >= sizeof pos_names / sizeof pos_names[0])
        return NULL;
    return pos_names[p];
}

int pos_scheme_parse(const char *s, pos_scheme *p)
{
    for (unsigned i = 0; i < sizeof pos_names / sizeof pos_names[0]; i++)
        if (strcmp(s, pos_names[i]) == 0) {
            *p = (pos_scheme)i;
            return 0;
        }
    return -1;
}
