/* main.c: mixpar-grade: region checks, the student handout, submissions and grading (make grade/submit/handout). */
#include "answers.h"
#include "labinfo.h"
#include "regions.h"
#include "runner.h"
#include "tarball.h"
#include "tree.h"
#include "verdict.h"

#include "course/answer.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <dirent.h>
#include <unistd.h>

enum { EXIT_BAD = 2 };
static const char *const SOURCE_SUFFIXES[] = {".c", ".h", ".cu", ".cuh", NULL};

static _Noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void die(const char *fmt, ...) {
    fflush(stdout);
    fprintf(stderr, "mixpar-grade: ");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(EXIT_BAD);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int parse_lab(const char *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 1 || v > 99) die("'%s' is not a lab number (expected 1..99, e.g. 03)", s);
    return (int)v;
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* ---------------------------------------------------------------- the regions of a tree */

typedef struct {
    char path[256];
    char *text;
    region_list regions;
} source_file;

typedef struct {
    const char *root;
    source_file *files;
    int count;
    char err[512];
} source_set;

static void collect_one(const char *rel, void *arg) {
    source_set *set = arg;
    if (set->err[0]) return;
    char full[4096];
    snprintf(full, sizeof full, "%s/%s", set->root, rel);
    char *text = read_text_file(full, NULL);
    if (!text) {
        snprintf(set->err, sizeof set->err, "cannot read %s", full);
        return;
    }
    region_list regions;
    if (!regions_scan(rel, text, &regions, set->err, sizeof set->err)) {
        free(text);
        return;
    }
    if (regions.count == 0) {
        free(text);
        return;
    }
    set->files = realloc(set->files, (size_t)(set->count + 1) * sizeof *set->files);
    source_file *f = &set->files[set->count++];
    snprintf(f->path, sizeof f->path, "%s", rel);
    f->text = text;
    f->regions = regions;
}

/* Every core source with lab regions; malformed markers or regions of labs that do not exist stop it. */
static source_set collect_regions(const char *root) {
    source_set set = {.root = root};
    if (!tree_walk(root, "core", SOURCE_SUFFIXES, collect_one, &set)) die("no core/ folder under %s", root);
    if (set.err[0]) die("%s", set.err);
    for (int i = 0; i < set.count; i++)
        for (int j = 0; j < set.files[i].regions.count; j++) {
            const region *r = &set.files[i].regions.items[j];
            char dir[256];
            if (!lab_dir(root, r->lab, dir, sizeof dir))
                die("%s:%d: region of lab %02d, but there is no labs/lab%02d-* folder (unknown lab)", set.files[i].path,
                    r->begin_line, r->lab, r->lab);
        }
    return set;
}

static int count_lab_regions(const source_file *f, int lab) {
    int n = 0;
    for (int j = 0; j < f->regions.count; j++) n += f->regions.items[j].lab == lab;
    return n;
}

static char *labs_table(void); /* the lab table of the student README (below, with `mixpar-grade labs`) */

/* ---------------------------------------------------------------- regions */

static int cmd_regions(int argc, char **argv) {
    const char *root = argc > 0 ? argv[0] : ".";
    source_set set = collect_regions(root);
    int total = 0;
    for (int i = 0; i < set.count; i++)
        for (int j = 0; j < set.files[i].regions.count; j++, total++) {
            const region *r = &set.files[i].regions.items[j];
            printf("lab %02d  %s:%d-%d  %s\n", r->lab, set.files[i].path, r->begin_line, r->end_line, r->title);
            char why[256];
            const char *body = set.files[i].text + r->body_start;
            if (!body_stays_a_body(body, r->body_end - r->body_start, r->begin_line + 1, why, sizeof why))
                die("%s: region '%s': %s (the splice would refuse it)", set.files[i].path, r->title, why);
        }
    printf("%d regions in %d files, all markers well formed\n", total, set.count);
    return 0;
}

/* ---------------------------------------------------------------- handout */

/* What the student edition leaves out: the solutions, the hidden tests, the core's own test suite (it
 * checks the reference code and would give answers away), CI, and anything built. */
static const char *const HANDOUT_SKIP[] = {
    ".git", "build", "dist", "runs", "data", "solutions", "grader/hidden", "tests/unit", "tests/cli", "tests/mpi",
    "tests/reference",
    ".ci", "submit-lab*", "results.json",
    "catchup", ".catchup-backup", /* released reference regions (make release), a student's first versions */
    "tests/mutants", /* planted bugs: their '-' lines are the reference regions' code */
    "core/cuda/convert.cu", /* its device fp16/bf16 encoders are lab 03's answer, written out for the GPU */
    NULL};

/* "labs/lab04-underflow-and-loss-scaling/README.md": where a stub of that lab's region points
 * (a file holds regions of several labs: each stub names its own lab's handout). */
static const char *handout_of_lab(int lab) {
    static char path[300];
    if (!lab_dir(".", lab, path, sizeof path)) return NULL;
    strncat(path, "/README.md", sizeof path - strlen(path) - 1);
    return path;
}

/* labs/labNN-slug/answers.md of lab `lab` under root, or false when the lab has none. */
static bool answers_file(const char *root, int lab, char *out, size_t cap) {
    char dir[300];
    if (!lab_dir(root, lab, dir, sizeof dir)) return false;
    snprintf(out, cap, "%s/%s/answers.md", root, dir);
    return exists(out);
}

/* Reads an answers file without trusting its size: at most ANSWERS_MAX_BYTES are kept, *len is its whole size.
 * NULL when there is none. */
static char *read_answers_bounded(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    struct stat st;
    char *text = NULL;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode)) {
        *len = (size_t)st.st_size;
        size_t keep = *len > ANSWERS_MAX_BYTES ? 0 : *len;
        text = malloc(keep + 1);
        if (text) text[fread(text, 1, keep, f)] = '\0';
    }
    fclose(f);
    return text;
}

/* The handout's answers files: every "Qn:" line emptied (the instructor's answers stay here). Returns how many. */
static int blank_answer_files(const char *out) {
    int nums[100], n = lab_numbers(".", nums, 100), blanked = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        if (!answers_file(out, nums[i], path, sizeof path)) continue;
        char *text = read_text_file(path, NULL);
        char *blank = text ? answers_blank(text) : NULL;
        if (!blank || !write_text_file(path, blank)) die("cannot blank %s", path);
        free(text);
        free(blank);
        blanked++;
    }
    return blanked;
}

static int cmd_handout(int argc, char **argv) {
    if (argc != 1) die("usage: mixpar-grade handout OUTDIR");
    const char *out = argv[0];
    source_set set = collect_regions(".");
    struct stat st;
    if (stat(out, &st) == 0) {
        char marker[4096];
        snprintf(marker, sizeof marker, "%s/.student-edition", out);
        if (stat(marker, &st) != 0)
            die("%s exists and is not a student edition made by this tool; remove it or choose another folder", out);
        if (!tree_remove(out, "")) die("cannot remove the old %s", out);
    }
    char err[512];
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", out);
    for (char *p = parent + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(parent, 0755);
            *p = '/';
        }
    if (!tree_copy(".", out, HANDOUT_SKIP, err, sizeof err)) die("%s", err);
    int regions = 0;
    for (int i = 0; i < set.count; i++) {
        source_file *f = &set.files[i];
        char *stubbed = regions_stub(f->text, &f->regions, -1, handout_of_lab);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", out, f->path);
        if (!write_text_file(path, stubbed)) die("cannot write %s", path);
        free(stubbed);
        regions += f->regions.count;
    }
    int blanked = blank_answer_files(out);
    char path[4096];
    snprintf(path, sizeof path, "%s/.student-edition", out);
    if (!write_text_file(path, "This is the student edition of mixpar, made by 'make handout'.\n"))
        die("cannot write %s", path);
    /* The student edition's README is its own (how to work the labs), not the instructor's. */
    char *readme = read_text_file("tools/README.student.md", NULL);
    if (readme) {
        char *table = labs_table();
        size_t len = strlen(readme) + strlen(table) + 512;
        char *whole = malloc(len);
        if (!whole) die("out of memory");
        snprintf(whole, len, "%s\n## The labs\n\nEach lab's handout is its README.md. \"needs labs\": earlier labs whose code "
                 "this lab's experiment and tests run (finish those first, or see `make catchup` above); \"points\": "
                 "visible and hidden tests and the graded questions of `answers.md` together.\n\n%s", readme, table);
        snprintf(path, sizeof path, "%s/README.md", out);
        if (!write_text_file(path, whole)) die("cannot write %s", path);
        free(whole);
        free(table);
        free(readme);
    }
    printf("student edition written to %s: %d regions in %d files replaced by LAB_TODO stubs, %d answers files "
           "blanked; solutions, hidden tests and the core's own tests left out\n", out, regions, set.count, blanked);
    return 0;
}

/* ---------------------------------------------------------------- the table of labs */

/* The labs as a Markdown table (number, titles, the labs each requires, hours, region files, points), from each
 * lab.json: `mixpar-grade labs` prints it, and the student edition's README ends with it. Returns malloc'd text. */
