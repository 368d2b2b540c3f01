/* pos.c: the registry of positional schemes (POS_SCHEMES in model_config.h) and what they
 * share: names, the dropout site keys. */
#include "pos.h"

#include <string.h>

#include "../common/rng.h"

static const pos_ops *const registry[POS_COUNT] = {
#define POS_ENTRY(u, l) [POS_##u] = &pos_##l,
    POS_SCHEMES(POS_ENTRY)
#undef POS_ENTRY
};

const pos_ops *pos_get(pos_scheme p) { return (unsigned)p < POS_COUNT ? registry[p] : NULL; }

const char *pos_scheme_name(pos_scheme p)
{
    const pos_ops *o = pos_get(p);
    return o ? o->name : NULL;
}

int pos_scheme_parse(const char *s, pos_scheme *p)
{
    for (int i = 0; i < POS_COUNT; i++)
        if (strcmp(s, registry[i]->name) == 0) {
            *p = (pos_scheme)i;
            return 0;
        }
    return -1;
}

uint64_t pos_site_key(uint64_t key, int layer, int site)
{
    return rng_key(key, (uint64_t)(layer + 1) * 16 + (uint64_t)site);
}
