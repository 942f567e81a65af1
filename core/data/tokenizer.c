/* tokenizer.c: UTF-8 decoding, the byte and character tokenizers, and their vocab.json files. */
#include "data/tokenizer.h"

#include "base/error.h"
#include "data/tokens.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VOCAB_FORMAT "mixpar-vocab-1"
enum { MAX_CODE_POINT = 0x10FFFF, REPLACEMENT_CHAR = 0xFFFD };

/* ---------------------------------------------------------------- UTF-8 */

int utf8_decode(const char *str, size_t len, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)str;
    if (len == 0) return 0;
    unsigned char b = s[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    /* Lead byte -> sequence length and the smallest code point that needs it (shorter forms are overlong). */
    int n;
    uint32_t v, min;
    if (b >= 0xC2 && b <= 0xDF) n = 2, v = b & 0x1F, min = 0x80;
    else if (b >= 0xE0 && b <= 0xEF) n = 3, v = b & 0x0F, min = 0x800;
    else if (b >= 0xF0 && b <= 0xF4) n = 4, v = b & 0x07, min = 0x10000;
    else return 0; /* a continuation byte, C0/C1 (always overlong) or F5..FF (beyond U+10FFFF) */
    if ((size_t)n > len) return 0;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    if (v < min || v > MAX_CODE_POINT || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return n;
}

int utf8_encode(uint32_t cp, char out[4]) {
    MP_ASSERT(cp <= MAX_CODE_POINT && !(cp >= 0xD800 && cp <= 0xDFFF), "code point U+%04X cannot be encoded", cp);
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

int64_t utf8_find_invalid(const char *s, size_t len) {
    size_t at = 0;
    uint32_t cp;
    while (at < len) {
        int n = utf8_decode(s + at, len - at, &cp);
        if (n == 0) return (int64_t)at;
        at += (size_t)n;
    }
    return -1;
}

/* "'龘' (U+9F98)" or "'\n' (U+000A)": a character as a person can read it in a message. */
static void describe_char(uint32_t cp, char *out, size_t out_len) {
    static const struct { uint32_t cp; const char *escape; } escapes[] = {
        {'\n', "\\n"}, {'\t', "\\t"}, {'\r', "\\r"}, {'\'', "\\'"}, {'\\', "\\\\"}};
    for (size_t i = 0; i < sizeof escapes / sizeof escapes[0]; i++)
        if (escapes[i].cp == cp) {
            snprintf(out, out_len, "'%s' (U+%04X)", escapes[i].escape, cp);
            return;
        }
    if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) {
        snprintf(out, out_len, "a control character (U+%04X)", cp);
        return;
    }
    char utf8[5] = {0};
    utf8_encode(cp, utf8);
    snprintf(out, out_len, "'%s' (U+%04X)", utf8, cp);
}

/* The error for invalid UTF-8 at byte `at` of text. */
static bool invalid_utf8(const char *text, size_t len, size_t at, data_err *err) {
    char bytes[32] = {0};
    size_t w = 0;
    for (size_t i = at; i < len && i < at + 4; i++)
        w += snprintf(bytes + w, sizeof bytes - w, "%s%02x", i > at ? " " : "", (unsigned char)text[i]);
    return DATA_ERR(err, "valid UTF-8 text", "convert the text to UTF-8 (iconv -f OLD -t UTF-8), or use the byte tokenizer",
                    "invalid UTF-8 at byte offset %zu (bytes %s)", at, bytes);
}

/* ---------------------------------------------------------------- tokenizers */

static const struct {
    tokenizer_kind kind;
    const char *name;
} kinds[] = {{TOKENIZER_BYTE, "byte"}, {TOKENIZER_CHAR, "char"}, {TOKENIZER_BPE, "bpe"}};

const char *tokenizer_kind_name(tokenizer_kind kind) {
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (kinds[i].kind == kind) return kinds[i].name;
    return "?";
}

int tokenizer_kind_from_name(const char *name) {
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(kinds[i].name, name) == 0) return (int)kinds[i].kind;
    return -1;
}