static char *labs_table(void) {
    int nums[100];
    int n = lab_numbers(".", nums, 100);
    size_t cap = 4096 + (size_t)n * 1024, o = 0;
    char *t = malloc(cap);
    if (!t) die("out of memory");
    o += (size_t)snprintf(t + o, cap - o,
                          "| lab | chapter | 章节 | needs labs | hours | you write in | points |\n"
                          "|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        lab_info info;
        char err[512], needs[128] = "", files[1024] = "", hours[16] = "?";
        if (!lab_load(".", nums[i], &info, err, sizeof err)) die("%s", err);
        size_t k = 0;
        for (int r = 0; r < info.nrequires; r++)
            k += (size_t)snprintf(needs + k, sizeof needs - k, "%s%02d", r ? ", " : "", info.requires[r]);
        k = 0;
        for (int f = 0; f < info.nfiles; f++)
            k += (size_t)snprintf(files + k, sizeof files - k, "%s`%s`", f ? ", " : "", info.files[f]);
        if (info.hours > 0) snprintf(hours, sizeof hours, "%g", info.hours);
        double points = 0;
        for (int j = 0; j < info.ntests; j++) points += info.tests[j].points;
        for (int j = 0; j < info.nquestions; j++) points += info.questions[j].points;
        if (o + 2048 > cap) {
            cap *= 2;
            t = realloc(t, cap);
            if (!t) die("out of memory");
        }
        o += (size_t)snprintf(t + o, cap - o, "| %02d | [%s](%s/README.md) | %s | %s | %s | %s | %g |\n", nums[i],
                              info.title, info.dir, info.title_zh, needs[0] ? needs : "-", hours, files, points);
        lab_free(&info);
    }
    return t;
}

static int cmd_labs(int argc, char **argv) {
    (void)argv;
    if (argc != 0) die("usage: mixpar-grade labs");
    char *t = labs_table();
    fputs(t, stdout);
    free(t);
    return 0;
}

/* ---------------------------------------------------------------- submit */

/* The archive of this tree's lab `lab` regions (the files that hold them, whole, and a MANIFEST) at `out`. */
static void write_regions_archive(int lab, const char *out) {
    lab_info info;
    char err[512];
    if (!lab_load(".", lab, &info, err, sizeof err)) die("%s", err);
    source_set set = collect_regions(".");
    const char *paths[64], *contents[65];
    int n = 0, regions = 0, stubs = 0;
    char manifest[8192];
    int m = snprintf(manifest, sizeof manifest, "mixpar submission\nlab: %02d\ntitle: %s\nfiles:\n", lab, info.title);
    for (int i = 0; i < set.count && n < 62; i++) { /* room for answers.md and MANIFEST */
        int k = count_lab_regions(&set.files[i], lab);
        if (!k) continue;
        paths[n] = set.files[i].path;
        contents[n] = set.files[i].text;
        n++;
        regions += k;
        m += snprintf(manifest + m, sizeof manifest - (size_t)m, "  %s (%d region%s)\n", set.files[i].path, k,
                      k == 1 ? "" : "s");
        for (int j = 0; j < set.files[i].regions.count; j++) {
            const region *r = &set.files[i].regions.items[j];
            const char *body = set.files[i].text + r->body_start;
            if (r->lab == lab && memmem(body, r->body_end - r->body_start, "LAB_TODO(", 9)) {
                printf("warning: %s:%d: region '%s' is still a LAB_TODO stub; its tests will fail\n",
                       set.files[i].path, r->begin_line, r->title);
                stubs++;
            }
        }
    }
    if (n == 0) die("no regions of lab %02d found under core/ (is this the mixpar tree?)", lab);
    /* The answers file travels whole (the grader reads only its "Qn:" lines); one it could not read stays out. */
    char answers_path[4096], answers_rel[320];
    char *answers = NULL;
    if (info.nquestions && answers_file(".", lab, answers_path, sizeof answers_path)) {
        size_t len = 0;
        answers = read_answers_bounded(answers_path, &len);
        answer_sheet sheet;
        answers_read(answers, len, answers_path + 2, &info, &sheet);
        if (sheet.problem[0]) {
            printf("warning: %s\n", sheet.problem);
            free(answers);
            answers = NULL;
        } else {
            int given = answers_count(&sheet, &info);
            snprintf(answers_rel, sizeof answers_rel, "%s/answers.md", info.dir);
            paths[n] = answers_rel;
            contents[n++] = answers;
            m += snprintf(manifest + m, sizeof manifest - (size_t)m, "  %s (%d of %d questions answered)\n",
                          answers_rel, given, info.nquestions);
            if (given < info.nquestions)
                printf("warning: %s answers %d of %d questions; an unanswered one scores 0\n", answers_rel, given,
                       info.nquestions);
        }
        answers_free(&sheet);
    }
    paths[n] = "MANIFEST";
    contents[n] = manifest;
    if (!tar_write(out, paths, contents, n + 1, err, sizeof err)) die("%s", err);
    free(answers);
    printf("wrote %s: lab %02d, %d region%s in %d file%s%s\n", out, lab, regions, regions == 1 ? "" : "s", n,
           n == 1 ? "" : "s", stubs ? " (some still stubs, see the warnings)" : "");
    lab_free(&info);
}

static int cmd_submit(int argc, char **argv) {
    if (argc < 1) die("usage: mixpar-grade submit NN [-o FILE]");
    int lab = parse_lab(argv[0]);
    char out[256];
    snprintf(out, sizeof out, "submit-lab%02d.tar", lab);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) snprintf(out, sizeof out, "%s", argv[++i]);
        else die("unknown argument '%s' (usage: mixpar-grade submit NN [-o FILE])", argv[i]);
    }
    write_regions_archive(lab, out);
    printf("only the bodies of your LAB %02d regions are graded; everything else comes from a clean copy\n", lab);
    return 0;
}

/* ---------------------------------------------------------------- release and catchup */

/* Where released reference regions wait for `make catchup`: catchup/labNN.tar in the student's tree. */
static const char *const CATCHUP_DIR = "catchup";
static const char *const CATCHUP_BACKUP = ".catchup-backup";
static const char *const STUDENT_MARKER = ".student-edition";

/* release NN [-o FILE]: the instructor's lab NN regions as catchup/labNN.tar, for students who fall behind (after
 * the deadline, say): `make catchup` in a student's tree fills the stubs of required labs from such files. */
static int cmd_release(int argc, char **argv) {
    if (argc < 1) die("usage: mixpar-grade release NN [-o FILE]");
    int lab = parse_lab(argv[0]);
    char out[256];
    snprintf(out, sizeof out, "%s/lab%02d.tar", CATCHUP_DIR, lab);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) snprintf(out, sizeof out, "%s", argv[++i]);
        else die("unknown argument '%s' (usage: mixpar-grade release NN [-o FILE])", argv[i]);
    }
    if (exists(STUDENT_MARKER))
        die("this is the student edition: its lab %02d regions are a student's, not the reference; run 'make release "
            "LAB=%02d' in the instructor's tree", lab, lab);
    mkdir(CATCHUP_DIR, 0755);
    write_regions_archive(lab, out);
    printf("copy %s into a student's tree as %s/lab%02d.tar; 'make catchup LAB=NN' there fills lab %02d's stubs\n",
           out, CATCHUP_DIR, lab, lab);
    return 0;
}

/* The file `path` (relative) written whole or not at all, its first version kept under .catchup-backup/ once. */
static bool replace_keeping_backup(const char *path, const char *text, char *err, size_t errlen) {
    char backup[4096], tmp[4096];
    snprintf(backup, sizeof backup, "%s/%s", CATCHUP_BACKUP, path);
    if (!exists(backup)) {
        char *old = read_text_file(path, NULL);
        bool saved = old && write_text_file(backup, old);
        free(old);
        if (!saved) {
            snprintf(err, errlen, "cannot keep a copy of %s in %s", path, backup);
            return false;
        }
    }
    snprintf(tmp, sizeof tmp, "%s.catchup-tmp", path);
    if (!write_text_file(tmp, text) || rename(tmp, path) != 0) {
        unlink(tmp);
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return false;
    }
    return true;
}

/* catchup NN [--from DIR]: the labs lab NN requires (lab.json "requires") that are still stubs here get the
 * instructor's released regions (DIR/labRR.tar, from `make release`), so that lab NN's experiment and tests run.
 * Only stub regions are filled: whatever the student wrote stays. Every archive is read and checked before any
 * file changes; each changed file's first version is kept in .catchup-backup/. */
