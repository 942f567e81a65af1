/* verdict.c: compares a submission's observations with the reference's; cleans untrusted text for display. */
#include "verdict.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char kind;
    int ok;
    char site[160];
    char rest[200]; /* count and hash, or the near check's numbers */
} observation;

/* The next record of `*p` (advancing it); false at the end. A malformed line is a record of kind '?'. */
static bool next_record(const char **p, observation *o) {
    if (!**p) return false;
    size_t n = strcspn(*p, "\n");
    char line[512];
    snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line - 1 ? n : sizeof line - 1), *p);
    *p += n + ((*p)[n] == '\n');
    memset(o, 0, sizeof *o);
    char site[160] = "", rest[200] = "";
    int used = 0;
    if (sscanf(line, "%c %d %159s %n", &o->kind, &o->ok, site, &used) < 3 || !strchr("vcfne", o->kind)) {
        o->kind = '?';
        return true;
    }
    snprintf(rest, sizeof rest, "%s", line + used);
    snprintf(o->site, sizeof o->site, "%s", site);
    snprintf(o->rest, sizeof o->rest, "%s", rest);
    return true;
}

static bool near_agrees(const observation *s, const observation *r, char *why, size_t cap) {
    double sg, se, sr, sa, rg, re, rr, ra;
    if (sscanf(s->rest, "%la %la %la %la", &sg, &se, &sr, &sa) != 4 ||
        sscanf(r->rest, "%la %la %la %la", &rg, &re, &rr, &ra) != 4) {
        snprintf(why, cap, "%s: a malformed record", s->site);
        return false;
    }
    /* The reference's expected value and tolerance; where the reference itself is off (its inputs come from
     * this grade's seed), its own answer with that tolerance. */
    double target = r->ok ? re : rg;
    if ((isnan(sg) && isnan(target)) || sg == target) return true; /* equal infinities too */
    double diff = fabs(sg - target);
    if (diff <= ra + rr * fabs(target)) return true;
    snprintf(why, cap, "%s: expected %.10g (tolerance: abs %g + rel %g), got %.10g (off by %.3g)", s->site, target, ra,
             rr, sg, diff);
    return false;
}

bool verdict_compare(const char *submitted, const char *reference, char *why, size_t cap) {
    why[0] = '\0';
    const char *sp = submitted, *rp = reference;
    observation s, r;
    for (int index = 1;; index++) {
        bool has_r = next_record(&rp, &r), has_s = next_record(&sp, &s);
        if (!has_r) {
            snprintf(why, cap, "the reference run of this test did not finish (a problem of the grader, not yours)");
            return false;
        }
        if (!has_s) {
            snprintf(why, cap, "the test stopped before its check at %s (it crashed, exited or ran out of time)",
                     r.site);
            return false;
        }
        if (s.kind == '?') {
            snprintf(why, cap, "check %d: a malformed record (did the code write to descriptor 3?)", index);
            return false;
        }
        if (r.kind == 'e' && s.kind == 'e') return true;
        if (s.kind != r.kind || strcmp(s.site, r.site) != 0) {
            if (s.kind == 'f') snprintf(why, cap, "%s: a check failed", s.site);
            else if (r.kind == 'e') snprintf(why, cap, "%s: checks the reference never reaches", s.site);
            else if (s.kind == 'e') snprintf(why, cap, "the test ended before its check at %s", r.site);
            else snprintf(why, cap, "the test took another path than with the reference: check %d is %s, not %s",
                          index, s.site, r.site);
            return false;
        }
        if (s.kind == 'n') {
            if (!near_agrees(&s, &r, why, cap)) return false;
        } else if (strcmp(s.rest, r.rest) != 0) {
            unsigned long long sc = 0, rc = 0;
            sscanf(s.rest, "%llu", &sc);
            sscanf(r.rest, "%llu", &rc);
            if (sc != rc)
                snprintf(why, cap, "%s: %llu checks here, the reference %llu (the test stopped early?)", s.site, sc, rc);
            else if (s.kind == 'v')
                snprintf(why, cap, "%s: of the %llu values checked here, some differ from the reference's", s.site, sc);
            else if (s.kind == 'c')
                snprintf(why, cap, "%s: a condition checked here differs from the reference's", s.site);
            else
                snprintf(why, cap, "%s: a check failed", s.site);
            return false;
        }
    }
}

bool verdict_self(const char *submitted, char *why, size_t cap) {
    why[0] = '\0';
    const char *sp = submitted;
    observation s;
    bool ended = false;
    while (next_record(&sp, &s)) {
        if (s.kind == '?') {
            snprintf(why, cap, "a malformed record (did the code write to descriptor 3?)");
            return false;
        }
        if (!s.ok) {
            snprintf(why, cap, "%s: a check failed", s.site);
            return false;
        }
        if (s.kind == 'e') ended = true;
    }
    if (!ended) snprintf(why, cap, "the test did not come back (it crashed, exited or ran out of time)");
    return ended;
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), or 0. */
static size_t utf8_length(const unsigned char *p, size_t n) {
    unsigned c = p[0];
    size_t len;
    uint32_t min, cp;
    if (c < 0x80) return 1;
    if ((c & 0xe0) == 0xc0) len = 2, min = 0x80, cp = c & 0x1f;
    else if ((c & 0xf0) == 0xe0) len = 3, min = 0x800, cp = c & 0x0f;
    else if ((c & 0xf8) == 0xf0) len = 4, min = 0x10000, cp = c & 0x07;
    else return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (p[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    if (cp >= 0x80 && cp < 0xa0) return 0; /* C1 controls (CSI is one) */
    return len;
}

char *clean_text(const char *text, size_t len, size_t max) {
    if (!text) text = "", len = 0;
    char *out = malloc(max + 64);
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)text;
    for (size_t i = 0; i < len && o < max;) {
        size_t n = utf8_length(p + i, len - i);
        if (n == 0) {
            memcpy(out + o, "\xef\xbf\xbd", 3); /* U+FFFD */
            o += 3;
            i++;
        } else if (n == 1 && (p[i] < 0x20 || p[i] == 0x7f) && p[i] != '\n' && p[i] != '\t') {
            if (p[i] == 0x1b) { /* an escape sequence: drop it whole (ESC [ params final) */
                i++;
                if (i < len && p[i] == '[') {
                    i++;
                    while (i < len && p[i] >= 0x20 && p[i] < 0x40) i++;
                    if (i < len) i++;
                } else if (i < len && p[i] == ']') { /* OSC: up to BEL or ESC \ */
                    while (i < len && p[i] != 0x07 && p[i] != 0x1b) i++;
                    if (i < len) i++;
                }
            } else {
                i++;
            }
        } else {
            memcpy(out + o, p + i, n);
            o += n;
            i += n;
        }
    }
    out[o] = '\0';
    if (o >= max) strcpy(out + o, "\n    [output cut]\n");
    return out;
}
