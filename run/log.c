/* log.c: log.jsonl, the library's own sink of a run's events (events.c), which the trainer
 * registers first for its run directory (run_start_run; the file is opened by run_dir.c's
 * run_open_log: never through a link, a resumed run's log a file of its own). Each event
 * whose json is set becomes one line, flushed at once; the end event's json is the
 * summary, which the log holds with "event":"end" first. A failed write (a full disk, an
 * I/O error) is kept, and the run stops at the next step's agreement (run_ends) rather than
 * go on losing events with exit 0. */
#include "run.h"

void run_log_sink(void *ctx, const txl_event *ev)
{
    run_log *l = ctx;
    if (!l->f || !ev->json)
        return;
    if (ev->kind == TXL_EV_END && ev->json[0] == '{')
        fprintf(l->f, "{\"event\":\"end\",%s\n", ev->json + 1);
    else
        fprintf(l->f, "%s\n", ev->json);
    errno = 0;
    if ((fflush(l->f) != 0 || ferror(l->f)) && !l->err) {
        l->err = errno ? errno : EIO;
        l->fail_step = ev->step;
    }
}