void tokenizer_init_byte(tokenizer *t) {
    memset(t, 0, sizeof *t);
    t->kind = TOKENIZER_BYTE;
    t->vocab_size = 256;
    t->unk_id = UINT32_MAX;
}

/* A character tokenizer over a sorted list of code points (the list is adopted, not copied). */
static void init_char(tokenizer *t, uint32_t *chars, uint32_t n_chars) {
    memset(t, 0, sizeof *t);
    t->kind = TOKENIZER_CHAR;
    t->chars = chars;
    t->n_chars = n_chars;
    t->unk_id = n_chars;
    t->vocab_size = n_chars + 1;
}

bool tokenizer_build_char(tokenizer *t, const char *text, size_t len, data_err *err) {
    /* A bitmap over all of Unicode (136 KiB): mark what occurs, then read the marks in code-point order. */
    enum { WORDS = (MAX_CODE_POINT + 1 + 63) / 64 };
    uint64_t *seen = calloc(WORDS, sizeof *seen);
    MP_ASSERT(seen != NULL, "out of memory");
    size_t at = 0;
    uint32_t n_chars = 0, cp;
    while (at < len) {
        int n = utf8_decode(text + at, len - at, &cp);
        if (n == 0) {
            free(seen);
            return invalid_utf8(text, len, at, err);
        }
        if (!(seen[cp / 64] >> (cp % 64) & 1)) n_chars++;
        seen[cp / 64] |= 1ULL << (cp % 64);
        at += (size_t)n;
    }
    uint32_t *chars = malloc((n_chars ? n_chars : 1) * sizeof *chars);
    MP_ASSERT(chars != NULL, "out of memory");
    uint32_t k = 0;
    for (uint32_t w = 0; w < WORDS; w++)
        for (uint64_t bits = seen[w]; bits; bits &= bits - 1) chars[k++] = w * 64 + (uint32_t)__builtin_ctzll(bits);
    free(seen);
    init_char(t, chars, n_chars);
    return true;
}

/* A BPE tokenizer over a model (adopted, not copied). */
static void init_bpe(tokenizer *t, bpe_model *model) {
    memset(t, 0, sizeof *t);
    t->kind = TOKENIZER_BPE;
    t->bpe = malloc(sizeof *t->bpe);
    MP_ASSERT(t->bpe != NULL, "out of memory");
    *t->bpe = *model;
    t->vocab_size = model->vocab_size;
    t->unk_id = UINT32_MAX;
}

bool tokenizer_build_bpe(tokenizer *t, const char *text, size_t len, uint32_t vocab_size, data_err *err) {
    bpe_model model;
    if (!bpe_train(&model, (const uint8_t *)text, len, vocab_size, err)) return false;
    init_bpe(t, &model);
    return true;
}

void tokenizer_free(tokenizer *t) {
    if (t->bpe) bpe_free(t->bpe);
    free(t->bpe);
    free(t->chars);
    memset(t, 0, sizeof *t);
}

int64_t tokenizer_char_id(const tokenizer *t, uint32_t cp) {
    uint32_t lo = 0, hi = t->n_chars; /* search [lo, hi) */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->chars[mid] < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < t->n_chars && t->chars[lo] == cp ? (int64_t)lo : -1;
}

