/* events.c: a run's events, one stream (include/txl.h's txl_event) handed to the run's sinks
 * in order, on rank 0 only: log.jsonl's (log.c: the run's own record comes first, so a
 * caller whose output went away cannot take it along) and the caller's callback. */
#include "run.h"

void run_event(const trainer *t, const txl_event *ev)
{
    if (!dist_is_root())
        return;
    for (int i = 0; i < RUN_SINKS; i++)
        if (t->sinks[i].fn)
            t->sinks[i].fn(t->sinks[i].ctx, ev);
}

void run_note(const trainer *t, txl_event_kind kind, const char *fmt, ...)
{
    char text[1400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    run_event(t, &(txl_event){.kind = kind, .step = t->st.step,
                              .max_steps = t->cfg.train.max_steps, .text = text});
}

/* A number rounded as fmt prints it ("%.6f": 6 decimals), or null when it is not finite
 * (no NaN or Infinity in JSON). */
void run_add_num(cJSON *o, const char *key, const char *fmt, double x)
{
    char buf[64];
    if (!isfinite(x)) {
        cJSON_AddNullToObject(o, key);
        return;
    }
    snprintf(buf, sizeof buf, fmt, x);
    cJSON_AddNumberToObject(o, key, strtod(buf, NULL));
}
