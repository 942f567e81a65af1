/* dataset.h: the named datasets and the build that turns one into data/NAME/ (tokens, vocabulary, info). */
#ifndef MIXPAR_DATA_DATASET_H
#define MIXPAR_DATA_DATASET_H

#include "data/corpus.h"
#include "data/data_err.h"
#include "data/textbuf.h"
#include "data/tokenizer.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum { DATASET_SYNTHETIC, DATASET_CORPUS } dataset_kind;

/* One row of the dataset table: a generator (synthetic) or a list of files from Debian packages (corpus). */
typedef struct {
    const char *name;
    dataset_kind kind;
    const char *summary;
    void (*generate)(uint64_t seed, uint64_t examples, textbuf *out); /* synthetic */
    uint64_t default_examples;                                         /* synthetic: lines made by default */
    const corpus_file *files;                                          /* corpus */
    int n_files;
} dataset_spec;

int dataset_count(void);
const dataset_spec *dataset_at(int i);
const dataset_spec *dataset_find(const char *name); /* NULL when there is no such dataset */
const char *dataset_packages(const dataset_spec *spec, char *buf, int buf_len); /* "fortunes-zh", ... */

typedef struct {
    tokenizer_kind tokenizer; /* TOKENIZER_CHAR (default), TOKENIZER_BYTE or TOKENIZER_BPE */
    uint32_t bpe_vocab;       /* bpe: the vocabulary to train, 257 .. 4096 (default 512) */
    uint32_t shards;          /* 0: one train.tokens; N >= 1: the training tokens as N MXPTOK02 shards */
    uint64_t seed;            /* synthetic: the generator's seed; corpus: the seed of the entry shuffle */
    bool keep_order;          /* corpus: keep the files' entry order (default: entries shuffled by seed) */
    uint64_t examples;        /* synthetic only; 0 means the dataset's default */
    double val_fraction;      /* the last fraction of tokens held out, in (0, 1) */
    bool force;               /* rebuild even when the output is up to date */
} dataset_options;

/* Defaults: char tokenizer (bpe vocabulary 512 when bpe is chosen), no shards, seed 1, entries shuffled, default examples, 10% validation, no force. */
dataset_options dataset_default_options(void);

typedef struct {
    bool built;               /* false: the output was already up to date and nothing was written */
    char reason[256];         /* why it was built or skipped, for the user */
    uint64_t text_bytes, characters, vocab_size, n_train, n_val;
} dataset_result;

/* Builds a dataset into out_dir (made when missing):
 *     train.tokens, val.tokens   MXPTOK01 token files: the first and last (val_fraction) parts of the text
 *                                (with opt->shards N: train-0000i-of-0000N.tokens, N MXPTOK02 shards of about equal
 *                                size, data/tokens.h, instead of train.tokens)
 *     vocab.json                 the tokenizer (tokenizer.h)
 *     info.json                  source, options, sizes, cleaning statistics and the sha256 of each file
 * Cached: when info.json records the same options (and, for a corpus, the same source file sizes) and
 * the files it lists have their recorded sizes, nothing is done unless opt->force. info.json is removed
 * first and written last, so an interrupted build is never taken for a finished one; every file is
 * written atomically. The output depends only on the options and the sources (no dates, no paths
 * inside the tokens), so building twice gives identical bytes. */
bool dataset_build(const dataset_spec *spec, const char *out_dir, const dataset_options *opt, dataset_result *res,
                   data_err *err);

/* The dataset's cleaned or generated text, as it is before tokenization. stats may be NULL;
 * sources (may be NULL) receives the corpus files' descriptions (see corpus_load). */
bool dataset_text(const dataset_spec *spec, const dataset_options *opt, textbuf *text, corpus_stats *stats,
                  cJSON *sources, data_err *err);

#endif
