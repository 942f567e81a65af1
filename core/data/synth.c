/* synth.c: the synthetic task generators, each a seeded loop; the grammar is a table of weighted rules. */
#include "data/synth.h"

#include "base/error.h"
#include "data/rand.h"

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

enum { MAX_WORD_LETTERS = 10, MAX_DIGITS = 3 };

/* ---------------------------------------------------------------- copy and reverse */

static void letters_task(uint64_t seed, uint64_t examples, int reverse, textbuf *out) {
    mp_rng rng;
    mp_rng_seed(&rng, seed);
    char word[MAX_WORD_LETTERS];
    for (uint64_t e = 0; e < examples; e++) {
        int n = 1 + (int)data_rng_below(&rng, MAX_WORD_LETTERS);
        for (int i = 0; i < n; i++) word[i] = (char)('a' + data_rng_below(&rng, 26));
        textbuf_append(out, word, (size_t)n);
        textbuf_putc(out, '=');
        for (int i = 0; i < n; i++) textbuf_putc(out, word[reverse ? n - 1 - i : i]);
        textbuf_putc(out, '\n');
    }
}

void synth_copy(uint64_t seed, uint64_t examples, textbuf *out) { letters_task(seed, examples, 0, out); }
void synth_reverse(uint64_t seed, uint64_t examples, textbuf *out) { letters_task(seed, examples, 1, out); }

/* ---------------------------------------------------------------- addition */

/* A number with 1 to MAX_DIGITS digits: the digit count first (so short and long operands are equally
 * common), then a value of exactly that many digits. */
static uint64_t draw_operand(mp_rng *rng) {
    static const uint64_t range[MAX_DIGITS][2] = {{0, 10}, {10, 100}, {100, 1000}}; /* [lo, hi) by digit count */
    const uint64_t *r = range[data_rng_below(rng, MAX_DIGITS)];
    return r[0] + data_rng_below(rng, r[1] - r[0]);
}

void synth_addition(uint64_t seed, uint64_t examples, textbuf *out) {
    mp_rng rng;
    mp_rng_seed(&rng, seed);
    for (uint64_t e = 0; e < examples; e++) {
        uint64_t a = draw_operand(&rng), b = draw_operand(&rng);
        textbuf_printf(out, "%llu+%llu=%llu\n", (unsigned long long)a, (unsigned long long)b,
                       (unsigned long long)(a + b));
    }
}

/* ---------------------------------------------------------------- grammar */

/* A probabilistic context-free grammar: each rule rewrites its left side into the space-separated
 * symbols on the right, chosen in proportion to its weight among the rules of that left side. A symbol
 * that is the left side of some rule is a nonterminal; any other is a word. The FIRST rule of each
 * nonterminal never recurses, and past MAX_DEPTH only first rules are used, so every sentence ends.
 * Nouns and adjectives start with consonants so "a" is always right; every noun is singular. */
typedef struct {
    const char *lhs;
    int weight;
    const char *rhs;
} pcfg_rule;

