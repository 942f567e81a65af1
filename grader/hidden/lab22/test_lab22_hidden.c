/* test_lab22_hidden.c: lab 22 hidden tests: merges on random corpora against the reference, encoding the training
 * text reproduces training's sequence, a BPE vocab.json saved and loaded, a shard of 4-byte tokens, and a whole
 * dataset built with BPE into shards that decode back to its text. */
#include "../../../labs/lab22-case-study/tests/lab22_util.h"

#include "data/dataset.h"
#include "data/tokenizer.h"

/* Random corpora of 1,500 bytes over alphabets of 2, 4 and 16 symbols (so counts tie often), 120 merges each. */
MPT_TEST(bpe_train_random_corpora_against_a_reference) {
    static const uint32_t alphabets[] = {2, 4, 16};
    enum { LEN = 1500, VOCAB = 376 };
    uint8_t text[LEN];
    bpe_pair want[VOCAB];
    for (int k = 0; k < 3; k++) {
        lab22_random_bytes(100 + (uint64_t)k, text, LEN, alphabets[k]);
        uint32_t n_want = lab22_ref_train(text, LEN, VOCAB, want, NULL, NULL);
        bpe_model m;
        MPT_REQUIRE(bpe_train(&m, text, LEN, VOCAB, NULL), "bpe_train failed");
        char what[96];
        snprintf(what, sizeof what, "random corpus of %d bytes over %u symbols", LEN, alphabets[k]);
        LAB22_CHECK_MERGES(what, &m, want, n_want);
        bpe_free(&m);
    }
}

/* Encoding the training text applies the merges in rank order over the same sequence, so it ends where training did. */
MPT_TEST(bpe_encode_training_text_reproduces_training) {
    enum { LEN = 3000, VOCAB = 420 };
    uint8_t text[LEN];
    lab22_random_bytes(200, text, LEN, 8);
    bpe_pair merges[VOCAB];
    uint32_t *want = malloc(LEN * sizeof *want), *ids = malloc(LEN * sizeof *ids);
    size_t n_want;
    lab22_ref_train(text, LEN, VOCAB, merges, want, &n_want);
    bpe_model m;
    MPT_REQUIRE(bpe_train(&m, text, LEN, VOCAB, NULL), "bpe_train failed");
    size_t n = bpe_encode(&m, text, LEN, ids);
    MPT_CHECK_EQ_U64(n_want, n, "tokens when encoding the training text = the length training ended with");
    uint64_t first_bad = n;
    for (size_t i = 0; i < n && i < n_want && first_bad == n; i++)
        if (ids[i] != want[i]) first_bad = i;
    MPT_CHECK_EQ_U64(n, first_bad, "index of the first token that differs from training's final sequence (n: none)");
    free(want), free(ids);
    bpe_free(&m);
}

