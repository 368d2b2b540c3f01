/* vocab.c: include/txl.h's vocabularies over data/vocab.h and data/tokfile.h: loading (a
 * vocabulary file, or a checkpoint's `vocab` tensor), building, importing, encoding texts
 * and token files, reading token files. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/instream.h"
#include "../config/config.h"
#include "../data/tokfile.h"
#include "../data/units.h"
#include "../data/vocab.h"
#include "../io/ckpt_open.h"
#include "../io/safetensors.h"
#include "api.h"

struct txl_vocab {
    vocab *v;
    const char *source;          /* "file", "checkpoint", "bytes" or NULL */
    char path[CKPT_PATH_MAX];
    unsigned anchors;            /* a checkpoint's anchors (ANCHOR_* bits), ids V, V+1, ... */
};

static txl_vocab *wrap(vocab *v, const char *source, const char *path, txl_err *e)
{
    if (!v)
        return NULL;
    txl_vocab *tv = calloc(1, sizeof *tv);
    if (!tv) {
        vocab_free(v);
        err_set(e, ERR_RUNTIME, "out of memory");
        return NULL;
    }
    tv->v = v;
    tv->source = source;
    if (path)
        snprintf(tv->path, sizeof tv->path, "%s", path);
    return tv;
}

txl_vocab *txl_vocab_load(const char *path, txl_err *e)
{
    if (!path || !*path) {
        err_set(e, ERR_INPUT, "no vocabulary given");
        return NULL;
    }
    if (!ckpt_names_checkpoint(path))
        return wrap(vocab_load(path, e), "file", path, e);
    /* the checkpoint's vocabulary, held to its config (ckpt_vocab_of) */
    char file[CKPT_PATH_MAX];
    int dir;
    run_config cfg;
    vocab *v;
    if (ckpt_resolve(path, 0, file, sizeof file, &dir, e) || ckpt_vocab_of(file, &v, &cfg, e))
        return NULL;
    txl_vocab *tv = wrap(v, cfg_tokenizer(&cfg) == VOCAB_BYTE ? "bytes" : "checkpoint", file, e);
    if (tv)
        tv->anchors = cfg_units(&cfg).anchors;
    return tv;
}

txl_vocab *txl_vocab_build(const char *kind, const char *const *files, int n_files, long size,
                           long min_freq, int progress, txl_err *e)
{
    vocab_kind k;
    if (vocab_kind_parse(kind, &k) || k == VOCAB_BYTE) {
        err_set(e, ERR_INPUT, "a vocabulary is built of kind word or bpe, not '%s'",
                kind ? kind : "");
        return NULL;
    }
    if (k == VOCAB_BPE && min_freq > 0) {
        err_set(e, ERR_INPUT, "a minimum frequency is for word vocabularies, not bpe");
        return NULL;
    }
    if (size < 0 || min_freq < 0) {
        err_set(e, ERR_INPUT, "the size and the minimum frequency are >= 0 (%ld, %ld)", size,
                min_freq);
        return NULL;
    }
    vocab_build_opts o = {.files = files, .n_files = n_files, .min_freq = min_freq,
                          .max_size = size, .progress = progress};
    return wrap(vocab_build(k, &o, e), NULL, NULL, e);
}

txl_vocab *txl_vocab_import_gpt2(const char *encoder_json, const char *vocab_bpe, txl_err *e)
{
    return wrap(vocab_import_gpt2(encoder_json, vocab_bpe, e), NULL, NULL, e);
}

int txl_vocab_save(const txl_vocab *v, const char *path, txl_err *e)
{
    return vocab_save(v->v, path, e);
}

void txl_vocab_free(txl_vocab *v)
{
    if (!v)
        return;
    vocab_free(v->v);
    free(v);
}

const char *txl_vocab_kind(const txl_vocab *v)
{
    return vocab_kind_name(vocab_get_kind(v->v));
}

size_t txl_vocab_size(const txl_vocab *v)
{
    return vocab_size(v->v);
}

