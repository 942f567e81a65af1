/* cmd_data.c: `mixpar data`: list and build datasets, inspect token files, encode and decode text. */
#include "base/error.h"
#include "base/parse.h"
#include "cli/commands.h"
#include "data/dataset.h"
#include "data/tokenizer.h"
#include "data/tokens.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *out) {
    fprintf(out,
            "usage: mixpar data COMMAND [ARGS]\n"
            "\n"
            "  list                          the datasets that can be built\n"
            "  build NAME [options]          build data/NAME/: train.tokens, val.tokens, vocab.json, info.json\n"
            "      --out DIR                 output directory (default data/NAME)\n"
            "      --force                   rebuild even when the output is up to date\n"
            "      --size N                  synthetic datasets: number of examples (default 20000; 50K, 1M ...)\n"
            "      --seed N                  generator seed (synthetic) or entry-shuffle seed (corpora); default 1\n"
            "      --keep-order              corpora: keep the files' order (default: entries shuffled, so the\n"
            "                                held-out tail samples the whole corpus)\n"
            "      --val F                   fraction of tokens held out for validation, the last ones (default 0.1)\n"
            "      --tokenizer char|byte|bpe characters of the corpus (default), the 256 byte values, or a byte-level\n"
            "                                BPE trained on the corpus (core/data/bpe.h)\n"
            "      --vocab N                 bpe: the vocabulary size, 257 to 4096 (default 512)\n"
            "      --shards N                write the training tokens as N shards (MXPTOK02: header with index,\n"
            "                                count and sha256), train-0000i-of-0000N.tokens, instead of train.tokens\n"
            "  info FILE [--vocab V] [-n N]  a token file's header and its first N tokens (default 64), decoded with\n"
            "                                V (default: vocab.json beside FILE, when there is one)\n"
            "  encode VOCAB [TEXT] [--unk] [--out FILE]\n"
            "                                encode TEXT (default: standard input) with the vocabulary VOCAB; prints\n"
            "                                the ids, or writes a token file; --unk maps unknown characters to <unk>\n"
            "  decode FILE [--vocab V] [--start I] [-n N]\n"
            "                                print the text of tokens I .. I+N-1 of a token file (default: all)\n"
            "\n"
            "Token files: MXPTOK01 (see core/data/tokens.h) and llm.c's .bin shards. Corpora need the Debian\n"
            "packages fortunes, fortunes-min and fortunes-zh (make deps).\n");
}

/* ---------------------------------------------------------------- argument helpers */

/* The value after an option, or a usage error naming it. */
static const char *option_value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) mp_usage_error(cmd, "%s needs a value", argv[*i]);
    return argv[++*i];
}

static uint64_t parse_count_arg(const char *cmd, const char *opt, const char *s, uint64_t min) {
    double v;
    if (!parse_count(s, &v) || v != (double)(uint64_t)v || v < (double)min || v > 1e15)
        mp_usage_error(cmd, "%s expects a whole number >= %llu (such as 1000, 50K or 2M), not '%s'", opt,
                       (unsigned long long)min, s);
    return (uint64_t)v;
}

/* ---------------------------------------------------------------- list, build */

static int data_list(int argc, char **argv) {
    (void)argv;
    if (argc > 0) mp_usage_error("data list", "takes no arguments");
    printf("%-10s %-10s %s\n", "name", "kind", "what");
    for (int i = 0; i < dataset_count(); i++) {
        const dataset_spec *d = dataset_at(i);
        char pkgs[256];
        if (d->kind == DATASET_CORPUS)
            printf("%-10s %-10s %s [needs: %s]\n", d->name, "corpus", d->summary, dataset_packages(d, pkgs, sizeof pkgs));
        else
            printf("%-10s %-10s %s\n", d->name, "synthetic", d->summary);
    }
    return 0;
}

