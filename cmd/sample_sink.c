/* sample_sink.c: see sample.h. */
#include "sample.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/json.h"
#include "../common/sys.h"
#include "cli.h"

#define MARKER_MAX 9 /* "<|para|>" and the like */

int sink_init(sink *k, const txl_model *m, int N, long max_tokens, int live, int show_anchors,
              const char *const *stops, int n_stops, txl_err *e)
{
    /* tokens drawn at most per stream for -n tokens: anchors come on top (about one per
     * sentence); a model that draws little but anchors stops there (sample.c) */
    long budget = max_tokens > 0 ? 2 * max_tokens + 16 : 0;
    long cap = max_tokens * (long)txl_model_token_text_max(m) +
               (show_anchors ? budget * MARKER_MAX : 0);
    *k = (sink){.m = m, .N = N, .live = live, .cap = cap, .show_anchors = show_anchors,
                .stops = stops, .n_stops = n_stops, .max_tokens = max_tokens, .last = -1};
    char who[160];
    snprintf(who, sizeof who, "sampling %d samples of up to %ld bytes each (kept until all "
             "are drawn)", N, cap);
    if (!live && sys_check_memory(who, (double)N * cap, 0, e))
        return -1;
    k->len = calloc((size_t)N, sizeof *k->len);
    k->done = calloc((size_t)N, sizeof *k->done);
    k->bytes = calloc((size_t)N, sizeof *k->bytes);
    k->tokens = calloc((size_t)N, sizeof *k->tokens);
    k->counted = calloc((size_t)N, sizeof *k->counted);
    k->seconds = calloc((size_t)N, sizeof *k->seconds);
    k->pend = calloc((size_t)N, sizeof *k->pend);
    k->npend = calloc((size_t)N, sizeof *k->npend);
    k->buf = live ? NULL : malloc((size_t)N * (size_t)(cap > 0 ? cap : 1));
    if (!k->len || !k->done || !k->bytes || !k->tokens || !k->counted || !k->seconds ||
        !k->pend || !k->npend || (!live && !k->buf))
        return err_set(e, ERR_RUNTIME, "out of memory for %d samples of %ld bytes", N, cap);
    return 0;
}

void sink_reset(sink *k, double t0)
{
    size_t n = (size_t)k->N;
    memset(k->len, 0, n * sizeof *k->len);
    memset(k->done, 0, n * sizeof *k->done);
    memset(k->bytes, 0, n * sizeof *k->bytes);
    memset(k->tokens, 0, n * sizeof *k->tokens);
    memset(k->counted, 0, n * sizeof *k->counted);
    memset(k->seconds, 0, n * sizeof *k->seconds);
    memset(k->npend, 0, n * sizeof *k->npend);
    k->calls = 0;
    k->t0 = t0; /* last stays: -i's answers follow each other on stdout */
}

/* Text of stream b out: to stdout (live, flushed at a newline and every 16 tokens) or kept. */
static int emit(sink *k, int b, const char *s, size_t n)
{
    if (n == 0)
        return 0;
    if (k->live) {
        if (fwrite(s, 1, n, stdout) != n)
            return -1; /* stdout failed: main reports it */
        k->last = (unsigned char)s[n - 1];
        if ((s[n - 1] == '\n' || k->calls % 16 == 15) && cli_stdout_flush())
            return -1;
    } else {
        size_t room = (size_t)(k->cap - k->len[b]);
        n = n < room ? n : room;
        memcpy(k->buf + (size_t)b * k->cap + k->len[b], s, n);
        k->len[b] += (long)n;
    }
    return 0;
}

/* s (n bytes) through the stop strings: held back while the end of what is held may begin
 * one; a whole one ends the stream, without being written. */
static int through_stops(sink *k, int b, const char *s, size_t n)
{
    if (k->n_stops == 0)
        return emit(k, b, s, n);
    for (size_t i = 0; i < n; i++) {
        char *p = k->pend[b];
        int np = k->npend[b];
        p[np++] = s[i];
        for (int j = 0; j < k->n_stops; j++) {
            int sl = (int)strlen(k->stops[j]);
            if (sl <= np && memcmp(p + np - sl, k->stops[j], (size_t)sl) == 0) {
                k->npend[b] = 0;
                k->done[b] = SINK_STOP;
                return emit(k, b, p, (size_t)(np - sl));
            }
        }
        int keep = 0; /* the longest end of p that begins a stop string */
        for (int j = 0; j < k->n_stops; j++) {
            int sl = (int)strlen(k->stops[j]);
            for (int t = np < sl - 1 ? np : sl - 1; t > keep; t--)
                if (memcmp(p + np - t, k->stops[j], (size_t)t) == 0) {
                    keep = t;
                    break;
                }
        }
        if (emit(k, b, p, (size_t)(np - keep)))
            return -1;
        memmove(p, p + np - keep, (size_t)keep);
        k->npend[b] = keep;
    }
    return 0;
}

