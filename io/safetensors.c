/* safetensors.c: see safetensors.h. The reader takes the file front to back through
 * common/instream (plain or gzip'd): the 8-byte length, the header, which it validates
 * whole, then exactly the tensor bytes the header describes and nothing after them, so
 * what a damaged or hostile file costs is bounded by its header. The writer goes through a temp file + fsync + rename so that a crash or a full
 * disk never leaves a damaged file where a good one stood. Host byte order is assumed
 * little-endian (checked at compile time), as the format is. */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "../common/instream.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "txl's safetensors I/O assumes a little-endian host"
#endif

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    [ST_F32] = {"F32", 4}, [ST_F64] = {"F64", 8}, [ST_I32] = {"I32", 4}, [ST_I64] = {"I64", 8},
    [ST_U8] = {"U8", 1},   [ST_F16] = {"F16", 2}, [ST_BF16] = {"BF16", 2},
    [ST_I8] = {"I8", 1},
};
#define N_DTYPES (int)(sizeof dtypes / sizeof dtypes[0])

const char *st_dtype_name(st_dtype d) { return (unsigned)d < (unsigned)N_DTYPES ? dtypes[d].name : "?"; }

/* ------------------------------------------------------------------ reading */

/* Where a safetensors file's first `pos` bytes end, for the messages of a damaged gzip
 * stream (hlen 0: the header length is not known yet). */
static void part_of(unsigned long long pos, uint64_t hlen, char *out, size_t cap)
{
    if (pos == 0)
        snprintf(out, cap, "before the first byte of the safetensors file (in the gzip header "
                 "or the first compressed block)");
    else if (pos < 8)
        snprintf(out, cap, "inside the 8-byte header length");
    else if (pos < 8 + hlen)
        snprintf(out, cap, "inside the JSON header (%llu bytes at offset 8)",
                 (unsigned long long)hlen);
    else
        snprintf(out, cap, "in or after the tensor data (which starts at offset %llu)",
                 (unsigned long long)hlen + 8);
}

/* A failed ins_read: damaged gzip data gets the part of the file it hit. */
static int read_fail(const instream *in, uint64_t hlen, txl_err *e)
{
    if (in->corrupt) {
        char part[160];
        size_t n = strlen(e->msg);
        part_of(in->out, hlen, part, sizeof part);
        snprintf(e->msg + n, sizeof e->msg - n, ", %s", part);
    }
    return -1;
}

/* Opens a checkpoint without blocking (a FIFO would wait for a writer forever) and
 * refuses anything but a regular file; *size is its size on disk. */
static int open_regular(const char *path, instream *in, size_t *size, txl_err *e)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return err_set(e, ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    const char *kind = NULL;
    if (fstat(fd, &sb) != 0)
        kind = strerror(errno);
    else if (S_ISDIR(sb.st_mode))
        kind = "is a directory, expected a checkpoint file";
    else if (S_ISFIFO(sb.st_mode))
        kind = "is a FIFO (named pipe), not a regular file: checkpoints are read from files";
    else if (!S_ISREG(sb.st_mode))
        kind = "is a device or socket, not a regular file: checkpoints are read from files";
    if (kind || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
        int er = errno;
        close(fd);
        return err_set(e, ERR_INPUT, "%s: %s", path, kind ? kind : strerror(er));
    }
    *size = (size_t)sb.st_size;
    return ins_open(in, fd, path, e);
}

/* The 8-byte header length and the JSON header, into f->buf (f->data_start = 8 + hlen).
 * For a plain file the length is checked against the size on disk before anything is
 * allocated; for a gzip'd one at most ST_MAX_HEADER bytes are read. */
