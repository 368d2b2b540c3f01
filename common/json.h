/* json.h: a text as a JSON string, for the rows and events txl writes with printf (the
 * quotes and escapes are cJSON's, so a path with a quote, a backslash or a control byte
 * stays one valid string). NULL is written as null. And a cJSON object as one line. */
#ifndef TXL_JSON_H
#define TXL_JSON_H

#include <stddef.h>
#include <stdio.h>

/* Writes s as a JSON string to f. Returns 0, or -1 when out of memory (nothing written). */
int json_put_str(FILE *f, const char *s);
/* s as a JSON string into buf (NUL-terminated, cut at cap - 1 as snprintf does): the length
 * it needs without the NUL, or -1 when out of memory (buf empty). */
int json_str(char *buf, size_t cap, const char *s);
/* Writes o as one line of JSON (unformatted, then a newline) to f. Returns 0, or -1 when
 * out of memory (nothing written). */
struct cJSON;
int json_put_line(FILE *f, const struct cJSON *o);

#endif
