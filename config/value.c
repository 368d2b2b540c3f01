/* value.c: a key's value (config_impl.h's cfg_value) in and out of run_config, written as
 * text (the writer's numbers, the messages' quoted strings) and checked against the key's
 * type and range. Every source's value goes through cfg_key_check, so a range error reads
 * the same whatever its source; only the location prefix differs. Storing a value writes
 * its field alone: the values that follow from the keys are derive.c's. */
#include "config_impl.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TWO53 9007199254740992.0

/* ---------------------------------------------------------------------------------------
 * Struct access */

void cfg_key_get(const cfg_key *k, const run_config *c, cfg_value *v)
{
    const char *p = (const char *)c + k->off;
    memset(v, 0, sizeof *v);
    switch (k->type) {
    case CT_INT: case CT_BOOL: case CT_ENUM: case CT_SET: case CT_TERMS: {
        int x;
        memcpy(&x, p, sizeof x);
        v->i = x;
        break;
    }
    case CT_LONG: { long x; memcpy(&x, p, sizeof x); v->i = x; break; }
    case CT_DOUBLE: memcpy(&v->x[0], p, sizeof(double)); break;
    case CT_FLOAT: { float x; memcpy(&x, p, sizeof x); v->x[0] = x; break; }
    case CT_U64: memcpy(&v->u, p, sizeof v->u); break;
    case CT_PATH: case CT_TEXT: case CT_NAME: v->s = p; break;
    case CT_SPLIT: memcpy(v->x, p, 3 * sizeof(double)); break;
    case CT_INTS: {
        cutoff_list l;
        memcpy(&l, p, sizeof l);
        v->n = l.n;
        for (int i = 0; i < l.n && i < MODEL_MAX_CUTOFFS; i++)
            v->list[i] = l.v[i];
        break;
    }
    }
}

/* Stores a value that passed key_check (strings fit, integers are in the type's range) in
 * its field, and nothing else: what follows from a key (model.vocab, a vocabulary that
 * another tokenizer's key no longer fits) is cfg_derive's, which the caller runs after. */
void cfg_key_put(const cfg_key *k, run_config *c, const cfg_value *v)
{
    char *p = (char *)c + k->off;
    switch (k->type) {
    case CT_INT: case CT_BOOL: case CT_ENUM: case CT_SET: case CT_TERMS: {
        int x = (int)v->i;
        memcpy(p, &x, sizeof x);
        break;
    }
    case CT_LONG: { long x = (long)v->i; memcpy(p, &x, sizeof x); break; }
    case CT_DOUBLE: memcpy(p, &v->x[0], sizeof(double)); break;
    case CT_FLOAT: { float x = (float)v->x[0]; memcpy(p, &x, sizeof x); break; }
    case CT_U64: memcpy(p, &v->u, sizeof v->u); break;
    case CT_PATH: case CT_TEXT: case CT_NAME: {
        size_t n = strnlen(v->s, k->cap - 1);
        if (v->s != p) {
            memmove(p, v->s, n);
            memset(p + n, 0, k->cap - n); /* zero the tail so equal configs compare equal */
        }
        break;
    }
    case CT_SPLIT: memcpy(p, v->x, 3 * sizeof(double)); break;
    case CT_INTS: {
        cutoff_list l = {.n = v->n};
        for (int i = 0; i < v->n; i++)
            l.v[i] = (int)v->list[i];
        memcpy(p, &l, sizeof l);
        break;
    }
    }
}

/* ---------------------------------------------------------------------------------------
 * Formatting */

/* Shortest "%.Ng" that reads back to exactly x. */
void cfg_fmt_double(char *buf, size_t cap, double x)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, x);
        if (strtod(buf, NULL) == x)
            return;
    }
}

/* Shortest form that reads back to exactly the float x (as strtod then a float cast). */
static void fmt_float(char *buf, size_t cap, float x)
{
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, cap, "%.*g", prec, (double)x);
        if ((float)strtod(buf, NULL) == x)
            return;
    }
}