static int read_header(st_file *f, instream *in, size_t size, txl_err *e)
{
    const char *path = f->path;
    uint8_t len8[8];
    long long got = ins_read(in, len8, 8, e);
    if (got < 0)
        return read_fail(in, 0, e);
    if (got < 8)
        return err_set(e, ERR_INPUT, "%s: %lld bytes is too short for a safetensors file "
                       "(need an 8-byte header length)", path, got);
    uint64_t hlen;
    memcpy(&hlen, len8, 8);
    if (hlen > ST_MAX_HEADER)
        return err_set(e, ERR_INPUT, "%s: header length %llu exceeds txl's limit of %d bytes "
                       "(not a safetensors file?)", path, (unsigned long long)hlen,
                       ST_MAX_HEADER);
    if (!in->gz && hlen > size - 8)
        return err_set(e, ERR_INPUT, "%s: header length %llu exceeds the file's remaining %zu "
                       "bytes (not a safetensors file, or truncated)", path,
                       (unsigned long long)hlen, size - 8);
    if (hlen < 2)
        return err_set(e, ERR_INPUT, "%s: header length %llu is too small for a JSON header",
                       path, (unsigned long long)hlen);
    f->buf = malloc(8 + (size_t)hlen);
    if (!f->buf)
        return err_set(e, ERR_RUNTIME, "%s: out of memory", path);
    memcpy(f->buf, len8, 8);
    got = ins_read(in, f->buf + 8, (size_t)hlen, e);
    if (got < 0)
        return read_fail(in, hlen, e);
    if ((uint64_t)got < hlen)
        return err_set(e, ERR_INPUT, "%s: header length %llu exceeds the file's remaining %lld "
                       "bytes (not a safetensors file, or truncated)", path,
                       (unsigned long long)hlen, got);
    f->data_start = f->len = 8 + (size_t)hlen;
    return 0;
}

static int parse_dtype(const char *s, st_dtype *d)
{
    for (int i = 0; i < N_DTYPES; i++)
        if (strcmp(s, dtypes[i].name) == 0) {
            *d = (st_dtype)i;
            return 0;
        }
    return -1;
}

