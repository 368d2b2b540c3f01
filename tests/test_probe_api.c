/* test_probe_api.c: txl_probe through include/txl.h alone, on a new model (weights from the
 * seed) over tests/data/tinyshakespeare.txt.gz (run from the repository's root).
 *
 * - The rows: shift's one per offset, the table's heading on the first only, the JSON and
 *   the table line as single lines, no mode; recall's distance rows then its summary row
 *   (summary set), each with its mode; the needle's default lengths on a 32-byte context
 *   (1x and 2x cannot hold its 75 bytes): first a note row (only the note), then the cells
 *   of 4x and 8x, the heading on the first cell.
 * - The callback's non-zero value stops the probe after that row and is returned.
 * - Options a flag's range would have refused reach the library as ERR_INPUT naming the
 *   field, before any work (a depth over 100 would place the needle past its haystack, more
 *   trials than the cell's buffer, a list longer than the probes hold, an unknown probe). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/txl.h"
#include "testlib.h"

#define TEXT "tests/data/tinyshakespeare.txt.gz"
#define MAX_ROWS 64

typedef struct {
    int n, stop_at;                    /* rows seen; return 7 at row stop_at (0: never) */
    int has_json[MAX_ROWS], has_text[MAX_ROWS], has_head[MAX_ROWS], summary[MAX_ROWS];
    int one_line[MAX_ROWS];
    char mode[MAX_ROWS][8], note[256], json0[512];
} rows;

static int one_line(const char *s) { return !s || !strchr(s, '\n'); }

static int take(void *ctx, const txl_probe_row *r)
{
    rows *w = ctx;
    if (w->n < MAX_ROWS) {
        int i = w->n;
        w->has_json[i] = r->json != NULL;
        w->has_text[i] = r->text != NULL;
        w->has_head[i] = r->head != NULL;
        w->summary[i] = r->summary;
        w->one_line[i] = one_line(r->json) && one_line(r->text) && one_line(r->head);
        snprintf(w->mode[i], sizeof w->mode[i], "%s", r->mode ? r->mode : "-");
        if (r->note && !w->note[0])
            snprintf(w->note, sizeof w->note, "%s", r->note);
        if (i == 0 && r->json)
            snprintf(w->json0, sizeof w->json0, "%s", r->json);
    }
    w->n++;
    return w->n == w->stop_at ? 7 : 0;
}

static txl_model *tiny_model(void)
{
    static const char *const sets[] = {
        "model.n_layer=1", "model.d_model=16", "model.n_head=2", "model.d_head=8",
        "model.d_inner=32", "model.tgt_len=16", "model.mem_len=16", "model.pos_scheme=xl",
        "data.train=" TEXT};
    txl_err e = {0};
    txl_config *c = txl_config_new();
    txl_model *m = NULL;
    int bad = !c;
    for (size_t i = 0; !bad && i < sizeof sets / sizeof *sets; i++)
        bad = txl_config_set(c, sets[i], &e) != 0;
    if (!bad)
        m = txl_model_new(c, &e);
    CHECK(m, "a new model of 1 layer, tgt_len 16, mem_len 16: %s", m ? "ok" : e.msg);
    txl_config_free(c);
    return m;
}

static void test_shift(txl_model *m)
{
    static const int off[] = {0, 5, 1000};
    txl_probe_opts o = {.kind = "shift", .data = TEXT, .offsets = off, .n_offsets = 3,
                        .max_tokens = 600, .mem_len = -1};
    rows w = {0};
    txl_err e = {0};
    int rc = txl_probe(m, &o, take, &w, &e);
    CHECK(rc == 0 && w.n == 3, "shift: one row per offset (rc %d, %d rows) %s", rc, w.n, e.msg);
    CHECK(w.has_head[0] && !w.has_head[1] && !w.has_head[2], "  ... the heading on the first");
    CHECK(w.has_json[1] && w.has_text[1] && w.one_line[0] && w.one_line[1] && w.one_line[2],
          "  ... JSON and table line, single lines");
    CHECK(strcmp(w.mode[0], "-") == 0, "  ... and no mode");
    CHECK(strncmp(w.json0, "{\"probe\":\"shift\",\"offset\":0,", 28) == 0 &&
              strstr(w.json0, "\"delta\":0,") &&
              strstr(w.json0, "\"step\":0,\"checkpoint\":null}"),
          "  ... the JSON of txl probe shift --json (a model made in memory: no checkpoint): %s",
          w.json0);

    rows s = {.stop_at = 2};
    rc = txl_probe(m, &o, take, &s, &e);
    CHECK(rc == 7 && s.n == 2, "the callback's 7 at the second row stops there and is "
          "returned (rc %d, %d rows)", rc, s.n);
}

