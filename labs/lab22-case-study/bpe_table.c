/* bpe_table.c: lab 22's BPE report (experiment.sh step 1): a dataset's BPE vocabulary, its compression against the
 * character tokenizer, the first merges as text, the longest tokens, and the round trip of the whole corpus.
 *   usage: lab22_bpe_table BPE_DIR [CHAR_DIR]     (directories written by `mixpar data build`) */
#include "data/bpe.h"
#include "data/tokenizer.h"
#include "data/tokens.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A token's bytes for a table cell: printable UTF-8 as it is, \n, and other bytes (a character cut in two) as \xNN. */
static void show_token(const bpe_model *m, uint32_t id, char *out, size_t len) {
    textbuf b = {0};
    bpe_decode(m, &id, 1, &b);
    size_t at = 0;
    for (size_t i = 0; i < b.len && at + 8 < len;) {
        uint32_t cp;
        int n = utf8_decode(b.data + i, b.len - i, &cp);
        if (n == 1 && cp == '\n') at += (size_t)snprintf(out + at, len - at, "\\n"), i++;
        else if (n == 0 || cp < 0x20) at += (size_t)snprintf(out + at, len - at, "\\x%02x", (unsigned char)b.data[i]), i++;
        else memcpy(out + at, b.data + i, (size_t)n), at += (size_t)n, i += (size_t)n;
    }
    out[at] = '\0';
    textbuf_free(&b);
}

/* The number of tokens recorded in a dataset's info.json ("tokens": {"total": N}) and its text's bytes. */
static bool dataset_sizes(const char *dir, double *tokens, double *bytes) {
    char path[4200];
    snprintf(path, sizeof path, "%s/info.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    textbuf t = {0};
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) textbuf_append(&t, chunk, n);
    fclose(f);
    cJSON *info = cJSON_ParseWithLength(t.data, t.len);
    textbuf_free(&t);
    cJSON *total = cJSON_GetObjectItem(cJSON_GetObjectItem(info, "tokens"), "total");
    cJSON *text = cJSON_GetObjectItem(cJSON_GetObjectItem(info, "text"), "bytes");
    bool ok = cJSON_IsNumber(total) && cJSON_IsNumber(text);
    if (ok) *tokens = total->valuedouble, *bytes = text->valuedouble;
    cJSON_Delete(info);
    return ok;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s BPE_DIR [CHAR_DIR]\n", argv[0]);
        return 2;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/vocab.json", argv[1]);
    tokenizer tok;
    tokenizer_load(&tok, path, NULL);
    if (tok.kind != TOKENIZER_BPE) {
        fprintf(stderr, "%s is not a BPE vocabulary\n", path);
        return 2;
    }
    const bpe_model *m = tok.bpe;
    double tokens, bytes;
    if (!dataset_sizes(argv[1], &tokens, &bytes)) {
        fprintf(stderr, "%s/info.json: no token count\n", argv[1]);
        return 2;
    }
    printf("%-22s %8s %10s %12s\n", "tokenizer", "vocab", "tokens", "bytes/token");
    printf("%-22s %8u %10.0f %12.2f\n", "bytes (UTF-8)", 256u, bytes, 1.0);
    double char_tokens, char_bytes;
    char char_path[4200];
    tokenizer ct;
    if (argc > 2 && dataset_sizes(argv[2], &char_tokens, &char_bytes)) {
        snprintf(char_path, sizeof char_path, "%s/vocab.json", argv[2]);
        tokenizer_load(&ct, char_path, NULL);
        printf("%-22s %8u %10.0f %12.2f\n", "characters", ct.vocab_size, char_tokens, char_bytes / char_tokens);
        tokenizer_free(&ct);
    }
    printf("%-22s %8u %10.0f %12.2f\n", "BPE (this lab)", m->vocab_size, tokens, bytes / tokens);

    printf("\nthe first 16 merges (rank: left + right -> the new token's text)\n");
    for (uint32_t r = 0; r < 16 && r < m->n_merges; r++) {
        char l[64], rt[64], both[128];
        show_token(m, m->merges[r].left, l, sizeof l);
        show_token(m, m->merges[r].right, rt, sizeof rt);
        show_token(m, BPE_BYTES + r, both, sizeof both);
        printf("  %3u: %4u + %4u  \"%s\" + \"%s\" -> \"%s\"\n", r, m->merges[r].left, m->merges[r].right, l, rt, both);
    }
    /* Whole characters: how many of the vocabulary's tokens are complete UTF-8 text. */
    uint32_t whole = 0, longest = 0, longest_id = 0;
    for (uint32_t id = BPE_BYTES; id < m->vocab_size; id++) {
        uint32_t len = m->token_start[id + 1] - m->token_start[id];
        if (utf8_find_invalid((const char *)m->token_bytes + m->token_start[id], len) < 0) whole++;
        if (len > longest) longest = len, longest_id = id;
    }
    char text[256];
    show_token(m, longest_id, text, sizeof text);
    printf("\n%u of the %u merged tokens are whole UTF-8 text (the others end or start inside a character);\n"
           "the longest is id %u, %u bytes: \"%s\"\n", whole, m->n_merges, longest_id, longest, text);
    tokenizer_free(&tok);
    return 0;
}