static const pcfg_rule english[] = {
    {"S", 6, "NP VP"},
    {"S", 2, "NP VP PP"},
    {"S", 1, "PP , NP VP"},
    {"S", 1, "NP VP , and NP VP"},
    {"S", 1, "NP Vs that S"},
    {"NP", 5, "Det N"},
    {"NP", 3, "Det Adj N"},
    {"NP", 2, "Name"},
    {"NP", 1, "Det N PP"},
    {"NP", 1, "Det N who VP"},
    {"VP", 4, "Vt NP"},
    {"VP", 3, "Vi"},
    {"VP", 2, "Vi Adv"},
    {"VP", 1, "Vt NP Adv"},
    {"PP", 1, "P NP"},
    {"Det", 4, "the"}, {"Det", 2, "a"}, {"Det", 1, "every"}, {"Det", 1, "some"}, {"Det", 1, "my"},
    {"N", 1, "cat"}, {"N", 1, "dog"}, {"N", 1, "bird"}, {"N", 1, "child"}, {"N", 1, "teacher"},
    {"N", 1, "river"}, {"N", 1, "garden"}, {"N", 1, "house"}, {"N", 1, "book"}, {"N", 1, "tree"},
    {"N", 1, "student"}, {"N", 1, "farmer"}, {"N", 1, "king"}, {"N", 1, "ship"}, {"N", 1, "city"},
    {"N", 1, "poet"}, {"N", 1, "moon"}, {"N", 1, "lamp"},
    {"Adj", 1, "small"}, {"Adj", 1, "big"}, {"Adj", 1, "happy"}, {"Adj", 1, "quiet"}, {"Adj", 1, "red"},
    {"Adj", 1, "bright"}, {"Adj", 1, "lazy"}, {"Adj", 1, "clever"}, {"Adj", 1, "green"}, {"Adj", 1, "tired"},
    {"Name", 1, "Alice"}, {"Name", 1, "Bob"}, {"Name", 1, "Carol"}, {"Name", 1, "Dave"}, {"Name", 1, "Mei"},
    {"Vt", 1, "sees"}, {"Vt", 1, "finds"}, {"Vt", 1, "likes"}, {"Vt", 1, "follows"}, {"Vt", 1, "reads"},
    {"Vt", 1, "builds"}, {"Vt", 1, "watches"}, {"Vt", 1, "helps"}, {"Vt", 1, "paints"},
    {"Vi", 1, "sleeps"}, {"Vi", 1, "runs"}, {"Vi", 1, "sings"}, {"Vi", 1, "waits"}, {"Vi", 1, "laughs"},
    {"Vi", 1, "falls"}, {"Vi", 1, "dreams"},
    {"Vs", 1, "thinks"}, {"Vs", 1, "says"}, {"Vs", 1, "knows"}, {"Vs", 1, "hopes"},
    {"Adv", 1, "quickly"}, {"Adv", 1, "slowly"}, {"Adv", 1, "today"}, {"Adv", 1, "again"}, {"Adv", 1, "quietly"},
    {"P", 1, "near"}, {"P", 1, "under"}, {"P", 1, "behind"}, {"P", 1, "with"}, {"P", 1, "beside"}, {"P", 1, "over"},
};
enum { N_RULES = sizeof english / sizeof english[0], MAX_DEPTH = 6 };

static bool is_nonterminal(const char *sym, size_t len) {
    for (int r = 0; r < N_RULES; r++)
        if (strlen(english[r].lhs) == len && memcmp(english[r].lhs, sym, len) == 0) return true;
    return false;
}

/* Appends a word: after a space unless it is the first word or punctuation. */
static void emit_word(const char *w, size_t len, textbuf *sentence) {
    if (sentence->len > 0 && !(len == 1 && w[0] == ',')) textbuf_putc(sentence, ' ');
    textbuf_append(sentence, w, len);
}

static void expand(const char *sym, size_t len, int depth, mp_rng *rng, textbuf *sentence) {
    if (!is_nonterminal(sym, len)) {
        emit_word(sym, len, sentence);
        return;
    }
    /* Choose among this symbol's rules by weight (only the first one when deep). */
    int total = 0, first = -1;
    for (int r = 0; r < N_RULES; r++)
        if (strlen(english[r].lhs) == len && memcmp(english[r].lhs, sym, len) == 0) {
            if (first < 0) first = r;
            total += english[r].weight;
        }
    int chosen = first;
    if (depth < MAX_DEPTH) {
        int x = (int)data_rng_below(rng, (uint64_t)total);
        for (int r = first; r < N_RULES; r++) {
            if (strlen(english[r].lhs) != len || memcmp(english[r].lhs, sym, len) != 0) continue;
            if (x < english[r].weight) {
                chosen = r;
                break;
            }
            x -= english[r].weight;
        }
    }
    for (const char *p = english[chosen].rhs; *p;) {
        while (*p == ' ') p++;
        const char *end = p;
        while (*end && *end != ' ') end++;
        if (end > p) expand(p, (size_t)(end - p), depth + 1, rng, sentence);
        p = end;
    }
}

void synth_grammar(uint64_t seed, uint64_t examples, textbuf *out) {
    mp_rng rng;
    mp_rng_seed(&rng, seed);
    textbuf sentence = {0};
    for (uint64_t e = 0; e < examples; e++) {
        sentence.len = 0;
        expand("S", 1, 0, &rng, &sentence);
        MP_ASSERT(sentence.len > 0, "the grammar produced an empty sentence");
        sentence.data[0] = (char)toupper((unsigned char)sentence.data[0]);
        textbuf_append(out, sentence.data, sentence.len);
        textbuf_puts(out, ".\n");
    }
    textbuf_free(&sentence);
}
