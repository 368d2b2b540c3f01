/* test_bpe.c: byte-level BPE (data/bpe.c, pretok.c, gpt2.c, bpe_train.c): GPT-2's
 * vocabulary imported from its files; its ids on texts of many kinds (prose, code, markup,
 * scripts, emoji, whitespace, contractions, digits) and on random strings equal to
 * tiktoken's (tests/ref/gpt2_ids.js, committed as tests/data/vocab/gpt2_expected.json.gz);
 * decode(encode(x)) == x for random bytes (invalid UTF-8 included); random chunkings give
 * the tokens of the whole text; the array and heap merges agree; the trainer's merges equal
 * the naive trainer's (tests/ref/bpe_train.py); bad bpe files and GPT-2 files name the
 * fault. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../data/pretok.h"
#include "../data/vocab_impl.h"
#include "testlib.h"

#define D "tests/data/vocab/"

static vocab *gpt2(void)
{
    txl_err e = {0};
    vocab *v = vocab_import_gpt2(D "gpt2_encoder.json.gz", D "gpt2_vocab.bpe.gz", &e);
    CHECK(v && vocab_size(v) == 50257 && vocab_merges(v) == 50000 &&
          vocab_special_id(v, SPECIAL_EOT) == 50256 && vocab_get_kind(v) == VOCAB_BPE,
          "GPT-2 imported: 50257 tokens, 50000 merges, <|endoftext|> = 50256 (%s)", e.msg);
    return v;
}

/* ids of text equal to the JSON array want; the index of the first difference or -1 */
static long ids_differ(const vocab *v, const uint8_t *text, size_t len, const cJSON *want)
{
    txl_err e = {0};
    txl_tok *t;
    size_t n;
    if (vocab_encode(v, text, len, &t, &n, &e))
        return 0;
    long bad = (size_t)cJSON_GetArraySize(want) == n ? -1 : (long)n;
    size_t i = 0;
    for (const cJSON *x = want->child; x && bad < 0; x = x->next, i++)
        if (t[i] != (txl_tok)x->valuedouble)
            bad = (long)i;
    free(t);
    return bad;
}

/* decode(encode(x)) == x */
static int round_trip(const vocab *v, const uint8_t *text, size_t len)
{
    txl_err e = {0};
    txl_tok *t;
    size_t n;
    if (vocab_encode(v, text, len, &t, &n, &e))
        return 0;
    uint8_t *out = malloc(len + 1);
    size_t o = 0;
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) {
        size_t k = vocab_decoded(v, i ? (long)t[i - 1] : -1, t[i], NULL, 0);
        ok = o + k <= len;
        if (ok)
            o += vocab_decoded(v, i ? (long)t[i - 1] : -1, t[i], out + o, k);
    }
    ok = ok && o == len && memcmp(out, text, len) == 0;
    free(out);
    free(t);
    return ok;
}

static void test_gpt2_reference(const vocab *v)
{
    size_t len;
    char *js = (char *)vt_read_file(D "gpt2_expected.json.gz", &len);
    cJSON *root = js ? cJSON_ParseWithLength(js, len) : NULL;
    CHECK(root != NULL, "gpt2_expected.json.gz parses");
    if (!root)
        return;
    for (const cJSON *f = cJSON_GetObjectItem(root, "files")->child; f; f = f->next) {
        char path[256];
        snprintf(path, sizeof path, D "gpt2/%s", f->string);
        size_t n;
        uint8_t *text = vt_read_file(path, &n);
        long bad = text ? ids_differ(v, text, n, f) : 0;
        CHECK(bad < 0, "gpt2 %s: %d ids as tiktoken's (first difference: %ld)", f->string,
              cJSON_GetArraySize(f), bad);
        CHECK(text && vt_chunked_equal(v, text, n, 12, 77 + n), "gpt2 %s: random chunkings "
              "give the tokens and offsets of the whole text", f->string);
        CHECK(text && vt_offsets_ok(v, text, n) && round_trip(v, text, n),
              "gpt2 %s: the tokens tile the text and decode to it", f->string);
        free(text);
    }
    int n = 0, bad = 0, chunk_bad = 0;
    for (const cJSON *r = cJSON_GetObjectItem(root, "random")->child; r; r = r->next, n++) {
        const char *s = r->child->valuestring;
        long d = ids_differ(v, (const uint8_t *)s, strlen(s), r->child->next);
        if (d >= 0 && bad++ < 5)
            printf("        random string %d differs at token %ld\n", n, d);
        chunk_bad += !vt_chunked_equal(v, (const uint8_t *)s, strlen(s), 3, (uint64_t)n + 5);
    }
    CHECK(n > 1000 && bad == 0, "gpt2: %d random strings (scripts, marks, whitespace, emoji, "
          "contractions) as tiktoken's: %d differ", n, bad);
    CHECK(chunk_bad == 0, "gpt2: random strings in random chunks: %d differ", chunk_bad);
    cJSON_Delete(root);
    free(js);
}