size_t txl_vocab_merges(const txl_vocab *v)
{
    return vocab_merges(v->v);
}

uint64_t txl_vocab_fingerprint(const txl_vocab *v)
{
    return vocab_fingerprint(v->v);
}

const char *txl_vocab_source(const txl_vocab *v)
{
    return v->source;
}

const char *txl_vocab_path(const txl_vocab *v)
{
    return v->path[0] ? v->path : NULL;
}

int txl_vocab_special(const txl_vocab *v, int i, const char **name, uint32_t *id)
{
    static const char *const names[] = {"eos", "unk", "eot"};
    static const vocab_special_kind kinds[] = {SPECIAL_EOS, SPECIAL_UNK, SPECIAL_EOT};
    int seen = 0;
    for (int k = 0; k < 3; k++) {
        long t = vocab_special_id(v->v, kinds[k]);
        if (t >= 0 && seen++ == i) {
            *name = names[k];
            *id = (uint32_t)t;
            return 0;
        }
    }
    /* a checkpoint's anchors: the tokens after the vocabulary's (data/units.h) */
    static const char *const anames[] = {"bos", "para", "sent"};
    static const unsigned akinds[] = {ANCHOR_BOS, ANCHOR_PARA, ANCHOR_SENT};
    units_config u = {.anchors = v->anchors, .base = (txl_tok)vocab_size(v->v)};
    for (int k = 0; k < 3; k++) {
        long t = units_anchor_token(&u, akinds[k]);
        if (t >= 0 && seen++ == i) {
            *name = anames[k];
            *id = (uint32_t)t;
            return 0;
        }
    }
    return -1;
}

int txl_vocab_anchors(const txl_vocab *v)
{
    return units_n_anchors(v->anchors);
}

size_t txl_vocab_token(const txl_vocab *v, uint32_t id, int escaped, char *buf, size_t cap,
                       int *special)
{
    vocab_special_kind sp = id < vocab_size(v->v) ? vocab_special(v->v, id) : SPECIAL_NONE;
    if (special)
        *special = sp != SPECIAL_NONE;
    if (id >= vocab_size(v->v))
        return 0;
    const char *name = sp == SPECIAL_EOS ? "<eos>" : sp == SPECIAL_UNK ? "<unk>"
                       : sp == SPECIAL_EOT ? "<|endoftext|>" : NULL;
    size_t n;
    const uint8_t *p = name ? (const uint8_t *)name : vocab_piece(v->v, id, &n);
    if (name)
        n = strlen(name);
    if (escaped && !name)
        return vocab_escape(p, n, buf, cap);
    if (buf)
        memcpy(buf, p, n < cap ? n : cap);
    return n;
}

size_t txl_vocab_decode(const txl_vocab *v, long prev, uint32_t id, char *buf, size_t cap)
{
    if (id >= vocab_size(v->v))
        return 0;
    return vocab_decoded(v->v, prev, id, (uint8_t *)buf, cap);
}

/* ---- Encoding -------------------------------------------------------------------------- */

int txl_vocab_encode(const txl_vocab *v, const char *text, size_t len, uint32_t **ids,
                     size_t *n, txl_err *e)
{
    return vocab_encode(v->v, (const uint8_t *)text, len, ids, n, e);
}

#define ID_BATCH 4096

typedef struct {
    txl_ids_fn fn;
    void *ctx;
    uint32_t ids[ID_BATCH];
    size_t n;
    int rc;                      /* fn's non-zero value */
} id_batch;

static int batch_flush(id_batch *b)
{
    if (b->n && !b->rc)
        b->rc = b->fn(b->ctx, b->ids, b->n);
    b->n = 0;
    return b->rc;
}

static int batch_push(void *ctx, txl_tok t, size_t off, size_t len)
{
    (void)off;
    (void)len;
    id_batch *b = ctx;
    b->ids[b->n++] = t;
    return b->n == ID_BATCH ? batch_flush(b) : 0;
}