int64_t tokenizer_encode(const tokenizer *t, const char *text, size_t len, bool map_unknown, uint32_t *ids,
                         uint64_t *unknown_count, data_err *err) {
    if (unknown_count) *unknown_count = 0;
    if (t->kind == TOKENIZER_BYTE) {
        for (size_t i = 0; i < len; i++) ids[i] = (unsigned char)text[i];
        return (int64_t)len;
    }
    if (t->kind == TOKENIZER_BPE) return (int64_t)bpe_encode(t->bpe, (const uint8_t *)text, len, ids);
    size_t at = 0;
    uint64_t n_ids = 0, line = 1, column = 1;
    uint32_t cp;
    while (at < len) {
        int n = utf8_decode(text + at, len - at, &cp);
        if (n == 0) {
            invalid_utf8(text, len, at, err);
            return -1;
        }
        int64_t id = tokenizer_char_id(t, cp);
        if (id < 0) {
            if (!map_unknown) {
                char what[48];
                describe_char(cp, what, sizeof what);
                DATA_ERR(err, "only characters of the vocabulary",
                         "map unknown characters to <unk> (mixpar data encode --unk), or build the vocabulary from "
                         "text that has them",
                         "character %s at character %llu (line %llu, column %llu; byte offset %zu) is not among the "
                         "vocabulary's %u characters",
                         what, (unsigned long long)n_ids, (unsigned long long)line, (unsigned long long)column, at,
                         t->n_chars);
                return -1;
            }
            id = t->unk_id;
            if (unknown_count) ++*unknown_count;
        }
        ids[n_ids++] = (uint32_t)id;
        if (cp == '\n') line++, column = 1;
        else column++;
        at += (size_t)n;
    }
    return (int64_t)n_ids;
}

bool tokenizer_decode_token(const tokenizer *t, uint32_t id, textbuf *out) {
    if (id >= t->vocab_size) return false;
    if (t->kind == TOKENIZER_BYTE) {
        textbuf_putc(out, (char)id);
        return true;
    }
    if (t->kind == TOKENIZER_BPE) return bpe_decode(t->bpe, &id, 1, out);
    char utf8[4];
    int n = utf8_encode(id == t->unk_id ? REPLACEMENT_CHAR : t->chars[id], utf8);
    textbuf_append(out, utf8, (size_t)n);
    return true;
}

/* ---------------------------------------------------------------- vocab.json */

char *tokenizer_to_json(const tokenizer *t) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", VOCAB_FORMAT);
    cJSON_AddStringToObject(root, "kind", tokenizer_kind_name(t->kind));
    cJSON_AddNumberToObject(root, "vocab_size", t->vocab_size);
    if (t->kind == TOKENIZER_CHAR) {
        cJSON_AddNumberToObject(root, "unk_id", t->unk_id);
        cJSON *tokens = cJSON_AddArrayToObject(root, "tokens");
        for (uint32_t i = 0; i < t->n_chars; i++) {
            char utf8[5] = {0};
            utf8_encode(t->chars[i], utf8);
            cJSON_AddItemToArray(tokens, cJSON_CreateString(utf8));
        }
    }
    if (t->kind == TOKENIZER_BPE) {
        cJSON *merges = cJSON_AddArrayToObject(root, "merges");
        for (uint32_t r = 0; r < t->bpe->n_merges; r++) {
            int pair[2] = {(int)t->bpe->merges[r].left, (int)t->bpe->merges[r].right};
            cJSON_AddItemToArray(merges, cJSON_CreateIntArray(pair, 2));
        }
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    MP_ASSERT(text != NULL, "out of memory printing a vocabulary");
    size_t n = strlen(text);
    char *with_newline = realloc(text, n + 2);
    MP_ASSERT(with_newline != NULL, "out of memory");
    memcpy(with_newline + n, "\n", 2);
    return with_newline;
}

bool tokenizer_save(const tokenizer *t, const char *path, data_err *err) {
    char *text = tokenizer_to_json(t);
    bool ok = data_write_file_atomic(path, text, strlen(text), err);
    free(text);
    return ok;
}

/* The whole of a small file, NUL-terminated; NULL with errno set when it cannot be read. */
static char *read_small_file(const char *path, size_t limit, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    textbuf b = {0};
    char chunk[1 << 14];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0 && b.len <= limit) textbuf_append(&b, chunk, n);
    fclose(f);
    if (b.len > limit) {
        textbuf_free(&b);
        errno = EFBIG;
        return NULL;
    }
    if (!b.data) textbuf_append(&b, "", 0);
    *len = b.len;
    return b.data;
}