static int cmd_catchup(int argc, char **argv) {
    const char *usage = "usage: mixpar-grade catchup NN [--from DIR]";
    if (argc < 1) die("%s", usage);
    int lab = parse_lab(argv[0]);
    const char *from = CATCHUP_DIR;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--from") == 0 && i + 1 < argc) from = argv[++i];
        else die("unknown argument '%s' (%s)", argv[i], usage);
    }
    lab_info info;
    char err[1024];
    if (!lab_load(".", lab, &info, err, sizeof err)) die("%s", err);
    if (info.nrequires == 0) {
        printf("lab %02d (%s) runs no earlier lab's regions: there is nothing to catch up on\n", lab, info.title);
        lab_free(&info);
        return 0;
    }
    source_set set = collect_regions(".");
    enum { MAX_REQ = 16 };
    tar_archive archives[MAX_REQ];
    bool needed[MAX_REQ] = {false}, loaded[MAX_REQ] = {false};
    char missing[1024] = "";
    size_t mlen = 0;
    for (int k = 0; k < info.nrequires; k++) {
        int r = info.requires[k];
        for (int i = 0; i < set.count && !needed[k]; i++)
            needed[k] = regions_has_stub(set.files[i].text, &set.files[i].regions, r);
        if (!needed[k]) {
            printf("lab %02d: your regions are all written; kept as they are\n", r);
            continue;
        }
        char path[4096], manifest_lab[32];
        snprintf(path, sizeof path, "%s/lab%02d.tar", from, r);
        if (!exists(path)) {
            mlen += (size_t)snprintf(missing + mlen, sizeof missing - mlen, "%s%s", mlen ? ", " : "", path);
            continue;
        }
        if (!tar_read(path, &archives[k], err, sizeof err)) die("%s: %s", path, err);
        loaded[k] = true;
        const tar_entry *m = tar_find(&archives[k], "MANIFEST");
        snprintf(manifest_lab, sizeof manifest_lab, "\nlab: %02d\n", r);
        if (!m || !strstr(m->data, manifest_lab))
            die("%s is not lab %02d's release (its MANIFEST has no 'lab: %02d'); the instructor makes it with "
                "'make release LAB=%02d'", path, r, r, r);
    }
    if (mlen)
        die("lab %02d runs the regions of labs it requires, and these are still stubs here without a released "
            "reference: %s is missing. Finish them yourself, or ask your instructor for the release "
            "('make release LAB=NN' in the instructor's edition) and put it there", lab, missing);
    /* Every file's new text first (any failure leaves the tree as it was), then the writes. */
    char *texts[256] = {NULL};
    int filled_total = 0;
    for (int k = 0; k < info.nrequires; k++) {
        if (!needed[k]) continue;
        int r = info.requires[k];
        for (int i = 0; i < set.count && i < 256; i++) {
            source_file *f = &set.files[i];
            if (!regions_has_stub(f->text, &f->regions, r)) continue;
            const tar_entry *e = tar_find(&archives[k], f->path);
            if (!e) die("%s/lab%02d.tar has no %s, which holds lab %02d regions", from, r, f->path, r);
            region_list released;
            if (!regions_scan(f->path, e->data, &released, err, sizeof err)) die("%s/lab%02d.tar: %s", from, r, err);
            int filled = 0;
            char *merged = regions_fill_stubs(f->path, f->text, &f->regions, e->data, &released, r, &filled, err,
                                              sizeof err);
            regions_free(&released);
            if (!merged) die("%s/lab%02d.tar: %s", from, r, err);
            region_list moved;
            if (!regions_scan(f->path, merged, &moved, err, sizeof err)) die("%s", err);
            free(f->text);
            regions_free(&f->regions);
            f->text = texts[i] = merged;
            f->regions = moved;
            printf("lab %02d: %s: %d stub region%s filled from the release\n", r, f->path, filled, filled == 1 ? "" : "s");
            filled_total += filled;
        }
    }
    for (int i = 0; i < set.count && i < 256; i++)
        if (texts[i] && !replace_keeping_backup(set.files[i].path, texts[i], err, sizeof err)) die("%s", err);
    for (int k = 0; k < info.nrequires; k++)
        if (loaded[k]) tar_free(&archives[k]);
    printf("%d region%s filled; your own regions are untouched; the files as they were are in %s/. Now 'make lab%02d'.\n",
           filled_total, filled_total == 1 ? "" : "s", CATCHUP_BACKUP, lab);
    lab_free(&info);
    return 0;
}

/* ---------------------------------------------------------------- grade */

/* What a grading copy leaves out: never the solutions or the hidden tests' sources (the hidden tests come in
 * compiled, in a separate binary), nor the core's own tests, nor anything built or run. */
static const char *const GRADING_SKIP[] = {".git", "build", "dist", "runs", "data", "submit-lab*", "results.json",
                                           "solutions", "grader/hidden", "tests/unit", "tests/cli", "tests/mpi",
                                           "tests/reference", "tests/mutants", ".ci", "catchup", ".catchup-backup",
                                           NULL};
/* Of this tree's compiled objects, the grading copy takes the core's (so only spliced files recompile). */
static const char *const GRADING_OBJ_SKIP[] = {"grader", "tests/unit", "tests/cli", NULL};

/* Grades running at once in one tree (an instructor grading a deadline's archives with xargs -P, or make test's
 * suites) share no grading folder, log or half-built object:
 * - each grade takes the first of build/grading/labNN, labNN.2, labNN.3, ... whose lock (NAME.lock, flock) it can
 *   hold, and holds it until it exits, when the kernel lets it go;
 * - what a grade builds or copies in this tree itself (objects, the reference, the hidden tests' objects) it does
 *   under build/grading/.tree.lock, so another grade never reads an object while make rewrites it. */
static bool claim_grading_folder(const char *base, char *root, size_t rootlen) {
    mkdir("build", 0755);
    mkdir("build/grading", 0755);
    for (int k = 1; k <= 64; k++) {
        if (k == 1) snprintf(root, rootlen, "%s", base);
        else snprintf(root, rootlen, "%s.%d", base, k);
        char lock[PATH_MAX];
        snprintf(lock, sizeof lock, "%s.lock", root);
        int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) return false;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return true; /* fd stays open: the folder is this grade's */
        close(fd);
    }
    return false;
}

static int lock_this_tree(void) {
    mkdir("build", 0755);
    mkdir("build/grading", 0755);
    int fd = open("build/grading/.tree.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    while (fd >= 0 && flock(fd, LOCK_EX) != 0 && errno == EINTR) {
    }
    return fd;
}