/* random bytes of several kinds: uniform, mostly ASCII with invalid bytes, UTF-8 cut up */
static void random_text(tl_rng *r, uint8_t *buf, size_t n, int kind)
{
    static const char *const frag[] = {"\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", " ",
                                       "\n", "'s", "ab", "12", "\xe2\x80", "\xf0\x9f",
                                       "\x80", "\xc0\xaf", "\xed\xa0\x80", "\t ", "  "};
    for (size_t i = 0; i < n;) {
        uint32_t x = (uint32_t)(tl_uniform(r, 1.0f) * 1e6f + 1e6f);
        if (kind == 0) {
            buf[i++] = (uint8_t)x;
        } else if (kind == 1) {
            buf[i++] = x % 17 == 0 ? (uint8_t)(0x80 | x % 128) : (uint8_t)(32 + x % 95);
        } else {
            const char *f = frag[x % 15];
            for (size_t k = 0; f[k] && i < n; k++)
                buf[i++] = (uint8_t)f[k];
        }
    }
}

static void test_random_bytes(const vocab *v)
{
    tl_rng r = {12345};
    uint8_t buf[3000];
    int bad = 0, chunk_bad = 0, n = 0;
    for (int k = 0; k < 300; k++, n++) {
        size_t len = (size_t)(tl_uniform(&r, 1.0f) * 1400 + 1500) % sizeof buf;
        random_text(&r, buf, len, k % 3);
        bad += !round_trip(v, buf, len) || !vt_offsets_ok(v, buf, len);
        if (k < 60)
            chunk_bad += !vt_chunked_equal(v, buf, len, 4, (uint64_t)k + 1);
    }
    CHECK(bad == 0, "bpe: decode(encode(x)) == x for %d random byte strings: %d fail", n, bad);
    CHECK(chunk_bad == 0, "bpe: random bytes in random chunks: %d differ", chunk_bad);
}

/* The array scan and the heap merge the same. */
static void test_merge_algorithms(const vocab *v)
{
    tl_rng r = {999};
    uint8_t buf[400];
    txl_tok a[400], b[400];
    int bad = 0;
    for (int k = 0; k < 400; k++) {
        size_t len = 2 + (size_t)(tl_uniform(&r, 1.0f) * 190 + 190) % 398;
        random_text(&r, buf, len, 1 + k % 2);
        if (k % 4 == 0)
            memset(buf, k % 8 ? ' ' : 'a', len); /* runs of one byte: overlapping pairs */
        size_t na = bpe_piece_tokens(v, buf, len, 1, a), nb = bpe_piece_tokens(v, buf, len, 2, b);
        bad += na != nb || memcmp(a, b, na * sizeof *a) != 0;
    }
    CHECK(bad == 0, "bpe: the array and the heap merge 400 random pieces alike: %d differ", bad);
}

static void test_gpt2_file(const vocab *v)
{
    txl_err e = {0};
    uint8_t *buf, *buf2;
    size_t len, len2;
    vocab *w = vocab_serialize(v, &buf, &len, &e) == 0 ? vocab_parse(buf, len, "g", &e) : NULL;
    CHECK(w && vocab_fingerprint(w) == vocab_fingerprint(v) && vocab_size(w) == 50257 &&
          vocab_merges(w) == 50000, "GPT-2's vocabulary through txl's file: the same (%s)",
          e.msg);
    CHECK(w && vocab_serialize(w, &buf2, &len2, &e) == 0 && len2 == len &&
          !memcmp(buf, buf2, len), "... and written again byte for byte");
    const char *s = "Hello world";
    txl_tok *t = NULL;
    size_t n = 0;
    CHECK(w && vocab_encode(w, (const uint8_t *)s, strlen(s), &t, &n, &e) == 0 && n == 2 &&
          t[0] == 15496 && t[1] == 995, "... and encodes as GPT-2 ('Hello world': 15496 995)");
    size_t pl;
    vocab_piece(v, 50256, &pl);
    CHECK(pl == 0 && vocab_decoded(v, 0, 50256, NULL, 0) == 0 &&
          vocab_lookup(v, (const uint8_t *)"<|endoftext|>", 13) < 0,
          "<|endoftext|> decodes to nothing and no text encodes to it");
    free(t);
    free(buf);
    free(buf2);
    vocab_free(w);
}