/* "merges": [[left, right], ...], V - 256 of them, each id made before its rank (bpe_init checks that). */
static bool load_bpe(tokenizer *t, const char *path, cJSON *root, uint32_t vocab_size, data_err *err) {
    const char *hint = "rebuild it: mixpar data build NAME --tokenizer bpe --force";
    if (vocab_size <= BPE_BYTES || vocab_size > BPE_MAX_VOCAB)
        return DATA_ERR(err, "\"vocab_size\" from 257 to 4096 for a BPE tokenizer", hint,
                        "key \"vocab_size\" of '%s' is %u", path, vocab_size);
    cJSON *merges = cJSON_GetObjectItemCaseSensitive(root, "merges");
    if (!cJSON_IsArray(merges))
        return DATA_ERR(err, "\"merges\": an array of [left, right] id pairs", hint,
                        "key \"merges\" of '%s' is missing or not an array", path);
    uint32_t n = (uint32_t)cJSON_GetArraySize(merges);
    if (n != vocab_size - BPE_BYTES)
        return DATA_ERR(err, "\"vocab_size\" = 256 + the number of \"merges\"", hint,
                        "\"vocab_size\" %u with %u merges in '%s'", vocab_size, n, path);
    bpe_pair *pairs = malloc(n * sizeof *pairs);
    MP_ASSERT(pairs != NULL, "out of memory");
    uint32_t r = 0;
    cJSON *item;
    cJSON_ArrayForEach(item, merges) {
        cJSON *l = cJSON_GetArrayItem(item, 0), *rt = cJSON_GetArrayItem(item, 1);
        bool ok = cJSON_IsArray(item) && cJSON_GetArraySize(item) == 2 && cJSON_IsNumber(l) && cJSON_IsNumber(rt) &&
                  l->valuedouble >= 0 && rt->valuedouble >= 0 && l->valuedouble == (double)(uint32_t)l->valuedouble &&
                  rt->valuedouble == (double)(uint32_t)rt->valuedouble;
        if (!ok) {
            free(pairs);
            return DATA_ERR(err, "each of \"merges\" is [left, right], two whole numbers >= 0", hint,
                            "\"merges\"[%u] of '%s' is not", r, path);
        }
        pairs[r++] = (bpe_pair){(uint32_t)l->valuedouble, (uint32_t)rt->valuedouble};
    }
    bpe_model model;
    data_err why;
    bool ok = bpe_init(&model, pairs, n, &why);
    free(pairs);
    if (!ok) return DATA_ERR(err, why.expected, hint, "\"merges\" of '%s': %s", path, why.found);
    init_bpe(t, &model);
    return true;
}

