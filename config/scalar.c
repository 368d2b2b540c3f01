/* scalar.c: the scalar rules every config source shares (doc/design.md, "Configuration"):
 * integers are decimal literals, numbers decimal (no hex, inf or nan), bools true/false
 * (also yes/no/on/off, YAML 1.1's), null only where a key allows it; a scalar's text to a
 * cfg_value of its key's type (the ranges are cfg_key_check's). */
#include "config_impl.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cfg_is_null_text(const char *s, int plain)
{
    return plain && (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
                     !strcmp(s, "NULL"));
}

static int is_int_syntax(const char *s)
{
    if (*s == '+' || *s == '-')
        s++;
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

/* Decimal numbers only: [+-](digits[.digits]|.digits)([eE][+-]digits). strtod alone would
 * also take hex, inf, nan and leading blanks. (Flags follow the same rule: cli_double.) */
int cfg_is_decimal(const char *s)
{
    int digits = 0;
    if (*s == '+' || *s == '-')
        s++;
    for (; *s >= '0' && *s <= '9'; s++)
        digits++;
    if (*s == '.')
        for (s++; *s >= '0' && *s <= '9'; s++)
            digits++;
    if (!digits)
        return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (*s < '0' || *s > '9')
            return 0;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    return *s == '\0';
}

static int parse_bool_text(const char *s, int *b)
{
    static const char *const yes[] = { "true", "True", "TRUE", "yes", "Yes", "YES",
                                       "on", "On", "ON" };
    static const char *const no[] = { "false", "False", "FALSE", "no", "No", "NO",
                                      "off", "Off", "OFF" };
    for (size_t i = 0; i < COUNT(yes); i++) {
        if (strcmp(s, yes[i]) == 0)
            return *b = 1, 0;
        if (strcmp(s, no[i]) == 0)
            return *b = 0, 0;
    }
    return -1;
}

/* Unsigned decimal integer (train.seed). */
static int parse_u64_text(const char *s, unsigned long long *u)
{
    const char *t = *s == '+' ? s + 1 : s;
    if (!*t)
        return -1;
    for (const char *q = t; *q; q++)
        if (*q < '0' || *q > '9')
            return -1;
    errno = 0;
    *u = strtoull(t, NULL, 10);
    return errno == ERANGE ? -1 : 0;
}

/* A number for a double key, or one element of data.split. */
int cfg_parse_number(const char *label, const char *text, int plain, double *x, char *why,
                        size_t cap)
{
    char f[64];
    cfg_show(f, sizeof f, text, strlen(text), plain ? '\'' : '"');
    if (!plain || !cfg_is_decimal(text)) {
        snprintf(why, cap, "%s: expected a number, found %s%s", label,
                 plain ? "" : "the string ", f);
        return -1;
    }
    errno = 0;
    *x = strtod(text, NULL);
    /* Overflow is an error; underflow gives a subnormal or 0, which the range checks see
     * (and subnormals must load back for the dump to round-trip). */
    if (errno == ERANGE && fabs(*x) > 1) {
        snprintf(why, cap, "%s: expected a number, found %s (too large for a double)", label, f);
        return -1;
    }
    return 0;
}

/* The index of name s in k->names, or -1. */
int cfg_name_index(const cfg_key *k, const char *s)
{
    for (int i = 0; k->names[i]; i++)
        if (strcmp(k->names[i], s) == 0)
            return i;
    return -1;
}

/* xl_terms: distinct letters of a..d ("abcd", "ac") to the bits of the letters left out. */
static int parse_terms(const char *s, long long *off)
{
    int on = 0;
    for (const char *q = s; *q; q++) {
        if (*q < 'a' || *q > 'd' || (on >> (*q - 'a') & 1))
            return -1;
        on |= 1 << (*q - 'a');
    }
    *off = ~on & 15;
    return 0;
}

/* The value of the enum key k named s, or -1. */
int cfg_enum_parse(const cfg_key *k, const char *s)
{
    const char *nm;
    for (int i = 0; (nm = k->en(i)); i++)
        if (strcmp(nm, s) == 0)
            return i;
    return -1;
}

/* Converts one scalar's text to a value for k (types only; ranges are key_check's).
 * plain: the scalar was unquoted, so it may be null, a number or a bool. */
int cfg_parse_scalar(const cfg_key *k, const char *text, size_t len, int plain, cfg_value *v,
                        char *why, size_t cap)
{
    char full[64], f[64], tmp[256];
    const char *expect = cfg_type_expect(k, tmp, sizeof tmp);
    cfg_key_fullname(k, full, sizeof full);
    cfg_show(f, sizeof f, text, len, plain ? '\'' : '"');
    memset(v, 0, sizeof *v);
    if (strlen(text) != len) {
        snprintf(why, cap, "%s: expected %s, found a value containing a NUL byte", full, expect);
        return -1;
    }
    if (cfg_is_null_text(text, plain)) {
        if ((k->flags & F_NULL_OK) &&
            (k->type == CT_PATH || k->type == CT_TEXT || k->type == CT_NAME)) {
            v->s = "";
            return 0;
        }
        snprintf(why, cap, "%s: expected %s, found null", full, expect);
        return -1;
    }
    /* "found 'x'" for plain text, "found the string "x"" for quoted (enum names and data.split
     * say neither) */
    const char *quoted = plain || k->type == CT_ENUM || k->type == CT_SPLIT ? "" : "the string ";
    const char *extra = "";
    int b, ok = plain;
    switch (k->type) {
    case CT_INT: case CT_LONG:
        ok = ok && is_int_syntax(text);
        errno = 0;
        v->i = ok ? strtoll(text, NULL, 10) : 0;
        if (ok && errno == ERANGE)
            ok = 0, extra = " (too large)";
        break;
    case CT_DOUBLE: case CT_FLOAT:
        if (cfg_parse_number(full, text, plain, &v->x[0], why, cap) != 0)
            return -1;
        ok = k->type == CT_DOUBLE || fabs(v->x[0]) <= FLT_MAX;
        v->x[0] = ok && k->type == CT_FLOAT ? (float)v->x[0] : v->x[0]; /* checked as stored */
        extra = " (too large for a float)";
        break;
    case CT_BOOL:
        ok = ok && parse_bool_text(text, &b) == 0;
        v->i = ok ? b : 0;
        break;
    case CT_U64:
        ok = ok && parse_u64_text(text, &v->u) == 0;
        expect = "a non-negative integer < 2^64";
        break;
    case CT_ENUM:
        ok = (v->i = cfg_enum_parse(k, text)) >= 0;
        break;
    case CT_PATH: case CT_TEXT: case CT_NAME:
        v->s = text;
        return 0;
    case CT_SET: { /* one bare name: a set of one */
        int i = cfg_name_index(k, text);
        ok = i >= 0;
        v->i = ok ? 1LL << i : 0;
        break;
    }
    case CT_TERMS:
        ok = parse_terms(text, &v->i) == 0;
        break;
    case CT_SPLIT: case CT_INTS:
        ok = 0;
        break;
    }
    if (ok)
        return 0;
    snprintf(why, cap, "%s: expected %s, found %s%s%s", full, expect, quoted, f, extra);
    return -1;
}