/* ---- bad files --------------------------------------------------------------------------- */

/* a bpe file of the 256 bytes (in order), the extra tokens and the merges given */
static char *bpe_file(const char *extra, int n_extra, const char *merges, int n_merges)
{
    size_t cap = 8192 + strlen(extra) + strlen(merges);
    char *f = malloc(cap);
    int o = snprintf(f, cap, "txl-vocab 1\nkind bpe\nsize %d\ntokens\n", 256 + n_extra);
    for (int b = 0; b < 256; b++) {
        if (b > 0x20 && b < 0x7f && b != '\\')
            o += snprintf(f + o, cap - (size_t)o, "%d %c\n", b, b);
        else
            o += snprintf(f + o, cap - (size_t)o, "%d \\x%02x\n", b, b);
    }
    snprintf(f + o, cap - (size_t)o, "%smerges %d\n%send\n", extra, n_merges, merges);
    return f;
}

static void bad_bpe(const char *name, const char *extra, int n_extra, const char *merges,
                    int n_merges, const char *want)
{
    char *f = bpe_file(extra, n_extra, merges, n_merges);
    txl_err e = {0};
    vocab *v = vocab_parse((const uint8_t *)f, strlen(f), "f", &e);
    CHECK(want ? !v && e.kind == ERR_INPUT && strstr(e.msg, want) : v != NULL,
          "bpe file (%s): '%s'", name, v ? "parses" : e.msg);
    vocab_free(v);
    free(f);
}

static void test_bad_bpe_files(void)
{
    bad_bpe("good", "256 ab\n257 abc\n", 2, "a b\nab c\n", 2, NULL);
    bad_bpe("unknown part", "256 ab\n", 1, "a q\\x00\n", 1, "f:263:3: merge 0: its right part "
            "is not a token");
    bad_bpe("result not a token", "256 ab\n", 1, "a c\n", 1, "f:263:1: merge 0: the two parts "
            "joined is not a token");
    bad_bpe("made by no merge", "256 ab\n257 xy\n", 2, "a b\n", 1, "f:262: token 257 is made "
            "by no merge");
    bad_bpe("part made later", "256 ab\n257 abc\n", 2, "ab c\na b\n", 2, "f:264: merge 0 joins "
            "token 256, which no earlier merge makes");
    bad_bpe("made twice", "256 ab\n257 bc\n258 abc\n", 3, "a b\nb c\nab c\na bc\n", 4,
            "f:268: merge 3 makes token 258 again");
    bad_bpe("merge count", "256 ab\n", 1, "a b\n", 2, "'merges 2' but the file lists 1");
    bad_bpe("merge line", "256 ab\n", 1, "ab\n", 1, "f:263: merge 0: expected 'LEFT RIGHT'");
    /* a byte missing: byte 0x41 written as a second 0x42 */
    char *f = bpe_file("", 0, "", 0);
    char *at = strstr(f, "\n65 A\n");
    at[4] = 'B';
    txl_err e = {0};
    vocab *v = vocab_parse((const uint8_t *)f, strlen(f), "f", &e);
    CHECK(!v && strstr(e.msg, "f:71: token 66 is a duplicate of token 65 (line 70)"),
          "bpe file (a byte twice): '%s'", e.msg);
    free(f);
}

static void write_file(const char *path, const char *s)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(s, f);
        fclose(f);
    }
}