/* 'text' for messages: at most 40 bytes, control bytes shown as '?'; quote 0: no quotes. */
void cfg_show(char *buf, size_t cap, const char *s, size_t len, char quote)
{
    size_t o = 0, lim = len > 40 ? 40 : len;
    if (cap < 8) {
        if (cap)
            buf[0] = '\0';
        return;
    }
    if (quote)
        buf[o++] = quote;
    for (size_t i = 0; i < lim && o + 5 < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        buf[o++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    if (lim < len && o + 5 < cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    if (quote)
        buf[o++] = quote;
    buf[o] = '\0';
}

/* names[i] of a CT_SET key, or NULL past the list. */
const char *cfg_set_item_name(const cfg_key *k, int i)
{
    for (int j = 0; j <= i; j++)
        if (!k->names[j])
            return NULL;
    return k->names[i];
}

/* The text of a scalar value as the writer emits it (numbers in shortest round-trip form,
 * true/false, enum names); strings as a shortened "quote" for messages; data.split as
 * "[a, b, c]" (messages and diffs). */
void cfg_fmt_value(const cfg_key *k, const cfg_value *v, char *buf, size_t cap)
{
    switch (k->type) {
    case CT_INT: case CT_LONG: snprintf(buf, cap, "%lld", v->i); break;
    case CT_DOUBLE: cfg_fmt_double(buf, cap, v->x[0]); break;
    case CT_FLOAT: fmt_float(buf, cap, (float)v->x[0]); break;
    case CT_BOOL: snprintf(buf, cap, "%s", v->i ? "true" : "false"); break;
    case CT_ENUM: {
        const char *nm = v->i >= INT_MIN && v->i <= INT_MAX ? k->en((int)v->i) : NULL;
        if (nm)
            snprintf(buf, cap, "%s", nm);
        else
            snprintf(buf, cap, "<invalid %lld>", v->i);
        break;
    }
    case CT_U64: snprintf(buf, cap, "%llu", v->u); break;
    case CT_PATH: case CT_TEXT: case CT_NAME: cfg_show(buf, cap, v->s, strlen(v->s), '"'); break;
    case CT_SET: { /* [para, sent]; bits past the names as numbers */
        size_t o = (size_t)snprintf(buf, cap, "[");
        for (int i = 0, first = 1; i < 31 && o < cap; i++) {
            if (!(v->i >> i & 1))
                continue;
            const char *nm = cfg_set_item_name(k, i);
            o += nm ? (size_t)snprintf(buf + o, cap - o, "%s%s", first ? "" : ", ", nm)
                    : (size_t)snprintf(buf + o, cap - o, "%s<bit %d>", first ? "" : ", ", i);
            first = 0;
        }
        if (o < cap)
            snprintf(buf + o, cap - o, "]");
        break;
    }
    case CT_TERMS: { /* the letters of the terms in use */
        size_t o = 0;
        for (int i = 0; i < 4 && o + 1 < cap; i++)
            if (!(v->i >> i & 1))
                buf[o++] = (char)('a' + i);
        buf[o] = '\0';
        break;
    }
    case CT_INTS: { /* [20000, 40000, 200000] */
        size_t o = (size_t)snprintf(buf, cap, "[");
        for (int i = 0; i < v->n && i < MODEL_MAX_CUTOFFS && o < cap; i++)
            o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", v->list[i]);
        if (o < cap)
            snprintf(buf + o, cap - o, "]");
        break;
    }
    case CT_SPLIT: {
        char a[32], b[32], d[32];
        cfg_fmt_double(a, sizeof a, v->x[0]);
        cfg_fmt_double(b, sizeof b, v->x[1]);
        cfg_fmt_double(d, sizeof d, v->x[2]);
        snprintf(buf, cap, "[%s, %s, %s]", a, b, d);
        break;
    }
    }
}

void cfg_key_fullname(const cfg_key *k, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s.%s", k->section, k->name);
}

/* "one of a, b, c" for enums and name lists. */
static void choices_desc(const cfg_key *k, char *buf, size_t cap)
{
    size_t o = (size_t)snprintf(buf, cap, "one of ");
    for (int i = 0; o < cap; i++) {
        const char *nm = k->type == CT_ENUM ? k->en(i) : k->names[i];
        if (!nm)
            break;
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? ", " : "", nm);
    }
}

/* What a key expects, for "expected X, found Y". */
const char *cfg_type_expect(const cfg_key *k, char *buf, size_t cap)
{
    switch (k->type) {
    case CT_INT: case CT_LONG: return "an integer";
    case CT_DOUBLE: case CT_FLOAT: return "a number";
    case CT_BOOL: return "true or false";
    case CT_U64: return "a non-negative integer";
    case CT_PATH: return "a path";
    case CT_TEXT: return "a string";
    case CT_SPLIT: return "a list of 3 numbers [train, valid, test]";
    case CT_ENUM: case CT_NAME: choices_desc(k, buf, cap); return buf;
    case CT_SET: {
        size_t o = (size_t)snprintf(buf, cap, "a list of names, each ");
        if (o < cap)
            choices_desc(k, buf + o, cap - o);
        return buf;
    }
    case CT_TERMS: return "letters of the terms a, b, c, d (\"abcd\", \"ac\")";
    case CT_INTS: return "a list of increasing integers (token ids), [] for none";
    }
    return "a value";
}

/* ---------------------------------------------------------------------------------------
 * Checks shared by every source: each returns 0 if v is acceptable for k, else -1 with the
 * message in why ("model.d_model must be even, found 255"), without location. */

/* Integer and number keys: the field's own range, then the key's. */
static int check_number(const cfg_key *k, const cfg_value *v, const char *full,
                        const char *found, char *why, size_t cap)
{
    char lo[32], hi[32];
    double x;
    if (k->type == CT_INT || k->type == CT_LONG) {
        /* The field's own range first: an int key cannot hold 2^31. */
        long long tmin = k->type == CT_INT ? INT_MIN : (LONG_MIN < -(long long)TWO53
                                                       ? -(long long)TWO53 : LONG_MIN);
        long long tmax = k->type == CT_INT ? INT_MAX : (LONG_MAX > (long long)TWO53
                                                       ? (long long)TWO53 : LONG_MAX);
        if (v->i < tmin || v->i > tmax) {
            snprintf(why, cap, "%s must be %s %lld (the largest the field holds), found %s",
                     full, v->i < tmin ? ">=" : "<=", v->i < tmin ? tmin : tmax, found);
            return -1;
        }
        x = (double)v->i;
    } else {
        x = v->x[0];
        if (!isfinite(x)) {
            snprintf(why, cap, "%s must be a finite number, found %s", full, found);
            return -1;
        }
    }
    int ok = 1;
    if ((k->flags & F_MIN) && ((k->flags & F_MIN_EXCL) ? !(x > k->min) : !(x >= k->min)))
        ok = 0;
    if ((k->flags & F_MAX) && ((k->flags & F_MAX_EXCL) ? !(x < k->max) : !(x <= k->max)))
        ok = 0;
    if (!ok) { /* "in [0, 1)", ">= 1", "> 0" */
        char range[80];
        cfg_fmt_double(lo, sizeof lo, k->min);
        cfg_fmt_double(hi, sizeof hi, k->max);
        int excl_lo = (k->flags & F_MIN_EXCL) != 0, excl_hi = (k->flags & F_MAX_EXCL) != 0;
        if ((k->flags & F_MIN) && (k->flags & F_MAX))
            snprintf(range, sizeof range, "in %c%s, %s%c", "[("[excl_lo], lo, hi, "])"[excl_hi]);
        else
            snprintf(range, sizeof range, "%s %s", (k->flags & F_MIN) ? (excl_lo ? ">" : ">=")
                     : (excl_hi ? "<" : "<="), (k->flags & F_MIN) ? lo : hi);
        snprintf(why, cap, "%s must be %s, found %s", full, range, found);
        return -1;
    }
    if ((k->flags & F_EVEN) && v->i % 2 != 0) {
        snprintf(why, cap, "%s must be even, found %s", full, found);
        return -1;
    }
    return 0;
}

/* Paths and names: they fit the buffer; names are one of the list. (They are UTF-8: every
 * source is read by libyaml, which refuses anything else, and the writer checks again.) */
static int check_text(const cfg_key *k, const cfg_value *v, const char *full,
                      const char *found, char *why, size_t cap)
{
    char tmp[256];
    size_t n = strnlen(v->s, k->cap);
    if (n >= k->cap) {
        snprintf(why, cap, "%s: expected a value of at most %zu bytes, found %zu+ bytes",
                 full, k->cap - 1, n);
        return -1;
    }
    if (k->type == CT_NAME) {
        for (int i = 0; k->names[i]; i++)
            if (strcmp(v->s, k->names[i]) == 0)
                return 0;
        snprintf(why, cap, "%s: expected %s, found %s", full, cfg_type_expect(k, tmp, sizeof tmp),
                 found);
        return -1;
    }
    return 0;
}

static int check_split(const cfg_value *v, const char *full, const char *found, char *why,
                       size_t cap)
{
    double sum = 0;
    for (int i = 0; i < 3; i++) {
        if (!isfinite(v->x[i]) || v->x[i] < 0) {
            snprintf(why, cap, "%s: each fraction must be a finite number >= 0, found %s",
                     full, found);
            return -1;
        }
        sum += v->x[i];
    }
    /* 1e-9 of slack: 0.8 + 0.1 + 0.1 is 1.0000000000000002 in doubles. */
    if (sum > 1 + 1e-9) {
        snprintf(why, cap, "%s: the fractions must sum to <= 1, found %s (sum %.17g)", full,
                 found, sum);
        return -1;
    }
    if (!(v->x[0] > 0)) {
        snprintf(why, cap, "%s: the train fraction must be > 0, found %s", full, found);
        return -1;
    }
    return 0;
}

/* Sets hold only named bits (a required set at least one); xl_terms keep at least one term. */
static int check_bits(const cfg_key *k, const cfg_value *v, const char *full,
                      const char *found, char *why, size_t cap)
{
    int n = 0;
    if (k->type == CT_TERMS)
        n = 4;
    else
        while (k->names[n])
            n++;
    long long all = (1LL << n) - 1;
    if (v->i < 0 || (v->i & ~all)) {
        snprintf(why, cap, "%s: unknown member in %s", full, found);
        return -1;
    }
    if (k->type == CT_TERMS && v->i == all) {
        snprintf(why, cap, "%s: at least one of the terms a, b, c, d must stay, found \"\"",
                 full);
        return -1;
    }
    if ((k->flags & F_REQUIRED) && v->i == 0) {
        snprintf(why, cap, "%s: at least one of the names must be given, found []", full);
        return -1;
    }
    return 0;
}

/* model.cutoffs: at most MODEL_MAX_CUTOFFS ids, each >= 1 and above the one before (each
 * cluster holds a token; the bound V is check_cross's). */
static int check_ints(const cfg_value *v, const char *full, const char *found, char *why,
                      size_t cap)
{
    if (v->n < 0 || v->n > MODEL_MAX_CUTOFFS) {
        snprintf(why, cap, "%s: at most %d cutoffs, found %d", full, MODEL_MAX_CUTOFFS, v->n);
        return -1;
    }
    for (int i = 0; i < v->n; i++)
        if (v->list[i] < 1 || v->list[i] > INT_MAX || (i > 0 && v->list[i] <= v->list[i - 1])) {
            snprintf(why, cap, "%s must be increasing token ids, each >= 1 and < V (every "
                     "cluster holds a token), found %s", full, found);
            return -1;
        }
    return 0;
}

/* Range and per-key rules for any key. */
int cfg_key_check(const cfg_key *k, const cfg_value *v, char *why, size_t cap)
{
    char full[64], found[128], tmp[256];
    cfg_key_fullname(k, full, sizeof full);
    cfg_fmt_value(k, v, found, sizeof found);
    switch (k->type) {
    case CT_INT: case CT_LONG: case CT_DOUBLE: case CT_FLOAT:
        return check_number(k, v, full, found, why, cap);
    case CT_BOOL:
        if (v->i != 0 && v->i != 1) {
            snprintf(why, cap, "%s: expected true or false, found %lld", full, v->i);
            return -1;
        }
        return 0;
    case CT_ENUM:
        if (v->i < INT_MIN || v->i > INT_MAX || !k->en((int)v->i)) {
            snprintf(why, cap, "%s: expected %s, found %s", full,
                     cfg_type_expect(k, tmp, sizeof tmp), found);
            return -1;
        }
        return 0;
    case CT_U64:
        return 0;
    case CT_PATH: case CT_TEXT: case CT_NAME:
        return check_text(k, v, full, found, why, cap);
    case CT_SPLIT:
        return check_split(v, full, found, why, cap);
    case CT_SET: case CT_TERMS:
        return check_bits(k, v, full, found, why, cap);
    case CT_INTS:
        return check_ints(v, full, found, why, cap);
    }
    return 0;
}
