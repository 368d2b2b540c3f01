/* test_units.c: the text-structure rules of data/units.c on hand-made texts: where anchors
 * go (every combination of kinds, the document separator), the coordinates of every token,
 * feeding a text in pieces, and an anchor token pushed by a sampler. */
#include <stdio.h>
#include <string.h>

#include "../data/units.h"
#include "testlib.h"

/* Tokens as text: bytes as themselves, anchors as <bos> <para> <sent>. */
static void show(char *buf, size_t cap, const txl_tok *t, size_t n, unsigned anchors)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 8 < cap; i++) {
        unsigned k = t[i] >= TXL_BYTES ? units_anchor_kind(anchors, t[i]) : 0;
        const char *nm = k == ANCHOR_BOS ? "<bos>" : k == ANCHOR_PARA ? "<para>"
                         : k == ANCHOR_SENT ? "<sent>" : NULL;
        if (nm)
            o += (size_t)snprintf(buf + o, cap - o, "%s", nm);
        else
            buf[o++] = (char)t[i];
    }
    buf[o] = '\0';
}

/* s with newlines shown as \n, for messages */
static const char *esc(const char *s, char *buf, size_t cap)
{
    size_t o = 0;
    for (; *s && o + 3 < cap; s++) {
        if (*s == '\n') {
            buf[o++] = '\\';
            buf[o++] = 'n';
        } else {
            buf[o++] = *s;
        }
    }
    buf[o] = '\0';
    return buf;
}

static void anchors_case(const char *text, unsigned anchors, const char *sep, const char *want)
{
    units_config c = {.anchors = anchors};
    snprintf(c.sep, sizeof c.sep, "%s", sep);
    units_state s;
    units_init(&s, &c);
    txl_tok out[512];
    size_t n = units_tokenize(&s, (const uint8_t *)text, strlen(text), out, NULL);
    char got[1024];
    show(got, sizeof got, out, n, anchors);
    char e1[256], e2[1024], e3[1024];
    CHECK(strcmp(got, want) == 0, "anchors %u sep '%s': '%s' -> '%s' (want '%s')", anchors, sep,
          esc(text, e1, sizeof e1), esc(got, e2, sizeof e2), esc(want, e3, sizeof e3));
}

