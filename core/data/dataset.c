/* dataset.c: the dataset table, and building one: text -> vocabulary -> tokens -> split -> files + info.json. */
#include "data/dataset.h"

#include "base/error.h"
#include "base/mem.h"
#include "data/loader.h"
#include "data/sha256.h"
#include "data/synth.h"
#include "data/tokens.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define DATASET_FORMAT "mixpar-dataset-1"

/* ---------------------------------------------------------------- the table */

static const corpus_file tang_files[] = {{"tang300", "fortunes-zh"}};
static const corpus_file song_files[] = {{"song100", "fortunes-zh"}};
static const corpus_file poetry_files[] = {{"tang300", "fortunes-zh"}, {"song100", "fortunes-zh"}};
/* The English files of Debian's fortunes package and of fortunes-min, which it depends on. */
static const corpus_file fortune_files[] = {
    {"art", "fortunes"},           {"ascii-art", "fortunes"},    {"computers", "fortunes"},
    {"cookie", "fortunes"},        {"debian", "fortunes"},       {"definitions", "fortunes"},
    {"disclaimer", "fortunes"},    {"drugs", "fortunes"},        {"education", "fortunes"},
    {"ethnic", "fortunes"},        {"food", "fortunes"},         {"fortunes", "fortunes-min"},
    {"goedel", "fortunes"},        {"humorists", "fortunes"},    {"kids", "fortunes"},
    {"knghtbrd", "fortunes"},      {"law", "fortunes"},          {"linux", "fortunes"},
    {"linuxcookie", "fortunes"},   {"literature", "fortunes-min"}, {"love", "fortunes"},
    {"magic", "fortunes"},         {"medicine", "fortunes"},     {"men-women", "fortunes"},
    {"miscellaneous", "fortunes"}, {"news", "fortunes"},         {"paradoxum", "fortunes"},
    {"people", "fortunes"},        {"perl", "fortunes"},         {"pets", "fortunes"},
    {"platitudes", "fortunes"},    {"politics", "fortunes"},     {"pratchett", "fortunes"},
    {"riddles", "fortunes-min"},   {"science", "fortunes"},      {"songs-poems", "fortunes"},
    {"sports", "fortunes"},        {"startrek", "fortunes"},     {"tao", "fortunes"},
    {"translate-me", "fortunes"},  {"wisdom", "fortunes"},       {"work", "fortunes"},
    {"zippy", "fortunes"},
};
#define FILES(list) list, (int)(sizeof list / sizeof list[0])

static const dataset_spec datasets[] = {
    {"copy", DATASET_SYNTHETIC, "copy a string: \"qzkf=qzkf\" (1-10 letters)", synth_copy, 20000, NULL, 0},
    {"reverse", DATASET_SYNTHETIC, "reverse a string: \"qzkf=fkzq\" (1-10 letters)", synth_reverse, 20000, NULL, 0},
    {"addition", DATASET_SYNTHETIC, "add two numbers: \"123+45=168\" (1-3 digits each)", synth_addition, 20000, NULL, 0},
    {"grammar", DATASET_SYNTHETIC, "English-like sentences from a small probabilistic grammar", synth_grammar, 20000,
     NULL, 0},
    {"tang", DATASET_CORPUS, "Three Hundred Tang Poems (唐诗三百首), from fortunes-zh's tang300", NULL, 0,
     FILES(tang_files)},
    {"song", DATASET_CORPUS, "a hundred Song ci poems (宋词), from fortunes-zh's song100", NULL, 0, FILES(song_files)},
    {"poetry", DATASET_CORPUS, "tang and song together", NULL, 0, FILES(poetry_files)},
    {"fortunes", DATASET_CORPUS, "English fortune cookies, from the fortunes and fortunes-min packages", NULL, 0,
     FILES(fortune_files)},
};
enum { N_DATASETS = sizeof datasets / sizeof datasets[0] };

int dataset_count(void) { return N_DATASETS; }
const dataset_spec *dataset_at(int i) { return i >= 0 && i < N_DATASETS ? &datasets[i] : NULL; }