/* A JSON number that is a non-negative integer representable exactly. */
static int json_uint(const cJSON *j, uint64_t *out)
{
    if (!cJSON_IsNumber(j))
        return -1;
    double v = j->valuedouble;
    if (!(v >= 0) || v > 9007199254740992.0 || v != (double)(uint64_t)v)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

static int cmp_begin(const void *a, const void *b)
{
    const st_tensor *x = *(st_tensor *const *)a, *y = *(st_tensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Shows a header string (its JSON text, escapes as written, so "out.bias\u0000zz" reads
 * as such) for a message: at most 60 bytes, control bytes as '?'. */
static void show_json(char *buf, size_t cap, const char *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && i < 60 && o + 4 < cap; i++)
        buf[o++] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    if (n > 60 && o + 4 < cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
}

/* One pass over the header text, before cJSON builds a tree for it: counts the members of
 * the top-level object (a ':' outside strings at depth 1), so an absurd header is refused
 * first, and refuses a string holding a NUL (a raw 0 byte or the escape \u0000): cJSON
 * keeps C strings, so a tensor "out.bias\u0000zz" would read as out.bias and a metadata
 * value would end at the NUL. The message shows the string (a key) or the key whose value
 * it is. */
static int scan_header(const st_file *f, const char *s, size_t n, size_t *count, txl_err *e)
{
    int depth = 0;
    size_t key_at = 0, key_len = 0; /* the last key seen */
    *count = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '"') {
            size_t start = ++i;
            int nul = 0;
            for (; i < n && s[i] != '"'; i++) {
                if (s[i] == '\0')
                    nul = 1;
                else if (s[i] == '\\' && i + 1 < n) {
                    i++;
                    nul |= s[i] == 'u' && n - i > 4 && memcmp(s + i + 1, "0000", 4) == 0;
                }
            }
            size_t j = i + 1, len = i - start;
            while (j < n && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r'))
                j++;
            int is_key = j < n && s[j] == ':';
            if (nul) {
                char shown[80], key[80];
                show_json(shown, sizeof shown, s + start, len);
                show_json(key, sizeof key, s + key_at, key_len);
                if (is_key)
                    return err_set(e, ERR_INPUT, "%s: header key \"%s\" holds a NUL character "
                                   "(\\u0000 or a 0 byte), which would cut the name short",
                                   f->path, shown);
                return err_set(e, ERR_INPUT, "%s: the value of header key \"%s\" holds a NUL "
                               "character (\\u0000 or a 0 byte), which would cut the text short",
                               f->path, key);
            }
            if (is_key) {
                key_at = start;
                key_len = len;
            }
        } else if (ch == '{' || ch == '[') {
            depth++;
        } else if (ch == '}' || ch == ']') {
            depth--;
        } else if (ch == ':' && depth == 1) {
            ++*count;
        }
    }
    return 0;
}

/* The header's JSON: an object, followed by nothing but blanks (the padding). */
static int parse_json(const st_file *f, const char *hdr, size_t hlen, cJSON **root, txl_err *e)
{
    if (hdr[0] != '{')
        return err_set(e, ERR_INPUT, "%s: header does not start with '{' (not a safetensors "
                       "file?)", f->path);
    size_t n;
    if (scan_header(f, hdr, hlen, &n, e))
        return -1;
    if (n > ST_MAX_TENSORS)
        return err_set(e, ERR_INPUT, "%s: the header lists %zu entries, more than txl reads "
                       "(%d; a txl checkpoint has a few per layer)", f->path, n, ST_MAX_TENSORS);
    const char *endp = NULL;
    *root = cJSON_ParseWithLengthOpts(hdr, hlen, &endp, 0);
    if (!*root || !cJSON_IsObject(*root)) {
        size_t at = endp ? (size_t)(endp - hdr) : 0;
        cJSON_Delete(*root);
        *root = NULL;
        return err_set(e, ERR_INPUT, "%s: malformed JSON header near byte %zu of %zu", f->path,
                       at, hlen);
    }
    for (const char *p = endp; p && p < hdr + hlen; p++)
        if (*p != ' ' && *p != '\n' && *p != '\t' && *p != '\r' && *p != '\0') {
            cJSON_Delete(*root);
            *root = NULL;
            return err_set(e, ERR_INPUT, "%s: unexpected bytes after the JSON header", f->path);
        }
    return 0;
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first name that appears twice among names[0..n) (sorted in place), or NULL:
 * O(n log n), where comparing each name with all earlier ones took minutes for 300,000. */
static const char *find_dup(const char **names, size_t n)
{
    qsort(names, n, sizeof *names, cmp_str_ptr);
    for (size_t i = 1; i < n; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            return names[i];
    return NULL;
}

/* The keys of object c are unique (a JSON object with a duplicate key means different
 * things to different readers: cJSON keeps both, Python's json the last). On a duplicate,
 * fills `dup` with the key and returns 1; -1 on out of memory. */
static int dup_key(const st_file *f, const cJSON *c, char *dup, size_t cap, txl_err *e)
{
    size_t n = 0;
    for (const cJSON *m = c->child; m; m = m->next)
        n++;
    const char **names = malloc((n + 1) * sizeof *names);
    if (!names)
        return err_set(e, ERR_RUNTIME, "%s: out of memory", f->path);
    n = 0;
    for (const cJSON *m = c->child; m; m = m->next)
        names[n++] = m->string;
    const char *d = find_dup(names, n);
    if (d)
        snprintf(dup, cap, "%s", d);
    free(names);
    return d != NULL;
}

/* "__metadata__": {key: string, ...} into meta_keys/meta_vals. */
static int parse_meta(st_file *f, const cJSON *c, txl_err *e)
{
    if (!cJSON_IsObject(c))
        return err_set(e, ERR_INPUT, "%s: __metadata__ must be an object", f->path);
    char dup[256];
    int rc = dup_key(f, c, dup, sizeof dup, e);
    if (rc)
        return rc < 0 ? -1 : err_set(e, ERR_INPUT, "%s: __metadata__ key '%s' appears twice",
                                     f->path, dup);
    int nm = 0;
    for (cJSON *m = c->child; m; m = m->next)
        nm++;
    f->meta_keys = calloc((size_t)nm + 1, sizeof(char *));
    f->meta_vals = calloc((size_t)nm + 1, sizeof(char *));
    if (!f->meta_keys || !f->meta_vals)
        return err_set(e, ERR_RUNTIME, "%s: out of memory", f->path);
    for (cJSON *m = c->child; m; m = m->next) {
        if (!cJSON_IsString(m))
            return err_set(e, ERR_INPUT, "%s: __metadata__.%s must be a string", f->path,
                           m->string);
        f->meta_keys[f->n_meta] = strdup(m->string);
        f->meta_vals[f->n_meta] = strdup(m->valuestring);
        if (!f->meta_keys[f->n_meta] || !f->meta_vals[f->n_meta])
            return err_set(e, ERR_RUNTIME, "%s: out of memory", f->path);
        f->n_meta++;
    }
    return 0;
}

/* The shape of tensor entry c into t (dims, numel), checking that its bytes fit a size_t. */
static int parse_shape(const st_file *f, const cJSON *sh, st_tensor *t, txl_err *e)
{
    int nd = cJSON_GetArraySize(sh);
    if (nd > ST_MAX_DIMS)
        return err_set(e, ERR_INPUT, "%s: tensor '%s': %d dimensions (at most %d)", f->path,
                       t->name, nd, ST_MAX_DIMS);
    t->ndim = nd;
    size_t numel = 1, esize = dtypes[t->dtype].size;
    int k = 0;
    for (cJSON *s = sh->child; s; s = s->next, k++) {
        uint64_t v;
        if (json_uint(s, &v) || v > (uint64_t)INT64_MAX)
            return err_set(e, ERR_INPUT, "%s: tensor '%s': shape[%d] is not a non-negative "
                           "integer", f->path, t->name, k);
        t->shape[k] = (int64_t)v;
        if (v && numel > SIZE_MAX / esize / v)
            return err_set(e, ERR_INPUT, "%s: tensor '%s': shape too large", f->path, t->name);
        numel *= (size_t)v;
    }
    t->numel = numel;
    return 0;
}

/* One tensor entry {"dtype", "shape", "data_offsets"} into t (t->name is set). */
static int parse_tensor(const st_file *f, const cJSON *c, st_tensor *t, txl_err *e)
{
    const char *path = f->path, *name = t->name;
    static const char *const keys[3] = {"dtype", "shape", "data_offsets"};
    const cJSON *val[3] = {NULL, NULL, NULL};
    for (const cJSON *m = cJSON_IsObject(c) ? c->child : NULL; m; m = m->next) {
        int k = 0;
        while (k < 3 && strcmp(m->string, keys[k]) != 0)
            k++;
        if (k == 3)
            return err_set(e, ERR_INPUT, "%s: tensor '%s': unexpected key '%.200s' (expected "
                           "dtype, shape and data_offsets)", path, name, m->string);
        if (val[k])
            return err_set(e, ERR_INPUT, "%s: tensor '%s': key '%s' appears twice", path, name,
                           keys[k]);
        val[k] = m;
    }
    const cJSON *dt = val[0], *sh = val[1], *off = val[2];
    if (!cJSON_IsObject(c) || !cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off))
        return err_set(e, ERR_INPUT, "%s: tensor '%s': expected {\"dtype\": string, \"shape\": "
                       "[...], \"data_offsets\": [begin, end]}", path, name);
    if (parse_dtype(dt->valuestring, &t->dtype))
        return err_set(e, ERR_INPUT, "%s: tensor '%s': unknown dtype '%s'", path, name,
                       dt->valuestring);
    if (parse_shape(f, sh, t, e))
        return -1;
    uint64_t b, en;
    size_t esize = dtypes[t->dtype].size;
    if (cJSON_GetArraySize(off) != 2 || json_uint(off->child, &b) ||
        json_uint(off->child->next, &en) || b > en)
        return err_set(e, ERR_INPUT, "%s: tensor '%s': data_offsets must be [begin, end] with "
                       "0 <= begin <= end", path, name);
    if (en > SIZE_MAX - ST_MAX_HEADER - 8)
        return err_set(e, ERR_INPUT, "%s: tensor '%s': data_offsets [%llu, %llu] are beyond "
                       "any file", path, name, (unsigned long long)b, (unsigned long long)en);
    if (en - b != t->numel * esize)
        return err_set(e, ERR_INPUT, "%s: tensor '%s': %llu bytes of data for %zu elements of "
                       "%s (%zu bytes expected)", path, name, (unsigned long long)(en - b),
                       t->numel, dtypes[t->dtype].name, t->numel * esize);
    t->begin = (size_t)b;
    t->end = (size_t)en;
    return 0;
}

/* No two tensors share bytes; *data_len is where the last one ends. */
static int check_layout(const st_file *f, size_t *data_len, txl_err *e)
{
    st_tensor **order = malloc(((size_t)f->n + 1) * sizeof *order);
    if (!order)
        return err_set(e, ERR_RUNTIME, "%s: out of memory", f->path);
    for (int i = 0; i < f->n; i++)
        order[i] = &f->t[i];
    qsort(order, (size_t)f->n, sizeof *order, cmp_begin);
    size_t maxend = 0;
    int rc = 0;
    for (int i = 0; i < f->n && rc == 0; i++) {
        if (i > 0 && order[i]->begin < order[i - 1]->end && order[i]->end > order[i]->begin)
            rc = err_set(e, ERR_INPUT, "%s: tensors '%s' and '%s' overlap in the data section",
                         f->path, order[i - 1]->name, order[i]->name);
        if (order[i]->end > maxend)
            maxend = order[i]->end;
    }
    free(order);
    *data_len = maxend;
    return rc;
}

static int cmp_tensor_name(const void *a, const void *b)
{
    return strcmp((*(st_tensor *const *)a)->name, (*(st_tensor *const *)b)->name);
}

/* The index st_find searches. */
static int index_names(st_file *f, txl_err *e)
{
    f->by_name = malloc(((size_t)f->n + 1) * sizeof *f->by_name);
    if (!f->by_name)
        return err_set(e, ERR_RUNTIME, "%s: out of memory", f->path);
    for (int i = 0; i < f->n; i++)
        f->by_name[i] = &f->t[i];
    qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_tensor_name);
    return 0;
}

/* The entries of the header object: __metadata__ and the tensors, in file order. */
static int parse_entries(st_file *f, const cJSON *root, txl_err *e)
{
    char dup[256];
    int rc = dup_key(f, root, dup, sizeof dup, e);
    if (rc < 0)
        return -1;
    if (rc && strcmp(dup, "__metadata__") == 0)
        return err_set(e, ERR_INPUT, "%s: key '__metadata__' appears twice in the header",
                       f->path);
    if (rc)
        return err_set(e, ERR_INPUT, "%s: tensor '%s' appears twice in the header", f->path,
                       dup);
    int n = 0;
    for (cJSON *c = root->child; c; c = c->next)
        n++;
    f->t = calloc((size_t)n + 1, sizeof *f->t);
    if (!f->t)
        return err_set(e, ERR_RUNTIME, "%s: out of memory", f->path);
    for (cJSON *c = root->child; c; c = c->next) {
        const char *name = c->string;
        if (strcmp(name, "__metadata__") == 0) {
            if (parse_meta(f, c, e))
                return -1;
            continue;
        }
        st_tensor *t = &f->t[f->n];
        if (!(t->name = strdup(name)))
            return err_set(e, ERR_RUNTIME, "%s: out of memory", f->path);
        f->n++;
        if (parse_tensor(f, c, t, e))
            return -1;
    }
    return 0;
}

/* The header read by read_header: tensors, metadata, layout; *data_len is the size of
 * the data section the tensors describe. */
static int parse_header(st_file *f, size_t *data_len, txl_err *e)
{
    cJSON *root;
    if (parse_json(f, (const char *)f->buf + 8, f->data_start - 8, &root, e))
        return -1;
    int rc = parse_entries(f, root, e);
    cJSON_Delete(root);
    return rc ? rc : check_layout(f, data_len, e) ? -1 : index_names(f, e);
}

/* The data section is shorter than the tensors need: name the first tensor (in header
 * order) that it cuts. */
static int data_short(const st_file *f, size_t have, txl_err *e)
{
    for (int i = 0; i < f->n; i++)
        if (f->t[i].end > have)
            return err_set(e, ERR_INPUT, "%s: tensor '%s': data_offsets [%zu, %zu] past the "
                           "end of the data (%zu bytes; file truncated?)", f->path,
                           f->t[i].name, f->t[i].begin, f->t[i].end, have);
    return err_set(e, ERR_INPUT, "%s: the data section is shorter than its tensors", f->path);
}

/* Exactly the data_len bytes of tensor data the header describes, then the end of the
 * file: more bytes are an error (so a gzip bomb behind a small header costs one byte).
 * A plain file's size says both before anything is read; a gzip'd file grows the buffer
 * as data arrives, so a header that claims more than the stream holds costs only what
 * it holds. */
static int read_data(st_file *f, instream *in, size_t size, size_t data_len, txl_err *e)
{
    uint64_t hlen = f->data_start - 8;
    size_t half = ins_phys_mem() / 2, have = 0;
    if (!in->gz && size - f->data_start < data_len)
        return data_short(f, size - f->data_start, e);
    if (!in->gz && size - f->data_start > data_len)
        return err_set(e, ERR_INPUT, "%s: %zu bytes after the tensor data the header "
                       "describes, which ends at byte %zu (trailing garbage?)", f->path,
                       size - f->data_start - data_len, f->data_start + data_len);
    if (half && data_len > half)
        return err_set(e, ERR_INPUT, "%s: the header's tensors hold %zu bytes, more than half "
                       "this machine's memory (%zu MiB): txl reads a checkpoint into memory",
                       f->path, data_len, half >> 20);
    size_t cap = in->gz && data_len > (1u << 24) ? (1u << 24) : data_len;
    while (have < data_len) {
        if (have == cap)
            cap = data_len - cap < cap ? data_len : 2 * cap;
        uint8_t *nb = realloc(f->buf, f->data_start + cap);
        if (!nb)
            return err_set(e, ERR_RUNTIME, "%s: out of memory reading %zu bytes of tensor "
                           "data", f->path, data_len);
        f->buf = nb;
        long long got = ins_read(in, f->buf + f->data_start + have, cap - have, e);
        if (got < 0)
            return read_fail(in, hlen, e);
        have += (size_t)got;
        f->len = f->data_start + have;
        if (have < cap) /* the end came early */
            return data_short(f, have, e);
    }
    uint8_t extra;
    long long got = ins_read(in, &extra, 1, e);
    if (got < 0)
        return read_fail(in, hlen, e);
    if (got > 0)
        return err_set(e, ERR_INPUT, "%s: the file goes on after the tensor data the header "
                       "describes, which ends at byte %zu of the safetensors data (trailing "
                       "garbage?)", f->path, f->data_start + data_len);
    return 0;
}

int st_open(st_file *f, const char *path, txl_err *e)
{
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    instream *in = malloc(sizeof *in);
    if (!in)
        return err_set(e, ERR_RUNTIME, "%s: out of memory", path);
    if (open_regular(path, in, &f->file_size, e)) {
        free(in);
        return -1;
    }
    f->in = in;
    if (read_header(f, in, f->file_size, e) || parse_header(f, &f->data_len, e)) {
        st_free(f);
        return -1;
    }
    return 0;
}

int st_read_data(st_file *f, txl_err *e)
{
    instream *in = f->in;
    int rc = read_data(f, in, f->file_size, f->data_len, e);
    ins_close(in);
    free(in);
    f->in = NULL;
    if (rc)
        st_free(f);
    return rc;
}

int st_read(st_file *f, const char *path, txl_err *e)
{
    return st_open(f, path, e) || st_read_data(f, e) ? -1 : 0;
}

void st_free(st_file *f)
{
    if (f->in) {
        ins_close(f->in);
        free(f->in);
    }
    if (f->t)
        for (int i = 0; i < f->n; i++)
            free(f->t[i].name);
    if (f->meta_keys)
        for (int i = 0; i < f->n_meta; i++) {
            free(f->meta_keys[i]);
            free(f->meta_vals[i]);
        }
    free(f->meta_keys);
    free(f->meta_vals);
    free(f->by_name);
    free(f->t);
    free(f->buf);
    memset(f, 0, sizeof *f);
}

void st_drop_data(st_file *f)
{
    free(f->buf);
    f->buf = NULL;
    f->len = 0;
}

const st_tensor *st_find(const st_file *f, const char *name)
{
    int lo = 0, hi = f->by_name ? f->n : 0;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(f->by_name[mid]->name, name);
        if (c == 0)
            return f->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const char *st_meta(const st_file *f, const char *key)
{
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_keys[i], key) == 0)
            return f->meta_vals[i];
    return NULL;
}

const void *st_data(const st_file *f, const st_tensor *t) { return f->buf + f->data_start + t->begin; }

int st_to_f32(const st_file *f, const st_tensor *t, float *out, size_t n, txl_err *e)
{
    if (t->numel != n)
        return err_set(e, ERR_INPUT, "%s: tensor '%s' has %zu elements, expected %zu", f->path,
                       t->name, t->numel, n);
    const uint8_t *p = st_data(f, t);
    switch (t->dtype) {
    case ST_F32:
        memcpy(out, p, n * 4);
        return 0;
    case ST_F64:
        for (size_t i = 0; i < n; i++) {
            double v;
            memcpy(&v, p + 8 * i, 8);
            out[i] = (float)v;
        }
        return 0;
    case ST_I32:
        for (size_t i = 0; i < n; i++) {
            int32_t v;
            memcpy(&v, p + 4 * i, 4);
            out[i] = (float)v;
        }
        return 0;
    default:
        return err_set(e, ERR_INPUT, "%s: tensor '%s': dtype %s where F32 was expected",
                       f->path, t->name, st_dtype_name(t->dtype));
    }
}

int st_to_f64(const st_file *f, const st_tensor *t, double *out, size_t n, txl_err *e)
{
    if (t->numel != n)
        return err_set(e, ERR_INPUT, "%s: tensor '%s' has %zu elements, expected %zu", f->path,
                       t->name, t->numel, n);
    const uint8_t *p = st_data(f, t);
    for (size_t i = 0; i < n; i++) {
        if (t->dtype == ST_F64) {
            memcpy(&out[i], p + 8 * i, 8);
        } else if (t->dtype == ST_F32) {
            float v;
            memcpy(&v, p + 4 * i, 4);
            out[i] = v;
        } else if (t->dtype == ST_I32) {
            int32_t v;
            memcpy(&v, p + 4 * i, 4);
            out[i] = v;
        } else {
            return err_set(e, ERR_INPUT, "%s: tensor '%s': dtype %s where F64 was expected",
                           f->path, t->name, st_dtype_name(t->dtype));
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ writing */

void st_writer_init(st_writer *w) { memset(w, 0, sizeof *w); }

int st_writer_add(st_writer *w, const char *name, st_dtype dtype, int ndim,
                  const int64_t *shape, const void *data)
{
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 64;
        st_entry *ne = realloc(w->e, (size_t)cap * sizeof *ne);
        if (!ne)
            return -1;
        w->e = ne;
        w->cap = cap;
    }
    st_entry *en = &w->e[w->n++];
    memset(en, 0, sizeof *en);
    en->name = name;
    en->dtype = dtype;
    en->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        en->shape[i] = shape[i];
    en->data = data;
    return 0;
}

int st_writer_meta(st_writer *w, const char *key, const char *value)
{
    if (w->n_meta == w->cap_meta) {
        int cap = w->cap_meta ? 2 * w->cap_meta : 16;
        char **k = realloc(w->meta_keys, (size_t)cap * sizeof *k);
        if (!k)
            return -1;
        w->meta_keys = k;
        char **v = realloc(w->meta_vals, (size_t)cap * sizeof *v);
        if (!v)
            return -1;
        w->meta_vals = v;
        w->cap_meta = cap;
    }
    w->meta_keys[w->n_meta] = strdup(key);
    w->meta_vals[w->n_meta] = strdup(value);
    if (!w->meta_keys[w->n_meta] || !w->meta_vals[w->n_meta]) {
        free(w->meta_keys[w->n_meta]);
        free(w->meta_vals[w->n_meta]);
        return -1;
    }
    w->n_meta++;
    return 0;
}

void st_writer_free(st_writer *w)
{
    for (int i = 0; i < w->n_meta; i++) {
        free(w->meta_keys[i]);
        free(w->meta_vals[i]);
    }
    free(w->meta_keys);
    free(w->meta_vals);
    free(w->e);
    memset(w, 0, sizeof *w);
}

static size_t entry_bytes(const st_entry *en)
{
    size_t n = dtypes[en->dtype].size;
    for (int i = 0; i < en->ndim; i++)
        n *= (size_t)en->shape[i];
    return n;
}

/* Builds the padded header: returns malloc'd bytes and their length. */
static char *build_header(const st_writer *w, size_t *len)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return NULL;
    if (w->n_meta) {
        cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
        for (int i = 0; meta && i < w->n_meta; i++)
            cJSON_AddStringToObject(meta, w->meta_keys[i], w->meta_vals[i]);
    }
    size_t off = 0;
    for (int i = 0; i < w->n; i++) {
        const st_entry *en = &w->e[i];
        cJSON *t = cJSON_AddObjectToObject(root, en->name);
        if (!t)
            break;
        cJSON_AddStringToObject(t, "dtype", dtypes[en->dtype].name);
        cJSON *sh = cJSON_AddArrayToObject(t, "shape");
        for (int k = 0; sh && k < en->ndim; k++)
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)en->shape[k]));
        size_t nb = entry_bytes(en);
        cJSON *of = cJSON_AddArrayToObject(t, "data_offsets");
        if (of) {
            cJSON_AddItemToArray(of, cJSON_CreateNumber((double)off));
            cJSON_AddItemToArray(of, cJSON_CreateNumber((double)(off + nb)));
        }
        off += nb;
    }
    char *js = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!js)
        return NULL;
    size_t n = strlen(js), padded = (n + 7) / 8 * 8;
    char *out = malloc(padded + 1);
    if (out) {
        memcpy(out, js, n);
        memset(out + n, ' ', padded - n);
        out[padded] = 0;
        *len = padded;
    }
    free(js);
    return out;
}