static void coords_case(void)
{
    const char *text = "Hi there. Go!\n\nNew para.";
    units_config c = {.anchors = 0};
    units_state s;
    units_init(&s, &c);
    int32_t co[64][N_COORDS];
    txl_tok out[64];
    size_t n = units_tokenize(&s, (const uint8_t *)text, strlen(text), out, &co[0][0]);
    /* word, sentence, paragraph counts at each byte */
    static const int32_t want[][3] = {
        {1, 1, 1}, {1, 1, 1}, {1, 1, 1},                       /* "Hi " */
        {2, 1, 1}, {2, 1, 1}, {2, 1, 1}, {2, 1, 1}, {2, 1, 1}, {2, 1, 1}, {2, 1, 1}, /* there. */
        {3, 2, 1}, {3, 2, 1}, {3, 2, 1}, {3, 2, 1}, {3, 2, 1}, /* Go!\n\n */
        {4, 3, 2}, {4, 3, 2}, {4, 3, 2}, {4, 3, 2},            /* New  */
        {5, 3, 2}, {5, 3, 2}, {5, 3, 2}, {5, 3, 2}, {5, 3, 2}, /* para. */
    };
    int ok = n == sizeof want / sizeof want[0];
    for (size_t i = 0; ok && i < n; i++)
        ok = memcmp(co[i], want[i], sizeof want[i]) == 0;
    CHECK(ok, "coordinates (words, sentences, paragraphs) of every byte of '%s'", "Hi there. "
          "Go!\\n\\nNew para.");

    /* the same text with anchors: an anchor has the counts of the byte after it, also when
     * it announces less than starts there (only <sent> before the new paragraph) */
    static const unsigned sets[] = { ANCHOR_SENT, ANCHOR_PARA, ANCHOR_BOS, ANCHOR_ALL };
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
        c.anchors = sets[k];
        units_init(&s, &c);
        n = units_tokenize(&s, (const uint8_t *)text, strlen(text), out, &co[0][0]);
        int same = 1;
        size_t b = 0;
        for (size_t i = 0; i < n && same; i++) {
            same = memcmp(co[i], want[b], sizeof want[b]) == 0;
            if (out[i] < TXL_BYTES)
                b++;
        }
        CHECK(same && b == strlen(text), "anchors %u: the bytes keep their coordinates, "
              "anchors share the next byte's (%zu tokens)", sets[k], n);
    }

    /* in pieces: the same tokens and coordinates */
    units_init(&s, &c);
    txl_tok out2[64];
    int32_t co2[64][N_COORDS];
    size_t n2 = 0, len = strlen(text);
    for (size_t i = 0; i < len; i += 3) {
        size_t k = len - i < 3 ? len - i : 3;
        n2 += units_tokenize(&s, (const uint8_t *)text + i, k, out2 + n2, &co2[n2][0]);
    }
    CHECK(n2 == n && !memcmp(out, out2, n * sizeof *out) && !memcmp(co, co2, n * sizeof co[0]),
          "three bytes at a time gives the same tokens and coordinates");

    /* a sampler that produces the anchor itself: the byte after it does not count twice */
    units_init(&s, &c);
    units_tokenize(&s, (const uint8_t *)"End. ", 5, NULL, NULL);
    int32_t before[N_COORDS];
    memcpy(before, s.count, sizeof before);
    units_push(&s, (txl_tok)units_anchor_id(c.anchors, ANCHOR_SENT));
    int32_t at_anchor[N_COORDS];
    memcpy(at_anchor, s.count, sizeof at_anchor);
    units_push(&s, 'N');
    CHECK(at_anchor[COORD_SENT] == before[COORD_SENT] + 1 &&
          at_anchor[COORD_WORD] == before[COORD_WORD] + 1 &&
          !memcmp(at_anchor, s.count, sizeof at_anchor),
          "a pushed <sent> anchor counts the sentence and word it announces, the next byte not "
          "again");
}

int main(void)
{
    const char *t = "One two. Three!\n\nNew para? yes.\n  \n Last";
    anchors_case(t, 0, "", t);
    anchors_case(t, ANCHOR_ALL, "",
                 "<bos>One two. <sent>Three!\n\n<para>New para? <sent>yes.\n  \n <para>Last");
    anchors_case(t, ANCHOR_SENT, "",
                 "<sent>One two. <sent>Three!\n\n<sent>New para? <sent>yes.\n  \n <sent>Last");
    anchors_case(t, ANCHOR_PARA, "", "<para>One two. Three!\n\n<para>New para? yes.\n  \n <para>Last");
    anchors_case(t, ANCHOR_BOS, "", "<bos>One two. Three!\n\nNew para? yes.\n  \n Last");
    anchors_case("a.b 3.5 x\n y", ANCHOR_SENT, "", "<sent>a.b 3.5 x\n y");
    anchors_case("doc one.=== doc two", ANCHOR_BOS | ANCHOR_SENT, "===",
                 "<bos>doc one.=== <bos>doc two");
    anchors_case("\n\n  lead", ANCHOR_ALL, "", "\n\n  <bos>lead");
    CHECK(units_anchor_id(ANCHOR_PARA | ANCHOR_SENT, ANCHOR_SENT) == 257 &&
              units_anchor_id(ANCHOR_PARA | ANCHOR_SENT, ANCHOR_BOS) == -1 &&
              units_n_anchors(ANCHOR_ALL) == 3,
          "anchor ids follow the bytes in the order bos, para, sent among the enabled kinds");
    coords_case();
    return tl_done("test_units");
}
