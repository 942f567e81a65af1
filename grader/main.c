/* main.c: mixpar-grade: region checks, the student handout, submissions and grading (make grade/submit/handout). */
#include "labinfo.h"
#include "regions.h"
#include "runner.h"
#include "tarball.h"
#include "tree.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
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

/* ---------------------------------------------------------------- regions */

static int cmd_regions(int argc, char **argv) {
    const char *root = argc > 0 ? argv[0] : ".";
    source_set set = collect_regions(root);
    int total = 0;
    for (int i = 0; i < set.count; i++)
        for (int j = 0; j < set.files[i].regions.count; j++, total++) {
            const region *r = &set.files[i].regions.items[j];
            printf("lab %02d  %s:%d-%d  %s\n", r->lab, set.files[i].path, r->begin_line, r->end_line, r->title);
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
    char path[4096];
    snprintf(path, sizeof path, "%s/.student-edition", out);
    if (!write_text_file(path, "This is the student edition of mixpar, made by 'make handout'.\n"))
        die("cannot write %s", path);
    /* The student edition's README is its own (how to work the labs), not the instructor's. */
    char *readme = read_text_file("tools/README.student.md", NULL);
    if (readme) {
        snprintf(path, sizeof path, "%s/README.md", out);
        write_text_file(path, readme);
        free(readme);
    }
    printf("student edition written to %s: %d regions in %d files replaced by LAB_TODO stubs; solutions, hidden "
           "tests and the core's own tests left out\n", out, regions, set.count);
    return 0;
}

/* ---------------------------------------------------------------- submit */

static int cmd_submit(int argc, char **argv) {
    if (argc < 1) die("usage: mixpar-grade submit NN [-o FILE]");
    int lab = parse_lab(argv[0]);
    char out[256];
    snprintf(out, sizeof out, "submit-lab%02d.tar", lab);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) snprintf(out, sizeof out, "%s", argv[++i]);
        else die("unknown argument '%s' (usage: mixpar-grade submit NN [-o FILE])", argv[i]);
    }
    lab_info info;
    char err[512];
    if (!lab_load(".", lab, &info, err, sizeof err)) die("%s", err);
    source_set set = collect_regions(".");
    const char *paths[64], *contents[65];
    int n = 0, regions = 0, stubs = 0;
    char manifest[8192];
    int m = snprintf(manifest, sizeof manifest, "mixpar submission\nlab: %02d\ntitle: %s\nfiles:\n", lab, info.title);
    for (int i = 0; i < set.count && n < 63; i++) {
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
    paths[n] = "MANIFEST";
    contents[n] = manifest;
    if (!tar_write(out, paths, contents, n + 1, err, sizeof err)) die("%s", err);
    printf("wrote %s: lab %02d, %d region%s in %d file%s%s\n", out, lab, regions, regions == 1 ? "" : "s", n,
           n == 1 ? "" : "s", stubs ? " (some still stubs, see the warnings)" : "");
    printf("only the bodies of your LAB %02d regions are graded; everything else comes from a clean copy\n", lab);
    lab_free(&info);
    return 0;
}

/* ---------------------------------------------------------------- grade */

static const char *const GRADING_SKIP[] = {".git", "build", "dist", "runs", "data", "submit-lab*", "results.json", NULL};

/* Builds a grading folder build/grading/labNN: a copy of this tree with the submission's lab regions
 * spliced in. Only region bodies are taken from the archive; nothing from it is written elsewhere. */
static bool prepare_submission(int lab, const char *submission, char *root, size_t rootlen, char *err, size_t errlen) {
    tar_archive archive;
    if (!tar_read(submission, &archive, err, errlen)) return false;
    snprintf(root, rootlen, "build/grading/lab%02d", lab);
    tree_remove(root, "build/grading/");
    mkdir("build", 0755);
    mkdir("build/grading", 0755);
    if (!tree_copy(".", root, GRADING_SKIP, err, errlen)) {
        tar_free(&archive);
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
        if (!tree_copy("build/obj", objs, NULL, err, errlen)) {
            tar_free(&archive);
            return false;
        }
        char stamp[512];
        snprintf(stamp, sizeof stamp, "%s/build/.deps-ok", root);
        write_text_file(stamp, "");
    }
    source_set set = collect_regions(root);
    bool ok = true;
    int spliced = 0;
    for (int i = 0; i < set.count && ok; i++) {
        source_file *f = &set.files[i];
        if (!count_lab_regions(f, lab)) continue;
        const tar_entry *e = tar_find(&archive, f->path);
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
        free(merged);
        spliced++;
    }
    if (ok && spliced == 0) {
        snprintf(err, errlen, "this tree has no lab %02d regions to grade", lab);
        ok = false;
    }
    tar_free(&archive);
    return ok;
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

/* Test output, each line indented, so nothing a test prints can pass for a line of the grader's own. */
static void print_indented(const char *text) {
    for (const char *line = text; *line;) {
        size_t n = strcspn(line, "\n");
        printf("%s%.*s\n", strncmp(line, "    ", 4) == 0 ? "" : "    ", (int)n, line);
        line += n + (line[n] == '\n');
    }
}

static void write_results(const char *path, cJSON *results) {
    if (!path) return;
    char *text = cJSON_Print(results);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!write_text_file(tmp, text) || rename(tmp, path) != 0) fprintf(stderr, "mixpar-grade: cannot write %s\n", path);
    free(text);
}

