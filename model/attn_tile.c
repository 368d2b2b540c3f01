/* attn_tile.c: see attn_tile.h. Each kernel is a tile of accumulators held in registers
 * (GCC vector extensions, one CPU vector per AT_W floats), swept along the depth of the
 * product; the tile functions are inlined with constant sizes, so the edge tiles (fewer rows
 * or vectors) are the same loops with fewer accumulators.
 *
 * Tiles (accumulator vectors; AVX-512 has 32 registers, AVX2 16):
 *   at_scores  SC_R queries x 2 vectors of keys (AVX-512 8 x 2, AVX2 6 x 2)
 *   at_rows    RW_R rows x RW_V vectors of the head (4 x 4, 2 x 4)
 *   at_cols    CO_J keys x CO_V vectors of the head (4 x 4, 2 x 4)
 * FMA contraction is on for these functions (GCC turns it off for -std=c11): each
 * multiply-add is rounded once. */
#include "attn_tile.h"

typedef float atv __attribute__((vector_size(AT_W * 4)));
typedef float atvu __attribute__((vector_size(AT_W * 4), aligned(4)));

/* macros, not enum constants: the edge cases' #if reads them */
#if defined(__AVX512F__)
#define SC_R 8
#define RW_R 4
#define CO_J 4
#else
#define SC_R 6
#define RW_R 2
#define CO_J 2
#endif
#define RW_V 4
#define RW_J 64
#define CO_V 4

#if defined(__GNUC__) && !defined(__clang__)
#define AT_FN __attribute__((optimize("fp-contract=fast", "no-tree-loop-distribution")))
#define AT_INLINE static inline __attribute__((always_inline, optimize("fp-contract=fast", "no-tree-loop-distribution")))
#else
#define AT_FN
#define AT_INLINE static inline
#endif

static inline atv at_ld(const float *p) { return *(const atvu *)p; }

/* Holds a loaded vector in a register: without it GCC folds the load into every FMA that
 * uses it (a memory operand per FMA), and the tiles become bound by loads, not FMAs
 * (at_rows ran at 0.55x OpenBLAS's kernel that way). */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define AT_REG(x) __asm__("" : "+v"(x))
#else
#define AT_REG(x) (void)0
#endif
static inline void at_st(float *p, atv v) { *(atvu *)p = v; }

/* one tile of at_scores: tr rows (constant after inlining), keys j .. j + AT_KEYS - 1 */
AT_INLINE void scores_tile(float *S, int lds, const float *A, int lda, const float *KT,
                           int ldk, int K, float alpha, int j, const int tr)
{
    atv acc[SC_R][2];
    for (int r = 0; r < tr; r++)
        acc[r][0] = acc[r][1] = (atv){0};
    for (int c = 0; c < K; c++) {
        const float *k = KT + (size_t)c * ldk + j;
        atv k0 = at_ld(k), k1 = at_ld(k + AT_W);
        AT_REG(k0);
        AT_REG(k1);
        for (int r = 0; r < tr; r++) {
            float x = A[(size_t)r * lda + c];
            acc[r][0] += x * k0;
            acc[r][1] += x * k1;
        }
    }
    for (int r = 0; r < tr; r++) {
        at_st(S + (size_t)r * lds + j, alpha * acc[r][0]);
        at_st(S + (size_t)r * lds + j + AT_W, alpha * acc[r][1]);
    }
}

AT_FN void at_scores(float *S, int lds, const float *A, int lda, const float *KT, int ldk,
                     int rows, int n, int K, float alpha)
{
    /* keys outer: a tile's [K, AT_KEYS] slice of KT stays in L1 for every row tile */
    for (int j = 0; j < n; j += AT_KEYS)
        for (int r0 = 0; r0 < rows; r0 += SC_R) {
            const float *a = A + (size_t)r0 * lda;
            float *s = S + (size_t)r0 * lds;
            int left = rows - r0;
#define AT_SC(t) scores_tile(s, lds, a, lda, KT, ldk, K, alpha, j, t)
            switch (left >= SC_R ? SC_R : left) {
            case 1: AT_SC(1); break;
            case 2: AT_SC(2); break;
            case 3: AT_SC(3); break;
            case 4: AT_SC(4); break;
            case 5: AT_SC(5); break;
#if SC_R > 6
            case 6: AT_SC(6); break;
            case 7: AT_SC(7); break;
#endif
            default: AT_SC(SC_R); break;
            }
#undef AT_SC
        }
}

/* one tile of at_rows: tr rows, nv vectors from column c0 of B and O */
AT_INLINE void rows_tile(float *O, int ldo, const float *A, int lda, const float *B, int ldb,
                         int n, float alpha, int accumulate, const int tr, const int nv)
{
    atv acc[RW_R][RW_V];
    for (int r = 0; r < tr; r++)
        for (int v = 0; v < nv; v++)
            acc[r][v] = (atv){0};
    for (int j = 0; j < n; j++) {
        const float *b = B + (size_t)j * ldb;
        atv bv[RW_V];
        for (int v = 0; v < nv; v++) {
            bv[v] = at_ld(b + v * AT_W);
            AT_REG(bv[v]);
        }
        for (int r = 0; r < tr; r++) {
            float x = A[(size_t)r * lda + j];
            for (int v = 0; v < nv; v++)
                acc[r][v] += x * bv[v];
        }
    }
    for (int r = 0; r < tr; r++)
        for (int v = 0; v < nv; v++) {
            float *o = O + (size_t)r * ldo + v * AT_W;
            atv y = alpha * acc[r][v];
            at_st(o, accumulate ? at_ld(o) + y : y);
        }
}