const dataset_spec *dataset_find(const char *name) {
    for (int i = 0; i < N_DATASETS; i++)
        if (strcmp(datasets[i].name, name) == 0) return &datasets[i];
    return NULL;
}

const char *dataset_packages(const dataset_spec *spec, char *buf, int buf_len) {
    int at = 0;
    buf[0] = '\0';
    for (int i = 0; i < spec->n_files; i++) {
        const char *pkg = spec->files[i].package;
        bool seen = false;
        for (int j = 0; j < i; j++) seen |= strcmp(spec->files[j].package, pkg) == 0;
        if (!seen && at < buf_len) at += snprintf(buf + at, buf_len - at, "%s%s", at ? " " : "", pkg);
    }
    return buf;
}

dataset_options dataset_default_options(void) {
    return (dataset_options){.tokenizer = TOKENIZER_CHAR, .bpe_vocab = 512, .shards = 0, .seed = 1, .keep_order = false, .examples = 0,
                             .val_fraction = 0.1, .force = false};
}

/* ---------------------------------------------------------------- text */

bool dataset_text(const dataset_spec *spec, const dataset_options *opt, textbuf *text, corpus_stats *stats,
                  cJSON *sources, data_err *err) {
    if (spec->kind == DATASET_SYNTHETIC) {
        spec->generate(opt->seed, opt->examples ? opt->examples : spec->default_examples, text);
        return true;
    }
    corpus_stats local = {0};
    corpus_entries entries = {0};
    bool ok = corpus_load(spec->files, spec->n_files, &entries, stats ? stats : &local, sources, err);
    if (ok) corpus_join(&entries, !opt->keep_order, opt->seed, text);
    corpus_entries_free(&entries);
    return ok;
}

/* ---------------------------------------------------------------- info.json and the cache */

/* What the output depends on: equal params (and sources) mean the files on disk are what a build would
 * write, so the build can be skipped. */
static cJSON *params_json(const dataset_spec *spec, const dataset_options *opt) {
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "dataset", spec->name);
    cJSON_AddStringToObject(p, "tokenizer", tokenizer_kind_name(opt->tokenizer));
    /* Only when used, so the records of builds made before these options existed still match. */
    if (opt->tokenizer == TOKENIZER_BPE) cJSON_AddNumberToObject(p, "bpe_vocab", opt->bpe_vocab);
    if (opt->shards > 0) cJSON_AddNumberToObject(p, "shards", opt->shards);
    cJSON_AddNumberToObject(p, "val_fraction", opt->val_fraction);
    cJSON_AddNumberToObject(p, "seed", (double)opt->seed);
    if (spec->kind == DATASET_SYNTHETIC)
        cJSON_AddNumberToObject(p, "examples", (double)(opt->examples ? opt->examples : spec->default_examples));
    else
        cJSON_AddStringToObject(p, "entry_order", opt->keep_order ? "files" : "shuffled");
    return p;
}

/* The files a build writes: train.tokens (or its shards), val.tokens, vocab.json. */
typedef struct {
    int n;
    char (*names)[64];
} output_list;

static output_list output_files(const dataset_options *opt) {
    output_list o = {0, calloc(opt->shards + 2 + !opt->shards, 64)};
    MP_ASSERT(o.names != NULL, "out of memory");
    for (uint32_t i = 0; i < opt->shards; i++) tokfile_shard_name("train.tokens", i, opt->shards, o.names[o.n++], 64);
    if (!opt->shards) snprintf(o.names[o.n++], 64, "train.tokens");
    snprintf(o.names[o.n++], 64, "val.tokens");
    snprintf(o.names[o.n++], 64, "vocab.json");
    return o;
}

static long long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) ? (long long)st.st_size : -1;
}