static bool load_json(tokenizer *t, const char *path, cJSON *root, data_err *err) {
    const char *hint = "rebuild it: mixpar data build NAME --force";
    if (!cJSON_IsObject(root)) return DATA_ERR(err, "a JSON object", hint, "'%s' is not a JSON object", path);
    cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(format) || strcmp(format->valuestring, VOCAB_FORMAT) != 0)
        return DATA_ERR(err, "\"format\": \"" VOCAB_FORMAT "\"", hint, "key \"format\" of '%s' is %s", path,
                        cJSON_IsString(format) ? format->valuestring : "missing or not a string");
    cJSON *kind = cJSON_GetObjectItemCaseSensitive(root, "kind");
    int k = cJSON_IsString(kind) ? tokenizer_kind_from_name(kind->valuestring) : -1;
    if (k < 0)
        return DATA_ERR(err, "\"kind\": \"byte\", \"char\" or \"bpe\"", hint, "key \"kind\" of '%s' is %s", path,
                        cJSON_IsString(kind) ? kind->valuestring : "missing or not a string");
    cJSON *vocab = cJSON_GetObjectItemCaseSensitive(root, "vocab_size");
    if (!cJSON_IsNumber(vocab) || vocab->valuedouble < 1 || vocab->valuedouble > 0x110001 ||
        vocab->valuedouble != (double)(uint32_t)vocab->valuedouble)
        return DATA_ERR(err, "\"vocab_size\": a whole number >= 1", hint, "key \"vocab_size\" of '%s' is %s", path,
                        cJSON_IsNumber(vocab) ? "out of range" : "missing or not a number");
    uint32_t vocab_size = (uint32_t)vocab->valuedouble;
    if (k == TOKENIZER_BYTE) {
        if (vocab_size != 256)
            return DATA_ERR(err, "\"vocab_size\": 256 for a byte tokenizer", hint, "key \"vocab_size\" of '%s' is %u",
                            path, vocab_size);
        tokenizer_init_byte(t);
        return true;
    }
    if (k == TOKENIZER_BPE) return load_bpe(t, path, root, vocab_size, err);
    cJSON *tokens = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    if (!cJSON_IsArray(tokens))
        return DATA_ERR(err, "\"tokens\": an array of characters", hint, "key \"tokens\" of '%s' is missing or not an array",
                        path);
    uint32_t n_chars = (uint32_t)cJSON_GetArraySize(tokens);
    if (vocab_size != n_chars + 1)
        return DATA_ERR(err, "\"vocab_size\" = the number of \"tokens\" + 1 (for <unk>)", hint,
                        "\"vocab_size\" %u with %u tokens in '%s'", vocab_size, n_chars, path);
    cJSON *unk = cJSON_GetObjectItemCaseSensitive(root, "unk_id");
    if (!cJSON_IsNumber(unk) || unk->valuedouble != (double)n_chars)
        return DATA_ERR(err, "\"unk_id\" = the number of \"tokens\" (the last id)", hint,
                        "key \"unk_id\" of '%s' is %s, with %u tokens", path,
                        cJSON_IsNumber(unk) ? "another number" : "missing or not a number", n_chars);
    uint32_t *chars = malloc((n_chars ? n_chars : 1) * sizeof *chars);
    MP_ASSERT(chars != NULL, "out of memory");
    uint32_t i = 0;
    cJSON *item;
    cJSON_ArrayForEach(item, tokens) {
        uint32_t cp = 0;
        const char *s = cJSON_IsString(item) ? item->valuestring : NULL;
        size_t len = s ? strlen(s) : 0;
        int n = s ? utf8_decode(s, len, &cp) : 0;
        /* A NUL character cannot live in a cJSON string; it is not in any corpus mixpar builds. */
        if (!s || n == 0 || (size_t)n != len) {
            free(chars);
            return DATA_ERR(err, "each of \"tokens\" is a string of exactly one character", hint,
                            "\"tokens\"[%u] of '%s' is %s", i, path,
                            !s ? "not a string" : len == 0 ? "empty" : n == 0 ? "not valid UTF-8" : "longer than one character");
        }
        if (i > 0 && cp <= chars[i - 1]) {
            uint32_t before = chars[i - 1];
            free(chars);
            return DATA_ERR(err, "\"tokens\" sorted by code point, each once", hint,
                            "\"tokens\"[%u] of '%s' is U+%04X, after U+%04X at [%u]", i, path, cp, before, i - 1);
        }
        chars[i++] = cp;
    }
    init_char(t, chars, n_chars);
    return true;
}

bool tokenizer_load(tokenizer *t, const char *path, data_err *err) {
    size_t len = 0;
    char *text = read_small_file(path, 64u << 20, &len);
    if (!text)
        return DATA_ERR(err, "a readable vocab.json", "mixpar data build NAME writes data/NAME/vocab.json",
                        "cannot read '%s': %s", path, strerror(errno));
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        size_t at = end ? (size_t)(end - text) : 0;
        free(text);
        return DATA_ERR(err, "valid JSON", "rebuild it: mixpar data build NAME --force",
                        "'%s' is not valid JSON near byte offset %zu", path, at);
    }
    free(text);
    bool ok = load_json(t, path, root, err);
    cJSON_Delete(root);
    return ok;
}