int sink_put(void *ctx, int b, int t, const char *text, size_t len)
{
    sink *k = ctx;
    k->calls++;
    k->tokens[b]++;
    const char *name = len ? NULL : txl_token_name(k->m, t); /* an anchor's */
    if (len > 0) {
        const char *nl = k->stop_at_newline ? memchr(text, '\n', len) : NULL;
        size_t n = nl ? (size_t)(nl - text) + 1 : len; /* -i: the answer ends its line */
        if (through_stops(k, b, text, n))
            return -1;
        k->bytes[b] += (long)n;
        if (k->done[b] == SINK_GOING && nl)
            k->done[b] = SINK_NEWLINE;
    } else if (name && k->show_anchors) {
        char m[MARKER_MAX];
        snprintf(m, sizeof m, "<|%s|>", name);
        if (through_stops(k, b, m, strlen(m)))
            return -1;
    }
    /* -n counts the vocabulary's tokens, a special without text (GPT-2's <|endoftext|>)
     * too; the anchors a model inserts come on top, as they did on -n bytes */
    if (!name && ++k->counted[b] >= k->max_tokens && k->done[b] == SINK_GOING)
        k->done[b] = SINK_LENGTH;
    if (k->done[b])
        k->seconds[b] = sys_now() - k->t0;
    return k->done[b] != SINK_GOING;
}

int sink_end(sink *k, double now)
{
    for (int b = 0; b < k->N; b++) {
        if (k->npend[b] && emit(k, b, k->pend[b], (size_t)k->npend[b]))
            return -1;
        k->npend[b] = 0;
        if (!k->done[b]) {
            k->done[b] = SINK_LENGTH; /* the token budget: only anchors came */
            k->seconds[b] = now - k->t0;
        }
    }
    if (k->live && k->last >= 0 && k->last != '\n') { /* the shell's prompt on a line of its own */
        fputc('\n', stdout);
        k->last = '\n';
    }
    return k->live ? cli_stdout_flush() : 0;
}

/* The bytes of a UTF-8 sequence starting at s (at most n) that are well-formed so far, and
 * whether they make a whole character (Unicode's table 3-7: no overlong forms, surrogates
 * or code points past U+10FFFF). */
static size_t utf8_prefix(const uint8_t *s, size_t n, int *whole)
{
    uint8_t c = s[0], lo = 0x80, hi = 0xBF;
    size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (c == 0xE0)
        lo = 0xA0;
    else if (c == 0xED)
        hi = 0x9F;
    else if (c == 0xF0)
        lo = 0x90;
    else if (c == 0xF4)
        hi = 0x8F;
    size_t i = 1;
    for (; len && i < len && i < n; i++) {
        uint8_t x = s[i];
        if (x < (i == 1 ? lo : 0x80) || x > (i == 1 ? hi : 0xBF))
            break;
    }
    *whole = len > 0 && i == len && c != 0;
    return i;
}

/* s (n bytes) as valid UTF-8 for JSON: each maximal ill-formed part (and a NUL, which
 * would end the C string) becomes U+FFFD, as Unicode recommends and Python's 'replace'
 * decodes. malloc'd, NUL-terminated; NULL when out of memory. */
static char *utf8_text(const uint8_t *s, size_t n)
{
    char *o = malloc(3 * n + 1), *w = o;
    for (size_t i = 0; o && i < n;) {
        int whole;
        size_t k = utf8_prefix(s + i, n - i, &whole);
        if (whole) {
            memcpy(w, s + i, k);
            w += k;
        } else {
            memcpy(w, "\xEF\xBF\xBD", 3);
            w += 3;
        }
        i += k;
    }
    if (o)
        *w = 0;
    return o;
}

int sink_print(const sink *k, int json, long prompt_index)
{
    static const char *const why[] = {"length", "length", "newline", "stop"};
    for (int b = 0; b < k->N && !ferror(stdout); b++) {
        const uint8_t *s = k->buf + (size_t)b * k->cap;
        size_t n = (size_t)k->len[b];
        if (!json) {
            fwrite(s, 1, n, stdout);
            fputs(n && s[n - 1] == '\n' ? "---------------\n" : "\n---------------\n", stdout);
        } else {
            char *t = utf8_text(s, n);
            printf("{\"sample\":%d,\"prompt\":", b);
            if (prompt_index >= 0)
                printf("%ld", prompt_index);
            else
                fputs("null", stdout);
            fputs(",\"text\":", stdout);
            if (!t || json_put_str(stdout, t))
                fputs("null", stdout);
            printf(",\"tokens\":%ld,\"bytes\":%ld,\"seconds\":%.4f,\"finish\":\"%s\"}\n",
                   k->tokens[b], k->bytes[b], k->seconds[b], why[k->done[b]]);
            free(t);
        }
        if (cli_stdout_flush()) /* keeps the reason a write failed for main's message */
            return -1;
    }
    return ferror(stdout) ? -1 : 0;
}

void sink_free(sink *k)
{
    free(k->len);
    free(k->done);
    free(k->bytes);
    free(k->tokens);
    free(k->counted);
    free(k->seconds);
    free(k->pend);
    free(k->npend);
    free(k->buf);
    memset(k, 0, sizeof *k);
}