static int data_build(int argc, char **argv) {
    const char *cmd = "data build";
    const char *name = NULL, *out = NULL;
    dataset_options opt = dataset_default_options();
    bool size_given = false, keep_order_given = false, vocab_given = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--out") == 0) out = option_value(cmd, argc, argv, &i);
        else if (strcmp(a, "--force") == 0) opt.force = true;
        else if (strcmp(a, "--keep-order") == 0) opt.keep_order = keep_order_given = true;
        else if (strcmp(a, "--size") == 0) {
            opt.examples = parse_count_arg(cmd, a, option_value(cmd, argc, argv, &i), 1);
            size_given = true;
        } else if (strcmp(a, "--seed") == 0) {
            const char *v = option_value(cmd, argc, argv, &i);
            if (!parse_u64(v, &opt.seed)) mp_usage_error(cmd, "--seed expects a whole number >= 0, not '%s'", v);
        } else if (strcmp(a, "--val") == 0) {
            const char *v = option_value(cmd, argc, argv, &i);
            if (!parse_double(v, &opt.val_fraction) || !(opt.val_fraction > 0 && opt.val_fraction < 1))
                mp_usage_error(cmd, "--val expects a fraction between 0 and 1 (exclusive), such as 0.1, not '%s'", v);
        } else if (strcmp(a, "--tokenizer") == 0) {
            const char *v = option_value(cmd, argc, argv, &i);
            int k = tokenizer_kind_from_name(v);
            if (k < 0) mp_usage_error(cmd, "--tokenizer expects char, byte or bpe, not '%s'", v);
            opt.tokenizer = (tokenizer_kind)k;
        } else if (strcmp(a, "--vocab") == 0) {
            opt.bpe_vocab = (uint32_t)parse_count_arg(cmd, a, option_value(cmd, argc, argv, &i), BPE_BYTES + 1);
            if (opt.bpe_vocab > BPE_MAX_VOCAB) mp_usage_error(cmd, "--vocab expects 257 to %d, not %u", BPE_MAX_VOCAB, opt.bpe_vocab);
            vocab_given = true;
        } else if (strcmp(a, "--shards") == 0) {
            uint64_t n = parse_count_arg(cmd, a, option_value(cmd, argc, argv, &i), 1);
            if (n > 99999) mp_usage_error(cmd, "--shards expects 1 to 99999, not %llu", (unsigned long long)n);
            opt.shards = (uint32_t)n;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (a[0] == '-') mp_usage_error(cmd, "unknown option '%s'", a);
        else if (!name) name = a;
        else mp_usage_error(cmd, "one dataset at a time; got '%s' and '%s'", name, a);
    }
    if (!name) mp_usage_error(cmd, "which dataset? (mixpar data list shows them)");
    if (vocab_given && opt.tokenizer != TOKENIZER_BPE)
        mp_usage_error(cmd, "--vocab sets the size of a BPE vocabulary: add --tokenizer bpe");
    const dataset_spec *spec = dataset_find(name);
    if (!spec) {
        char names[512] = "";
        for (int i = 0, at = 0; i < dataset_count(); i++)
            at += snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "", dataset_at(i)->name);
        MP_FAIL_HINT("a dataset name", "mixpar data list describes each", "'%s'; the datasets are: %s", name, names);
    }
    if (size_given && spec->kind == DATASET_CORPUS)
        mp_usage_error(cmd, "--size sets the number of examples of a synthetic dataset; %s is a corpus", name);
    if (keep_order_given && spec->kind == DATASET_SYNTHETIC)
        mp_usage_error(cmd, "--keep-order applies to corpora; %s is synthetic (its lines are independent)", name);
    char default_out[512];
    snprintf(default_out, sizeof default_out, "data/%s", name);
    if (!out) out = default_out;

    dataset_result res;
    dataset_build(spec, out, &opt, &res, NULL); /* bad input stops there, exit 2 */
    if (!res.built) {
        printf("%s: %s\n", out, res.reason);
        return 0;
    }
    printf("%s: built (%s): %llu bytes of text, %llu characters; %s vocabulary %llu; tokens %llu train + %llu val\n",
           out, res.reason, (unsigned long long)res.text_bytes, (unsigned long long)res.characters,
           tokenizer_kind_name(opt.tokenizer), (unsigned long long)res.vocab_size, (unsigned long long)res.n_train,
           (unsigned long long)res.n_val);
    return 0;
}

/* ---------------------------------------------------------------- info, decode */

/* vocab.json beside a token file, when it exists. */
static const char *vocab_beside(const char *file, char *buf, size_t len) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", file);
    snprintf(buf, len, "%s/vocab.json", dirname(dir));
    return access(buf, R_OK) == 0 ? buf : NULL;
}

