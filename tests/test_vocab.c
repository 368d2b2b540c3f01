/* test_vocab.c: the vocabularies (data/vocab.h): the byte vocabulary; the file format
 * (round trips of any bytes, the fingerprint, one bad file per fault class, each naming
 * its line); the word tokenizer against the independent reimplementation of official
 * Transformer-XL's Vocab (tests/ref/word_vocab.py, whose output on the committed texts is
 * tests/data/vocab/word_expected.json): the same symbols in the same order and the same
 * ids; encoding in random chunks giving exactly the tokens and offsets of the whole text;
 * decoding. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../data/tokfile.h"
#include "../data/vocab.h"
#include "testlib.h"

static void test_bytes(void)
{
    txl_err e = {0};
    vocab *v = vocab_new_bytes(&e);
    CHECK(v && vocab_size(v) == 256 && vocab_get_kind(v) == VOCAB_BYTE, "byte vocabulary: 256");
    int ok = 1;
    for (int b = 0; b < 256; b++) {
        size_t n;
        const uint8_t *p = vocab_piece(v, (txl_tok)b, &n);
        uint8_t c = (uint8_t)b, d[4];
        ok &= n == 1 && p[0] == b && vocab_lookup(v, &c, 1) == b && vocab_special(v, b) == 0;
        ok &= vocab_decoded(v, b - 1, (txl_tok)b, d, sizeof d) == 1 && d[0] == b;
    }
    CHECK(ok, "byte vocabulary: token b is byte b, looked up and decoded as itself");
    CHECK(vocab_special_id(v, SPECIAL_EOS) < 0 && vocab_special_id(v, SPECIAL_EOT) < 0 &&
          vocab_merges(v) == 0, "byte vocabulary: no specials, no merges");
    vocab_kind k = VOCAB_BYTE;
    CHECK(vocab_kind_parse("bpe", &k) == 0 && k == VOCAB_BPE && vocab_kind_parse("char", &k) < 0
          && strcmp(vocab_kind_name(VOCAB_WORD), "word") == 0, "kind names");
    const uint8_t text[] = "a\0\xff\n";
    txl_tok *t;
    size_t n;
    CHECK(vocab_encode(v, text, 4, &t, &n, &e) == 0 && n == 4 && t[1] == 0 && t[2] == 255,
          "byte vocabulary: encoding is the bytes");
    free(t);
    uint8_t *buf;
    size_t len;
    vocab *w = vocab_serialize(v, &buf, &len, &e) == 0 ? vocab_parse(buf, len, "b", &e) : NULL;
    CHECK(w && vocab_fingerprint(w) == vocab_fingerprint(v) && vocab_get_kind(w) == VOCAB_BYTE,
          "byte vocabulary: its file parses back, same fingerprint (%s)", e.msg);
    vocab *b2 = vocab_new_bytes(&e);
    CHECK(b2 && vocab_fingerprint(b2) == vocab_fingerprint(v), "the fingerprint is stable");
    vocab_free(b2);
    vocab_free(w);
    free(buf);
    vocab_free(v);
}

/* A word vocabulary whose words hold every kind of byte a word may hold. */
static void test_format_roundtrip(void)
{
    const char *f = "txl-vocab 1\nkind word\nsize 7\nspecial eos 0\nspecial unk 2\ntokens\n"
                    "0 <eos>\n1 a\\\\b\n2 <unk>\n3 \\x00\\x01\\x7f\\xff\\xc3\n4 caf\xc3\xa9\n"
                    "5 \xe6\x97\xa5\\xe2\\x80\\x8b\n6 x\\x80y\nend\n";
    txl_err e = {0};
    vocab *v = vocab_parse((const uint8_t *)f, strlen(f), "f", &e);
    CHECK(v != NULL, "a word vocabulary file parses (%s)", e.msg);
    if (!v)
        return;
    size_t n;
    const uint8_t *p = vocab_piece(v, 3, &n);
    CHECK(n == 5 && memcmp(p, "\0\x01\x7f\xff\xc3", 5) == 0, "escapes: \\x00 \\x01 \\x7f \\xff");
    p = vocab_piece(v, 1, &n);
    CHECK(n == 3 && memcmp(p, "a\\b", 3) == 0, "escapes: \\\\");
    CHECK(vocab_special(v, 2) == SPECIAL_UNK && vocab_special_id(v, SPECIAL_UNK) == 2 &&
          vocab_lookup(v, (const uint8_t *)"<unk>", 5) == 2 &&
          vocab_lookup(v, (const uint8_t *)"<eos>", 5) == 0, "specials and their names");
    uint8_t *buf;
    size_t len;
    CHECK(vocab_serialize(v, &buf, &len, &e) == 0 && len == strlen(f) && !memcmp(buf, f, len),
          "serialize(parse(file)) is the file, byte for byte");
    free(buf);
    vocab_free(v);
}

