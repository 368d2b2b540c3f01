/* testlib.h: tiny helpers shared by the C unit tests (tests/test_*.c).
 * Each test program prints one line per check and exits non-zero if any failed. */
#ifndef TXL_TESTLIB_H
#define TXL_TESTLIB_H

#include <stddef.h>
#include <stdint.h>

extern int tl_failures;
extern int tl_checks;

/* Records a check; prints "ok" / "FAIL" with the formatted description. */
void tl_check(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define CHECK(cond, ...) tl_check(!!(cond), __VA_ARGS__)

/* Summary line and exit status (0 when every check passed). */
int tl_done(const char *name);

/* Deterministic test RNG (xorshift); values in [-scale, scale) or N(0, scale). */
typedef struct { uint64_t s; } tl_rng;
float tl_uniform(tl_rng *r, float scale);
float tl_normal(tl_rng *r, float scale);
void tl_fill(tl_rng *r, float *x, size_t n, float scale);

/* max |a-b| / max(max |b|, floor): a norm-relative error that is meaningful for tensors
 * with entries near zero. */
double tl_max_rel_err(const float *a, const double *b, size_t n, double floor);

/* Vocabulary tests (data/vocab.h): a whole file, plain or gzip'd (malloc'd, NULL on
 * failure); whether `rounds` random chunkings of a text (chunks of 0 to 4096 bytes) give
 * exactly the tokens, offsets and lengths of encoding it whole; whether each token's offset
 * and length cover its bytes in the text (byte, bpe: the pieces tile the text; word: a
 * word's bytes, <eos> a line end or nothing at the end). */
struct vocab;
uint8_t *vt_read_file(const char *path, size_t *len);
int vt_chunked_equal(const struct vocab *v, const uint8_t *text, size_t len, int rounds,
                     uint64_t seed);
int vt_offsets_ok(const struct vocab *v, const uint8_t *text, size_t len);

#endif