/* Loads the vocabulary for a token file, which must fit it (its V equals the file's). */
static bool load_vocab_for(const tokfile *f, const char *vocab_path, tokenizer *tok) {
    tokenizer_load(tok, vocab_path, NULL);
    if (tok->vocab_size != f->vocab_size)
        MP_FAIL_HINT("a vocabulary with the token file's vocab_size",
                     "use the vocab.json built with this file (--vocab), or rebuild the dataset with --force",
                     "'%s' has %u ids; '%s' says vocab_size %u", vocab_path, tok->vocab_size, f->path, f->vocab_size);
    return true;
}

/* Text for a person: each line after "  | ", control characters and invalid UTF-8 as \xNN. */
static void print_text_block(const char *s, size_t len) {
    fputs("  | ", stdout);
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int n = utf8_decode(s + i, len - i, &cp);
        if (n == 1 && cp == '\n') fputs(i + 1 < len ? "\n  | " : "\n", stdout);
        else if (n == 0 || (cp < 0x20 && cp != '\t') || cp == 0x7F) printf("\\x%02x", (unsigned char)s[i]), n = 1;
        else fwrite(s + i, 1, (size_t)n, stdout);
        i += (size_t)n;
    }
    if (len == 0 || s[len - 1] != '\n') fputc('\n', stdout);
}

static int data_info(int argc, char **argv) {
    const char *cmd = "data info";
    const char *file = NULL, *vocab_path = NULL;
    uint64_t n_show = 64;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--vocab") == 0) vocab_path = option_value(cmd, argc, argv, &i);
        else if (strcmp(a, "-n") == 0) n_show = parse_count_arg(cmd, a, option_value(cmd, argc, argv, &i), 0);
        else if (a[0] == '-' && a[1]) mp_usage_error(cmd, "unknown option '%s'", a);
        else if (!file) file = a;
        else mp_usage_error(cmd, "one file at a time; got '%s' and '%s'", file, a);
    }
    if (!file) mp_usage_error(cmd, "which token file? (such as data/tang/train.tokens)");
    tokfile *f = tokfile_open_set(file, NULL); /* the file, or the shards it was split into */
    char beside[4200];
    if (!vocab_path) vocab_path = vocab_beside(file, beside, sizeof beside);
    printf("file         %s\n", f->path);
    printf("format       %s, header %llu bytes\n", f->format_name, (unsigned long long)f->header_bytes);
    if (f->joined) printf("shards       %u, joined in order (each one's sha256 checked)\n", f->shard_count);
    else if (f->shard_count > 0)
        printf("shard        %u of %u (sha256 of the tokens checked)\n", f->shard_index, f->shard_count);
    printf("tokens       %llu x %u bytes (uint%u) = %llu bytes; file %llu bytes\n", (unsigned long long)f->token_count,
           f->token_width, 8 * f->token_width, (unsigned long long)(f->token_count * f->token_width),
           (unsigned long long)f->file_bytes);
    printf("vocab_size   %u (largest token in the file: %u)\n", f->vocab_size, f->max_token);
    tokenizer tok = {0};
    bool have_vocab = vocab_path && f->format == TOKFILE_MIXPAR && load_vocab_for(f, vocab_path, &tok);
    if (have_vocab)
        printf("vocabulary   %s (%s, %u ids%s)\n", vocab_path, tokenizer_kind_name(tok.kind), tok.vocab_size,
               tok.kind == TOKENIZER_CHAR ? ", the last is <unk>" : "");
    else
        printf("vocabulary   none%s: ids only\n",
               f->format != TOKFILE_MIXPAR ? " (llm.c shards hold GPT-2 or LLaMA-3 BPE ids, not mixpar's)"
                                           : " (no vocab.json beside the file; --vocab names one)");
    uint64_t n = n_show < f->token_count ? n_show : f->token_count;
    if (n == 0) {
        tokfile_close(f);
        return 0;
    }
    printf("first %llu tokens:\n  ids ", (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) printf(" %u", tokfile_get(f, i));
    printf("\n");
    if (have_vocab) {
        textbuf text = {0};
        for (uint64_t i = 0; i < n; i++) tokenizer_decode_token(&tok, tokfile_get(f, i), &text);
        printf("  text:\n");
        print_text_block(text.data ? text.data : "", text.len);
        textbuf_free(&text);
    }
    tokenizer_free(&tok);
    tokfile_close(f);
    return 0;
}

