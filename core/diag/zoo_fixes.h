/* zoo_fixes.h: the lab 24 bug zoo's config bugs (labs/lab24-common-problems/zoo/) and their fixes, as data: the
 * config overrides (`--set key=value`) that break a run, and those that repair it. */
#ifndef MIXPAR_DIAG_ZOO_FIXES_H
#define MIXPAR_DIAG_ZOO_FIXES_H

enum { ZOO_MAX_OVERRIDES = 6 };

typedef struct {
    const char *bug;                              /* the zoo folder's name without its number: "fp16-lr-too-high" */
    const char *broken[ZOO_MAX_OVERRIDES];        /* on top of configs/synthetic-addition.json; NULL-terminated */
} zoo_bug;

/* The zoo's config bugs, in zoo order; *count gets their number. */
const zoo_bug *zoo_config_bugs(int *count);
const zoo_bug *zoo_config_bug(const char *bug); /* NULL when unknown */

/* The fix for `bug`: up to ZOO_MAX_OVERRIDES "key=value" overrides applied after the broken ones, into fix[]
 * (NULL-terminated). Returns their number, or -1 for an unknown bug. */
int zoo_fix_overrides(const char *bug, const char *fix[ZOO_MAX_OVERRIDES + 1]);

#endif