typedef struct {
    const char *name, *text, *want;
} bad_case;

static void test_bad_files(void)
{
    static const bad_case cases[] = {
        {"empty", "", "f:1: not a txl vocabulary"},
        {"magic", "txl-vocab\n", "f:1: not a txl vocabulary"},
        {"version", "txl-vocab 2\n", "this txl reads version 1"},
        {"kind", "txl-vocab 1\nkind char\n", "f:2:6: the kind is byte, word or bpe"},
        {"size missing", "txl-vocab 1\nkind word\ntokens\n", "f:3: expected 'size N'"},
        {"size text", "txl-vocab 1\nkind word\nsize x\n", "f:3:6: 'size' needs a number"},
        {"truncated in tokens", "txl-vocab 1\nkind word\nsize 3\nspecial eos 0\ntokens\n0 <eos>\n1 a\n",
         "f:8: the size is 3 but the file lists 2 tokens"},
        {"size too large", "txl-vocab 1\nkind word\nsize 3\nspecial eos 0\ntokens\n0 <eos>\n1 a\nend\n",
         "f:8: the size is 3 but the file lists 2 tokens"},
        {"size too small", "txl-vocab 1\nkind word\nsize 2\nspecial eos 0\ntokens\n0 <eos>\n1 a\n2 b\nend\n",
         "f:8: expected 'end'"},
        {"missing token", "txl-vocab 1\nkind word\nsize 3\nspecial eos 0\ntokens\n0 <eos>\n2 a\n1 b\nend\n",
         "f:7: expected token 1, found token 2"},
        {"duplicate token", "txl-vocab 1\nkind word\nsize 3\nspecial eos 0\ntokens\n0 <eos>\n1 a\n2 a\nend\n",
         "f:8: token 2 is a duplicate of token 1 (line 7)"},
        {"duplicate of a special", "txl-vocab 1\nkind word\nsize 2\nspecial eos 0\ntokens\n0 <eos>\n1 <eos>\nend\n",
         "f:7: token 1 is a duplicate of token 0"},
        {"no eos", "txl-vocab 1\nkind word\nsize 1\ntokens\n0 a\nend\n", "needs an <eos>"},
        {"undeclared unk", "txl-vocab 1\nkind word\nsize 2\nspecial eos 0\ntokens\n0 <eos>\n1 <unk>\nend\n",
         "f:7: the word <unk> is a word vocabulary's <unk>: declare it 'special unk 1'"},
        {"special text", "txl-vocab 1\nkind word\nsize 1\nspecial eos 0\ntokens\n0 eos\nend\n",
         "f:6:3: token 0 is special eos: its text is <eos>"},
        {"special id", "txl-vocab 1\nkind word\nsize 1\nspecial eos 1\ntokens\n0 <eos>\nend\n",
         "f:4:13: special eos needs a token id below the size"},
        {"bad escape", "txl-vocab 1\nkind word\nsize 2\nspecial eos 0\ntokens\n0 <eos>\n1 a\\q\nend\n",
         "f:7:4: a bad escape"},
        {"raw control", "txl-vocab 1\nkind word\nsize 2\nspecial eos 0\ntokens\n0 <eos>\n1 a\tb\nend\n",
         "f:7:4: byte 0x09 stands unescaped"},
        {"whitespace word", "txl-vocab 1\nkind word\nsize 2\nspecial eos 0\ntokens\n0 <eos>\n1 a\\sb\nend\n",
         "f:7: word 1 holds whitespace at its byte 1"},
        {"bytes after end", "txl-vocab 1\nkind word\nsize 1\nspecial eos 0\ntokens\n0 <eos>\nend\nx\n",
         "f:8: bytes after 'end'"},
        {"no end", "txl-vocab 1\nkind word\nsize 1\nspecial eos 0\ntokens\n0 <eos>\n", "expected 'end'"},
        {"byte kind wrong", "txl-vocab 1\nkind byte\nsize 1\ntokens\n0 a\nend\n", "256 tokens, not 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        txl_err e = {0};
        vocab *v = vocab_parse((const uint8_t *)cases[i].text, strlen(cases[i].text), "f", &e);
        CHECK(!v && e.kind == ERR_INPUT && strstr(e.msg, cases[i].want),
              "bad file (%s): '%s'", cases[i].name, e.msg);
        vocab_free(v);
    }
}

/* ---- word, against tests/ref/word_vocab.py ---------------------------------------------- */

static void word_case(const cJSON *c)
{
    const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
    const cJSON *files = cJSON_GetObjectItem(c, "build");
    const char *paths[8];
    int nf = 0;
    for (const cJSON *f = files->child; f && nf < 8; f = f->next)
        paths[nf++] = f->valuestring;
    vocab_build_opts o = {.files = paths, .n_files = nf,
                          .min_freq = (long)cJSON_GetObjectItem(c, "min_freq")->valuedouble,
                          .max_size = (long)cJSON_GetObjectItem(c, "max_size")->valuedouble};
    txl_err e = {0};
    vocab *v = vocab_build(VOCAB_WORD, &o, &e);
    CHECK(v != NULL, "word %s: built (%s)", name, e.msg);
    if (!v)
        return;
    const cJSON *syms = cJSON_GetObjectItem(c, "symbols");
    size_t n = (size_t)cJSON_GetArraySize(syms), bad = n, i = 0;
    for (const cJSON *s = syms->child; s; s = s->next, i++) {
        size_t len;
        const uint8_t *p = vocab_piece(v, (txl_tok)i, &len);
        const char *want = s->valuestring;
        if (vocab_special(v, (txl_tok)i) == SPECIAL_EOS)
            p = (const uint8_t *)"<eos>", len = 5;
        if (bad == n && (i >= vocab_size(v) || len != strlen(want) || memcmp(p, want, len)))
            bad = i;
    }
    CHECK(vocab_size(v) == n && bad == n, "word %s: %zu symbols as the reference's (first "
          "difference: %zu)", name, n, bad);
    size_t len;
    uint8_t *text = vt_read_file(cJSON_GetObjectItem(c, "encode")->valuestring, &len);
    txl_tok *t = NULL;
    size_t nt = 0;
    int rc = vocab_encode(v, text, len, &t, &nt, &e);
    const cJSON *ids = cJSON_GetObjectItem(c, "ids");
    size_t nid = (size_t)cJSON_GetArraySize(ids), first = nid;
    i = 0;
    for (const cJSON *x = ids->child; x && rc == 0; x = x->next, i++)
        if (first == nid && (i >= nt || t[i] != (txl_tok)x->valuedouble))
            first = i;
    CHECK(rc == 0 && nt == nid && first == nid, "word %s: %zu ids as the reference's (first "
          "difference: %zu) %s", name, nid, first, e.msg);
    CHECK(vt_chunked_equal(v, text, len, 20, 1000 + i), "word %s: random chunkings give the "
          "tokens and offsets of the whole text", name);
    CHECK(vt_offsets_ok(v, text, len), "word %s: each token's offset and length cover its "
          "bytes", name);
    free(t);
    free(text);
    vocab_free(v);
}

static void test_word_reference(void)
{
    size_t len;
    char *js = (char *)vt_read_file("tests/data/vocab/word_expected.json", &len);
    cJSON *root = js ? cJSON_Parse(js) : NULL;
    CHECK(root != NULL, "tests/data/vocab/word_expected.json parses");
    if (!root)
        return;
    const cJSON *cases = cJSON_GetObjectItem(root, "cases");
    for (const cJSON *c = cases->child; c; c = c->next)
        word_case(c);
    cJSON_Delete(root);
    free(js);
}

/* Decoding: words joined by a space, a line end per <eos>; lookup of every word. */
static void test_word_decode(void)
{
    const char *paths[] = {"tests/data/vocab/word_edge.txt"};
    vocab_build_opts o = {.files = paths, .n_files = 1};
    txl_err e = {0};
    vocab *v = vocab_build(VOCAB_WORD, &o, &e);
    const char *text = "  the cat\t sat \n\nthe  end";
    txl_tok *t = NULL;
    size_t n = 0;
    int rc = v ? vocab_encode(v, (const uint8_t *)text, strlen(text), &t, &n, &e) : -1;
    char out[128];
    size_t o_n = 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        o_n += vocab_decoded(v, i ? (long)t[i - 1] : -1, t[i], (uint8_t *)out + o_n,
                             sizeof out - o_n);
    out[o_n < sizeof out ? o_n : sizeof out - 1] = 0;
    CHECK(rc == 0 && strcmp(out, "the cat sat\n\nthe end\n") == 0, "word: decoded '%s'", out);
    size_t counted = 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        counted += vocab_decoded(v, i ? (long)t[i - 1] : -1, t[i], NULL, 0);
    CHECK(counted == o_n, "word: vocab_decoded counts what it writes");
    free(t);
    /* a word outside a vocabulary: <unk> (a build always has it) */
    rc = v ? vocab_encode(v, (const uint8_t *)"the zebra", 9, &t, &n, &e) : -1;
    CHECK(rc == 0 && n == 3 && vocab_special(v, t[1]) == SPECIAL_UNK,
          "word: an unknown word is the build's <unk>");
    free(t);
    t = NULL;
    /* ... and an error with a vocabulary that has none (a hand-made file) */
    static const char no_unk[] = "txl-vocab 1\nkind word\nsize 3\nspecial eos 0\ntokens\n"
                                 "0 <eos>\n1 the\n2 cat\nend\n";
    vocab *nu = vocab_parse((const uint8_t *)no_unk, sizeof no_unk - 1, "no_unk", &e);
    rc = nu ? vocab_encode(nu, (const uint8_t *)"the zebra", 9, &t, &n, &e) : 0;
    CHECK(rc == -1 && e.kind == ERR_INPUT && strstr(e.msg, "byte 4: the word 'zebra'"),
          "word: an unknown word without <unk>: '%s'", e.msg);
    vocab_free(nu);
    vocab_free(v);
}

static void test_save_load(void)
{
    const char *paths[] = {"tests/data/vocab/wt2_valid_head.txt"};
    vocab_build_opts o = {.files = paths, .n_files = 1, .max_size = 300};
    txl_err e = {0};
    vocab *v = vocab_build(VOCAB_WORD, &o, &e);
    char path[] = "/tmp/txl_test_vocab_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0)
        close(fd);
    int rc = v ? vocab_save(v, path, &e) : -1;
    vocab *w = rc == 0 ? vocab_load(path, &e) : NULL;
    CHECK(w && vocab_size(w) == vocab_size(v) && vocab_fingerprint(w) == vocab_fingerprint(v),
          "word: saved and loaded back, the same fingerprint (%s)", e.msg);
    vocab_free(w);
    w = vocab_load("/nonexistent/v.txt", &e);
    CHECK(!w && e.kind == ERR_INPUT && strstr(e.msg, "/nonexistent/v.txt"),
          "a missing vocabulary file is named: '%s'", e.msg);
    unlink(path);
    vocab_free(v);
    CHECK(!vocab_import_gpt2("/nonexistent/encoder.json", "/nonexistent/vocab.bpe", &e),
          "importing missing GPT-2 files fails");
}

/* ---- token files ------------------------------------------------------------------------ */

/* A word vocabulary of n words w0 .. w(n-2) and <eos>: V = n. */
static vocab *n_words(size_t n)
{
    size_t cap = 64 + 16 * n;
    char *f = malloc(cap);
    int o = snprintf(f, cap, "txl-vocab 1\nkind word\nsize %zu\nspecial eos 0\ntokens\n0 <eos>\n",
                     n);
    for (size_t i = 1; i < n; i++)
        o += snprintf(f + o, cap - (size_t)o, "%zu w%zu\n", i, i);
    snprintf(f + o, cap - (size_t)o, "end\n");
    txl_err e = {0};
    vocab *v = vocab_parse((const uint8_t *)f, strlen(f), "n", &e);
    free(f);
    return v;
}

static void patch(const char *path, long off, const void *b, size_t n)
{
    FILE *f = fopen(path, "r+b");
    if (f) {
        fseek(f, off, SEEK_SET);
        fwrite(b, 1, n, f);
        fclose(f);
    }
}

static void tokfile_case(size_t V, int width)
{
    vocab *v = n_words(V), *other = n_words(V - 1);
    char path[] = "/tmp/txl_test_tok_XXXXXX";
    close(mkstemp(path));
    txl_err e = {0};
    txl_tok ids[5000], back[5000];
    for (size_t i = 0; i < 5000; i++)
        ids[i] = (txl_tok)((i * 7919) % V);
    tokfile_writer w;
    int rc = v && other ? tokfile_create(&w, path, v, &e) : -1;
    if (!rc)
        rc = tokfile_write(&w, ids, 3000, &e) || tokfile_write(&w, ids + 3000, 2000, &e) ||
             tokfile_commit(&w, &e);
    tokfile f;
    rc = rc ? rc : tokfile_open(&f, path, v, &e);
    CHECK(rc == 0 && f.n == 5000 && f.width == width && f.vocab_size == V,
          "token file, V %zu: written and opened, %d-byte ids (%s)", V, width, e.msg);
    if (rc)
        return;
    int ok = tokfile_read(&f, 0, 5000, back, &e) == 0 && !memcmp(back, ids, sizeof ids);
    ok = ok && tokfile_read(&f, 4321, 600, back, &e) == 0 && !memcmp(back, ids + 4321, 600 * 4);
    CHECK(ok && tokfile_check(&f, &e) == 0, "token file, V %zu: ranges read back", V);
    CHECK(tokfile_read(&f, 4900, 101, back, &e) < 0 && strstr(e.msg, "past its 5000 tokens"),
          "token file: a range past the end: '%s'", e.msg);
    tokfile_close(&f);
    CHECK(tokfile_open(&f, path, other, &e) < 0 && e.kind == ERR_INPUT &&
          strstr(e.msg, "another vocabulary"), "token file: another vocabulary: '%s'", e.msg);
    uint8_t big[4] = {0xff, 0xff, 0xff, 0xff};
    patch(path, 32 + 17 * width, big, (size_t)width);
    rc = tokfile_open(&f, path, v, &e);
    if (V != 65536) /* 2-byte ids of 65,536 tokens are all valid */
        CHECK(rc == 0 && tokfile_check(&f, &e) < 0 && strstr(e.msg, "token 17 (byte ") &&
              strstr(e.msg, "not below the vocabulary's size"), "token file: an id >= V: '%s'",
              e.msg);
    if (rc == 0)
        tokfile_close(&f);
    if (truncate(path, 32 + 4999 * width) == 0) {
        CHECK(tokfile_open(&f, path, v, &e) < 0 && strstr(e.msg, "truncated") &&
              strstr(e.msg, path), "token file: truncated: '%s'", e.msg);
    }
    patch(path, 0, "TXLX", 4);
    CHECK(tokfile_open(&f, path, NULL, &e) < 0 && strstr(e.msg, "not a txl token file"),
          "token file: the magic: '%s'", e.msg);
    patch(path, 0, "TXLT\x02", 5);
    CHECK(tokfile_open(&f, path, NULL, &e) < 0 && strstr(e.msg, "byte 4: token file version 2"),
          "token file: the version: '%s'", e.msg);
    unlink(path);
    vocab_free(v);
    vocab_free(other);
}

static void test_tokfile(void)
{
    tokfile_case(1000, 2);
    tokfile_case(65536, 2);
    tokfile_case(70000, 4);
    CHECK(tokfile_sniff((const uint8_t *)"TXLT", 4) && !tokfile_sniff((const uint8_t *)"TXL", 3),
          "token files are told by their magic");
}

int main(void)
{
    test_bytes();
    test_format_roundtrip();
    test_bad_files();
    test_word_reference();
    test_word_decode();
    test_save_load();
    test_tokfile();
    return tl_done("test_vocab");
}