typedef struct {
    int fd;
    gzFile gz;
} sink;

static int sink_write(sink *s, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : n;
        if (s->gz) {
            int w = gzwrite(s->gz, b, (unsigned)chunk);
            if (w <= 0)
                return -1;
            chunk = (size_t)w;
        } else {
            ssize_t w = write(s->fd, b, chunk);
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                return -1;
            }
            chunk = (size_t)w;
        }
        b += chunk;
        n -= chunk;
    }
    return 0;
}

static void dir_of(const char *path, char *dir, size_t cap)
{
    snprintf(dir, cap, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, cap, ".");
    else if (slash == dir)
        dir[1] = 0;
    else
        *slash = 0;
}

int st_write(const st_writer *w, const char *path, int gzip_level, txl_err *e)
{
    char tmp[1100], dir[1024];
    snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
    dir_of(path, dir, sizeof dir);
    size_t hlen = 0;
    char *hdr = build_header(w, &hlen);
    if (!hdr)
        return err_set(e, ERR_RUNTIME, "%s: out of memory building the header", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        free(hdr);
        return err_set(e, ERR_RUNTIME, "%s: cannot create a temporary file in %s: %s", path, dir,
                       strerror(errno));
    }
    fchmod(fd, 0644);
    sink s = {fd, NULL};
    int werr = 0;
    const char *why = NULL;
    if (gzip_level > 0) {
        char mode[8];
        snprintf(mode, sizeof mode, "wb%d", gzip_level > 9 ? 9 : gzip_level);
        int fd2 = dup(fd);
        s.gz = fd2 >= 0 ? gzdopen(fd2, mode) : NULL;
        if (!s.gz) {
            if (fd2 >= 0)
                close(fd2);
            werr = errno ? errno : ENOMEM;
        }
    }
    uint64_t hl = hlen;
    if (!werr && (sink_write(&s, &hl, 8) || sink_write(&s, hdr, hlen)))
        werr = errno ? errno : EIO;
    for (int i = 0; !werr && i < w->n; i++)
        if (sink_write(&s, w->e[i].data, entry_bytes(&w->e[i])))
            werr = errno ? errno : EIO;
    if (s.gz) {
        int zr = gzclose(s.gz);
        if (!werr && zr != Z_OK)
            werr = errno ? errno : EIO;
    }
    if (!werr && fsync(fd) != 0)
        werr = errno;
    if (close(fd) != 0 && !werr)
        werr = errno;
    free(hdr);
    if (!werr && rename(tmp, path) != 0) {
        werr = errno;
        why = "rename";
    }
    if (werr) {
        unlink(tmp);
        return err_set(e, ERR_RUNTIME, "%s: %s failed: %s (the previous file, if any, is "
                       "untouched)", path, why ? why : "write", strerror(werr));
    }
    int dfd = open(dir, O_RDONLY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}
