/* test_train_events.c: a trainer's events through include/txl.h alone. log.jsonl is one of
 * the run's sinks: a caller's on_event gets every event the log holds, in the same order,
 * each event's json the log's line (the end event: the summary, which the log holds with
 * "event":"end" first). A 12-step micro run (tests/configs/micro.yaml) with steps logged,
 * a validation, a checkpoint (kept numbered too) and the score terms every 6 steps; run
 * from the repository's root. Every checkpoint written is a TXL_EV_CHECKPOINT event naming
 * the file.
 *
 * Without the log as a sink, the start line and the terms lines were written beside the
 * events (the start event had no json, the terms none at all): the sequences differ. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../include/txl.h"
#include "testlib.h"

#define MAX_LINES 64

typedef struct {
    int n, kinds[TXL_EV_TERMS + 1];
    char *line[MAX_LINES]; /* each event's json as a line of the log would hold it */
    int lasts, numbered, missing; /* checkpoint events: last, step-N, a file not there */
} events;

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && strcmp(s + n - m, tail) == 0;
}

static void take(void *ctx, const txl_event *ev)
{
    events *w = ctx;
    if ((int)ev->kind >= 0 && ev->kind <= TXL_EV_TERMS)
        w->kinds[ev->kind]++;
    if (ev->kind == TXL_EV_CHECKPOINT) {
        w->lasts += ev->path && ends_with(ev->path, "/last.safetensors.gz");
        w->numbered += ev->path && strstr(ev->path, "/step-");
        w->missing += !ev->path || access(ev->path, R_OK) != 0;
    }
    if (!ev->json || w->n == MAX_LINES)
        return;
    size_t n = strlen(ev->json) + 16;
    char *s = malloc(n);
    if (!s)
        return;
    if (ev->kind == TXL_EV_END)
        snprintf(s, n, "{\"event\":\"end\",%s", ev->json + 1);
    else
        snprintf(s, n, "%s", ev->json);
    w->line[w->n++] = s;
}

int main(void)
{
    char dir[] = "/tmp/txl-test-events-XXXXXX", set[256];
    txl_err e = {0};
    events w = {0};
    CHECK(mkdtemp(dir) != NULL, "a temp dir");
    txl_config *c = txl_config_load("tests/configs/micro.yaml", &e);
    const char *sets[] = {"train.max_steps=12", "train.log_interval=3", "train.eval_interval=6",
                          "train.ckpt_interval=6", "train.keep_checkpoints=2",
                          "train.term_stats_interval=6",
                          "train.eval_tokens=2000", "train.threads=1"};
    for (size_t i = 0; c && i < sizeof sets / sizeof *sets; i++)
        txl_config_set(c, sets[i], &e);
    snprintf(set, sizeof set, "train.out_dir=%s/run", dir);
    int rc = c ? txl_config_set(c, set, &e) : -1;
    txl_train_opts o = {.on_event = take, .ctx = &w};
    txl_trainer *t = rc == 0 ? txl_trainer_new(c, &o, &e) : NULL;
    CHECK(t != NULL, "a trainer of micro.yaml, 12 steps: %s", e.msg);
    rc = t ? txl_trainer_run(t, &e) : -1;
    CHECK(rc == 0, "trains (%d): %s", rc, e.msg);
    txl_trainer_free(t);
    txl_config_free(c);

    char path[512], buf[65536];
    snprintf(path, sizeof path, "%s/run/log.jsonl", dir);
    FILE *f = fopen(path, "r");
    int n = 0, same = 1;
    while (f && fgets(buf, sizeof buf, f)) {
        buf[strcspn(buf, "\n")] = 0;
        if (n >= w.n || strcmp(buf, w.line[n]) != 0) {
            if (same)
                printf("  line %d of the log: %.120s\n  event: %.120s\n", n + 1, buf,
                       n < w.n ? w.line[n] : "(none)");
            same = 0;
        }
        n++;
    }
    if (f)
        fclose(f);
    CHECK(f && n > 0 && n == w.n && same, "log.jsonl's %d lines are the %d events' json, in "
          "order", n, w.n);
    CHECK(w.kinds[TXL_EV_START] == 1 && w.n > 0 && strstr(w.line[0], "\"event\":\"start\""),
          "the start event carries the log's start line");
    CHECK(w.kinds[TXL_EV_STEP] == 4 && w.kinds[TXL_EV_EVAL] == 2 && w.kinds[TXL_EV_TERMS] == 2 &&
          w.kinds[TXL_EV_END] == 1, "4 steps, 2 validations, 2 terms events and the end "
          "(got %d, %d, %d, %d)", w.kinds[TXL_EV_STEP], w.kinds[TXL_EV_EVAL],
          w.kinds[TXL_EV_TERMS], w.kinds[TXL_EV_END]);
    CHECK(w.lasts == 2 && w.numbered == 2 && w.missing == 0 &&
          w.kinds[TXL_EV_CHECKPOINT] >= 4, "a checkpoint event per file written: last and "
          "step-N at steps 6 and 12, each there (%d events: %d last, %d numbered, %d missing)",
          w.kinds[TXL_EV_CHECKPOINT], w.lasts, w.numbered, w.missing);
    for (int i = 0; i < w.n; i++)
        free(w.line[i]);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        printf("  (could not remove %s)\n", dir);
    return tl_done("test_train_events");
}