static void unlock_this_tree(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* Builds a grading folder build/grading/labNN: a copy of this tree with the submission's lab regions
 * spliced in. Only region bodies are taken from the archive; nothing from it is written elsewhere.
 * `mixpar-grade splice` makes build/grading/spliced-labNN (or spliced-labNN+MM, with several labs: lab k's
 * regions from submissions[k]), so a tree it makes outlives the grades run in the same tree. */
static bool prepare_submissions(const char *prefix, int nlabs, const int *labs, const char *const *submissions,
                                char *root, size_t rootlen, char *err, size_t errlen) {
    enum { MAX_SPLICED = 16 };
    if (nlabs < 1 || nlabs > MAX_SPLICED) {
        snprintf(err, errlen, "between 1 and %d labs at a time", MAX_SPLICED);
        return false;
    }
    tar_archive archives[MAX_SPLICED];
    for (int k = 0; k < nlabs; k++)
        if (!tar_read(submissions[k], &archives[k], err, errlen)) {
            while (k--) tar_free(&archives[k]);
            return false;
        }
    char base[128];
    size_t used = (size_t)snprintf(base, sizeof base, "build/grading/%slab%02d", prefix, labs[0]);
    for (int k = 1; k < nlabs && used < sizeof base; k++)
        used += (size_t)snprintf(base + used, sizeof base - used, "+%02d", labs[k]);
    if (!claim_grading_folder(base, root, rootlen)) {
        snprintf(err, errlen, "cannot claim a grading folder %s[.N] (64 grades of it at once, or build/grading is not "
                 "writable)", base);
        for (int k = 0; k < nlabs; k++) tar_free(&archives[k]);
        return false;
    }
    tree_remove(root, "build/grading/");
    if (!tree_copy(".", root, GRADING_SKIP, err, errlen)) {
        for (int k = 0; k < nlabs; k++) tar_free(&archives[k]);
        return false;
    }
    /* The clean tree's compiled objects come along (times kept), so only the spliced files recompile. */
    char objs[512];
    snprintf(objs, sizeof objs, "%s/build/obj", root);
    struct stat st;
    if (stat("build/obj", &st) == 0) {
        mkdir(objs, 0755);
        objs[strlen(objs) - 4] = '\0';
        mkdir(objs, 0755);
        strcat(objs, "/obj");
        if (!tree_copy("build/obj", objs, GRADING_OBJ_SKIP, err, errlen)) {
            for (int k = 0; k < nlabs; k++) tar_free(&archives[k]);
            return false;
        }
        char stamp[512];
        snprintf(stamp, sizeof stamp, "%s/build/.deps-ok", root);
        write_text_file(stamp, "");
    }
    source_set set = collect_regions(root);
    bool ok = true;
    for (int k = 0; k < nlabs && ok; k++) {
        int lab = labs[k], spliced = 0;
        for (int i = 0; i < set.count && ok; i++) {
            source_file *f = &set.files[i];
            if (!count_lab_regions(f, lab)) continue;
            const tar_entry *e = tar_find(&archives[k], f->path);
            if (!e) {
                snprintf(err, errlen, "the submission has no %s, which holds lab %02d regions; make it with "
                         "'make submit LAB=%02d'", f->path, lab, lab);
                ok = false;
                break;
            }
            region_list submitted;
            if (!regions_scan(f->path, e->data, &submitted, err, errlen)) {
                ok = false;
                break;
            }
            char *merged = regions_splice(f->path, f->text, &f->regions, e->data, &submitted, lab, err, errlen);
            regions_free(&submitted);
            if (!merged) {
                ok = false;
                break;
            }
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", root, f->path);
            ok = write_text_file(path, merged);
            if (!ok) snprintf(err, errlen, "cannot write %s", path);
            /* the next lab splices into this text: its regions move */
            region_list moved;
            if (ok && !regions_scan(f->path, merged, &moved, err, errlen)) ok = false;
            if (ok) {
                free(f->text);
                regions_free(&f->regions);
                f->text = merged;
                f->regions = moved;
            } else {
                free(merged);
            }
            spliced++;
        }
        if (ok && spliced == 0) {
            snprintf(err, errlen, "this tree has no lab %02d regions to grade", lab);
            ok = false;
        }
        /* The copy's answers file is the submission's, or none: never the reference answers. */
        char answers_path[4096], dir[300];
        if (ok && answers_file(root, lab, answers_path, sizeof answers_path) && lab_dir(root, lab, dir, sizeof dir)) {
            char rel[320];
            snprintf(rel, sizeof rel, "%s/answers.md", dir);
            const tar_entry *e = tar_find(&archives[k], rel);
            ok = e ? write_text_file(answers_path, e->data) : unlink(answers_path) == 0;
            if (!ok) snprintf(err, errlen, "cannot write %s", answers_path);
        }
    }
    for (int k = 0; k < nlabs; k++) tar_free(&archives[k]);
    return ok;
}

static bool prepare_submission(int lab, const char *submission, char *root, size_t rootlen, char *err, size_t errlen) {
    return prepare_submissions("", 1, &lab, &submission, root, rootlen, err, errlen);
}

/* Does `body` use identifier `name` outside comments and strings? */
static bool uses_identifier(const char *body, size_t len, const char *name) {
    size_t n = strlen(name);
    for (size_t i = 0; i < len; i++) {
        if (body[i] == '/' && i + 1 < len && body[i + 1] == '*') {
            const char *end = memmem(body + i + 2, len - i - 2, "*/", 2);
            i = end ? (size_t)(end - body) + 1 : len;
        } else if (body[i] == '/' && i + 1 < len && body[i + 1] == '/') {
            while (i < len && body[i] != '\n') i++;
        } else if (body[i] == '"') {
            for (i++; i < len && body[i] != '"'; i++)
                if (body[i] == '\\') i++;
        } else if (i + n <= len && memcmp(body + i, name, n) == 0 &&
                   (i == 0 || !(isalnum((unsigned char)body[i - 1]) || body[i - 1] == '_')) &&
                   (i + n == len || !(isalnum((unsigned char)body[i + n]) || body[i + n] == '_'))) {
            return true;
        }
    }
    return false;
}

/* The lab's "forbidden" rule over its region bodies in `root`: the first use found, or "" when none. */
static void check_rules(const char *root, const lab_info *info, char *violation, size_t cap) {
    violation[0] = '\0';
    if (!info->nforbidden) return;
    source_set set = collect_regions(root);
    for (int i = 0; i < set.count && !violation[0]; i++)
        for (int j = 0; j < set.files[i].regions.count && !violation[0]; j++) {
            const region *r = &set.files[i].regions.items[j];
            if (r->lab != info->lab) continue;
            for (int k = 0; k < info->nforbidden; k++)
                if (uses_identifier(set.files[i].text + r->body_start, r->body_end - r->body_start,
                                    info->forbidden[k])) {
                    snprintf(violation, cap, "%s:%d: region '%s' uses %s, which lab %02d does not allow%s%s",
                             set.files[i].path, r->begin_line, r->title, info->forbidden[k], info->lab,
                             info->forbidden_why[0] ? ": " : "", info->forbidden_why);
                    break;
                }
        }
}

/* ---------------------------------------------------------------- rules on the compiled objects */

/* What a region file may call beyond what the reference file calls: the C library's math, memory, string
 * and printing functions (for debugging output). Anything else new (dlopen, syscall, another module's
 * complete answer) makes the rules fail. */
static const char *const ALWAYS_ALLOWED[] = {
    "memcpy", "memset", "memmove", "memcmp", "strlen", "strcmp", "strncmp", "printf", "fprintf", "puts", "fputs",
    "putchar", "fputc", "fflush", "fwrite", "stdout", "stderr", "abort", "__stack_chk_fail", "__printf_chk",
    "__fprintf_chk", "__memcpy_chk", "__memset_chk", "__memmove_chk", "abs", "labs", "llabs",
    "fabs", "fabsf", "floor", "floorf", "ceil", "ceilf", "rint", "rintf", "nearbyint", "nearbyintf", "round",
    "roundf", "lround", "lroundf", "lrint", "lrintf", "trunc", "truncf", "sqrt", "sqrtf", "exp", "expf", "exp2",
    "exp2f", "log", "logf", "log2", "log2f", "pow", "powf", "ldexp", "ldexpf", "frexp", "frexpf", "fmod", "fmodf",
    "fmax", "fmaxf", "fmin", "fminf", "tanh", "tanhf", "erf", "erff", "copysign", "copysignf", "nextafter",
    "nextafterf", "scalbn", "scalbnf", "ilogb", "ilogbf", "logb", "logbf", "modf", "modff", "cbrt", "cbrtf",
    "sin", "sinf", "cos", "cosf", NULL};

typedef struct {
    char names[512][96];
    int count;
} name_set;

static bool set_has(const name_set *s, const char *name) {
    for (int i = 0; i < s->count; i++)
        if (strcmp(s->names[i], name) == 0) return true;
    return false;
}

static void set_add(name_set *s, const char *name) {
    if (s->count < 512 && !set_has(s, name)) snprintf(s->names[s->count++], sizeof s->names[0], "%s", name);
}

/* nm's defined and undefined symbols of `object` (a defined name without its .part/.cold/.constprop suffix). */
static bool object_symbols(const char *object, name_set *defined, name_set *undefined) {
    char command[PATH_MAX + 64];
    snprintf(command, sizeof command, "nm -P '%s' 2>/dev/null", object);
    FILE *p = popen(command, "r");
    if (!p) return false;
    defined->count = undefined->count = 0;
    char line[512];
    int lines = 0;
    while (fgets(line, sizeof line, p)) {
        char name[256], type;
        if (sscanf(line, "%255s %c", name, &type) != 2) continue;
        lines++;
        if (type == 'U') {
            set_add(undefined, name);
        } else if (strchr("TtDdBbRrWwVv", type)) {
            char *dot = strchr(name, '.');
            if (dot && dot != name) *dot = '\0';
            if (name[0] != '.' && strncmp(name, "__func__", 8) != 0) set_add(defined, name);
        }
    }
    return pclose(p) == 0 && lines > 0;
}

/* How many times `mnemonic` is in the disassembly, and whether the object has a constructor section. */
static int count_in_objdump(const char *object, const char *args, const char *what) {
    char command[PATH_MAX + 200];
    snprintf(command, sizeof command, "objdump %s '%s' 2>/dev/null | grep -cE '%s'", args, object, what);
    FILE *p = popen(command, "r");
    if (!p) return -1;
    int n = -1;
    if (fscanf(p, "%d", &n) != 1) n = -1;
    pclose(p);
    return n;
}

/* Each lab file's object in the grading copy against the same object built from the reference regions. */
static void check_object_rules(const char *root, const lab_info *info, char *violation, size_t cap) {
    static name_set sub_def, sub_undef, ref_def, ref_undef;
    for (int f = 0; f < info->nfiles && !violation[0]; f++) {
        const char *file = info->files[f];
        size_t len = strlen(file);
        if (len < 3 || strcmp(file + len - 2, ".c") != 0) continue;
        char sub[PATH_MAX + 300], ref[PATH_MAX + 300];
        snprintf(sub, sizeof sub, "%s/build/obj/%.*s.o", root, (int)(len - 2), file);
        snprintf(ref, sizeof ref, "build/obj/%.*s.o", (int)(len - 2), file);
        if (!object_symbols(ref, &ref_def, &ref_undef)) continue; /* no reference object: nothing to compare */
        if (!object_symbols(sub, &sub_def, &sub_undef)) {
            snprintf(violation, cap, "%s: its compiled object could not be read", file);
            return;
        }
        for (int i = 0; i < sub_undef.count && !violation[0]; i++) {
            const char *name = sub_undef.names[i];
            bool forbidden = false;
            for (int k = 0; k < info->nforbidden; k++) forbidden |= strcmp(name, info->forbidden[k]) == 0;
            bool allowed = set_has(&ref_undef, name);
            if (forbidden && allowed) {
                /* The file's own code outside the regions calls it too (step.c clips with clip_global_norm where
                 * lab 07 may not): a call from a region shows as one more relocation against it. */
                char pattern[160];
                snprintf(pattern, sizeof pattern, "[[:space:]]%s([-+]|$)", name);
                forbidden = count_in_objdump(sub, "-r", pattern) > count_in_objdump(ref, "-r", pattern);
            }
            for (int k = 0; ALWAYS_ALLOWED[k] && !allowed; k++) allowed = strcmp(name, ALWAYS_ALLOWED[k]) == 0;
            if (forbidden || !allowed)
                snprintf(violation, cap, "%s: the compiled code calls %s, which lab %02d's regions may not use%s%s", file,
                         name, info->lab, forbidden && info->forbidden_why[0] ? ": " : "",
                         forbidden ? info->forbidden_why : " (the reference does not need it)");
        }
        for (int i = 0; i < sub_def.count && !violation[0]; i++)
            if (!set_has(&ref_def, sub_def.names[i]))
                snprintf(violation, cap, "%s: the compiled code defines %s, which the course's file does not: a region "
                         "may only fill in its function", file, sub_def.names[i]);
        static const char *const ctor_sections[] = {".init_array", ".ctors", ".fini_array", ".dtors", ".preinit_array", NULL};
        for (int k = 0; ctor_sections[k] && !violation[0]; k++) {
            char pattern[64];
            snprintf(pattern, sizeof pattern, " \\%s", ctor_sections[k]);
            if (count_in_objdump(sub, "-h", pattern) > count_in_objdump(ref, "-h", pattern))
                snprintf(violation, cap, "%s: the compiled code has a %s section (code that runs before or after main)",
                         file, ctor_sections[k]);
        }
        for (int k = 0; k < info->nforbidden_instructions && !violation[0]; k++) {
            char pattern[64];
            snprintf(pattern, sizeof pattern, "[[:space:]]%s[[:space:]]", info->forbidden_instructions[k]);
            int s = count_in_objdump(sub, "-d", pattern), r = count_in_objdump(ref, "-d", pattern);
            if (s > r)
                snprintf(violation, cap, "%s: the compiled code uses the %s instruction, which lab %02d does not allow%s%s",
                         file, info->forbidden_instructions[k], info->lab, info->forbidden_why[0] ? ": " : "",
                         info->forbidden_why);
        }
    }
}

/* Runs a shell command in `dir`, output to `log`; returns its exit status. */
static int run_logged(const char *dir, const char *command, const char *log) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cd '%s' && (%s) > '%s' 2>&1", dir, command, log);
    int status = system(cmd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* The lines of a build log worth showing: errors first, else the tail. */
static void print_build_errors(const char *log, FILE *out, char *summary, size_t cap) {
    char *text = read_text_file(log, NULL);
    if (!text) return;
    size_t used = 0;
    int shown = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line && shown < 30;
         line = strtok_r(NULL, "\n", &save)) {
        if (!strstr(line, "error") && !strstr(line, "Error") && !strstr(line, "undefined reference")) continue;
        fprintf(out, "    %s\n", line);
        int n = snprintf(summary + used, cap - used, "%s\n", line);
        if (n > 0 && used + (size_t)n < cap) used += (size_t)n;
        shown++;
    }
    if (!shown) fprintf(out, "    (see %s)\n", log);
    free(text);
}

static void write_results(const char *path, cJSON *results) {
    if (!path) return;
    char *text = cJSON_Print(results);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!write_text_file(tmp, text) || rename(tmp, path) != 0) fprintf(stderr, "mixpar-grade: cannot write %s\n", path);
    free(text);
}

