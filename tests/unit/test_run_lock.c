/* test_run_lock.c: the run directory's lock (a second holder is refused, naming the first) and stale temporaries. */
#include "train/run_lock.h"
#include "unit_files.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A child takes the lock and holds it until the pipe closes; the parent's attempt meanwhile must fail and
 * name the child's pid; once the child is gone, the lock is free (the kernel dropped it: no stale lock). */
Test(run_lock, second_holder_is_refused_naming_the_first_and_freed_when_it_dies) {
    char *dir = unit_tmpdir("runlock");
    int ready[2], hold[2];
    cr_assert_eq(pipe(ready), 0);
    cr_assert_eq(pipe(hold), 0);
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        close(ready[0]);
        close(hold[1]);
        data_err e;
        char ok = run_lock_acquire(dir, NULL, &e) ? 'y' : 'n';
        (void)!write(ready[1], &ok, 1);
        char c;
        (void)!read(hold[0], &c, 1); /* until the parent closes its end */
        _exit(0);
    }
    close(ready[1]);
    close(hold[0]);
    char ok = 0;
    cr_assert_eq(read(ready[0], &ok, 1), 1);
    cr_assert_eq(ok, 'y', "the first holder should get the lock");
    data_err e;
    cr_assert_not(run_lock_acquire(dir, NULL, &e), "a second holder while the first lives should be refused");
    char pid[64];
    snprintf(pid, sizeof pid, "pid %ld on ", (long)child);
    cr_expect(strstr(e.found, "is in use by another job") && strstr(e.found, pid),
              "the refusal should name the holder (%s); got: %s", pid, e.found);
    cr_expect(strstr(e.hint, "train.run_dir") != NULL, "the hint should say what to do; got: %s", e.hint);
    close(hold[1]);
    int status;
    waitpid(child, &status, 0);
    cr_assert(run_lock_acquire(dir, NULL, &e), "the lock of a dead holder should be free: %s", e.found);
    unit_remove_tree(dir);
}

Test(run_lock, stale_temporaries_are_removed_and_counted_checkpoints_kept) {
    char *dir = unit_tmpdir("stale");
    char path[600];
    char buf[300] = {0};
    snprintf(path, sizeof path, "%s/checkpoint.safetensors.tmp.x1Y2z3", dir);
    unit_write_file(path, buf, 300);
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", dir);
    unit_write_file(path, buf, 100);
    snprintf(path, sizeof path, "%s/checkpoint.sharded", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/checkpoint.sharded/index.json", dir);
    unit_write_file(path, buf, 10);
    snprintf(path, sizeof path, "%s/checkpoint.sharded.tmp", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/checkpoint.sharded.tmp/rank-00000-of-00001.safetensors", dir);
    unit_write_file(path, buf, 200);
    snprintf(path, sizeof path, "%s/checkpoint.sharded.old", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/checkpoint.sharded.old/index.json", dir);
    unit_write_file(path, buf, 20);
    run_cleared c;
    data_err e;
    cr_assert(run_clear_stale(dir, &c, &e), "%s", e.found);
    cr_expect_eq(c.files, 3, "files removed: the .tmp file, the shard in .tmp/, .old's index; got %d", c.files);
    cr_expect_eq(c.bytes, 520, "bytes removed: 300 + 200 + 20; got %llu", (unsigned long long)c.bytes);
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", dir);
    cr_expect_eq(access(path, F_OK), 0, "the checkpoint itself must stay");
    snprintf(path, sizeof path, "%s/checkpoint.sharded/index.json", dir);
    cr_expect_eq(access(path, F_OK), 0, "the sharded checkpoint must stay");
    snprintf(path, sizeof path, "%s/checkpoint.sharded.tmp", dir);
    cr_expect_neq(access(path, F_OK), 0, "the temporary directory should be gone");
    unit_remove_tree(dir);
}