/* vocab.json keeps the merges: loaded back, the tokenizer encodes and decodes as the trained one. */
MPT_TEST(bpe_vocab_json_round_trip) {
    char dir[256], path[512];
    lab22_scratch(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    const char *poem = "床前明月光，疑是地上霜。\n举头望明月，低头思故乡。\n床前明月光，疑是地上霜。\n";
    tokenizer a, b;
    MPT_REQUIRE(tokenizer_build_bpe(&a, poem, strlen(poem), 300, NULL), "tokenizer_build_bpe failed");
    MPT_REQUIRE(tokenizer_save(&a, path, NULL), "tokenizer_save failed");
    data_err err;
    MPT_REQUIRE(tokenizer_load(&b, path, &err), "tokenizer_load of a saved BPE vocabulary failed: %s", err.found);
    MPT_CHECK_EQ_U64(a.vocab_size, b.vocab_size, "vocab_size after save and load");
    const char *text = "明月光\xff思故乡";
    uint32_t ia[64], ib[64];
    int64_t na = tokenizer_encode(&a, text, strlen(text), false, ia, NULL, NULL);
    int64_t nb = tokenizer_encode(&b, text, strlen(text), false, ib, NULL, NULL);
    MPT_CHECK_EQ_I64(na, nb, "tokens of the text, trained vs loaded tokenizer");
    textbuf out = {0};
    for (int64_t i = 0; i < nb; i++) tokenizer_decode_token(&b, ib[i], &out);
    MPT_CHECK(out.len == strlen(text) && memcmp(out.data, text, out.len) == 0, "the loaded tokenizer's round trip differs");
    MPT_OBSERVE(nb);
    textbuf_free(&out);
    tokenizer_free(&a);
    tokenizer_free(&b);
}

/* A vocabulary above 65536 ids takes 4-byte tokens: the header says so and the checksum covers them. */
MPT_TEST(shard_of_4_byte_tokens) {
    char dir[256], path[512];
    lab22_scratch(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/wide.tokens", dir);
    uint32_t tokens[257];
    for (int i = 0; i < 257; i++) tokens[i] = mp_hash32(mpt_seed(), (uint64_t)i) % 100000;
    MPT_REQUIRE(tokfile_write_shard(path, tokens, 257, 100000, 6, 7, NULL), "tokfile_write_shard failed");
    size_t len;
    uint8_t *b = lab22_read_file(path, &len);
    MPT_REQUIRE(b && len == 64 + 4 * 257, "file of 64 + 4 x 257 bytes expected, got %zu", b ? len : 0);
    MPT_CHECK_EQ_U64(4, lab22_u32(b + 8), "token_width at byte offset 8 for vocab_size 100000");
    MPT_CHECK_EQ_U64(100000, lab22_u32(b + 12), "vocab_size at byte offset 12");
    MPT_CHECK_EQ_U64(6, lab22_u32(b + 24), "shard_index at byte offset 24");
    MPT_CHECK_EQ_U64(7, lab22_u32(b + 28), "shard_count at byte offset 28");
    tokfile *f = tokfile_open(path, NULL);
    MPT_CHECK_EQ_U64(tokens[256], tokfile_get(f, 256), "the last token read back");
    tokfile_close(f);
    b[64 + 4 * 200] ^= 0x01; /* a low bit of token 200: still a token of the vocabulary most of the time */
    lab22_write_file(path, b, len);
    data_err err;
    f = tokfile_open(path, &err);
    MPT_CHECK(f == NULL, "a 4-byte shard with one flipped low bit in token 200 was accepted");
    tokfile_close(f);
    free(b);
}

/* The pipeline's data half: a synthetic dataset, BPE-tokenized into 3 shards; the shards joined and decoded with the
 * saved vocabulary give back the dataset's text (its training part). */
MPT_TEST(dataset_bpe_shards_decode_to_the_text) {
    char dir[256], path[600];
    lab22_scratch(dir, sizeof dir);
    dataset_options opt = dataset_default_options();
    opt.tokenizer = TOKENIZER_BPE;
    opt.bpe_vocab = 320;
    opt.shards = 3;
    opt.examples = 400;
    opt.seed = 1 + mpt_seed() % 1000;
    const dataset_spec *spec = dataset_find("grammar");
    dataset_result res;
    data_err err;
    MPT_REQUIRE(dataset_build(spec, dir, &opt, &res, &err), "dataset_build failed: %s", err.found);
    snprintf(path, sizeof path, "%s/train.tokens", dir);
    tokfile *f = tokfile_open_set(path, &err);
    MPT_REQUIRE(f != NULL, "the shard set does not open: %s", err.found);
    MPT_CHECK_EQ_U64(res.n_train, f->token_count, "tokens in the joined shards = the build's training tokens");
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    tokenizer tok;
    MPT_REQUIRE(tokenizer_load(&tok, path, &err), "vocab.json does not load: %s", err.found);
    textbuf text = {0}, out = {0};
    MPT_REQUIRE(dataset_text(spec, &opt, &text, NULL, NULL, &err), "dataset_text failed");
    for (uint64_t i = 0; i < f->token_count; i++) tokenizer_decode_token(&tok, tokfile_get(f, i), &out);
    MPT_CHECK(out.len <= text.len && memcmp(out.data, text.data, out.len) == 0,
              "the decoded training shards are not the start of the dataset's text");
    MPT_OBSERVE(out.len);
    MPT_OBSERVE(res.n_train + res.n_val);
    textbuf_free(&text);
    textbuf_free(&out);
    tokenizer_free(&tok);
    tokfile_close(f);
}