/* A lab whose tests also run earlier labs' regions (lab.json "requires": lab 07 trains a real model, so
 * it needs lab 02's backward passes): say which of those are still stubs in the tree being graded, so a
 * student reads "finish lab 02 first" rather than a wall of failures. */
static void note_required_stubs(const char *root, const lab_info *info) {
    for (int k = 0; k < info->nrequires; k++) {
        int r = info->requires[k];
        lab_info req;
        char err[512], stub[32];
        if (!lab_load(root, r, &req, err, sizeof err)) continue;
        snprintf(stub, sizeof stub, "LAB_TODO(%d);", r);
        for (int f = 0; f < req.nfiles; f++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", root, req.files[f]);
            char *text = read_text_file(path, NULL);
            bool stubbed = text && strstr(text, stub);
            free(text);
            if (stubbed) {
                printf("note: lab %02d's tests also run lab %02d (%s), whose regions in %s are still stubs; tests "
                       "that reach them stop with \"lab %02d not done\": finish lab %02d first\n",
                       info->lab, r, req.title, req.files[f], r, r);
                break;
            }
        }
        lab_free(&req);
    }
}

/* splice NN[,MM...] --submission FILE.tar [--submission FILE2.tar ...]: the folder build/grading/spliced-labNN
 * (this tree with the submission's lab NN regions spliced in, as grade makes it; with several labs,
 * spliced-labNN+MM, lab k's regions from the k-th archive), compiled, and no test run: to look at what a
 * submission becomes, or to build a tree in which earlier labs are done (tests/pipeline.sh does, for labs
 * that require others). */
static int cmd_splice(int argc, char **argv) {
    const char *usage = "usage: mixpar-grade splice NN[,MM...] --submission FILE.tar [--submission FILE.tar ...]";
    if (argc < 3) die("%s", usage);
    int labs[16], nlabs = 0;
    const char *subs[16];
    int nsubs = 0;
    char list[256];
    snprintf(list, sizeof list, "%s", argv[0]);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        if (nlabs == 16) die("at most 16 labs at a time");
        labs[nlabs++] = parse_lab(tok);
    }
    for (int i = 1; i < argc; i += 2) {
        if (strcmp(argv[i], "--submission") != 0 || i + 1 >= argc || nsubs == 16) die("%s", usage);
        subs[nsubs++] = argv[i + 1];
    }
    if (nsubs != nlabs) die("one --submission per lab (%d labs, %d archives)", nlabs, nsubs);
    char root[256], err[1024];
    int tree = lock_this_tree();
    bool prepared = prepare_submissions("spliced-", nlabs, labs, subs, root, sizeof root, err, sizeof err);
    unlock_this_tree(&tree);
    if (!prepared) {
        fprintf(stderr, "mixpar-grade: submission rejected: %s\n", err);
        return EXIT_BAD;
    }
    char command[256], abs_log[4096], cwd[2048];
    if (!getcwd(cwd, sizeof cwd)) die("cannot read the current folder");
    snprintf(abs_log, sizeof abs_log, "%s/build/grade-build-%s.log", cwd, root + strlen("build/grading/"));
    snprintf(command, sizeof command, "mkdir -p build && make -s labtests LAB=%02d", labs[0]);
    const char *what = nlabs > 1 ? "labs" : "lab";
    if (run_logged(root, command, abs_log) != 0) {
        printf("%s: %s %s regions spliced; the build failed\n", root, what, argv[0]);
        char summary[2048];
        print_build_errors(abs_log, stdout, summary, sizeof summary);
        return 1;
    }
    printf("%s: %s %s regions spliced and built\n", root, what, argv[0]);
    return 0;
}

/* A fresh seed for this grade: the inputs the tests draw (mpt_seed) are unknown before it starts. */
static void make_seed(char *seed, size_t cap) {
    unsigned char raw[8] = {0};
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, raw, sizeof raw) != (ssize_t)sizeof raw) {
        unsigned long long x = (unsigned long long)(now_s() * 1e9) ^ ((unsigned long long)getpid() << 32);
        memcpy(raw, &x, sizeof raw);
    }
    if (fd >= 0) close(fd);
    size_t o = 0;
    for (size_t i = 0; i < sizeof raw && o + 3 <= cap; i++) o += (size_t)snprintf(seed + o, cap - o, "%02x", raw[i]);
}

/* The hidden tests of `lab` in a binary of their own, built against the tree at `root` (abs_root) from objects
 * compiled in this tree: the grading copy never holds their sources, and the visible tests' binary, whose
 * output a student sees, holds none of their code. Returns the binary's folder (its build/labs), or "". */
static bool build_hidden(int lab, const char *abs_root, const char *abs_log, char *dir, size_t cap) {
    char command[8192], here[PATH_MAX];
    dir[0] = '\0';
    if (!getcwd(here, sizeof here)) return false;
    snprintf(command, sizeof command, "make -s hidden-objs LAB=%02d", lab);
    if (run_logged(".", command, abs_log) != 0) return false;
    char objs[4096] = "";
    char hidden_dir[300];
    snprintf(hidden_dir, sizeof hidden_dir, "grader/hidden/lab%02d", lab);
    DIR *d = opendir(hidden_dir);
    if (!d) return false;
    size_t used = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n < 3 || strcmp(e->d_name + n - 2, ".c") != 0) continue;
        used += (size_t)snprintf(objs + used, sizeof objs - used, "%s/build/obj/%s/%.*s.o ", here, hidden_dir,
                                 (int)(n - 2), e->d_name);
    }
    closedir(d);
    snprintf(dir, cap, "%s-hidden/build/labs", abs_root); /* beside the grading copy, e.g. build/grading/lab05-hidden */
    snprintf(command, sizeof command, "mkdir -p '%s' && make -s hidden-tests LAB=%02d HIDDEN_OBJS='%s' HIDDEN_OUT='%s/lab%02d_tests'",
             dir, lab, objs, dir, lab);
    if (run_logged(abs_root, command, abs_log) != 0) return false;
    /* Tests that start ranks run the visible worker program: it sits beside them. */
    char worker[4096];
    snprintf(worker, sizeof worker, "%s/build/labs/lab%02d_worker", abs_root, lab);
    if (exists(worker)) {
        snprintf(command, sizeof command, "cp -p '%s' '%s/'", worker, dir);
        if (run_logged(".", command, abs_log) != 0) return false;
    }
    return true;
}

/* Text from a test for the terminal and results.json: valid UTF-8, no control sequences, capped; each line
 * indented, so nothing a test prints can pass for a line of the grader's own. */
static char *indented_clean(const char *text, size_t len) {
    char *clean = clean_text(text, len, 16 * 1024);
    size_t cap = strlen(clean) * 2 + 64, o = 0;
    char *out = malloc(cap);
    for (const char *line = clean; *line;) {
        size_t n = strcspn(line, "\n");
        o += (size_t)snprintf(out + o, cap - o, "%s%.*s\n", strncmp(line, "    ", 4) == 0 ? "" : "    ", (int)n, line);
        line += n + (line[n] == '\n');
    }
    out[o] = '\0';
    free(clean);
    return out;
}

/* The reference's run of a test, started beside the submission's so that a grade takes about as long as the
 * slower of the two: a child of the grader runs it (sandboxed like any run) and sends back how it ended and
 * what it observed. */
typedef struct {
    pid_t pid;
    int fd;
} reference_run;

typedef struct {
    bool finished, timed_out, out_of_memory, observations_truncated;
    int exit_code, signal;
    double seconds;
    size_t observations_len;
} reference_header;