/* NULL when the output is up to date; otherwise why it must be built (into why). */
static const char *stale_reason(const dataset_spec *spec, const dataset_options *opt, const char *out_dir, char *why,
                                size_t why_len) {
    char path[4200];
    snprintf(path, sizeof path, "%s/info.json", out_dir);
    FILE *f = fopen(path, "rb");
    if (!f) return snprintf(why, why_len, "no previous build"), why;
    textbuf b = {0};
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) textbuf_append(&b, chunk, n);
    fclose(f);
    cJSON *info = b.data ? cJSON_ParseWithLength(b.data, b.len) : NULL;
    textbuf_free(&b);
    const char *result = NULL;
    cJSON *want = params_json(spec, opt);
    cJSON *files = info ? cJSON_GetObjectItemCaseSensitive(info, "files") : NULL;
    cJSON *format = info ? cJSON_GetObjectItemCaseSensitive(info, "format") : NULL;
    if (!info || !cJSON_IsString(format) || strcmp(format->valuestring, DATASET_FORMAT) != 0) {
        result = (snprintf(why, why_len, "info.json is unreadable or from another version"), why);
    } else if (!cJSON_Compare(cJSON_GetObjectItemCaseSensitive(info, "params"), want, true)) {
        result = (snprintf(why, why_len, "the options differ from the last build's"), why);
    }
    output_list outputs = output_files(opt);
    for (int i = 0; !result && i < outputs.n; i++) {
        cJSON *entry = cJSON_GetObjectItemCaseSensitive(files, outputs.names[i]);
        cJSON *bytes = cJSON_GetObjectItemCaseSensitive(entry, "bytes");
        snprintf(path, sizeof path, "%s/%s", out_dir, outputs.names[i]);
        if (!cJSON_IsNumber(bytes) || file_size(path) != (long long)bytes->valuedouble)
            result = (snprintf(why, why_len, "%s is missing or changed since the last build", outputs.names[i]), why);
    }
    free(outputs.names);
    /* A corpus is rebuilt when a package update changed a source file. */
    cJSON *sources = info ? cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(info, "source"), "files")
                          : NULL;
    cJSON *src;
    if (!result && spec->kind == DATASET_CORPUS) {
        int i = 0;
        if (cJSON_GetArraySize(sources) != spec->n_files)
            result = (snprintf(why, why_len, "the source file list changed"), why);
        cJSON_ArrayForEach(src, sources) {
            if (result || i >= spec->n_files) break;
            cJSON *bytes = cJSON_GetObjectItemCaseSensitive(src, "bytes");
            snprintf(path, sizeof path, "%s/%s", corpus_fortunes_dir(), spec->files[i].file);
            if (!cJSON_IsNumber(bytes) || file_size(path) != (long long)bytes->valuedouble)
                result = (snprintf(why, why_len, "source %s changed since the last build", path), why);
            i++;
        }
    }
    cJSON_Delete(want);
    cJSON_Delete(info);
    return result;
}

static cJSON *stats_json(const corpus_stats *s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "bytes_read", (double)s->bytes_in);
    cJSON_AddNumberToObject(o, "entries", (double)s->entries);
    cJSON_AddNumberToObject(o, "ansi_escapes_removed", (double)s->ansi_escapes);
    cJSON_AddNumberToObject(o, "backspaces_resolved", (double)s->overstrikes);
    cJSON_AddNumberToObject(o, "control_characters_removed", (double)s->controls_removed);
    cJSON_AddNumberToObject(o, "invalid_utf8_replaced", (double)s->invalid_utf8);
    return o;
}

/* ---------------------------------------------------------------- build */

