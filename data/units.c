/* units.c: see units.h. */
#include "units.h"

#include <stdio.h>
#include <string.h>

static int is_ws(uint8_t b)
{
    return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f';
}

void units_init(units_state *s, const units_config *c)
{
    memset(s, 0, sizeof *s);
    s->cfg = *c;
    s->cfg.sep[UNITS_SEP_MAX] = '\0';
    s->sep_len = strlen(s->cfg.sep);
    s->in_ws = 1;
    s->doc_pending = 1;
}

int units_n_anchors(unsigned anchors)
{
    return !!(anchors & ANCHOR_BOS) + !!(anchors & ANCHOR_PARA) + !!(anchors & ANCHOR_SENT);
}

int units_anchor_id(unsigned anchors, unsigned kind)
{
    if (!(anchors & kind))
        return -1;
    int id = TXL_BYTES;
    for (unsigned k = ANCHOR_BOS; k < kind; k <<= 1)
        id += !!(anchors & k);
    return id;
}

unsigned units_anchor_kind(unsigned anchors, txl_tok t)
{
    for (unsigned k = ANCHOR_BOS; k <= ANCHOR_SENT; k <<= 1)
        if (units_anchor_id(anchors, k) == (int)t)
            return k;
    return 0;
}

static txl_tok anchor_base(const units_config *u)
{
    return u->base ? u->base : TXL_BYTES;
}

long units_anchor_token(const units_config *u, unsigned kind)
{
    int id = units_anchor_id(u->anchors, kind);
    return id < 0 ? -1 : (long)anchor_base(u) + (id - TXL_BYTES);
}

unsigned units_token_anchor(const units_config *u, txl_tok t)
{
    txl_tok b = anchor_base(u);
    return t < b || t - b >= 3 ? 0 : units_anchor_kind(u->anchors, TXL_BYTES + (t - b));
}

unsigned units_starting(const units_state *s, uint8_t b)
{
    if (is_ws(b))
        return 0;
    unsigned st = 0;
    if (s->doc_pending)
        st |= START_DOC | START_PARA;
    if (s->in_ws && s->newlines >= 2)
        st |= START_PARA;
    if ((st & START_PARA) || (s->in_ws && s->after_stop))
        st |= START_SENT;
    if ((st & START_SENT) || s->in_ws)
        st |= START_WORD;
    return st;
}

/* Units counted when the unit starts, and the START_* bits an anchor of a kind announces. */
static void count_starts(units_state *s, unsigned st)
{
    if (st & START_WORD)
        s->count[COORD_WORD]++;
    if (st & START_SENT)
        s->count[COORD_SENT]++;
    if (st & START_PARA)
        s->count[COORD_PARA]++;
}

static unsigned announces(unsigned kind)
{
    return kind == ANCHOR_BOS    ? START_DOC | START_PARA | START_SENT | START_WORD
           : kind == ANCHOR_PARA ? START_PARA | START_SENT | START_WORD
           : kind == ANCHOR_SENT ? START_SENT | START_WORD
                                 : 0;
}

void units_push_byte(units_state *s, uint8_t b)
{
    unsigned st = units_starting(s, b);
    count_starts(s, st & ~s->announced);
    if (is_ws(b)) {
        s->newlines += b == '\n';
        s->in_ws = 1;
    } else {
        s->announced = 0;
        s->doc_pending = 0;
        s->in_ws = 0;
        s->newlines = 0;
        s->after_stop = b == '.' || b == '!' || b == '?';
    }
    if (s->sep_len) { /* the separator ends here: the next word starts a document */
        if (s->tail_n == s->sep_len)
            memmove(s->tail, s->tail + 1, --s->tail_n);
        s->tail[s->tail_n++] = b;
        if (s->tail_n == s->sep_len && memcmp(s->tail, s->cfg.sep, s->sep_len) == 0) {
            s->doc_pending = 1;
            s->tail_n = 0;
        }
    }
}

void units_push_anchor(units_state *s, unsigned kind)
{
    /* an anchor is the first token of the unit it announces and of every other unit the
     * text starts there (a paragraph after a blank line, with only sentence anchors): count
     * them now, and not again at the byte that follows */
    unsigned a = announces(kind) | units_starting(s, 'x');
    count_starts(s, a & ~s->announced);
    s->announced |= a;
}

void units_push(units_state *s, txl_tok t)
{
    if (t < TXL_BYTES)
        units_push_byte(s, (uint8_t)t);
    else
        units_push_anchor(s, units_anchor_kind(s->cfg.anchors, t));
}

unsigned units_anchor_before(const units_config *u, unsigned st)
{
    unsigned an = u->anchors;
    if ((st & START_DOC) && (an & ANCHOR_BOS))
        return ANCHOR_BOS;
    if ((st & START_PARA) && (an & ANCHOR_PARA))
        return ANCHOR_PARA;
    if ((st & START_SENT) && (an & ANCHOR_SENT))
        return ANCHOR_SENT;
    return 0;
}

static void emit(units_state *s, txl_tok t, txl_tok *out, int32_t *coords, size_t k)
{
    units_push(s, t);
    if (out)
        out[k] = t;
    if (coords)
        memcpy(coords + k * N_COORDS, s->count, sizeof s->count);
}

size_t units_tokenize(units_state *s, const uint8_t *text, size_t n, txl_tok *out,
                      int32_t *coords)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s->cfg.anchors) {
            unsigned a = units_anchor_before(&s->cfg, units_starting(s, text[i]));
            if (a)
                emit(s, (txl_tok)units_anchor_id(s->cfg.anchors, a), out, coords, k++);
        }
        emit(s, text[i], out, coords, k++);
    }
    return k;
}

void units_anchor_list(unsigned anchors, char *buf, size_t cap)
{
    static const char *const names[] = { "bos", "para", "sent" };
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (unsigned i = 0, first = 1; i < 3 && o < cap; i++)
        if (anchors >> i & 1) {
            o += (size_t)snprintf(buf + o, cap - o, "%s%s", first ? "" : ", ", names[i]);
            first = 0;
        }
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}