static bool write_all(int fd, const void *data, size_t len) {
    const char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n, len -= (size_t)n;
    }
    return true;
}

static bool read_all(int fd, void *data, size_t len) {
    char *p = data;
    while (len) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n, len -= (size_t)n;
    }
    return true;
}

static reference_run start_reference(const char *exe, const char *name, const char *seed, const run_spec *spec) {
    reference_run rr = {-1, -1};
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return rr;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        run_result r;
        run_observed(exe, name, seed, spec, &r);
        reference_header h = {r.finished, r.timed_out, r.out_of_memory, r.observations_truncated, r.exit_code,
                              r.signal, r.seconds, r.observations ? r.observations_len : 0};
        bool ok = write_all(p[1], &h, sizeof h) && write_all(p[1], r.observations ? r.observations : "", h.observations_len);
        _exit(ok ? 0 : 1);
    }
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        return rr;
    }
    rr.pid = pid, rr.fd = p[0];
    return rr;
}

/* Waits for the reference's run; a run that could not be had reads as one that did not finish. */
static void finish_reference(reference_run *rr, run_result *r) {
    memset(r, 0, sizeof *r);
    if (rr->pid < 0) return;
    reference_header h;
    if (read_all(rr->fd, &h, sizeof h) && h.observations_len < ((size_t)1 << 31)) {
        char *obs = malloc(h.observations_len + 1);
        if (obs && read_all(rr->fd, obs, h.observations_len)) {
            obs[h.observations_len] = '\0';
            r->finished = h.finished, r->timed_out = h.timed_out, r->out_of_memory = h.out_of_memory;
            r->observations_truncated = h.observations_truncated;
            r->exit_code = h.exit_code, r->signal = h.signal, r->seconds = h.seconds;
            r->observations = obs, r->observations_len = h.observations_len;
        } else {
            free(obs);
        }
    }
    close(rr->fd);
    int status;
    while (waitpid(rr->pid, &status, 0) < 0 && errno == EINTR) {
    }
    rr->pid = -1, rr->fd = -1;
}

/* ---------------------------------------------------------------- questions (answers.md) */

/* What grading the questions needs from cmd_grade. */
typedef struct {
    const lab_info *info;
    const char *root;      /* the graded tree: its answers file and, for questions about a run, its build */
    bool official;         /* this tree's answers file is the reference's (the instructor's edition) */
    bool built;            /* the graded tree's tests built */
    const char *exe;       /* ./build/labs/labNN_tests, inside the sandbox */
    run_spec spec;         /* the visible tests' sandbox in the graded tree */
    const char *filter;
} question_context;

/* The `which`-th near observation's value ("n OK FILE:LINE GOT ...") of a run's records; false when none. */
static bool nth_near_value(const char *observations, int which, double *value) {
    for (const char *p = observations; p && *p;) {
        const char *nl = strchr(p, '\n');
        if (p[0] == 'n' && p[1] == ' ' && which-- == 0) {
            char got[64];
            if (sscanf(p, "n %*s %*s %63s", got) != 1) return false;
            char *end;
            *value = strtod(got, &end);
            return end != got && isfinite(*value);
        }
        p = nl ? nl + 1 : NULL;
    }
    return false;
}

/* The value a question about the student's own run expects: what the graded code computes in the sandbox for the
 * question's test and seed. False with why (how the run ended) when it gave none. */
static bool value_from_run(const question_context *c, const lab_question *q, double *value, char *why, size_t cap) {
    if (!c->built) return snprintf(why, cap, "the code did not build"), false;
    run_result r;
    run_observed(c->exe, q->from_test, q->seed, &c->spec, &r);
    char ending[300] = "";
    run_ending(&r, c->spec.time_limit_s, c->spec.memory_mb, ending, sizeof ending);
    bool ok = r.finished && r.signal == 0 && nth_near_value(r.observations, q->observation, value);
    if (!ok)
        snprintf(why, cap, "%s", ending[0] ? ending
                 : r.exit_code == 86 ? "it stopped at a LAB_TODO stub (finish the lab's regions first)"
                 : "it stopped before computing it (run the lab's experiment to see why)");
    run_result_free(&r);
    return ok;
}

/* The reference's number or letter for question k (the instructor's answers file). */
static bool key_of(const answer_sheet *key, int k, quiz_kind kind, double *number, char *letter) {
    const char *a = key->given[k];
    char why[160];
    if (!a || key->repeated_at[k] || !quiz_answer_readable(kind, a, why, sizeof why)) return false;
    if (kind == QUIZ_NUMBER) return quiz_answer_number(a, number);
    *letter = a[0];
    return true;
}

/* Grades the lab's questions (lab.json "questions", answers in labs/labNN-slug/answers.md) as part
 * "Q. questions": adds to *score and *max, one entry per question to tests_json and to answers_json. Returns how
 * many questions it graded (the filter may leave some out). */
static int grade_questions(const question_context *c, cJSON *tests_json, cJSON *answers_json, double *score,
                           double *max) {
    const lab_info *info = c->info;
    static const char *const PART = "Q. questions";
    char path[4096], shown_path[320];
    snprintf(shown_path, sizeof shown_path, "%s/answers.md", info->dir);
    snprintf(path, sizeof path, "%s/%s", c->root, shown_path);
    size_t len = 0;
    char *text = read_answers_bounded(path, &len);
    answer_sheet sheet, key;
    answers_read(text, len, shown_path, info, &sheet);
    free(text);
    bool have_key = false;
    memset(&key, 0, sizeof key);
    if (c->official) { /* the reference answers: this (the instructor's) tree's own file */
        snprintf(path, sizeof path, "./%s", shown_path);
        text = read_answers_bounded(path, &len);
        answers_read(text, len, shown_path, info, &key);
        have_key = !key.problem[0];
        free(text);
    }
    double part_score = 0, part_max = 0;
    int graded = 0;
    if (sheet.problem[0]) {
        char *clean = clean_text(sheet.problem, strlen(sheet.problem), 600);
        printf("== Questions == %s\n", clean);
        free(clean);
    } else {
        printf("== Questions == %s: %d of %d answered%s\n", shown_path, answers_count(&sheet, info), info->nquestions,
               have_key ? "" : "; this edition has no answer key, so only questions about your own runs are checked "
                               "here (the course's grade checks all)");
    }
    if (sheet.notes[0]) {
        char *clean = clean_text(sheet.notes, strlen(sheet.notes), 600);
        printf("    note: %s\n", clean);
        free(clean);
    }
    for (int k = 0; k < info->nquestions; k++) {
        const lab_question *q = &info->questions[k];
        char name[48];
        snprintf(name, sizeof name, "question_%s", q->id);
        if (c->filter && !strstr(name, c->filter)) continue;
        graded++;
        const char *given = sheet.given[k];
        char verdict[16] = "WRONG", why[700] = "";
        int correct = -1; /* -1: not judged (text, or nothing to judge against) */
        char readable_why[200];
        if (sheet.problem[0]) {
            snprintf(verdict, sizeof verdict, "UNREAD");
            snprintf(why, sizeof why, "the answers file was not read (above)");
        } else if (!given || !given[0]) {
            snprintf(verdict, sizeof verdict, "UNANSWERED");
            snprintf(why, sizeof why, "no answer: write it after '%s:' in %s (a %s)", q->id, shown_path,
                     quiz_kind_name((quiz_kind)q->kind));
        } else if (sheet.repeated_at[k]) {
            snprintf(why, sizeof why, "answered twice (lines %d and %d): keep one '%s:' line", sheet.line[k],
                     sheet.repeated_at[k], q->id);
            correct = 0;
        } else if (q->kind == QUIZ_TEXT) {
            snprintf(verdict, sizeof verdict, "TEXT");
            snprintf(why, sizeof why, "%s", sheet.too_long[k] ? "cut at 4000 characters for your teacher" : "");
        } else if (sheet.too_long[k] || !quiz_answer_readable((quiz_kind)q->kind, given, readable_why, sizeof readable_why)) {
            snprintf(verdict, sizeof verdict, "UNREADABLE");
            snprintf(why, sizeof why, "line %d: %s", sheet.line[k],
                     sheet.too_long[k] ? "longer than 4000 characters" : readable_why);
            correct = 0;
        } else if (q->from_test[0]) {
            double expected;
            char run_why[400];
            if (!value_from_run(c, q, &expected, run_why, sizeof run_why)) {
                snprintf(why, sizeof why, "your run (test %s, seed %s) gave no value to compare with: %s", q->from_test,
                         q->seed, run_why);
                correct = 0;
            } else {
                correct = quiz_answer_right(QUIZ_NUMBER, given, expected, 0, q->rel_tol, q->abs_tol);
                if (!correct)
                    snprintf(why, sizeof why, "your code's run (the one the question names) gives %.10g; you wrote %s "
                             "(tolerance: %g relative, %g absolute)", expected, given, q->rel_tol, q->abs_tol);
            }
        } else if (!have_key) {
            snprintf(verdict, sizeof verdict, "NOT CHECKED");
            snprintf(why, sizeof why, "answered; the answer key is the course's, so the course's grade checks it");
        } else {
            double number = 0;
            char letter = 0;
            if (!key_of(&key, k, (quiz_kind)q->kind, &number, &letter)) {
                snprintf(why, sizeof why, "the reference answers file has no readable answer to %s: a problem of the "
                         "course, not of your answer", q->id);
                correct = 0;
            } else {
                correct = quiz_answer_right((quiz_kind)q->kind, given, number, letter, q->rel_tol, q->abs_tol);
                if (!correct) snprintf(why, sizeof why, "not the expected %s", quiz_kind_name((quiz_kind)q->kind));
            }
        }
        if (correct == 1) snprintf(verdict, sizeof verdict, "OK");
        double earned = correct == 1 ? q->points : 0;
        part_score += earned;
        part_max += q->points;
        char *clean_why = clean_text(why, strlen(why), sizeof why + 64);
        if (q->kind == QUIZ_TEXT) printf("== Question %s == %s (text: for your teacher to read, not scored)\n", q->id, verdict);
        else printf("== Question %s == %s (%s, %g point%s)\n", q->id, verdict, quiz_kind_name((quiz_kind)q->kind),
                    q->points, q->points == 1 ? "" : "s");
        if (clean_why[0]) printf("    %s\n", clean_why);
        cJSON *tj = cJSON_CreateObject();
        cJSON_AddStringToObject(tj, "name", name);
        cJSON_AddStringToObject(tj, "number", q->id);
        cJSON_AddNumberToObject(tj, "score", earned);
        cJSON_AddNumberToObject(tj, "max_score", q->points);
        cJSON_AddStringToObject(tj, "status", correct == 1 || (q->kind == QUIZ_TEXT && given && given[0]) ? "passed"
                                                                                                          : "failed");
        cJSON_AddStringToObject(tj, "output", clean_why);
        cJSON_AddStringToObject(tj, "visibility", "visible");
        cJSON_AddItemToArray(cJSON_AddArrayToObject(tj, "tags"), cJSON_CreateString(PART));
        cJSON_AddItemToArray(tests_json, tj);
        cJSON *aj = cJSON_CreateObject();
        cJSON_AddStringToObject(aj, "id", q->id);
        cJSON_AddStringToObject(aj, "kind", quiz_kind_name((quiz_kind)q->kind));
        char *clean_answer = given ? clean_text(given, strlen(given), ANSWERS_MAX_ANSWER + 64) : NULL;
        if (clean_answer) cJSON_AddStringToObject(aj, "answer", clean_answer);
        else cJSON_AddNullToObject(aj, "answer");
        if (correct < 0) cJSON_AddNullToObject(aj, "correct");
        else cJSON_AddBoolToObject(aj, "correct", correct == 1);
        cJSON_AddItemToArray(answers_json, aj);
        free(clean_answer);
        free(clean_why);
    }
    if (graded) printf("  Part %s: %g/%g\n", PART, part_score, part_max);
    *score += part_score;
    *max += part_max;
    answers_free(&sheet);
    answers_free(&key);
    return graded;
}