static void test_recall(txl_model *m)
{
    static const int dist[] = {64, 8};
    txl_probe_opts o = {.kind = "recall", .data = TEXT, .trials = 2, .distances = dist,
                        .n_distances = 2, .string_len = 8, .mode = TXL_PROBE_BOTH,
                        .mem_len = -1};
    rows w = {0};
    txl_err e = {0};
    int rc = txl_probe(m, &o, take, &w, &e);
    CHECK(rc == 0 && w.n == 6, "recall, both modes: 2 distances and a summary each (rc %d, "
          "%d rows) %s", rc, w.n, e.msg);
    CHECK(!w.summary[0] && !w.summary[1] && w.summary[2] && !w.summary[3] && w.summary[5],
          "  ... the summary rows flagged");
    CHECK(strcmp(w.mode[0], "memory") == 0 && strcmp(w.mode[2], "memory") == 0 &&
              strcmp(w.mode[5], "window") == 0, "  ... each row with its mode");
    CHECK(w.has_head[0] && !w.has_head[2] && !w.has_head[3], "  ... one heading, first");
}

static void test_needle_note(txl_model *m)
{
    static const int depth[] = {100};
    txl_probe_opts o = {.kind = "needle", .data = TEXT, .trials = 1, .depths = depth,
                        .n_depths = 1, .mode = TXL_PROBE_WINDOW, .mem_len = -1};
    rows w = {0};
    txl_err e = {0};
    int rc = txl_probe(m, &o, take, &w, &e);
    CHECK(rc == 0 && w.n == 3, "needle, default lengths on a 32-byte context: a note and the "
          "cells of 4x and 8x (rc %d, %d rows) %s", rc, w.n, e.msg);
    CHECK(!w.has_json[0] && !w.has_text[0] && !w.has_head[0] &&
              strstr(w.note, "needle: skipping the default lengths 1x, 2x"),
          "  ... the note alone: %s", w.note);
    CHECK(w.has_head[1] && w.has_json[1] && !w.has_head[2] && strcmp(w.mode[1], "window") == 0,
          "  ... the heading on the first cell");
}

static void expect_input(txl_model *m, const txl_probe_opts *o, const char *needle,
                         const char *what)
{
    rows w = {0};
    txl_err e = {0};
    int rc = txl_probe(m, o, take, &w, &e);
    CHECK(rc == -1 && e.kind == TXL_ERR_INPUT && strstr(e.msg, needle) && w.n == 0,
          "%s: ERR_INPUT, no row: %s", what, e.msg);
}

static void test_bad_opts(txl_model *m)
{
    static const int d101[] = {0, 101}, len0[] = {0};
    int many[TXL_PROBE_MAX_LIST + 1];
    for (int i = 0; i <= TXL_PROBE_MAX_LIST; i++)
        many[i] = 16 + i;
    txl_probe_opts o = {.kind = "needle", .data = TEXT, .depths = d101, .n_depths = 2,
                        .mem_len = -1};
    expect_input(m, &o, "depths: 101 is out of range [0, 100]", "a depth of 101");
    o = (txl_probe_opts){.kind = "needle", .data = TEXT, .lengths = len0, .n_lengths = 1};
    expect_input(m, &o, "lengths: 0 is out of range", "a length factor of 0");
    o = (txl_probe_opts){.kind = "recall", .data = TEXT, .trials = TXL_PROBE_MAX_TRIALS + 1};
    expect_input(m, &o, "trials: 4097 is out of range", "4097 trials");
    o = (txl_probe_opts){.kind = "recall", .data = TEXT, .distances = many,
                         .n_distances = TXL_PROBE_MAX_LIST + 1};
    expect_input(m, &o, "distances: 33 values, at most 32", "33 distances");
    o = (txl_probe_opts){.kind = "echo", .data = TEXT};
    expect_input(m, &o, "probe 'echo': expected needle, recall or shift", "an unknown probe");
    o = (txl_probe_opts){.kind = "shift", .data = TEXT, .mode = (txl_probe_mode)3};
    expect_input(m, &o, "mode 3", "mode 3");
}

int main(void)
{
    txl_set_threads(1);
    txl_model *m = tiny_model();
    if (m) {
        test_shift(m);
        test_recall(m);
        test_needle_note(m);
        test_bad_opts(m);
    }
    txl_model_free(m);
    return tl_done("test_probe_api");
}