static bool list_has(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0')) return true;
    return false;
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

/* splice NN --submission FILE.tar: the grading folder build/grading/labNN (this tree with the submission's lab NN
 * regions spliced in), compiled, and no test run: to look at what a submission becomes, or to build a tree
 * in which an earlier lab is done (tests/pipeline.sh does, for labs that require others). */
static int cmd_splice(int argc, char **argv) {
    if (argc != 3 || strcmp(argv[1], "--submission") != 0) die("usage: mixpar-grade splice NN --submission FILE.tar");
    int lab = parse_lab(argv[0]);
    char root[256], err[1024];
    if (!prepare_submission(lab, argv[2], root, sizeof root, err, sizeof err)) {
        fprintf(stderr, "mixpar-grade: submission rejected: %s\n", err);
        return EXIT_BAD;
    }
    char command[256], abs_log[4096], cwd[2048];
    if (!getcwd(cwd, sizeof cwd)) die("cannot read the current folder");
    snprintf(abs_log, sizeof abs_log, "%s/build/grade-build-lab%02d.log", cwd, lab);
    snprintf(command, sizeof command, "mkdir -p build && make -s labtests LAB=%02d", lab);
    if (run_logged(root, command, abs_log) != 0) {
        printf("%s: lab %02d regions spliced; the build failed\n", root, lab);
        char summary[2048];
        print_build_errors(abs_log, stdout, summary, sizeof summary);
        return 1;
    }
    printf("%s: lab %02d regions spliced and built\n", root, lab);
    return 0;
}

static int cmd_grade(int argc, char **argv) {
    if (argc < 1) die("usage: mixpar-grade grade NN [--submission FILE.tar] [--filter TEXT] [--json FILE]");
    int lab = parse_lab(argv[0]);
    const char *submission = NULL, *filter = NULL, *json_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--submission") == 0 && i + 1 < argc) submission = argv[++i];
        else if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc) filter = argv[++i];
        else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) json_path = argv[++i];
        else die("unknown argument '%s'", argv[i]);
    }
    double scale = 1.0;
    const char *env = getenv("MIXPAR_TIME_SCALE");
    if (env && (scale = atof(env)) <= 0) die("MIXPAR_TIME_SCALE must be a positive number, not '%s'", env);
    double t_start = now_s();

    lab_info info;
    char err[1024];
    if (!lab_load(".", lab, &info, err, sizeof err)) die("%s", err);
    cJSON *results = cJSON_CreateObject();
    cJSON_AddNumberToObject(results, "score", 0);
    cJSON_AddNumberToObject(results, "execution_time", 0);
    cJSON *tests_json = cJSON_AddArrayToObject(results, "tests");

    printf("Grading lab %02d: %s%s%s%s\n", lab, info.title, info.title_zh[0] ? " (" : "", info.title_zh,
           info.title_zh[0] ? ")" : "");
    char root[256] = ".";
    if (submission) {
        if (!prepare_submission(lab, submission, root, sizeof root, err, sizeof err)) {
            double total = 0;
            for (int i = 0; i < info.ntests; i++) total += info.tests[i].points;
            printf("== Submission == REJECTED\n    %s\nScore: 0/%g\n", err, total);
            cJSON_AddStringToObject(results, "output", err);
            write_results(json_path, results);
            cJSON_Delete(results);
            return EXIT_BAD;
        }
        printf("submission %s: lab %02d regions spliced into a clean copy in %s\n", submission, lab, root);
    }
    note_required_stubs(root, &info);

    /* Logs go to this tree's build/, never into the grading copy, which a failed build may leave half-made. */
    char command[256], abs_log[4096], cwd[2048];
    mkdir("build", 0755);
    if (!getcwd(cwd, sizeof cwd)) die("cannot read the current folder");
    snprintf(abs_log, sizeof abs_log, "%s/build/grade-build-lab%02d.log", cwd, lab);
    snprintf(command, sizeof command, "mkdir -p build && make -s labtests LAB=%02d", lab);
    char violation[1024];
    check_rules(root, &info, violation, sizeof violation);
    if (violation[0]) printf("== Rules == FAIL\n    %s\n    every test scores 0 until the region keeps to the rule\n", violation);
    double t0 = now_s();
    int built = run_logged(root, command, abs_log) == 0;
    printf("== Build == %s (%.1fs)\n", built ? "OK" : "FAIL", now_s() - t0);
    char build_summary[4096] = "";
    if (!built) print_build_errors(abs_log, stdout, build_summary, sizeof build_summary);

    char binary[4096];
    snprintf(binary, sizeof binary, "%s/build/labs/lab%02d_tests", root, lab);
    char *listed = NULL;
    if (built) {
        char list_log[4096], list_cmd[4200];
        snprintf(list_log, sizeof list_log, "%s.list", abs_log);
        snprintf(list_cmd, sizeof list_cmd, "./build/labs/lab%02d_tests --list", lab);
        if (run_logged(root, list_cmd, list_log) == 0) listed = read_text_file(list_log, NULL);
    }

    double score = 0, max = 0, part_score = 0, part_max = 0;
    int run = 0;
    const char *part = NULL;
    for (int i = 0; i < info.ntests; i++) {
        const lab_test *t = &info.tests[i];
        if (filter && !strstr(t->name, filter)) continue;
        if (part && strcmp(part, t->part) != 0 && part[0]) printf("  Part %s: %g/%g\n", part, part_score, part_max);
        if (!part || strcmp(part, t->part) != 0) part_score = part_max = 0;
        part = t->part;
        test_result r = {0};
        double limit = t->time_limit_s * scale;
        if (!built) {
            r.output = strdup("    not graded: the code did not build (see the build errors above)\n");
        } else if (!listed || !list_has(listed, t->name)) {
            r.output = strdup("    the test binary has no test of this name (was its file removed?)\n");
        } else {
            char bin_abs[4096];
            snprintf(bin_abs, sizeof bin_abs, "./build/labs/lab%02d_tests", lab);
            run_test(bin_abs, root, t->name, limit, info.memory_limit_mb, &r);
        }
        if (violation[0] && r.passed) {
            r.passed = false;
            size_t len = strlen(r.output);
            r.output = realloc(r.output, len + strlen(violation) + 32);
            sprintf(r.output + len, "    scored 0: %s\n", violation);
        }
        run++;
        max += t->points;
        part_max += t->points;
        if (r.passed) {
            score += t->points;
            part_score += t->points;
        }
        printf("== Test %s == %s (%.2fs)%s\n", t->name, r.passed ? "OK" : "FAIL", r.seconds,
               t->hidden ? "  [hidden]" : "");
        if (!r.passed && r.output[0]) print_indented(r.output);
        fflush(stdout);
        cJSON *tj = cJSON_CreateObject();
        cJSON_AddStringToObject(tj, "name", t->name);
        char number[16];
        snprintf(number, sizeof number, "%d", i + 1);
        cJSON_AddStringToObject(tj, "number", number);
        cJSON_AddNumberToObject(tj, "score", r.passed ? t->points : 0);
        cJSON_AddNumberToObject(tj, "max_score", t->points);
        cJSON_AddStringToObject(tj, "status", r.passed ? "passed" : "failed");
        cJSON_AddStringToObject(tj, "output", r.passed ? "" : r.output);
        cJSON_AddStringToObject(tj, "visibility", t->hidden ? "after_due_date" : "visible");
        if (t->part[0]) {
            cJSON *tags = cJSON_AddArrayToObject(tj, "tags");
            cJSON_AddItemToArray(tags, cJSON_CreateString(t->part));
        }
        cJSON_AddItemToArray(tests_json, tj);
        cJSON_SetNumberValue(cJSON_GetObjectItem(results, "score"), score);
        cJSON_SetNumberValue(cJSON_GetObjectItem(results, "execution_time"), now_s() - t_start);
        write_results(json_path, results); /* after every test: a crash of the grader keeps what was scored */
        free(r.output);
    }
    if (part && part[0]) printf("  Part %s: %g/%g\n", part, part_score, part_max);
    if (run == 0) die("no test of lab %02d matches '%s'", lab, filter ? filter : "");
    printf("Score: %g/%g\n", score, max);
    char summary[4200];
    snprintf(summary, sizeof summary, "Lab %02d: %g/%g%s%s", lab, score, max, built ? "" : "\nBuild failed:\n",
             build_summary);
    cJSON_AddStringToObject(results, "output", summary);
    write_results(json_path, results);
    cJSON_Delete(results);
    free(listed);
    lab_free(&info);
    return score == max ? 0 : 1;
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        fprintf(stderr, "usage: mixpar-grade regions | handout OUTDIR | submit NN [-o FILE] |\n"
                        "                    grade NN [--submission FILE.tar] [--filter TEXT] [--json FILE] |\n"
                        "                    splice NN --submission FILE.tar\n");
        return EXIT_BAD;
    }
    if (strcmp(argv[1], "regions") == 0) return cmd_regions(argc - 2, argv + 2);
    if (strcmp(argv[1], "handout") == 0) return cmd_handout(argc - 2, argv + 2);
    if (strcmp(argv[1], "submit") == 0) return cmd_submit(argc - 2, argv + 2);
    if (strcmp(argv[1], "grade") == 0) return cmd_grade(argc - 2, argv + 2);
    if (strcmp(argv[1], "splice") == 0) return cmd_splice(argc - 2, argv + 2);
    die("unknown command '%s' (regions, handout, submit, grade, splice)", argv[1]);
}