static bool make_dir(const char *dir, data_err *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1;; p++) { /* mkdir -p */
        bool end = *p == '\0';
        if (*p == '/' || end) {
            *p = '\0';
            if (mkdir(path, 0755) != 0 && errno != EEXIST)
                return DATA_ERR(err, "an output directory that can be created", "choose another --out DIR",
                                "mkdir '%s': %s", path, strerror(errno));
            if (end) break;
            *p = '/';
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return DATA_ERR(err, "an output directory", "choose another --out DIR", "'%s' exists and is not a directory", dir);
    return true;
}

static uint64_t count_chars(const char *s, size_t len) {
    uint64_t n = 0;
    for (size_t i = 0; i < len; i++) n += ((unsigned char)s[i] & 0xC0) != 0x80; /* every byte but continuations */
    return n;
}

/* The parts of the build that own memory, freed in one place. */
typedef struct {
    textbuf text;
    tokenizer tok;
    uint32_t *ids;
    cJSON *info;
} build_state;

/* The training tokens as one file, or as `shards` shards of about equal size; the other form's files, left by an
 * earlier build, are removed (the trainer reads train.tokens when it exists, else the shards: tokfile_open_set). */
static bool write_train_tokens(const char *path, const uint32_t *ids, uint64_t n, uint32_t vocab, uint32_t shards,
                               data_err *err) {
    char name[4200], pattern[4200];
    snprintf(pattern, sizeof pattern, "%.*s-[0-9]*-of-[0-9]*.tokens", (int)(strlen(path) - strlen(".tokens")), path);
    glob_t old;
    if (glob(pattern, 0, NULL, &old) == 0)
        for (size_t i = 0; i < old.gl_pathc; i++) unlink(old.gl_pathv[i]);
    globfree(&old);
    if (shards == 0) return tokfile_write(path, ids, n, vocab, err);
    if (shards > n)
        return DATA_ERR(err, "at most one shard per training token", "use fewer --shards", "%u shards for %llu tokens",
                        shards, (unsigned long long)n);
    unlink(path);
    for (uint32_t i = 0; i < shards; i++) {
        uint64_t lo = n * i / shards, hi = n * (i + 1) / shards;
        tokfile_shard_name(path, i, shards, name, sizeof name);
        if (!tokfile_write_shard(name, ids + lo, hi - lo, vocab, i, shards, err)) return false;
    }
    return true;
}

static bool build(const dataset_spec *spec, const char *out_dir, const dataset_options *opt, dataset_result *res,
                  build_state *s, data_err *err) {
    char path[4200];
    corpus_stats stats = {0};
    s->info = cJSON_CreateObject();
    cJSON_AddStringToObject(s->info, "format", DATASET_FORMAT);
    cJSON_AddStringToObject(s->info, "name", spec->name);
    cJSON_AddStringToObject(s->info, "summary", spec->summary);
    cJSON_AddItemToObject(s->info, "params", params_json(spec, opt));
    cJSON *source = cJSON_AddObjectToObject(s->info, "source");
    cJSON *sources = NULL;
    if (spec->kind == DATASET_CORPUS) {
        char pkgs[256];
        cJSON_AddStringToObject(source, "kind", "corpus");
        cJSON_AddStringToObject(source, "packages", dataset_packages(spec, pkgs, sizeof pkgs));
        sources = cJSON_AddArrayToObject(source, "files");
    } else {
        cJSON_AddStringToObject(source, "kind", "synthetic");
        cJSON_AddStringToObject(source, "generator", spec->name);
    }
    if (!dataset_text(spec, opt, &s->text, &stats, sources, err)) return false;
    if (spec->kind == DATASET_CORPUS) cJSON_AddItemToObject(source, "cleaning", stats_json(&stats));
    if (s->text.len == 0)
        return DATA_ERR(err, "some text to tokenize", NULL, "dataset %s produced no text", spec->name);

    if (opt->tokenizer == TOKENIZER_BYTE) tokenizer_init_byte(&s->tok);
    else if (opt->tokenizer == TOKENIZER_BPE) {
        if (!tokenizer_build_bpe(&s->tok, s->text.data, s->text.len, opt->bpe_vocab, err)) return false;
    } else if (!tokenizer_build_char(&s->tok, s->text.data, s->text.len, err)) return false;
    s->ids = mem_alloc(s->text.len * sizeof *s->ids, MEM_OTHER, "dataset token ids");
    int64_t n = tokenizer_encode(&s->tok, s->text.data, s->text.len, false, s->ids, NULL, err);
    if (n < 0) return false;

    data_split split;
    if (!data_split_tokens((uint64_t)n, opt->val_fraction, &split, err)) return false;
    if (split.n_val == 0 || split.n_train == 0)
        return DATA_ERR(err, "at least one training and one validation token",
                        "use a validation fraction such as 0.1 (--val), or a bigger dataset (--size)",
                        "%lld tokens with --val %g: %llu train, %llu validation", (long long)n, opt->val_fraction,
                        (unsigned long long)split.n_train, (unsigned long long)split.n_val);

    snprintf(path, sizeof path, "%s/train.tokens", out_dir);
    if (!write_train_tokens(path, s->ids, split.n_train, s->tok.vocab_size, opt->shards, err)) return false;
    snprintf(path, sizeof path, "%s/val.tokens", out_dir);
    if (!tokfile_write(path, s->ids + split.n_train, split.n_val, s->tok.vocab_size, err)) return false;
    snprintf(path, sizeof path, "%s/vocab.json", out_dir);
    if (!tokenizer_save(&s->tok, path, err)) return false;

    char hex[65];
    cJSON *text = cJSON_AddObjectToObject(s->info, "text");
    uint64_t lines = 0;
    for (size_t i = 0; i < s->text.len; i++) lines += s->text.data[i] == '\n';
    sha256_hex(s->text.data, s->text.len, hex);
    cJSON_AddNumberToObject(text, "bytes", (double)s->text.len);
    cJSON_AddNumberToObject(text, "characters", (double)count_chars(s->text.data, s->text.len));
    cJSON_AddNumberToObject(text, "lines", (double)lines);
    cJSON_AddStringToObject(text, "sha256", hex);
    cJSON *tok = cJSON_AddObjectToObject(s->info, "tokenizer");
    cJSON_AddStringToObject(tok, "kind", tokenizer_kind_name(s->tok.kind));
    cJSON_AddNumberToObject(tok, "vocab_size", s->tok.vocab_size);
    if (s->tok.kind == TOKENIZER_CHAR) cJSON_AddNumberToObject(tok, "unk_id", s->tok.unk_id);
    cJSON *tokens = cJSON_AddObjectToObject(s->info, "tokens");
    cJSON_AddNumberToObject(tokens, "total", (double)n);
    cJSON_AddNumberToObject(tokens, "train", (double)split.n_train);
    cJSON_AddNumberToObject(tokens, "val", (double)split.n_val);
    cJSON_AddNumberToObject(tokens, "width_bytes", tokfile_width_for_vocab(s->tok.vocab_size));
    /* Hash what is on disk (not what was meant to be written): the same bytes `sha256sum` sees. */
    cJSON *files = cJSON_AddObjectToObject(s->info, "files");
    output_list outputs = output_files(opt);
    for (int i = 0; i < outputs.n; i++) {
        snprintf(path, sizeof path, "%s/%s", out_dir, outputs.names[i]);
        if (sha256_file_hex(path, hex) != 0) {
            free(outputs.names);
            return DATA_ERR(err, "the files just written to be readable", NULL, "cannot read back '%s': %s", path,
                            strerror(errno));
        }
        cJSON *entry = cJSON_AddObjectToObject(files, outputs.names[i]);
        cJSON_AddNumberToObject(entry, "bytes", (double)file_size(path));
        cJSON_AddStringToObject(entry, "sha256", hex);
    }
    free(outputs.names);
    char *json = cJSON_Print(s->info);
    MP_ASSERT(json != NULL, "out of memory");
    textbuf with_newline = {0};
    textbuf_puts(&with_newline, json);
    textbuf_putc(&with_newline, '\n');
    free(json);
    snprintf(path, sizeof path, "%s/info.json", out_dir);
    bool ok = data_write_file_atomic(path, with_newline.data, with_newline.len, err);
    textbuf_free(&with_newline);
    if (!ok) return false;

    res->text_bytes = s->text.len;
    res->characters = count_chars(s->text.data, s->text.len);
    res->vocab_size = s->tok.vocab_size;
    res->n_train = split.n_train;
    res->n_val = split.n_val;
    return true;
}

/* A synthetic dataset's size is the user's to choose (--size), so a build that cannot finish is refused before
 * it starts, instead of running until the disk or the memory is full: the text's bytes per example are measured
 * on the first examples, then the token files (2 bytes per token, at most one token per byte of text) are checked
 * against the free space of out_dir (statvfs) and the build's memory (the text, its buffer's growth, and 4 bytes
 * of token id per byte: about 6 bytes per byte of text) against the memory available. */
static bool check_room(const dataset_spec *spec, const char *out_dir, const dataset_options *opt, data_err *err) {
    if (spec->kind != DATASET_SYNTHETIC) return true; /* a corpus has the size of its packages */
    uint64_t examples = opt->examples ? opt->examples : spec->default_examples;
    enum { SAMPLE = 1000 };
    textbuf sample = {0};
    spec->generate(opt->seed, examples < SAMPLE ? examples : SAMPLE, &sample);
    double per_example = (double)sample.len / (double)(examples < SAMPLE ? examples : SAMPLE);
    textbuf_free(&sample);
    double text = per_example * (double)examples * 1.1; /* later examples run a little longer (bigger numbers) */
    double disk_need = 2.0 * text + 65536, memory_need = 6.0 * text;
    struct statvfs vfs;
    double disk_free = statvfs(out_dir, &vfs) == 0 ? (double)vfs.f_bavail * (double)vfs.f_frsize : -1;
    double memory = (double)mem_system_available(NULL);
    bool disk_short = disk_free >= 0 && disk_need > disk_free, memory_short = memory > 0 && memory_need > memory;
    if (!disk_short && !memory_short) return true;
    double fits = examples;
    if (disk_short) fits = fmin(fits, disk_free / (2.0 * per_example * 1.1));
    if (memory_short) fits = fmin(fits, memory / (6.0 * per_example * 1.1));
    char hint[256];
    snprintf(hint, sizeof hint, "a smaller --size: about %.3g examples fit here%s", floor(fits * 0.9),
             disk_short ? ", or --out on a disk with more room" : "");
    return DATA_ERR(err, "a dataset that fits on the disk and in memory", hint,
                    "--size %llu (%s, about %.0f bytes of text per example) needs about %.4g bytes of disk for its "
                    "token files in %s (%.4g bytes free) and about %.4g bytes of memory to build (%.4g bytes "
                    "available)",
                    (unsigned long long)examples, spec->name, per_example, disk_need, out_dir, disk_free, memory_need,
                    memory);
}

bool dataset_build(const dataset_spec *spec, const char *out_dir, const dataset_options *opt, dataset_result *res,
                   data_err *err) {
    memset(res, 0, sizeof *res);
    if (!(opt->val_fraction > 0 && opt->val_fraction < 1))
        return DATA_ERR(err, "a validation fraction in (0, 1), such as 0.1", NULL, "%g", opt->val_fraction);
    if (!make_dir(out_dir, err)) return false;
    const char *why = stale_reason(spec, opt, out_dir, res->reason, sizeof res->reason);
    if (!why && !opt->force) {
        snprintf(res->reason, sizeof res->reason, "up to date (same options and sources; --force rebuilds)");
        return true;
    }
    if (!why) snprintf(res->reason, sizeof res->reason, "--force");
    if (!check_room(spec, out_dir, opt, err)) return false;
    /* Without info.json the directory does not count as built, until the new one is written last. */
    char path[4200];
    snprintf(path, sizeof path, "%s/info.json", out_dir);
    if (unlink(path) != 0 && errno != ENOENT)
        return DATA_ERR(err, "a writable output directory", NULL, "cannot remove '%s': %s", path, strerror(errno));
    build_state s = {0};
    bool ok = build(spec, out_dir, opt, res, &s, err);
    textbuf_free(&s.text);
    tokenizer_free(&s.tok);
    mem_free(s.ids);
    cJSON_Delete(s.info);
    res->built = ok;
    return ok;
}
