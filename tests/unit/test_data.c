/* test_data.c: Criterion tests of core/data: tokenizers, token files (and every corruption), llm.c shards,
 * the split, the loader's order and resume, corpus cleaning, the generators and dataset builds. */
#include "unit_files.h"
#include "data/corpus.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/sha256.h"
#include "data/synth.h"
#include "data/tokenizer.h"
#include "data/tokens.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- helpers */

static bool same_file(const char *a, const char *b) {
    size_t na, nb;
    uint8_t *pa = unit_read_file(a, &na), *pb = unit_read_file(b, &nb);
    bool same = na == nb && memcmp(pa, pb, na) == 0;
    free(pa);
    free(pb);
    return same;
}

static int count_dir_entries(const char *dir) {
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Every needle must occur in the error's message (expected, found and hint together). */
static void expect_message(const data_err *e, const char *what, const char *const *needles) {
    char line[1400];
    data_err_line(e, line, sizeof line);
    for (int i = 0; needles[i]; i++)
        cr_expect(strstr(line, needles[i]) != NULL, "%s: the message should mention \"%s\"; it is: %s", what,
                  needles[i], line);
}
#define EXPECT_MESSAGE(e, what, ...) expect_message((e), (what), (const char *const[]){__VA_ARGS__, NULL})

static void put_le(uint8_t *p, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* ---------------------------------------------------------------- sha256 */

Test(sha256, matches_the_fips_180_examples) {
    static const struct { const char *msg; const char *hex; } cases[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    char hex[65];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sha256_hex(cases[i].msg, strlen(cases[i].msg), hex);
        cr_expect_str_eq(hex, cases[i].hex, "sha256(\"%s\")", cases[i].msg);
    }
    /* A million 'a' fed in uneven pieces: exercises the block buffering and the two-block padding. */
    sha256_ctx ctx;
    uint8_t digest[32];
    char a[997];
    memset(a, 'a', sizeof a);
    sha256_init(&ctx);
    size_t left = 1000000;
    while (left) {
        size_t n = left < sizeof a ? left : sizeof a;
        sha256_update(&ctx, a, n);
        left -= n;
    }
    sha256_final(&ctx, digest);
    cr_expect_eq(digest[0], 0xcd);
    cr_expect_eq(digest[31], 0xd0, "sha256 of 10^6 'a' is cdc76e5c...046d39ccc7112cd0");
}

/* ---------------------------------------------------------------- UTF-8 and tokenizers */

Test(utf8, decodes_valid_and_rejects_every_kind_of_invalid) {
    uint32_t cp = 0;
    cr_expect_eq(utf8_decode("\xe4\xb8\xad", 3, &cp), 3);
    cr_expect_eq(cp, 0x4E2D, "中 is U+4E2D");
    cr_expect_eq(utf8_decode("\xf0\x9f\x98\x80", 4, &cp), 4);
    cr_expect_eq(cp, 0x1F600);
    static const struct { const char *bytes; size_t n; const char *why; } bad[] = {
        {"\x80", 1, "stray continuation byte"},   {"\xc0\x80", 2, "overlong NUL"},
        {"\xe0\x80\x80", 3, "overlong 3-byte"},   {"\xed\xa0\x80", 3, "surrogate U+D800"},
        {"\xf4\x90\x80\x80", 4, "above U+10FFFF"}, {"\xe4\xb8", 2, "truncated"},
        {"\xe4\x41\xad", 3, "bad continuation"},  {"\xff", 1, "byte 0xFF"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_eq(utf8_decode(bad[i].bytes, bad[i].n, &cp), 0, "%s must be rejected", bad[i].why);
    cr_expect_eq(utf8_find_invalid("ab\xe4\xb8\xad\xff", 6), 5);
    cr_expect_eq(utf8_find_invalid("ab", 2), -1);
}

Test(utf8, encode_then_decode_is_identity_for_every_code_point) {
    char buf[4];
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        int n = utf8_encode(cp, buf);
        uint32_t back = 0;
        cr_assert_eq(utf8_decode(buf, (size_t)n, &back), n, "U+%04X", cp);
        cr_assert_eq(back, cp);
    }
}

Test(tokenizer, byte_round_trip_of_all_bytes_and_chinese) {
    tokenizer t;
    tokenizer_init_byte(&t);
    cr_expect_eq(t.vocab_size, 256);
    char text[256 + 16];
    for (int i = 0; i < 256; i++) text[i] = (char)i;
    memcpy(text + 256, "床前明月光", 15);
    size_t len = 256 + 15;
    uint32_t ids[300];
    cr_assert_eq(tokenizer_encode(&t, text, len, false, ids, NULL, NULL), (int64_t)len, "one id per byte");
    cr_expect_eq(ids[200], 200);
    textbuf out = {0};
    for (size_t i = 0; i < len; i++) cr_assert(tokenizer_decode_token(&t, ids[i], &out));
    cr_expect_eq(out.len, len);
    cr_expect(memcmp(out.data, text, len) == 0, "bytes come back unchanged");
    cr_expect(!tokenizer_decode_token(&t, 256, &out), "id 256 is outside a byte vocabulary");
    textbuf_free(&out);
}

static const char *poem = "《静夜思》\n作者：李白\n床前明月光，疑是地上霜。\n举头望明月，低头思故乡。\n";

Test(tokenizer, char_vocabulary_is_sorted_deterministic_and_ends_with_unk) {
    tokenizer a, b;
    cr_assert(tokenizer_build_char(&a, poem, strlen(poem), NULL));
    cr_assert(tokenizer_build_char(&b, poem, strlen(poem), NULL));
    cr_expect_eq(a.n_chars, b.n_chars);
    cr_expect(memcmp(a.chars, b.chars, a.n_chars * sizeof *a.chars) == 0, "same text, same ids");
    for (uint32_t i = 1; i < a.n_chars; i++) cr_assert_lt(a.chars[i - 1], a.chars[i], "sorted by code point, no repeats");
    cr_expect_eq(a.chars[0], '\n', "newline has the smallest code point here");
    cr_expect_eq(a.unk_id, a.n_chars);
    cr_expect_eq(a.vocab_size, a.n_chars + 1, "V = characters + <unk>");
    /* 明, 月, 头 and the punctuation repeat: fewer ids than characters. */
    uint32_t ids[256];
    int64_t n = tokenizer_encode(&a, poem, strlen(poem), false, ids, NULL, NULL);
    cr_expect_eq(n, 38, "38 characters, newlines included (got %lld)", (long long)n);
    cr_expect_lt(a.n_chars, (uint32_t)n);
    tokenizer_free(&a);
    tokenizer_free(&b);
}

Test(tokenizer, char_round_trip_of_multibyte_chinese) {
    tokenizer t;
    cr_assert(tokenizer_build_char(&t, poem, strlen(poem), NULL));
    uint32_t ids[256];
    int64_t n = tokenizer_encode(&t, poem, strlen(poem), false, ids, NULL, NULL);
    cr_assert_gt(n, 0);
    textbuf out = {0};
    for (int64_t i = 0; i < n; i++) cr_assert(tokenizer_decode_token(&t, ids[i], &out));
    cr_expect_str_eq(out.data, poem, "decode(encode(text)) == text");
    cr_expect_eq(ids[0], tokenizer_char_id(&t, 0x300A), "《 is U+300A");
    textbuf_free(&out);
    tokenizer_free(&t);
}

Test(tokenizer, unknown_character_is_an_error_naming_it_and_where) {
    tokenizer t;
    cr_assert(tokenizer_build_char(&t, "abc\n", 4, NULL));
    uint32_t ids[16];
    data_err e;
    cr_expect_eq(tokenizer_encode(&t, "ab\nc龘", 7, false, ids, NULL, &e), -1);
    EXPECT_MESSAGE(&e, "unknown character", "'龘' (U+9F98)", "at character 4", "line 2, column 2", "byte offset 4",
                   "--unk");
    tokenizer_free(&t);
}

Test(tokenizer, unknown_characters_map_to_unk_when_asked) {
    tokenizer t;
    cr_assert(tokenizer_build_char(&t, "abc\n", 4, NULL));
    uint32_t ids[16];
    uint64_t unknown = 0;
    const char *text = "a龘b霜";
    int64_t n = tokenizer_encode(&t, text, strlen(text), true, ids, &unknown, NULL);
    cr_assert_eq(n, 4);
    cr_expect_eq(unknown, 2);
    cr_expect_eq(ids[1], t.unk_id);
    cr_expect_eq(ids[3], t.unk_id);
    textbuf out = {0};
    for (int i = 0; i < 4; i++) tokenizer_decode_token(&t, ids[i], &out);
    cr_expect_str_eq(out.data, "a\xef\xbf\xbd" "b\xef\xbf\xbd", "<unk> decodes to U+FFFD");
    textbuf_free(&out);
    tokenizer_free(&t);
}

Test(tokenizer, invalid_utf8_is_an_error_with_its_byte_offset) {
    tokenizer t;
    data_err e;
    cr_expect(!tokenizer_build_char(&t, "ok\xe4\xb8", 4, &e));
    EXPECT_MESSAGE(&e, "building from invalid UTF-8", "byte offset 2", "e4 b8");
    cr_assert(tokenizer_build_char(&t, "ok", 2, NULL));
    uint32_t ids[8];
    cr_expect_eq(tokenizer_encode(&t, "o\xffk", 3, true, ids, NULL, &e), -1, "even with map_unknown");
    EXPECT_MESSAGE(&e, "encoding invalid UTF-8", "byte offset 1");
    tokenizer_free(&t);
}

/* ---------------------------------------------------------------- vocab.json */

Test(vocab, char_and_byte_vocabularies_round_trip_through_json) {
    char *dir = unit_tmpdir("data");
    char path[600];
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    tokenizer a, b;
    const char *text = "\t\n \"\\ab中文龘\xf0\x9f\x98\x80";
    cr_assert(tokenizer_build_char(&a, text, strlen(text), NULL));
    cr_assert(tokenizer_save(&a, path, NULL));
    cr_assert(tokenizer_load(&b, path, NULL));
    cr_expect_eq(b.kind, TOKENIZER_CHAR);
    cr_expect_eq(b.vocab_size, a.vocab_size);
    cr_expect(memcmp(a.chars, b.chars, a.n_chars * sizeof *a.chars) == 0, "control chars, quotes, CJK, emoji survive");
    tokenizer_free(&a);
    tokenizer_free(&b);
    tokenizer_init_byte(&a);
    cr_assert(tokenizer_save(&a, path, NULL));
    cr_assert(tokenizer_load(&b, path, NULL));
    cr_expect_eq(b.kind, TOKENIZER_BYTE);
    cr_expect_eq(b.vocab_size, 256);
    cr_expect_eq(count_dir_entries(dir), 1, "no temporary file left behind");
    unit_remove_tree(dir);
}

Test(vocab, every_broken_field_is_named) {
    static const struct { const char *json; const char *needle; } cases[] = {
        {"{\"format\": \"mixpar-vocab-1\", \"kind\": ", "not valid JSON"},
        {"[1, 2]", "not a JSON object"},
        {"{\"format\": \"other\", \"kind\": \"char\"}", "\"format\""},
        {"{\"format\": \"mixpar-vocab-1\", \"kind\": \"wordpiece\", \"vocab_size\": 3}", "\"kind\""},
        {"{\"format\": \"mixpar-vocab-1\", \"kind\": \"byte\", \"vocab_size\": 255}", "256"},
        {"{\"format\": \"mixpar-vocab-1\", \"kind\": \"char\", \"vocab_size\": 3, \"unk_id\": 2, \"tokens\": [\"a\"]}",
         "\"vocab_size\" 3 with 1 tokens"},
        {"{\"format\": \"mixpar-vocab-1\", \"kind\": \"char\", \"vocab_size\": 3, \"unk_id\": 1, \"tokens\": [\"a\", \"b\"]}",
         "\"unk_id\""},
        {"{\"format\": \"mixpar-vocab-1\", \"kind\": \"char\", \"vocab_size\": 3, \"unk_id\": 2, \"tokens\": [\"b\", \"a\"]}",
         "\"tokens\"[1]"},
        {"{\"format\": \"mixpar-vocab-1\", \"kind\": \"char\", \"vocab_size\": 3, \"unk_id\": 2, \"tokens\": [\"a\", \"bc\"]}",
         "longer than one character"},
        {"{\"format\": \"mixpar-vocab-1\", \"kind\": \"char\", \"vocab_size\": 2, \"unk_id\": 1, \"tokens\": [7]}",
         "not a string"},
        {"{\"format\": \"mixpar-vocab-1\", \"kind\": \"bpe\", \"vocab_size\": 3}", "from 257 to 4096"},
        {"{\"format\": \"mixpar-vocab-1\", \"kind\": \"bpe\", \"vocab_size\": 258, \"merges\": [[1, 2]]}",
         "256 + the number of \"merges\""},
        {"{\"format\": \"mixpar-vocab-1\", \"kind\": \"bpe\", \"vocab_size\": 257, \"merges\": [[256, 2]]}",
         "merge 0 joins (256, 2)"},
        {"{\"format\": \"mixpar-vocab-1\", \"kind\": \"bpe\", \"vocab_size\": 258, \"merges\": [[1, 2], [1, 2]]}",
         "as merge 0 does"},
        {"{\"format\": \"mixpar-vocab-1\", \"kind\": \"bpe\", \"vocab_size\": 257, \"merges\": [[1]]}",
         "\"merges\"[0]"},
    };
    char *dir = unit_tmpdir("data");
    char path[600];
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unit_write_file(path, cases[i].json, strlen(cases[i].json));
        tokenizer t;
        data_err e;
        cr_expect(!tokenizer_load(&t, path, &e), "case %zu must be rejected: %s", i, cases[i].json);
        EXPECT_MESSAGE(&e, cases[i].json, cases[i].needle);
    }
    unit_remove_tree(dir);
}

Test(vocab, missing_file_exits_with_code_2, .exit_code = 2) {
    tokenizer t;
    tokenizer_load(&t, "/nonexistent/mixpar/vocab.json", NULL);
}

/* ---------------------------------------------------------------- token files */

/* A valid MXPTOK01 file of n tokens (t_i = (7 i) mod vocab) at dir/name; returns its path. */
static const char *write_test_tokens(const char *dir, const char *name, uint64_t n, uint32_t vocab, char *path,
                                     size_t path_len) {
    snprintf(path, path_len, "%s/%s", dir, name);
    uint32_t *t = malloc(n * sizeof *t);
    for (uint64_t i = 0; i < n; i++) t[i] = (uint32_t)((7 * i) % vocab);
    cr_assert(tokfile_write(path, t, n, vocab, NULL));
    free(t);
    return path;
}

Test(tokfile, write_then_open_round_trips_with_the_documented_header) {
    char *dir = unit_tmpdir("data");
    char path[600];
    uint32_t tokens[] = {0, 1, 2, 65535, 300, 7};
    snprintf(path, sizeof path, "%s/a.tokens", dir);
    cr_assert(tokfile_write(path, tokens, 6, 65536, NULL));
    size_t n;
    uint8_t *raw = unit_read_file(path, &n);
    cr_expect_eq(n, 64 + 6 * 2, "header + N * 2 bytes");
    cr_expect(memcmp(raw, "MXPTOK01", 8) == 0, "magic at offset 0");
    cr_expect_eq(raw[8], 2, "token_width at offset 8");
    cr_expect_eq(raw[12] | raw[13] << 8 | raw[14] << 16, 65536, "vocab_size at offset 12");
    cr_expect_eq(raw[16], 6, "token_count at offset 16");
    for (int i = 24; i < 64; i++) cr_expect_eq(raw[i], 0, "reserved byte %d is zero", i);
    cr_expect_eq(raw[64 + 3 * 2] | raw[64 + 3 * 2 + 1] << 8, 65535, "little-endian uint16 tokens");
    free(raw);

    tokfile *f = tokfile_open(path, NULL);
    cr_assert_not_null(f);
    cr_expect_eq(f->format, TOKFILE_MIXPAR);
    cr_expect_eq(f->token_width, 2);
    cr_expect_eq(f->vocab_size, 65536);
    cr_expect_eq(f->token_count, 6);
    cr_expect_eq(f->max_token, 65535);
    for (int i = 0; i < 6; i++) cr_expect_eq(tokfile_get(f, i), tokens[i]);
    int32_t out[3];
    tokfile_read(f, 2, 3, out);
    cr_expect(out[0] == 2 && out[1] == 65535 && out[2] == 300, "tokfile_read copies a range as int32");
    tokfile_close(f);
    unit_remove_tree(dir);
}

Test(tokfile, large_vocabularies_use_four_byte_tokens) {
    char *dir = unit_tmpdir("data");
    char path[600];
    uint32_t tokens[] = {69999, 0, 65536};
    snprintf(path, sizeof path, "%s/wide.tokens", dir);
    cr_assert(tokfile_write(path, tokens, 3, 70000, NULL));
    tokfile *f = tokfile_open(path, NULL);
    cr_expect_eq(f->token_width, 4);
    cr_expect_eq(f->file_bytes, 64 + 3 * 4);
    cr_expect_eq(tokfile_get(f, 0), 69999);
    cr_expect_eq(tokfile_get(f, 2), 65536);
    tokfile_close(f);
    unit_remove_tree(dir);
}

Test(tokfile, a_failed_write_leaves_the_old_file_and_no_temporary) {
    char *dir = unit_tmpdir("data");
    char path[600];
    write_test_tokens(dir, "d.tokens", 100, 50, path, sizeof path);
    size_t n_before;
    uint8_t *before = unit_read_file(path, &n_before);
    uint32_t bad[] = {1, 2, 99};
    data_err e;
    cr_expect(!tokfile_write(path, bad, 3, 50, &e), "token 99 >= vocab 50 is refused");
    EXPECT_MESSAGE(&e, "bad token on write", "token 99 at index 2");
    size_t n_after;
    uint8_t *after = unit_read_file(path, &n_after);
    cr_expect(n_before == n_after && memcmp(before, after, n_after) == 0, "the old file is untouched");
    cr_expect_eq(count_dir_entries(dir), 1, "no temporary file left behind");
    char nowhere[700];
    snprintf(nowhere, sizeof nowhere, "%s/no/such/dir/x.tokens", dir);
    cr_expect(!tokfile_write(nowhere, bad, 2, 50, &e));
    EXPECT_MESSAGE(&e, "unwritable directory", "cannot create");
    free(before);
    free(after);
    unit_remove_tree(dir);
}

/* A corruption of a good 10-token file (vocab 50, 2-byte tokens): bytes patched at an offset and/or the
 * file cut to a length, and what the error must say. */
typedef struct {
    const char *name;
    long offset;          /* -1: no patch */
    const char *patch;
    int patch_len;
    long truncate_to;     /* -1: keep the length */
    long append;          /* extra bytes at the end */
    const char *needles[4];
} corruption;

static const corruption corruptions[] = {
    {"empty file", -1, NULL, 0, 0, 0, {"empty (0 bytes)", "byte offset 0"}},
    {"5 bytes", -1, NULL, 0, 5, 0, {"only 5 bytes", "truncated at byte offset 5"}},
    {"header cut at 40", -1, NULL, 0, 40, 0, {"inside the header", "byte offset 40"}},
    {"wrong magic", 0, "GARBAGE!", 8, -1, 0, {"magic", "at byte offset 0", "47 41 52 42"}},
    {"newer version", 6, "03", 2, -1, 0, {"version \"03\" at byte offset 6"}},
    {"token width 3", 8, "\x03\0\0\0", 4, -1, 0, {"token_width 3 at byte offset 8"}},
    {"vocab 0", 12, "\0\0\0\0", 4, -1, 0, {"vocab_size 0 at byte offset 12"}},
    {"vocab too big for uint16", 12, "\x70\x11\x01\0", 4, -1, 0, {"vocab_size 70000 at byte offset 12"}},
    {"reserved byte set", 30, "\x01", 1, -1, 0, {"byte 0x01 at byte offset 30", "reserved"}},
    {"zero tokens", 16, "\0", 1, 64, 0, {"token_count 0 at byte offset 16"}},
    {"data truncated", -1, NULL, 0, 83, 0, {"truncated", "ends at byte offset 83, 1 bytes short", "64 + 10 x 2 = 84"}},
    {"extra bytes", -1, NULL, 0, -1, 3, {"3 extra bytes after byte offset 84"}},
    {"count larger than data", 16, "\x0b", 1, -1, 0, {"64 + 11 x 2 = 86", "token count at byte offset 16"}},
    {"token >= vocab", 64 + 5 * 2, "\x32\0", 2, -1, 0, {"token 50 at index 5 (byte offset 74)", "vocab_size is 50"}},
    {"token 65535", 64 + 9 * 2, "\xff\xff", 2, -1, 0, {"token 65535 at index 9 (byte offset 82)"}},
};

Test(tokfile, every_corruption_is_rejected_with_its_byte_offset) {
    char *dir = unit_tmpdir("data");
    char good[600], bad[600];
    write_test_tokens(dir, "good.tokens", 10, 50, good, sizeof good);
    size_t n;
    uint8_t *raw = unit_read_file(good, &n);
    cr_assert_eq(n, 84);
    snprintf(bad, sizeof bad, "%s/bad.tokens", dir);
    for (size_t c = 0; c < sizeof corruptions / sizeof corruptions[0]; c++) {
        const corruption *k = &corruptions[c];
        uint8_t buf[200];
        memcpy(buf, raw, n);
        size_t len = n;
        if (k->offset >= 0) memcpy(buf + k->offset, k->patch, (size_t)k->patch_len);
        if (k->truncate_to >= 0) len = (size_t)k->truncate_to;
        for (long i = 0; i < k->append; i++) buf[len++] = 0;
        unit_write_file(bad, buf, len);
        data_err e;
        tokfile *f = tokfile_open(bad, &e);
        cr_expect_null(f, "%s: must be rejected", k->name);
        tokfile_close(f);
        for (int i = 0; i < 4 && k->needles[i]; i++) EXPECT_MESSAGE(&e, k->name, k->needles[i]);
    }
    free(raw);
    unit_remove_tree(dir);
}

Test(tokfile, missing_file_and_directory_are_rejected) {
    data_err e;
    cr_expect_null(tokfile_open("/nonexistent/x.tokens", &e));
    EXPECT_MESSAGE(&e, "missing file", "cannot open", "No such file");
    cr_expect_null(tokfile_open("/tmp", &e));
    EXPECT_MESSAGE(&e, "directory", "not a regular file");
}

/* Tests that end in exit(2) clean up their directory from an atexit handler. */
static char *dir_to_remove_at_exit;
static void remove_dir_at_exit(void) {
    if (dir_to_remove_at_exit) unit_remove_tree(dir_to_remove_at_exit);
}
static char *make_tmpdir_removed_at_exit(void) {
    dir_to_remove_at_exit = unit_tmpdir("data");
    atexit(remove_dir_at_exit);
    return dir_to_remove_at_exit;
}

Test(tokfile, truncated_file_exits_with_code_2, .exit_code = 2) {
    char *dir = make_tmpdir_removed_at_exit();
    char path[600];
    write_test_tokens(dir, "t.tokens", 10, 50, path, sizeof path);
    cr_assert_eq(truncate(path, 70), 0);
    tokfile_open(path, NULL);
}

Test(tokfile, token_out_of_vocabulary_exits_with_code_2, .exit_code = 2) {
    char *dir = make_tmpdir_removed_at_exit();
    char path[600];
    write_test_tokens(dir, "t.tokens", 10, 50, path, sizeof path);
    FILE *f = fopen(path, "r+b");
    fseek(f, 64 + 4, SEEK_SET);
    fputc(200, f);
    fclose(f);
    tokfile_open(path, NULL);
}

/* ---------------------------------------------------------------- llm.c shards */

/* An llm.c shard: 256 int32 header (magic, version, count), then tokens of `width` bytes. */
static void write_llmc_shard(const char *path, int32_t magic, int32_t version, int32_t count, const uint32_t *tokens,
                             int n, int width) {
    size_t len = 1024 + (size_t)n * width;
    uint8_t *buf = calloc(1, len);
    put_le(buf, (uint32_t)magic, 4);
    put_le(buf + 4, (uint32_t)version, 4);
    put_le(buf + 8, (uint32_t)count, 4);
    for (int i = 0; i < n; i++) put_le(buf + 1024 + (size_t)i * width, tokens[i], width);
    unit_write_file(path, buf, len);
    free(buf);
}

Test(llmc, gpt2_and_llama3_shards_are_read) {
    char *dir = unit_tmpdir("data");
    char path[600];
    uint32_t gpt2[] = {50256, 464, 2068, 7586, 0};
    snprintf(path, sizeof path, "%s/fineweb_val_000000.bin", dir);
    write_llmc_shard(path, 20240520, 1, 5, gpt2, 5, 2);
    tokfile *f = tokfile_open(path, NULL);
    cr_expect_eq(f->format, TOKFILE_LLMC_GPT2);
    cr_expect_eq(f->header_bytes, 1024);
    cr_expect_eq(f->token_width, 2);
    cr_expect_eq(f->vocab_size, 50257);
    cr_expect_eq(f->token_count, 5);
    for (int i = 0; i < 5; i++) cr_expect_eq(tokfile_get(f, i), gpt2[i]);
    tokfile_close(f);

    uint32_t llama[] = {128000, 9906, 128255};
    write_llmc_shard(path, 20240801, 7, 3, llama, 3, 4);
    f = tokfile_open(path, NULL);
    cr_expect_eq(f->format, TOKFILE_LLMC_LLAMA3);
    cr_expect_eq(f->token_width, 4);
    cr_expect_eq(tokfile_get(f, 2), 128255);
    tokfile_close(f);
    unit_remove_tree(dir);
}

Test(llmc, bad_shards_are_rejected_with_offsets) {
    char *dir = unit_tmpdir("data");
    char path[600];
    snprintf(path, sizeof path, "%s/shard.bin", dir);
    uint32_t tokens[] = {1, 2, 3, 4};
    data_err e;
    write_llmc_shard(path, 20240520, 2, 4, tokens, 4, 2);
    cr_expect_null(tokfile_open(path, &e));
    EXPECT_MESSAGE(&e, "wrong version", "version 2 at byte offset 4");
    write_llmc_shard(path, 20240520, 1, 5, tokens, 4, 2);
    cr_expect_null(tokfile_open(path, &e));
    EXPECT_MESSAGE(&e, "count too big", "1024 + 5 x 2 = 1034", "2 bytes short");
    write_llmc_shard(path, 20240520, 1, 0, tokens, 0, 2);
    cr_expect_null(tokfile_open(path, &e));
    EXPECT_MESSAGE(&e, "zero tokens", "token count 0 at byte offset 8");
    uint32_t big[] = {1, 50257};
    write_llmc_shard(path, 20240520, 1, 2, big, 2, 2);
    cr_expect_null(tokfile_open(path, &e));
    EXPECT_MESSAGE(&e, "token beyond GPT-2", "token 50257 at index 1 (byte offset 1026)");
    uint8_t header[500] = {0};
    put_le(header, 20240520, 4);
    unit_write_file(path, header, sizeof header);
    cr_expect_null(tokfile_open(path, &e));
    EXPECT_MESSAGE(&e, "truncated llm.c header", "1024-byte", "byte offset 500");
    unit_remove_tree(dir);
}

/* ---------------------------------------------------------------- split */

Test(split, last_fraction_is_held_out_rounded_down) {
    static const struct { uint64_t n; double frac; uint64_t train, val; } cases[] = {
        {1000, 0.1, 900, 100}, {1001, 0.1, 901, 100}, {7, 0.5, 4, 3}, {5, 0.0, 5, 0}, {29573, 0.1, 26616, 2957},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        data_split s;
        cr_assert(data_split_tokens(cases[i].n, cases[i].frac, &s, NULL));
        cr_expect(s.n_train == cases[i].train && s.n_val == cases[i].val, "N=%llu f=%g: got %llu + %llu",
                  (unsigned long long)cases[i].n, cases[i].frac, (unsigned long long)s.n_train,
                  (unsigned long long)s.n_val);
    }
    data_split s;
    data_err e;
    cr_expect(!data_split_tokens(10, 1.0, &s, &e));
    cr_expect(!data_split_tokens(10, -0.1, &s, &e));
    cr_expect(!data_split_tokens(10, NAN, &s, &e), "NaN is refused");
}

/* ---------------------------------------------------------------- loader */

/* A file whose token i is i (vocab 65536), so a batch shows which positions it read. */
static tokfile *identity_tokens(const char *dir, uint64_t n) {
    char path[600];
    snprintf(path, sizeof path, "%s/identity.tokens", dir);
    uint32_t *t = malloc(n * sizeof *t);
    for (uint64_t i = 0; i < n; i++) t[i] = (uint32_t)i;
    cr_assert(tokfile_write(path, t, n, 65536, NULL));
    free(t);
    return tokfile_open(path, NULL);
}

Test(loader, sequential_batches_are_contiguous_and_targets_shifted_by_one) {
    char *dir = unit_tmpdir("data");
    tokfile *f = identity_tokens(dir, 101); /* W = 100 / 4 = 25 windows, 12 batches of B=2 */
    loader l;
    cr_assert(loader_init(&l, f, 0, 101, 2, 4, LOADER_SEQUENTIAL, 0, NULL));
    cr_expect_eq(l.n_windows, 25);
    cr_expect_eq(l.batches_per_epoch, 12);
    for (int batch = 0; batch < 12; batch++) {
        loader_next(&l);
        for (int i = 0; i < 2 * 4; i++) {
            cr_assert_eq(l.inputs[i], batch * 8 + i, "batch %d reads tokens %d.. in order", batch, batch * 8);
            cr_assert_eq(l.targets[i], l.inputs[i] + 1, "targets are the next tokens");
        }
    }
    loader_next(&l);
    cr_expect_eq(l.state.epoch, 1, "after 12 batches the next one starts epoch 1");
    cr_expect_eq(l.inputs[0], 0, "... from the beginning again");
    loader_free(&l);
    tokfile_close(f);
    unit_remove_tree(dir);
}

Test(loader, reads_only_inside_its_range) {
    char *dir = unit_tmpdir("data");
    tokfile *f = identity_tokens(dir, 1000);
    data_split s;
    data_split_tokens(1000, 0.1, &s, NULL);
    loader l;
    cr_assert(loader_init(&l, f, s.n_train, 1000, 3, 8, LOADER_SHUFFLE, 5, NULL));
    for (int b = 0; b < 50; b++) {
        loader_next(&l);
        for (int i = 0; i < 3 * 8; i++) {
            cr_assert_geq(l.inputs[i], 900, "validation batches read only the held-out tokens");
            cr_assert_lt(l.targets[i], 1000);
        }
    }
    loader_free(&l);
    tokfile_close(f);
    unit_remove_tree(dir);
}

Test(loader, shuffle_is_seeded_covers_every_window_once_and_changes_per_epoch) {
    char *dir = unit_tmpdir("data");
    tokfile *f = identity_tokens(dir, 8 * 40 + 1); /* 40 windows of T=8, B=4: 10 batches */
    loader a, b, c;
    cr_assert(loader_init(&a, f, 0, f->token_count, 4, 8, LOADER_SHUFFLE, 42, NULL));
    cr_assert(loader_init(&b, f, 0, f->token_count, 4, 8, LOADER_SHUFFLE, 42, NULL));
    cr_assert(loader_init(&c, f, 0, f->token_count, 4, 8, LOADER_SHUFFLE, 43, NULL));
    int first[2][40], other_seed_differs = 0;
    for (int epoch = 0; epoch < 2; epoch++) {
        int seen[40] = {0};
        for (int batch = 0; batch < 10; batch++) {
            loader_next(&a);
            loader_next(&b);
            loader_next(&c);
            cr_assert(memcmp(a.inputs, b.inputs, 4 * 8 * sizeof(int32_t)) == 0, "same seed, same batches");
            other_seed_differs |= memcmp(a.inputs, c.inputs, 4 * 8 * sizeof(int32_t)) != 0;
            for (int row = 0; row < 4; row++) {
                int32_t start = a.inputs[row * 8];
                cr_assert_eq(start % 8, 0, "rows start on window boundaries");
                for (int t = 0; t < 8; t++) cr_assert_eq(a.targets[row * 8 + t], start + t + 1);
                seen[start / 8]++;
                first[epoch][batch * 4 + row] = start / 8;
            }
        }
        for (int w = 0; w < 40; w++) cr_expect_eq(seen[w], 1, "epoch %d uses window %d exactly once", epoch, w);
    }
    cr_expect(other_seed_differs, "another seed gives another order");
    cr_expect(memcmp(first[0], first[1], sizeof first[0]) != 0, "epochs 0 and 1 have different orders");
    bool identity = true;
    for (int w = 0; w < 40; w++) identity &= first[0][w] == w;
    cr_expect(!identity, "a shuffled epoch is not in file order");
    loader_free(&a);
    loader_free(&b);
    loader_free(&c);
    tokfile_close(f);
    unit_remove_tree(dir);
}

/* Takes k batches, saves, takes m more (recorded); a fresh loader restored to the save must repeat them. */
static void check_resume(loader_order order, int k, int m) {
    char *dir = unit_tmpdir("data");
    tokfile *f = identity_tokens(dir, 5 * 16 + 3); /* 5 windows of T=16, B=2: 2 batches per epoch */
    loader a, b;
    cr_assert(loader_init(&a, f, 0, f->token_count, 2, 16, order, 7, NULL));
    for (int i = 0; i < k; i++) loader_next(&a);
    loader_state saved = a.state;
    int32_t *want = malloc((size_t)m * 2 * 2 * 16 * sizeof(int32_t));
    for (int i = 0; i < m; i++) {
        loader_next(&a);
        memcpy(want + (size_t)i * 64, a.inputs, 32 * sizeof(int32_t));
        memcpy(want + (size_t)i * 64 + 32, a.targets, 32 * sizeof(int32_t));
    }
    cr_assert(loader_init(&b, f, 0, f->token_count, 2, 16, order, 7, NULL));
    loader_next(&b); /* move it somewhere else first: restore must not depend on where it was */
    cr_assert(loader_restore(&b, saved, NULL));
    for (int i = 0; i < m; i++) {
        loader_next(&b);
        cr_assert(memcmp(want + (size_t)i * 64, b.inputs, 32 * sizeof(int32_t)) == 0 &&
                      memcmp(want + (size_t)i * 64 + 32, b.targets, 32 * sizeof(int32_t)) == 0,
                  "%s: batch %d after resuming at (epoch %llu, batch %llu) differs", loader_order_name(order), i,
                  (unsigned long long)saved.epoch, (unsigned long long)saved.batch);
    }
    free(want);
    loader_free(&a);
    loader_free(&b);
    tokfile_close(f);
    unit_remove_tree(dir);
}

Test(loader, resume_from_a_saved_state_is_bit_identical) {
    for (int k = 0; k <= 5; k++) { /* mid-epoch, at an epoch boundary, several epochs in */
        check_resume(LOADER_SHUFFLE, k, 7);
        check_resume(LOADER_SEQUENTIAL, k, 7);
    }
}

Test(loader, too_little_data_and_bad_states_are_explained) {
    char *dir = unit_tmpdir("data");
    tokfile *f = identity_tokens(dir, 64);
    loader l;
    data_err e;
    cr_expect(!loader_init(&l, f, 0, 64, 4, 16, LOADER_SEQUENTIAL, 0, &e), "4 x 16 + 1 = 65 > 64 tokens");
    EXPECT_MESSAGE(&e, "too few tokens", "B*T+1", "B=4, T=16 need 65");
    cr_expect(!loader_init(&l, f, 0, 64, 0, 16, LOADER_SEQUENTIAL, 0, &e));
    cr_expect(!loader_init(&l, f, 10, 100, 1, 4, LOADER_SEQUENTIAL, 0, &e));
    EXPECT_MESSAGE(&e, "range beyond the file", "[10, 100)", "64 tokens");
    cr_assert(loader_init(&l, f, 0, 64, 2, 8, LOADER_SHUFFLE, 0, NULL));
    cr_expect(!loader_restore(&l, (loader_state){.epoch = 0, .batch = 4}, &e), "an epoch has 3 batches");
    EXPECT_MESSAGE(&e, "state beyond the epoch", "batch 4 of epoch 0", "3 batches");
    loader_free(&l);
    tokfile_close(f);
    unit_remove_tree(dir);
}

/* ---------------------------------------------------------------- corpus cleaning */

Test(corpus, colour_codes_separators_overstrike_and_controls_are_cleaned) {
    const char raw[] = "\x1b[32m《静夜思》\x1b[m\n\x1b[33m作者：李白\x1b[m\n床前明月光  \n%\n\n"
                       "It *_\b_\bis* fun\x07\r\nb\bbold x\b_\n\n%\n%\nlast\xff line";
    corpus_entries entries = {0};
    corpus_stats stats = {0};
    corpus_clean_fortunes(raw, sizeof raw - 1, &entries, &stats);
    cr_assert_eq(entries.n, 3, "three entries (an empty one between two %% lines is skipped)");
    textbuf joined = {0};
    corpus_join(&entries, false, 0, &joined);
    cr_expect_str_eq(joined.data,
                     "《静夜思》\n作者：李白\n床前明月光\n\nIt *is* fun\nbold x\n\nlast\xef\xbf\xbd line\n");
    cr_expect_eq(stats.entries, 3);
    cr_expect_eq(stats.ansi_escapes, 4);
    cr_expect_eq(stats.overstrikes, 4, "four backspaces");
    cr_expect_eq(stats.controls_removed, 2, "BEL and CR");
    cr_expect_eq(stats.invalid_utf8, 1);
    cr_expect_eq(utf8_find_invalid(joined.data, joined.len), -1, "the output is valid UTF-8");
    textbuf_free(&joined);
    corpus_entries_free(&entries);
}

Test(corpus, shuffled_join_is_a_seeded_permutation_of_entries) {
    corpus_entries entries = {0};
    corpus_stats stats = {0};
    const char raw[] = "a\n%\nb\n%\nc\n%\nd\n%\ne\n%\nf\n%\ng\n%\nh\n";
    corpus_clean_fortunes(raw, sizeof raw - 1, &entries, &stats);
    textbuf x = {0}, y = {0}, z = {0};
    corpus_join(&entries, true, 1, &x);
    corpus_join(&entries, true, 1, &y);
    corpus_join(&entries, true, 2, &z);
    cr_expect_str_eq(x.data, y.data, "same seed, same order");
    cr_expect_str_neq(x.data, z.data, "another seed, another order");
    cr_expect_eq(x.len, 8 * 3 - 1, "8 entries of 'x\\n' joined by blank lines");
    for (char ch = 'a'; ch <= 'h'; ch++) cr_expect_not_null(memchr(x.data, ch, x.len), "entry %c is kept", ch);
    textbuf_free(&x);
    textbuf_free(&y);
    textbuf_free(&z);
    corpus_entries_free(&entries);
}

Test(corpus, missing_package_file_names_the_package_to_install) {
    char *dir = unit_tmpdir("data");
    setenv("MIXPAR_FORTUNES_DIR", dir, 1);
    corpus_entries entries = {0};
    corpus_stats stats = {0};
    data_err e;
    const corpus_file files[] = {{"tang300", "fortunes-zh"}};
    cr_expect(!corpus_load(files, 1, &entries, &stats, NULL, &e));
    EXPECT_MESSAGE(&e, "missing corpus", "fortunes-zh", "make deps", "tang300");
    corpus_entries_free(&entries);
    unit_remove_tree(dir);
}

/* ---------------------------------------------------------------- generators */

Test(synth, tasks_are_deterministic_and_every_line_is_correct) {
    void (*gens[])(uint64_t, uint64_t, textbuf *) = {synth_copy, synth_reverse, synth_addition, synth_grammar};
    const char *names[] = {"copy", "reverse", "addition", "grammar"};
    for (int g = 0; g < 4; g++) {
        textbuf a = {0}, b = {0}, c = {0};
        gens[g](9, 500, &a);
        gens[g](9, 500, &b);
        gens[g](10, 500, &c);
        cr_expect_eq(a.len, b.len);
        cr_expect(memcmp(a.data, b.data, a.len) == 0, "%s: same seed, same text", names[g]);
        cr_expect(a.len != c.len || memcmp(a.data, c.data, a.len) != 0, "%s: another seed, other text", names[g]);
        int lines = 0;
        for (char *line = strtok(a.data, "\n"); line; line = strtok(NULL, "\n"), lines++) {
            char *eq = strchr(line, '=');
            if (g == 0 || g == 1) {
                cr_assert_not_null(eq, "%s line '%s' has '='", names[g], line);
                size_t n = (size_t)(eq - line);
                cr_assert(n >= 1 && n <= 10 && strlen(eq + 1) == n, "%s: '%s'", names[g], line);
                for (size_t i = 0; i < n; i++)
                    cr_assert_eq(eq[1 + i], g == 0 ? line[i] : line[n - 1 - i], "%s: '%s'", names[g], line);
            } else if (g == 2) {
                unsigned x, y, sum;
                cr_assert_eq(sscanf(line, "%u+%u=%u", &x, &y, &sum), 3, "addition line '%s'", line);
                cr_assert_eq(x + y, sum, "'%s' adds up", line);
                cr_assert(x < 1000 && y < 1000);
            } else {
                cr_assert(line[0] >= 'A' && line[0] <= 'Z', "a sentence starts with a capital: '%s'", line);
                cr_assert_eq(line[strlen(line) - 1], '.', "and ends with a full stop: '%s'", line);
            }
        }
        cr_expect_eq(lines, 500, "%s: one example per line", names[g]);
        textbuf_free(&a);
        textbuf_free(&b);
        textbuf_free(&c);
    }
}

/* ---------------------------------------------------------------- dataset builds */

static void build_into(const char *name, const char *out, dataset_options opt, dataset_result *res) {
    cr_assert(dataset_build(dataset_find(name), out, &opt, res, NULL));
}

static void expect_same_outputs(const char *dir_a, const char *dir_b, const char *name) {
    const char *files[] = {"train.tokens", "val.tokens", "vocab.json", "info.json"};
    for (int i = 0; i < 4; i++) {
        char a[700], b[700];
        snprintf(a, sizeof a, "%s/%s", dir_a, files[i]);
        snprintf(b, sizeof b, "%s/%s", dir_b, files[i]);
        cr_expect(same_file(a, b), "%s: %s differs between two builds", name, files[i]);
    }
}

/* train + val decoded is the dataset's text: nothing lost or reordered by tokenizing and splitting. */
static void expect_tokens_decode_to_text(const char *out, const char *name, dataset_options opt) {
    char path[700];
    tokenizer tok;
    snprintf(path, sizeof path, "%s/vocab.json", out);
    cr_assert(tokenizer_load(&tok, path, NULL));
    textbuf decoded = {0}, text = {0};
    const char *parts[] = {"train.tokens", "val.tokens"};
    uint64_t counts[2];
    for (int p = 0; p < 2; p++) {
        snprintf(path, sizeof path, "%s/%s", out, parts[p]);
        tokfile *f = tokfile_open(path, NULL);
        cr_expect_eq(f->vocab_size, tok.vocab_size);
        counts[p] = f->token_count;
        for (uint64_t i = 0; i < f->token_count; i++) tokenizer_decode_token(&tok, tokfile_get(f, i), &decoded);
        tokfile_close(f);
    }
    cr_assert(dataset_text(dataset_find(name), &opt, &text, NULL, NULL, NULL));
    cr_expect_eq(decoded.len, text.len);
    cr_expect(decoded.len == text.len && memcmp(decoded.data, text.data, text.len) == 0, "%s: decode(train+val) == text",
              name);
    data_split s;
    data_split_tokens(counts[0] + counts[1], opt.val_fraction, &s, NULL);
    cr_expect(s.n_train == counts[0] && s.n_val == counts[1], "%s: the split is the last %g of the tokens", name,
              opt.val_fraction);
    textbuf_free(&decoded);
    textbuf_free(&text);
    tokenizer_free(&tok);
}

Test(dataset, synthetic_builds_are_identical_twice_and_decode_to_their_text) {
    char *dir = unit_tmpdir("data");
    char a[600], b[600];
    dataset_options opt = dataset_default_options();
    opt.examples = 2000;
    dataset_result res;
    const char *names[] = {"copy", "reverse", "addition", "grammar"};
    for (int i = 0; i < 4; i++) {
        snprintf(a, sizeof a, "%s/%s-a", dir, names[i]);
        snprintf(b, sizeof b, "%s/%s-b", dir, names[i]);
        build_into(names[i], a, opt, &res);
        cr_expect(res.built);
        build_into(names[i], b, opt, &res);
        expect_same_outputs(a, b, names[i]);
        expect_tokens_decode_to_text(a, names[i], opt);
    }
    opt.tokenizer = TOKENIZER_BYTE;
    snprintf(a, sizeof a, "%s/addition-bytes", dir);
    build_into("addition", a, opt, &res);
    cr_expect_eq(res.vocab_size, 256);
    expect_tokens_decode_to_text(a, "addition", opt);
    unit_remove_tree(dir);
}

Test(dataset, second_build_is_cached_until_options_files_or_force_change) {
    char *dir = unit_tmpdir("data");
    char out[600], path[700];
    snprintf(out, sizeof out, "%s/nested/copy", dir);
    dataset_options opt = dataset_default_options();
    opt.examples = 300;
    dataset_result res;
    build_into("copy", out, opt, &res);
    cr_expect(res.built, "first build, into a directory made on demand");
    build_into("copy", out, opt, &res);
    cr_expect(!res.built, "second build with the same options is a no-op (%s)", res.reason);
    opt.force = true;
    build_into("copy", out, opt, &res);
    cr_expect(res.built, "--force rebuilds");
    opt.force = false;
    opt.seed = 2;
    build_into("copy", out, opt, &res);
    cr_expect(res.built && strstr(res.reason, "options"), "a new seed rebuilds (%s)", res.reason);
    snprintf(path, sizeof path, "%s/val.tokens", out);
    cr_assert_eq(unlink(path), 0);
    build_into("copy", out, opt, &res);
    cr_expect(res.built && strstr(res.reason, "val.tokens"), "a missing file rebuilds (%s)", res.reason);
    cr_expect_eq(count_dir_entries(out), 4, "train.tokens, val.tokens, vocab.json, info.json and nothing else");
    unit_remove_tree(dir);
}

Test(dataset, info_json_records_sizes_and_the_sha256_of_each_file) {
    char *dir = unit_tmpdir("data");
    char path[700];
    dataset_options opt = dataset_default_options();
    opt.examples = 400;
    dataset_result res;
    build_into("addition", dir, opt, &res);
    size_t n;
    snprintf(path, sizeof path, "%s/info.json", dir);
    char *text = (char *)unit_read_file(path, &n);
    cJSON *info = cJSON_Parse(text);
    cr_assert_not_null(info, "info.json is JSON");
    cJSON *tokens = cJSON_GetObjectItem(info, "tokens");
    cr_expect_eq((uint64_t)cJSON_GetObjectItem(tokens, "train")->valuedouble, res.n_train);
    cr_expect_eq((uint64_t)cJSON_GetObjectItem(tokens, "val")->valuedouble, res.n_val);
    cr_expect_eq((uint64_t)cJSON_GetObjectItem(cJSON_GetObjectItem(info, "tokenizer"), "vocab_size")->valuedouble,
                 res.vocab_size);
    cr_expect_eq(res.vocab_size, 14, "digits, '+', '=', newline and <unk>");
    const char *files[] = {"train.tokens", "val.tokens", "vocab.json"};
    for (int i = 0; i < 3; i++) {
        cJSON *entry = cJSON_GetObjectItem(cJSON_GetObjectItem(info, "files"), files[i]);
        char hex[65];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        cr_assert_eq(sha256_file_hex(path, hex), 0);
        cr_expect_str_eq(cJSON_GetObjectItem(entry, "sha256")->valuestring, hex, "%s sha256", files[i]);
        struct stat st;
        stat(path, &st);
        cr_expect_eq((long long)cJSON_GetObjectItem(entry, "bytes")->valuedouble, (long long)st.st_size);
    }
    cJSON_Delete(info);
    free(text);
    unit_remove_tree(dir);
}

/* A stand-in fortunes directory (MIXPAR_FORTUNES_DIR) with a tiny tang300, so corpus builds are tested
 * the same way on machines without the Debian packages. */
Test(dataset, corpus_build_from_fortune_files_is_deterministic) {
    char *dir = unit_tmpdir("data");
    char path[700], a[700], b[700];
    snprintf(path, sizeof path, "%s/tang300", dir);
    const char tang[] = "\x1b[32m《静夜思》\x1b[m\n\x1b[33m作者：李白\x1b[m\n床前明月光，疑是地上霜。\n举头望明月，低头思故乡。\n%\n"
                        "\x1b[32m《春晓》\x1b[m\n\x1b[33m作者：孟浩然\x1b[m\n春眠不觉晓，处处闻啼鸟。\n夜来风雨声，花落知多少。\n%\n"
                        "\x1b[32m《登鹳雀楼》\x1b[m\n\x1b[33m作者：王之涣\x1b[m\n白日依山尽，黄河入海流。\n欲穷千里目，更上一层楼。\n";
    unit_write_file(path, tang, sizeof tang - 1);
    setenv("MIXPAR_FORTUNES_DIR", dir, 1);
    snprintf(a, sizeof a, "%s/out-a", dir);
    snprintf(b, sizeof b, "%s/out-b", dir);
    dataset_options opt = dataset_default_options();
    dataset_result res;
    build_into("tang", a, opt, &res);
    build_into("tang", b, opt, &res);
    expect_same_outputs(a, b, "tang (fixture)");
    expect_tokens_decode_to_text(a, "tang", opt);
    /* 38 + 38 + 40 characters in the three poems (lines with their newlines), + 2 blank lines between. */
    cr_expect_eq(res.characters, 118, "characters of three poems (got %llu)", (unsigned long long)res.characters);
    /* A package update that changes a source file invalidates the cache. */
    FILE *f = fopen(path, "ab");
    fputs("%\n《新诗》\n", f);
    fclose(f);
    build_into("tang", a, opt, &res);
    cr_expect(res.built && strstr(res.reason, "tang300"), "a changed source rebuilds (%s)", res.reason);
    unit_remove_tree(dir);
}

Test(dataset, real_tang_poems_build_identically_twice) {
    unsetenv("MIXPAR_FORTUNES_DIR");
    if (access("/usr/share/games/fortunes/tang300", R_OK) != 0)
        cr_skip_test("the Debian package fortunes-zh is not installed (make deps installs it)");
    char *dir = unit_tmpdir("data");
    char a[700], b[700];
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    dataset_options opt = dataset_default_options();
    dataset_result res;
    build_into("tang", a, opt, &res);
    build_into("tang", b, opt, &res);
    expect_same_outputs(a, b, "tang");
    cr_expect_gt(res.vocab_size, 2000, "Tang poems use thousands of distinct characters (got %llu)",
                 (unsigned long long)res.vocab_size);
    expect_tokens_decode_to_text(a, "tang", opt);
    unit_remove_tree(dir);
}

Test(dataset, bad_options_are_explained) {
    char *dir = unit_tmpdir("data");
    dataset_options opt = dataset_default_options();
    dataset_result res;
    data_err e;
    opt.val_fraction = 0;
    cr_expect(!dataset_build(dataset_find("copy"), dir, &opt, &res, &e));
    EXPECT_MESSAGE(&e, "val 0", "validation fraction");
    opt = dataset_default_options();
    opt.examples = 1;
    opt.val_fraction = 0.01;
    cr_expect(!dataset_build(dataset_find("copy"), dir, &opt, &res, &e), "one short line leaves no validation tokens");
    EXPECT_MESSAGE(&e, "tiny dataset", "at least one training and one validation token");
    char file[700];
    snprintf(file, sizeof file, "%s/plainfile", dir);
    unit_write_file(file, "x", 1);
    opt = dataset_default_options();
    cr_expect(!dataset_build(dataset_find("copy"), file, &opt, &res, &e));
    EXPECT_MESSAGE(&e, "out is a file", "not a directory");
    cr_expect_null(dataset_find("wikipedia"));
    unit_remove_tree(dir);
}