static void test_bad_gpt2_files(void)
{
    char enc[] = "/tmp/txl_test_enc_XXXXXX", bpe[] = "/tmp/txl_test_bpe_XXXXXX";
    close(mkstemp(enc));
    close(mkstemp(bpe));
    /* the 256 bytes in GPT-2's alphabet would be long: a vocabulary missing bytes is the
     * first fault of a short encoder.json */
    struct { const char *enc, *bpe, *want; } cases[] = {
        {"[1, 2]", "", "not a JSON object"},
        {"{\"a\": 0, \"b\": 0}", "", "have the same id 0"},
        {"{\"a\": 0, \"b\": 5}", "", "has id out of range"},
        {"{\"a\": 0, \"\\u4e2d\": 1}", "", "token 1 '\xe4\xb8\xad' holds U+4E2D"},
        {"{\"a\": 0, \"b\": 1}", "", "byte 0x00 is not a token"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        write_file(enc, cases[i].enc);
        write_file(bpe, cases[i].bpe);
        txl_err e = {0};
        vocab *v = vocab_import_gpt2(enc, bpe, &e);
        CHECK(!v && e.kind == ERR_INPUT && strstr(e.msg, cases[i].want) && strstr(e.msg, "/tmp/"),
              "GPT-2 files: '%s'", e.msg);
        vocab_free(v);
    }
    txl_err e = {0};
    vocab *v = vocab_import_gpt2(D "gpt2_encoder.json.gz", "/nonexistent/vocab.bpe", &e);
    CHECK(!v && strstr(e.msg, "/nonexistent/vocab.bpe: cannot open"), "GPT-2 files: '%s'",
          e.msg);
    unlink(enc);
    unlink(bpe);
}

/* ---- the trainer ----------------------------------------------------------------------------- */

static void train_case(const cJSON *c)
{
    const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
    const char *paths[8];
    int nf = 0;
    for (const cJSON *f = cJSON_GetObjectItem(c, "files")->child; f && nf < 8; f = f->next)
        paths[nf++] = f->valuestring;
    vocab_build_opts o = {.files = paths, .n_files = nf,
                          .max_size = (long)cJSON_GetObjectItem(c, "size")->valuedouble};
    txl_err e = {0};
    vocab *v = vocab_build(VOCAB_BPE, &o, &e);
    const cJSON *m = cJSON_GetObjectItem(c, "merges");
    size_t nm = (size_t)cJSON_GetArraySize(m), r = 0, bad = nm;
    for (const cJSON *x = m->child; v && x; x = x->next, r++)
        if (bad == nm && (r >= v->n_merges || v->merges[r].a != (txl_tok)x->child->valuedouble ||
                          v->merges[r].b != (txl_tok)x->child->next->valuedouble ||
                          v->merges[r].to != 256 + r))
            bad = r;
    CHECK(v && v->n_merges == nm && bad == nm, "bpe trainer %s: %zu merges as the naive "
          "trainer's (first difference: %zu) %s", name, nm, bad, e.msg);
    size_t len;
    uint8_t *text = vt_read_file(paths[0], &len);
    CHECK(v && text && round_trip(v, text, len) && vt_chunked_equal(v, text, len, 5, 3),
          "bpe trainer %s: its vocabulary encodes and decodes the text, in any chunks", name);
    free(text);
    vocab_free(v);
}

static void test_trainer(void)
{
    size_t len;
    char *js = (char *)vt_read_file(D "bpe_train_expected.json", &len);
    cJSON *root = js ? cJSON_ParseWithLength(js, len) : NULL;
    CHECK(root != NULL, "bpe_train_expected.json parses");
    for (const cJSON *c = root ? cJSON_GetObjectItem(root, "cases")->child : NULL; c; c = c->next)
        train_case(c);
    cJSON_Delete(root);
    free(js);
    const char *p[] = {D "gpt2/emoji.txt"};
    vocab_build_opts o = {.files = p, .n_files = 1, .max_size = 100};
    txl_err e = {0};
    CHECK(!vocab_build(VOCAB_BPE, &o, &e) && e.kind == ERR_INPUT && strstr(e.msg, "256"),
          "bpe trainer: a size under 256 is refused: '%s'", e.msg);
}

int main(void)
{
    vocab *v = gpt2();
    if (v) {
        test_gpt2_reference(v);
        test_random_bytes(v);
        test_merge_algorithms(v);
        test_gpt2_file(v);
    }
    vocab_free(v);
    test_bad_bpe_files();
    test_bad_gpt2_files();
    test_trainer();
    return tl_done("test_bpe");
}