static int cmd_grade(int argc, char **argv) {
    if (argc < 1)
        die("usage: mixpar-grade grade NN [--submission FILE.tar] [--filter TEXT] [--json FILE] "
            "[--hidden-visibility hidden|after_due_date|after_published]");
    int lab = parse_lab(argv[0]);
    const char *submission = NULL, *filter = NULL, *json_path = NULL, *visibility = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--submission") == 0 && i + 1 < argc) submission = argv[++i];
        else if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc) filter = argv[++i];
        else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) json_path = argv[++i];
        else if (strcmp(argv[i], "--hidden-visibility") == 0 && i + 1 < argc) visibility = argv[++i];
        else die("unknown argument '%s'", argv[i]);
    }
    if (visibility && strcmp(visibility, "hidden") && strcmp(visibility, "after_due_date") &&
        strcmp(visibility, "after_published"))
        die("--hidden-visibility must be hidden, after_due_date or after_published, not '%s'", visibility);
    double scale = 1.0;
    const char *env = getenv("MIXPAR_TIME_SCALE");
    if (env && (scale = atof(env)) <= 0) die("MIXPAR_TIME_SCALE must be a positive number, not '%s'", env);
    double t_start = now_s();

    lab_info info;
    char err[1024];
    if (!lab_load(".", lab, &info, err, sizeof err)) die("%s", err);
    if (!visibility) visibility = info.hidden_visibility;
    cJSON *results = cJSON_CreateObject();
    cJSON_AddNumberToObject(results, "score", 0);
    cJSON_AddNumberToObject(results, "execution_time", 0);
    cJSON *tests_json = cJSON_AddArrayToObject(results, "tests");

    /* With the reference regions at hand (the instructor's edition), each test's observations are compared
     * with the reference's; the student edition has none, so there a test judges itself (a practice grade). */
    bool official = !exists(".student-edition");
    printf("Grading lab %02d: %s%s%s%s\n", lab, info.title, info.title_zh[0] ? " (" : "", info.title_zh,
           info.title_zh[0] ? ")" : "");
    char root[256] = ".";
    int tree = lock_this_tree(); /* released once what is built or copied in this tree is done */
    if (submission) {
        if (!prepare_submission(lab, submission, root, sizeof root, err, sizeof err)) {
            double total = 0;
            for (int i = 0; i < info.ntests; i++) total += info.tests[i].points;
            for (int i = 0; i < info.nquestions; i++) total += info.questions[i].points;
            char *clean = clean_text(err, strlen(err), sizeof err);
            printf("== Submission == REJECTED\n    %s\nScore: 0/%g\n", clean, total);
            cJSON_AddStringToObject(results, "output", clean);
            free(clean);
            write_results(json_path, results);
            cJSON_Delete(results);
            return EXIT_BAD;
        }
        printf("submission %s: lab %02d regions spliced into a clean copy in %s\n", submission, lab, root);
        if (official && info.nrequires) {
            printf("the labs it builds on (");
            for (int k = 0; k < info.nrequires; k++) printf("%s%02d", k ? ", " : "", info.requires[k]);
            printf(") come from the reference, so they are graded only in their own lab\n");
        }
    }
    printf("sandbox: %s\n", runner_protections());
    note_required_stubs(root, &info);

    /* Logs go to this tree's build/, never into the grading copy, which a failed build may leave half-made. */
    char command[256], abs_log[PATH_MAX + 64], cwd[PATH_MAX], abs_root[PATH_MAX];
    mkdir("build", 0755);
    if (!getcwd(cwd, sizeof cwd)) die("cannot read the current folder");
    if (!realpath(root, abs_root)) die("cannot resolve %s", root);
    bool self = strcmp(abs_root, cwd) == 0; /* grading this very tree */
    /* the log of a grading copy is named after it (grades at once in this tree keep their own) */
    if (self) snprintf(abs_log, sizeof abs_log, "%s/build/grade-build-lab%02d.log", cwd, lab);
    else snprintf(abs_log, sizeof abs_log, "%s/build/grade-build-%s.log", cwd, root + strlen("build/grading/"));
    snprintf(command, sizeof command, "mkdir -p build && make -s labtests LAB=%02d", lab);
    char violation[1024];
    check_rules(root, &info, violation, sizeof violation);
    if (violation[0]) printf("== Rules == FAIL\n    %s\n    every test scores 0 until the region keeps to the rule\n", violation);
    double t0 = now_s();
    if (!self) unlock_this_tree(&tree); /* the grading copy is this grade's own */
    int built = run_logged(root, command, abs_log) == 0;
    if (tree < 0) tree = lock_this_tree();
    char hidden_labs[PATH_MAX + 64] = "";
    bool has_hidden = false;
    for (int i = 0; i < info.ntests; i++) has_hidden |= info.tests[i].hidden;
    if (built && has_hidden && !self) {
        char hidden_log[PATH_MAX + 80];
        snprintf(hidden_log, sizeof hidden_log, "%s.hidden", abs_log);
        if (!build_hidden(lab, abs_root, hidden_log, hidden_labs, sizeof hidden_labs)) {
            printf("mixpar-grade: the hidden tests did not build (see %s): a problem of the grader\n", hidden_log);
            hidden_labs[0] = '\0';
        }
    }
    char reference_log[PATH_MAX + 80];
    snprintf(reference_log, sizeof reference_log, "%s.reference", abs_log);
    bool reference_built = official && (self ? built : run_logged(".", command, reference_log) == 0);
    unlock_this_tree(&tree);
    printf("== Build == %s (%.1fs)\n", built ? "OK" : "FAIL", now_s() - t0);
    if (built && reference_built && !self && !violation[0]) {
        check_object_rules(abs_root, &info, violation, sizeof violation);
        if (violation[0])
            printf("== Rules == FAIL\n    %s\n    every test scores 0 until the region keeps to the rule\n", violation);
    }

    char build_summary[4096] = "";
    if (!built) print_build_errors(abs_log, stdout, build_summary, sizeof build_summary);
    if (official && !reference_built && built) printf("mixpar-grade: the reference did not build (see %s)\n", reference_log);
    char seed[32];
    make_seed(seed, sizeof seed);
    if (official) printf("each test is compared with the reference regions' answers on inputs drawn for this grade\n");
    else printf("practice grade: this edition has no reference, so each test judges itself; the course's grade "
                "compares your code with the reference\n");

    /* The sandboxed views: the test binaries and the configs, read-only, at their usual paths. */
    char labs_dir[PATH_MAX + 32], configs_dir[PATH_MAX + 32], ref_labs[PATH_MAX + 32], ref_configs[PATH_MAX + 32];
    snprintf(labs_dir, sizeof labs_dir, "%s/build/labs", abs_root);
    snprintf(configs_dir, sizeof configs_dir, "%s/configs", abs_root);
    snprintf(ref_labs, sizeof ref_labs, "%s/build/labs", cwd);
    snprintf(ref_configs, sizeof ref_configs, "%s/configs", cwd);
    run_bind visible_binds[] = {{labs_dir, NULL}, {configs_dir, NULL}};
    run_bind hidden_binds[] = {{hidden_labs, labs_dir}, {configs_dir, NULL}};
    run_bind reference_binds[] = {{ref_labs, NULL}, {ref_configs, NULL}};
    char exe[64];
    snprintf(exe, sizeof exe, "./build/labs/lab%02d_tests", lab);

    double budget = info.submission_limit_s;
    if (budget <= 0) {
        for (int i = 0; i < info.ntests; i++) budget += info.tests[i].time_limit_s;
        if (budget > 120) budget = 120;
    }
    budget *= scale;
    double used = 0;

    double score = 0, max = 0, part_score = 0, part_max = 0;
    int run = 0;
    const char *part = NULL;
    for (int i = 0; i < info.ntests; i++) {
        const lab_test *t = &info.tests[i];
        if (filter && !strstr(t->name, filter)) continue;
        if (part && strcmp(part, t->part) != 0 && part[0]) printf("  Part %s: %g/%g\n", part, part_score, part_max);
        if (!part || strcmp(part, t->part) != 0) part_score = part_max = 0;
        part = t->part;
        double limit = t->time_limit_s * scale;
        if (limit > budget - used) limit = budget - used;
        bool passed = false;
        double seconds = 0;
        char *shown = NULL; /* what the student may read */
        char why[600] = "", ending[300] = "";
        if (!built) {
            shown = strdup("    not graded: the code did not build (see the build errors above)\n");
        } else if (t->hidden && !self && !hidden_labs[0]) {
            shown = strdup("    not graded: the hidden tests did not build (a problem of the grader)\n");
        } else if (limit <= 0.05) {
            snprintf(ending, sizeof ending, "TIMEOUT: not run, the submission's %.0f s for all its tests are used up",
                     budget);
        } else {
            run_spec spec = {.workdir = abs_root, .binds = visible_binds, .nbinds = 2, .time_limit_s = limit,
                             .memory_mb = info.memory_limit_mb, .max_processes = 64};
            if (t->hidden && !self) spec.binds = hidden_binds;
            run_spec ref_spec = {.workdir = cwd, .binds = reference_binds, .nbinds = 2,
                                 .time_limit_s = t->time_limit_s * scale * 2 + 5,
                                 .memory_mb = info.memory_limit_mb, .max_processes = 64};
            reference_run pending = {-1, -1};
            if (official && !self && reference_built) pending = start_reference(exe, t->name, seed, &ref_spec);
            run_result student;
            run_observed(exe, t->name, seed, &spec, &student);
            used += student.seconds;
            seconds = student.seconds;
            run_ending(&student, limit, info.memory_limit_mb, ending, sizeof ending);
            bool came_back = student.finished && student.signal == 0 && !student.observations_truncated;
            if (!official) {
                passed = came_back && student.exit_code == 0 && verdict_self(student.observations, why, sizeof why);
            } else if (came_back) {
                run_result ref;
                if (self) ref = student, ref.output = NULL, ref.observations = student.observations;
                else finish_reference(&pending, &ref);
                /* The reference must pass its own checks (else the test, not the submission, is wrong). */
                char ref_why[600];
                if (!reference_built || !ref.finished || ref.signal ||
                    !verdict_self(ref.observations, ref_why, sizeof ref_why))
                    snprintf(why, sizeof why, "the reference fails this test too: a problem of the test or the grader");
                else
                    passed = verdict_compare(student.observations, ref.observations, why, sizeof why);
                if (passed && student.exit_code != 0) {
                    /* a test that passes returns 0 from main; an exit from inside the code under test does not */
                    passed = false;
                    snprintf(why, sizeof why, "the test exited with status %d, not from its end", student.exit_code);
                }
                if (!self) run_result_free(&ref);
            }
            if (pending.pid >= 0) { /* the submission's run did not come back: the reference's is not needed */
                run_result unused;
                finish_reference(&pending, &unused);
                run_result_free(&unused);
            }
            if (student.observations_truncated) snprintf(why, sizeof why, "more observations than the grader keeps");
            if (!t->hidden && !passed) shown = indented_clean(student.output, student.output_len);
            run_result_free(&student);
        }
        if (!passed && !shown) shown = strdup(t->hidden ? "    (a hidden test: its messages are not shown)\n" : "");
        if (!passed && (why[0] || ending[0])) {
            char note[1000];
            snprintf(note, sizeof note, "    %s\n", ending[0] ? ending : why);
            if (t->hidden && !ending[0]) note[0] = '\0'; /* a hidden test's checks are not named */
            char *clean = clean_text(note, strlen(note), sizeof note);
            shown = realloc(shown, strlen(shown) + strlen(clean) + 1);
            strcat(shown, clean);
            free(clean);
        }
        if (violation[0] && passed) {
            passed = false;
            free(shown);
            shown = malloc(strlen(violation) + 32);
            sprintf(shown, "    scored 0: %s\n", violation);
        }
        run++;
        max += t->points;
        part_max += t->points;
        if (passed) {
            score += t->points;
            part_score += t->points;
        }
        printf("== Test %s == %s (%.2fs)%s\n", t->name, passed ? "OK" : "FAIL", seconds, t->hidden ? "  [hidden]" : "");
        if (!passed && shown && shown[0]) fputs(shown, stdout);
        fflush(stdout);
        cJSON *tj = cJSON_CreateObject();
        cJSON_AddStringToObject(tj, "name", t->name);
        char number[16];
        snprintf(number, sizeof number, "%d", i + 1);
        cJSON_AddStringToObject(tj, "number", number);
        cJSON_AddNumberToObject(tj, "score", passed ? t->points : 0);
        cJSON_AddNumberToObject(tj, "max_score", t->points);
        cJSON_AddStringToObject(tj, "status", passed ? "passed" : "failed");
        cJSON_AddStringToObject(tj, "output", passed || !shown ? "" : shown);
        cJSON_AddStringToObject(tj, "visibility", t->hidden ? visibility : "visible");
        if (t->part[0]) {
            cJSON *tags = cJSON_AddArrayToObject(tj, "tags");
            cJSON_AddItemToArray(tags, cJSON_CreateString(t->part));
        }
        cJSON_AddItemToArray(tests_json, tj);
        cJSON_SetNumberValue(cJSON_GetObjectItem(results, "score"), score);
        cJSON_SetNumberValue(cJSON_GetObjectItem(results, "execution_time"), now_s() - t_start);
        write_results(json_path, results); /* after every test: a crash of the grader keeps what was scored */
        free(shown);
    }
    if (part && part[0]) printf("  Part %s: %g/%g\n", part, part_score, part_max);
    if (info.nquestions) {
        run_spec question_spec = {.workdir = abs_root, .binds = visible_binds, .nbinds = 2,
                                  .time_limit_s = info.time_limit_s * scale, .memory_mb = info.memory_limit_mb,
                                  .max_processes = 64};
        question_context qc = {&info, root, official, built, exe, question_spec, filter};
        cJSON *answers_json = cJSON_AddArrayToObject(results, "answers");
        run += grade_questions(&qc, tests_json, answers_json, &score, &max);
        cJSON_SetNumberValue(cJSON_GetObjectItem(results, "score"), score);
    }
    if (run == 0) die("no test or question of lab %02d matches '%s'", lab, filter ? filter : "");
    printf("Score: %g/%g\n", score, max);
    char summary[4200];
    snprintf(summary, sizeof summary, "Lab %02d: %g/%g%s%s", lab, score, max, built ? "" : "\nBuild failed:\n",
             build_summary);
    char *clean = clean_text(summary, strlen(summary), sizeof summary);
    cJSON_AddStringToObject(results, "output", clean);
    free(clean);
    write_results(json_path, results);
    cJSON_Delete(results);
    lab_free(&info);
    return score == max ? 0 : 1;
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        fprintf(stderr, "usage: mixpar-grade regions | handout OUTDIR | submit NN [-o FILE] |\n"
                        "                    grade NN [--submission FILE.tar] [--filter TEXT] [--json FILE] |\n"
                        "                    splice NN[,MM...] --submission FILE.tar [--submission FILE.tar ...] |\n"
                        "                    release NN [-o FILE] | catchup NN [--from DIR] | labs\n");
        return EXIT_BAD;
    }
    if (strcmp(argv[1], "regions") == 0) return cmd_regions(argc - 2, argv + 2);
    if (strcmp(argv[1], "handout") == 0) return cmd_handout(argc - 2, argv + 2);
    if (strcmp(argv[1], "submit") == 0) return cmd_submit(argc - 2, argv + 2);
    if (strcmp(argv[1], "grade") == 0) return cmd_grade(argc - 2, argv + 2);
    if (strcmp(argv[1], "splice") == 0) return cmd_splice(argc - 2, argv + 2);
    if (strcmp(argv[1], "release") == 0) return cmd_release(argc - 2, argv + 2);
    if (strcmp(argv[1], "catchup") == 0) return cmd_catchup(argc - 2, argv + 2);
    if (strcmp(argv[1], "labs") == 0) return cmd_labs(argc - 2, argv + 2);
    die("unknown command '%s' (regions, handout, submit, grade, splice, release, catchup, labs)", argv[1]);
}
