/* json.c: see json.h. */
#include "json.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

/* s quoted and escaped, malloc'd; NULL when out of memory. */
static char *quoted(const char *s)
{
    if (!s) {
        char *t = malloc(5);
        if (t)
            snprintf(t, 5, "null");
        return t;
    }
    cJSON *o = cJSON_CreateString(s);
    char *t = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return t;
}

int json_put_line(FILE *f, const cJSON *o)
{
    char *t = cJSON_PrintUnformatted(o);
    if (!t)
        return -1;
    fprintf(f, "%s\n", t);
    free(t);
    return 0;
}

int json_put_str(FILE *f, const char *s)
{
    char *t = quoted(s);
    if (!t)
        return -1;
    fputs(t, f);
    free(t);
    return 0;
}

int json_str(char *buf, size_t cap, const char *s)
{
    char *t = quoted(s);
    if (!t) {
        if (cap)
            buf[0] = 0;
        return -1;
    }
    int n = snprintf(buf, cap, "%s", t);
    free(t);
    return n;
}
