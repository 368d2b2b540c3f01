/* corpora.c: the data a config names, opened: the splits' text (or a file instead), their
 * tokens with the config's anchors and coordinates. */
#include <stdio.h>

#include "../model/pos.h"
#include "config.h"

int cfg_open_text(const char *data, int split, const data_config *d, corpus *c,
                  token_span *span, const char **label, txl_err *e)
{
    if (data) {
        *label = "file";
        if (corpus_open(c, data, e))
            return -1;
        *span = corpus_all(c);
        return 0;
    }
    *label = split_name(split);
    data_paths p = {d->train, d->valid, d->test, d->split};
    if (data_open_split(&p, split, c, span, e))
        return err_wrap(e, "--split %s (from the checkpoint's data config; pass --data FILE to "
                        "score another file)", split_name(split));
    return 0;
}

units_config cfg_units(const run_config *cfg)
{
    units_config u = {.anchors = (unsigned)cfg->data.anchors,
                      .base = (txl_tok)cfg->data.vocab_tokens};
    snprintf(u.sep, sizeof u.sep, "%s", cfg->data.doc_separator);
    return u;
}

int cfg_tokens(const run_config *cfg, const vocab *v, token_span span, tok_stream *ts,
               txl_err *e)
{
    units_config u = cfg_units(cfg);
    return tok_stream_open(ts, span, v, &u, pos_get(cfg->model.pos)->needs_coords, e);
}