AT_INLINE void rows_nv(float *O, int ldo, const float *A, int lda, const float *B, int ldb,
                       int n, float alpha, int accumulate, int tr, const int nv)
{
    switch (tr) {
    case 1: rows_tile(O, ldo, A, lda, B, ldb, n, alpha, accumulate, 1, nv); break;
#if RW_R > 2
    case 2: rows_tile(O, ldo, A, lda, B, ldb, n, alpha, accumulate, 2, nv); break;
    case 3: rows_tile(O, ldo, A, lda, B, ldb, n, alpha, accumulate, 3, nv); break;
#endif
    default: rows_tile(O, ldo, A, lda, B, ldb, n, alpha, accumulate, RW_R, nv); break;
    }
}

AT_FN void at_rows(float *O, int ldo, const float *A, int lda, const float *B, int ldb, int rows,
                   int n, int dhp, float alpha, int accumulate)
{
    const int vecs = dhp / AT_W;
    /* by chunks of RW_J rows of B, kept in L1 while every row tile uses them; O gathers
     * the chunks' sums */
    for (int j0 = 0; j0 < n || j0 == 0; j0 += RW_J) {
        int nj = n - j0 < RW_J ? n - j0 : RW_J, acc = accumulate || j0 > 0;
        for (int r0 = 0; r0 < rows; r0 += RW_R) {
            int tr = rows - r0 >= RW_R ? RW_R : rows - r0;
            const float *a = A + (size_t)r0 * lda + j0;
            for (int v0 = 0; v0 < vecs; v0 += RW_V) {
                float *o = O + (size_t)r0 * ldo + v0 * AT_W;
                const float *b = B + (size_t)j0 * ldb + v0 * AT_W;
                switch (vecs - v0 >= RW_V ? RW_V : vecs - v0) {
                case 1: rows_nv(o, ldo, a, lda, b, ldb, nj, alpha, acc, tr, 1); break;
                case 2: rows_nv(o, ldo, a, lda, b, ldb, nj, alpha, acc, tr, 2); break;
                case 3: rows_nv(o, ldo, a, lda, b, ldb, nj, alpha, acc, tr, 3); break;
                default: rows_nv(o, ldo, a, lda, b, ldb, nj, alpha, acc, tr, RW_V); break;
                }
            }
        }
    }
}

/* one tile of at_cols: tj keys (from A's column 0 and O's row 0), nv vectors */
AT_INLINE void cols_tile(float *O, int ldo, const float *A, int lda, const float *X, int ldx,
                         int rows, float alpha, const int tj, const int nv)
{
    atv acc[CO_J][CO_V];
    for (int t = 0; t < tj; t++)
        for (int v = 0; v < nv; v++)
            acc[t][v] = (atv){0};
    for (int r = 0; r < rows; r++) {
        const float *x = X + (size_t)r * ldx, *a = A + (size_t)r * lda;
        atv xv[CO_V];
        for (int v = 0; v < nv; v++) {
            xv[v] = at_ld(x + v * AT_W);
            AT_REG(xv[v]);
        }
        for (int t = 0; t < tj; t++) {
            float s = a[t];
            for (int v = 0; v < nv; v++)
                acc[t][v] += s * xv[v];
        }
    }
    for (int t = 0; t < tj; t++)
        for (int v = 0; v < nv; v++) {
            float *o = O + (size_t)t * ldo + v * AT_W;
            at_st(o, at_ld(o) + alpha * acc[t][v]);
        }
}

AT_INLINE void cols_nv(float *O, int ldo, const float *A, int lda, const float *X, int ldx,
                       int rows, float alpha, int tj, const int nv)
{
    switch (tj) {
    case 1: cols_tile(O, ldo, A, lda, X, ldx, rows, alpha, 1, nv); break;
#if CO_J > 2
    case 2: cols_tile(O, ldo, A, lda, X, ldx, rows, alpha, 2, nv); break;
    case 3: cols_tile(O, ldo, A, lda, X, ldx, rows, alpha, 3, nv); break;
#endif
    default: cols_tile(O, ldo, A, lda, X, ldx, rows, alpha, CO_J, nv); break;
    }
}

AT_FN void at_cols(float *O, int ldo, const float *A, int lda, const float *X, int ldx, int rows,
                   int n, int dhp, float alpha)
{
    const int vecs = dhp / AT_W;
    for (int j0 = 0; j0 < n; j0 += CO_J) {
        int tj = n - j0 >= CO_J ? CO_J : n - j0;
        for (int v0 = 0; v0 < vecs; v0 += CO_V) {
            float *o = O + (size_t)j0 * ldo + v0 * AT_W;
            const float *a = A + j0, *x = X + v0 * AT_W;
            switch (vecs - v0 >= CO_V ? CO_V : vecs - v0) {
            case 1: cols_nv(o, ldo, a, lda, x, ldx, rows, alpha, tj, 1); break;
            case 2: cols_nv(o, ldo, a, lda, x, ldx, rows, alpha, tj, 2); break;
            case 3: cols_nv(o, ldo, a, lda, x, ldx, rows, alpha, tj, 3); break;
            default: cols_nv(o, ldo, a, lda, x, ldx, rows, alpha, tj, CO_V); break;
            }
        }
    }
}
