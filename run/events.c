/* events.c: a run's events: to the caller's callback (the banner, notes, progress,
 * validation, the result; rank 0 only) and to log.jsonl (one JSON object a line; a failed
 * write is kept and stops the run at the next step's agreement). */
#include "run.h"

void run_event(const trainer *t, const txl_event *ev)
{
    if (t->opts && t->opts->on_event && dist_is_root())
        t->opts->on_event(t->opts->ctx, ev);
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

/* After an event was written to log: a failed write (a full disk, an I/O error) is kept,
 * and the run stops at the next step's agreement (run_ends) rather than go on losing
 * events with exit 0. */
void run_log_flush(trainer *t)
{
    errno = 0;
    if ((fflush(t->log.f) != 0 || ferror(t->log.f)) && !t->log.err) {
        t->log.err = errno ? errno : EIO;
        t->log.fail_step = t->st.step;
    }
}

void run_log_json(trainer *t, const char *fmt, ...)
{
    if (!t->log.f || !dist_is_root())
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(t->log.f, fmt, ap);
    va_end(ap);
    fputc('\n', t->log.f);
    run_log_flush(t);
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
