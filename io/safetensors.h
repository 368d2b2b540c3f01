/* safetensors.h: the safetensors container (https://huggingface.co/docs/safetensors), read
 * from plain or gzip'd files and written atomically, gzip'd or plain.
 *
 * Layout: u64 little-endian header length N, N bytes of JSON
 *   {name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {key: string}}
 * (padded with spaces to a multiple of 8), then the tensor bytes; offsets are relative to
 * the end of the header. Everything a reader can check is checked: header length against
 * the file, JSON syntax, dtypes, shapes vs byte sizes, offsets inside the data, overlaps,
 * duplicate keys, the gzip CRC and length of every member, nothing after the data. Messages
 * name the file. */
#ifndef TXL_SAFETENSORS_H
#define TXL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"

typedef enum { ST_F32, ST_F64, ST_I32, ST_I64, ST_U8, ST_F16, ST_BF16, ST_I8 } st_dtype;

#define ST_MAX_DIMS 8
/* The most entries (tensors and __metadata__) a header may list, whatever its config says:
 * generous (a 1000-layer model with its Adam moments and memory has about 52,000 tensors);
 * ckpt_check_config then holds a txl checkpoint to what its config needs. */
#define ST_MAX_TENSORS (1 << 20)
/* The longest JSON header read (the limit of the safetensors reference implementation). */
#define ST_MAX_HEADER 100000000

typedef struct {
    char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    size_t numel;
    size_t begin, end; /* byte offsets into the data section */
} st_tensor;

typedef struct {
    char path[1100];   /* the file's name (for messages): a checkpoint path, at most 1055 */
    uint8_t *buf;      /* the whole (decompressed) file: length, header, tensor data */
    size_t len;
    size_t data_start; /* 8 + header length */
    st_tensor *t;      /* in header order */
    int n;
    st_tensor **by_name; /* the same, sorted by name (st_find: binary search) */
    char **meta_keys, **meta_vals;
    int n_meta;
    void *in;          /* between st_open and st_read_data: the open stream (instream) */
    size_t file_size;  /* on disk */
    size_t data_len;   /* bytes of tensor data the header describes */
} st_file;

/* Reads and validates a whole file, a regular file only (a FIFO or a device is refused
 * without blocking); -1 with kind ERR_INPUT for anything malformed, including a header
 * over ST_MAX_HEADER bytes or ST_MAX_TENSORS entries, bytes after the data the header
 * describes (also after the gzip stream), and tensor data over half the physical memory
 * (ERR_RUNTIME for out of memory). Never reads more than the header describes. */
int st_read(st_file *f, const char *path, txl_err *e);
/* st_read in two steps, so a reader can hold the header to what it expects (names, dtypes,
 * shapes: io/checkpoint.h, ckpt_check_header) before the data is read or allocated: st_open
 * reads and validates the header only (f->data_len says how much data it describes; the
 * tensors' data is not there yet: no st_data), st_read_data then reads the data and checks
 * the end of the file. Either fails as st_read does, freeing f; after st_open, st_free
 * alone is fine too (it closes the file). */
int st_open(st_file *f, const char *path, txl_err *e);
int st_read_data(st_file *f, txl_err *e);
void st_free(st_file *f);
/* Releases the file's bytes, keeping the header (tensor names, dtypes, shapes, metadata):
 * st_data is then invalid. For a reader that has copied the data out. */
void st_drop_data(st_file *f);
const st_tensor *st_find(const st_file *f, const char *name);
const char *st_meta(const st_file *f, const char *key);
const void *st_data(const st_file *f, const st_tensor *t);
/* Converts an F32/F64/I32 tensor to floats (F64 rounds; others refuse). */
int st_to_f32(const st_file *f, const st_tensor *t, float *out, size_t n, txl_err *e);
int st_to_f64(const st_file *f, const st_tensor *t, double *out, size_t n, txl_err *e);
const char *st_dtype_name(st_dtype d);

/* Writer: collect tensors (data must stay valid until st_write) and metadata, then write. */
typedef struct {
    const char *name; /* borrowed */
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const void *data;
} st_entry;

typedef struct {
    st_entry *e;
    int n, cap;
    char **meta_keys, **meta_vals; /* owned copies */
    int n_meta, cap_meta;
} st_writer;

void st_writer_init(st_writer *w);
int st_writer_add(st_writer *w, const char *name, st_dtype dtype, int ndim,
                  const int64_t *shape, const void *data);
int st_writer_meta(st_writer *w, const char *key, const char *value);
/* Writes to `path` atomically: a temp file in the same directory, fsync, rename, fsync of
 * the directory. gzip_level 0 writes plain safetensors, 1..9 gzip. On any failure the
 * temp file is removed and whatever stood at `path` is untouched. */
int st_write(const st_writer *w, const char *path, int gzip_level, txl_err *e);
void st_writer_free(st_writer *w);

#endif