int txl_vocab_encode_file(const txl_vocab *v, const char *path, txl_ids_fn fn, void *ctx,
                          size_t *bytes, txl_err *e)
{
    int std_in = strcmp(path, "-") == 0;
    const char *name = std_in ? "<stdin>" : path;
    int fd = std_in ? fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0) : open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0)
        return err_set(e, ERR_INPUT, "%s: cannot open the text: %s", name, strerror(errno));
    if (fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        close(fd);
        return err_set(e, ERR_INPUT, "%s: is a directory, expected a text file", name);
    }
    instream in;
    memset(&in, 0, sizeof in);
    vocab_encoder *en = NULL;
    id_batch *b = calloc(1, sizeof *b);
    uint8_t *buf = malloc(1 << 20);
    int rc = ins_open(&in, fd, name, e), enc = 0;
    if (!rc && (!b || !buf))
        rc = err_set(e, ERR_RUNTIME, "out of memory encoding %s", name);
    if (!rc && !(en = vocab_encoder_new(v->v, e)))
        rc = -1;
    if (b) {
        b->fn = fn;
        b->ctx = ctx;
    }
    size_t total = 0;
    for (long long got; !rc && (got = ins_read(&in, buf, 1 << 20, e)) != 0; total += (size_t)got)
        rc = got < 0 ? -1 : (enc = vocab_encoder_feed(en, buf, (size_t)got, batch_push, b, e));
    if (!rc)
        rc = enc = vocab_encoder_finish(en, batch_push, b, e);
    if (!rc)
        rc = batch_flush(b);
    if (b && b->rc)
        rc = b->rc; /* fn stopped it */
    else if (enc == -1)
        err_wrap(e, "%s", name);
    if (bytes)
        *bytes = total;
    ins_close(&in);
    vocab_encoder_free(en);
    free(b);
    free(buf);
    return rc;
}

typedef struct {
    tokfile_writer w;
    txl_err *e;
} tok_out;

static int write_ids(void *ctx, const uint32_t *ids, size_t n)
{
    tok_out *o = ctx;
    return tokfile_write(&o->w, ids, n, o->e);
}

int txl_vocab_write_tokens(const txl_vocab *v, const char *text, const char *out,
                           size_t *tokens, size_t *bytes, txl_err *e)
{
    tok_out *o = calloc(1, sizeof *o);
    if (!o)
        return err_set(e, ERR_RUNTIME, "out of memory");
    o->e = e;
    int rc = tokfile_create(&o->w, out, v->v, e);
    if (!rc)
        rc = txl_vocab_encode_file(v, text, write_ids, o, bytes, e) ? -1 : 0;
    if (!rc && tokens)
        *tokens = o->w.n;
    if (!rc)
        rc = tokfile_commit(&o->w, e);
    else
        tokfile_abort(&o->w);
    free(o);
    return rc;
}

int txl_is_token_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    uint8_t head[4];
    ssize_t got = fd >= 0 ? pread(fd, head, sizeof head, 0) : -1;
    if (fd >= 0)
        close(fd);
    return got == (ssize_t)sizeof head && tokfile_sniff(head, sizeof head);
}

int txl_vocab_read_tokens(const txl_vocab *v, const char *path, txl_ids_fn fn, void *ctx,
                          txl_err *e)
{
    tokfile f;
    if (tokfile_open(&f, path, v->v, e))
        return -1;
    int rc = tokfile_check(&f, e);
    txl_tok *buf = rc ? NULL : malloc(ID_BATCH * sizeof *buf);
    if (!rc && !buf)
        rc = err_set(e, ERR_RUNTIME, "out of memory reading %s", path);
    for (size_t at = 0; !rc && at < f.n; at += ID_BATCH) {
        size_t n = f.n - at < ID_BATCH ? f.n - at : ID_BATCH;
        rc = tokfile_read(&f, at, n, buf, e);
        if (!rc)
            rc = fn(ctx, buf, n);
    }
    free(buf);
    tokfile_close(&f);
    return rc;
}