static int data_decode(int argc, char **argv) {
    const char *cmd = "data decode";
    const char *file = NULL, *vocab_path = NULL;
    uint64_t start = 0, count = UINT64_MAX;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--vocab") == 0) vocab_path = option_value(cmd, argc, argv, &i);
        else if (strcmp(a, "--start") == 0) start = parse_count_arg(cmd, a, option_value(cmd, argc, argv, &i), 0);
        else if (strcmp(a, "-n") == 0) count = parse_count_arg(cmd, a, option_value(cmd, argc, argv, &i), 0);
        else if (a[0] == '-' && a[1]) mp_usage_error(cmd, "unknown option '%s'", a);
        else if (!file) file = a;
        else mp_usage_error(cmd, "one file at a time; got '%s' and '%s'", file, a);
    }
    if (!file) mp_usage_error(cmd, "which token file? (such as data/tang/val.tokens)");
    tokfile *f = tokfile_open_set(file, NULL);
    char beside[4200];
    if (!vocab_path) vocab_path = vocab_beside(file, beside, sizeof beside);
    if (!vocab_path)
        MP_FAIL_HINT("a vocabulary to decode with", "pass --vocab data/NAME/vocab.json",
                     "no vocab.json beside '%s'", file);
    if (start > f->token_count)
        MP_FAIL("--start within the file", "--start %llu; '%s' has %llu tokens", (unsigned long long)start, file,
                (unsigned long long)f->token_count);
    tokenizer tok = {0};
    load_vocab_for(f, vocab_path, &tok);
    uint64_t end = count < f->token_count - start ? start + count : f->token_count;
    textbuf text = {0};
    for (uint64_t i = start; i < end; i++) {
        tokenizer_decode_token(&tok, tokfile_get(f, i), &text);
        if (text.len >= (1 << 16)) {
            fwrite(text.data, 1, text.len, stdout);
            text.len = 0;
        }
    }
    if (text.len) fwrite(text.data, 1, text.len, stdout);
    textbuf_free(&text);
    tokenizer_free(&tok);
    tokfile_close(f);
    return 0;
}

/* ---------------------------------------------------------------- encode */

static int data_encode(int argc, char **argv) {
    const char *cmd = "data encode";
    const char *vocab_path = NULL, *text_arg = NULL, *out = NULL;
    bool map_unknown = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--unk") == 0) map_unknown = true;
        else if (strcmp(a, "--out") == 0) out = option_value(cmd, argc, argv, &i);
        else if (a[0] == '-' && a[1] && a[1] == '-') mp_usage_error(cmd, "unknown option '%s'", a);
        else if (!vocab_path) vocab_path = a;
        else if (!text_arg) text_arg = a;
        else mp_usage_error(cmd, "one TEXT argument (quote it); got '%s' and '%s'", text_arg, a);
    }
    if (!vocab_path) mp_usage_error(cmd, "which vocabulary? (such as data/tang/vocab.json)");
    tokenizer tok;
    tokenizer_load(&tok, vocab_path, NULL);
    textbuf text = {0};
    if (text_arg) textbuf_puts(&text, text_arg);
    else {
        char chunk[1 << 16];
        size_t n;
        while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0) textbuf_append(&text, chunk, n);
    }
    uint32_t *ids = malloc((text.len ? text.len : 1) * sizeof *ids);
    MP_ASSERT(ids != NULL, "out of memory");
    uint64_t unknown = 0;
    int64_t n = tokenizer_encode(&tok, text.data ? text.data : "", text.len, map_unknown, ids, &unknown, NULL);
    if (unknown) fprintf(stderr, "mixpar data encode: %llu unknown characters mapped to <unk> (id %u)\n",
                         (unsigned long long)unknown, tok.unk_id);
    if (out) {
        tokfile_write(out, ids, (uint64_t)n, tok.vocab_size, NULL);
        printf("%s: %lld tokens\n", out, (long long)n);
    } else {
        for (int64_t i = 0; i < n; i++) printf("%s%u", i ? " " : "", ids[i]);
        printf("\n");
    }
    free(ids);
    textbuf_free(&text);
    tokenizer_free(&tok);
    return 0;
}

/* ---------------------------------------------------------------- dispatch */

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} subcommands[] = {
    {"list", data_list}, {"build", data_build}, {"info", data_info}, {"encode", data_encode}, {"decode", data_decode},
};

int cmd_data(int argc, char **argv) {
    if (argc < 1) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "help") == 0) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (strcmp(argv[0], subcommands[i].name) == 0) return subcommands[i].run(argc - 1, argv + 1);
    mp_usage_error("data", "unknown command '%s' (list, build, info, encode, decode)", argv[0]);
}
