/* panel_loss.c: panel 1: training and validation loss, learning rate and tokens/s over steps. */
#include "panels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void vz_panel_loss(WINDOW *w, const vz_model *m, const vz_view *v, const vz_style *s) {
    int rows, cols;
    getmaxyx(w, rows, cols);
    size_t n = vz_model_nsteps(m);
    const vz_step *last = vz_model_last_step(m);
    const vz_eval *eval = vz_model_last_eval(m);
    char a[32], b[32], c[32], d[32];

    /* header: the newest values */
    attr_t bold = A_BOLD;
    int x = 0;
    if (!last) {
        vz_text(w, 0, 0, cols, vz_attr(s, VZ_PAIR_DIM), "waiting for the first step event...");
    } else {
        if (m->total_steps > 0) x += vz_text(w, 0, x, cols - x, bold, "step %lld/%lld", last->step, m->total_steps);
        else x += vz_text(w, 0, x, cols - x, bold, "step %lld", last->step);
        x += vz_text(w, 0, x, cols - x, vz_attr(s, VZ_PAIR_TRAIN) | bold, "  loss %.4f", last->loss);
        if (eval) x += vz_text(w, 0, x, cols - x, vz_attr(s, VZ_PAIR_VAL) | bold, "  val %.4f (step %lld)", eval->val_loss, eval->step);
        x += vz_text(w, 0, x, cols - x, vz_attr(s, VZ_PAIR_LR), "  lr %s", vz_fmt_num(last->lr, a, sizeof a));
        x += vz_text(w, 0, x, cols - x, A_NORMAL, "  grad norm %s", vz_fmt_num(last->grad_norm, b, sizeof b));
        x += vz_text(w, 0, x, cols - x, vz_attr(s, VZ_PAIR_TOKENS), "  %s tok/s", vz_fmt_num(last->tokens_per_s, c, sizeof c));
        x += vz_text(w, 0, x, cols - x, A_NORMAL, "  scale %s", vz_fmt_num(last->scale, d, sizeof d));
        if (m->skipped_steps) x += vz_text(w, 0, x, cols - x, vz_attr(s, VZ_PAIR_WARN), "  skipped %lld", m->skipped_steps);
    }
    if (m->diagnoses) vz_text(w, 1, 0, cols, vz_attr(s, VZ_PAIR_WARN) | A_BOLD, "diagnosis: %s", m->diagnosis);
    else if (m->checkpoints)
        vz_text(w, 1, 0, cols, vz_attr(s, VZ_PAIR_DIM), "%lld checkpoint%s, the last at step %lld", m->checkpoints,
                m->checkpoints == 1 ? "" : "s", m->last_checkpoint_step);

    /* the series: steps kept by the model, evals */
    double *xs = malloc((n + 1) * sizeof *xs), *loss = malloc((n + 1) * sizeof *loss);
    double *lr = malloc((n + 1) * sizeof *lr), *toks = malloc((n + 1) * sizeof *toks);
    size_t ne = m->evals.count;
    double *ex = malloc((ne + 1) * sizeof *ex), *ey = malloc((ne + 1) * sizeof *ey);
    if (!xs || !loss || !lr || !toks || !ex || !ey) {
        fprintf(stderr, "mixpar viz: out of memory\n");
        exit(3);
    }
    for (size_t i = 0; i < n; i++) {
        const vz_step *st = vz_model_step(m, i);
        xs[i] = (double)st->step;
        loss[i] = st->loss;
        lr[i] = st->lr;
        toks[i] = st->tokens_per_s;
    }
    for (size_t i = 0; i < ne; i++) {
        const vz_eval *e = vz_ring_at(&m->evals, i);
        ex[i] = (double)e->step;
        ey[i] = e->val_loss;
    }

    /* x range: every step kept, or the newest 1/2^zoom of them */
    double xmin = n ? xs[0] : 0, xmax = n ? xs[n - 1] : 1;
    if (xmax <= xmin) xmax = xmin + 1;
    if (v->zoom > 0) {
        double span = (xmax - xmin) / pow(2, v->zoom);
        if (span < 8) span = 8;
        if (xmax - span > xmin) xmin = xmax - span;
    }
    char title[96];
    snprintf(title, sizeof title, "loss%s", v->zoom > 0 ? " (zoomed: +/- to change)" : "");

    int top = 2, rest = rows - top;
    int loss_h = rest >= 14 ? rest * 3 / 5 : rest;
    int lower_h = rest - loss_h;
    vz_series loss_series[2] = {
        {"train", VZ_PAIR_TRAIN, xs, loss, n, 0},
        {"val", VZ_PAIR_VAL, ex, ey, ne, vz_glyph_char(s, VZ_G_BULLET)},
    };
    vz_chart_opts lo = {title, xmin, xmax, false, "step"};
    vz_chart(w, top, 0, loss_h, cols, &lo, loss_series, 2, s);
    if (lower_h >= 5) {
        int half = cols / 2;
        vz_series lr_series = {"lr", VZ_PAIR_LR, xs, lr, n, 0};
        vz_series tok_series = {"tokens/s", VZ_PAIR_TOKENS, xs, toks, n, 0};
        vz_chart_opts lro = {"learning rate", xmin, xmax, false, "step"};
        vz_chart_opts to = {"tokens/s", xmin, xmax, false, "step"};
        vz_chart(w, top + loss_h, 0, lower_h, half - 1, &lro, &lr_series, 1, s);
        vz_chart(w, top + loss_h, half + 1, lower_h, cols - half - 1, &to, &tok_series, 1, s);
    }
    free(xs), free(loss), free(lr), free(toks), free(ex), free(ey);
}

/* ---------------------------------------------------------------- runs side by side */

short vz_run_pair(int run) {
    static const short PAIRS[VZ_MAX_RUNS] = {VZ_PAIR_TRAIN, VZ_PAIR_TOKENS, VZ_PAIR_LR, VZ_PAIR_VAL};
    return PAIRS[(run % VZ_MAX_RUNS + VZ_MAX_RUNS) % VZ_MAX_RUNS];
}

/* Without colour the runs are told apart by their marks: run A a line, B..D their letters; validation
 * points a bullet (A) or the run's lowercase letter. */
static wchar_t run_mark(const vz_style *s, int run, bool val) {
    if (val) return run == 0 || s->color ? vz_glyph_char(s, VZ_G_BULLET) : (wchar_t)('a' + run);
    return run == 0 || s->color ? 0 : (wchar_t)('A' + run);
}

void vz_panel_loss_runs(WINDOW *w, const vz_model *const *ms, const char *const *dirs, int nruns, const vz_view *v,
                        const vz_style *s) {
    int rows, cols;
    getmaxyx(w, rows, cols);
    if (nruns > VZ_MAX_RUNS) nruns = VZ_MAX_RUNS;
    vz_series loss_series[2 * VZ_MAX_RUNS], scale_series[VZ_MAX_RUNS], tok_series[VZ_MAX_RUNS];
    double *buf[VZ_MAX_RUNS] = {0};
    char names[2 * VZ_MAX_RUNS][40];
    double xmin = INFINITY, xmax = -INFINITY;
    bool scaled = false;
    int ns = 0;
    /* one header row per run: its letter in its colour, its label, the newest values */
    for (int r = 0; r < nruns; r++) {
        const vz_model *m = ms[r];
        const vz_step *last = vz_model_last_step(m);
        const vz_eval *eval = vz_model_last_eval(m);
        char label[300], a[32], b[32];
        attr_t rc = vz_attr(s, vz_run_pair(r)) | A_BOLD;
        int x = vz_text(w, r, 0, cols, rc, "%c ", 'A' + r);
        x += vz_text(w, r, x, cols - x, A_BOLD, "%s", vz_model_run_label(m, dirs[r], label, sizeof label));
        if (!last) {
            vz_text(w, r, x, cols - x, vz_attr(s, VZ_PAIR_DIM), "  waiting for the first step event...");
        } else {
            x += vz_text(w, r, x, cols - x, A_NORMAL, "  step %lld", last->step);
            x += vz_text(w, r, x, cols - x, rc, "  loss %.4f", last->loss);
            if (eval) x += vz_text(w, r, x, cols - x, rc, "  val %.4f", eval->val_loss);
            x += vz_text(w, r, x, cols - x, A_NORMAL, "  %s tok/s", vz_fmt_num(last->tokens_per_s, a, sizeof a));
            x += vz_text(w, r, x, cols - x, A_NORMAL, "  scale %s", vz_fmt_num(last->scale, b, sizeof b));
            if (m->skipped_steps) x += vz_text(w, r, x, cols - x, vz_attr(s, VZ_PAIR_WARN), "  skipped %lld", m->skipped_steps);
        }
        size_t n = vz_model_nsteps(m), ne = m->evals.count;
        buf[r] = malloc((4 * n + 2 * ne + 1) * sizeof(double));
        if (!buf[r]) {
            fprintf(stderr, "mixpar viz: out of memory\n");
            exit(3);
        }
        double *xs = buf[r], *loss = xs + n, *scale = loss + n, *toks = scale + n, *ex = toks + n, *ey = ex + ne;
        for (size_t i = 0; i < n; i++) {
            const vz_step *st = vz_model_step(m, i);
            xs[i] = (double)st->step, loss[i] = st->loss, scale[i] = st->scale, toks[i] = st->tokens_per_s;
        }
        for (size_t i = 0; i < ne; i++) {
            const vz_eval *e = vz_ring_at(&m->evals, i);
            ex[i] = (double)e->step, ey[i] = e->val_loss;
        }
        if (n && xs[0] < xmin) xmin = xs[0];
        if (n && xs[n - 1] > xmax) xmax = xs[n - 1];
        if (m->max_scale != m->min_scale || (m->max_scale > 0 && m->max_scale != 1)) scaled = true;
        snprintf(names[2 * r], sizeof names[0], "%c train", 'A' + r);
        snprintf(names[2 * r + 1], sizeof names[0], "%c val", 'A' + r);
        loss_series[ns++] = (vz_series){names[2 * r], vz_run_pair(r), xs, loss, n, run_mark(s, r, false)};
        if (ne) loss_series[ns++] = (vz_series){names[2 * r + 1], vz_run_pair(r), ex, ey, ne, run_mark(s, r, true)};
        scale_series[r] = (vz_series){names[2 * r], vz_run_pair(r), xs, scale, n, run_mark(s, r, false)};
        tok_series[r] = (vz_series){names[2 * r], vz_run_pair(r), xs, toks, n, run_mark(s, r, false)};
    }
    char letters[VZ_MAX_RUNS][4];
    for (int r = 0; r < nruns; r++) {
        snprintf(letters[r], sizeof letters[r], "%c", 'A' + r);
        scale_series[r].label = tok_series[r].label = letters[r];
    }
    if (!(xmin <= xmax)) xmin = 0, xmax = 1;
    if (xmax <= xmin) xmax = xmin + 1;
    if (v->zoom > 0) {
        double span = (xmax - xmin) / pow(2, v->zoom);
        if (span < 8) span = 8;
        if (xmax - span > xmin) xmin = xmax - span;
    }
    char title[96];
    snprintf(title, sizeof title, "loss%s", v->zoom > 0 ? " (zoomed)" : "");
    int top = nruns + 1, rest = rows - top;
    int loss_h = rest >= 14 ? rest * 3 / 5 : rest, lower_h = rest - loss_h;
    vz_chart_opts lo = {title, xmin, xmax, false, "step"};
    vz_chart(w, top, 0, loss_h, cols, &lo, loss_series, ns, s);
    if (lower_h >= 5) {
        int half = cols / 2;
        vz_chart_opts so = {scaled ? "loss scale (log)" : "loss scale", xmin, xmax, scaled, "step"};
        vz_chart_opts to = {"tokens/s", xmin, xmax, false, "step"};
        vz_chart(w, top + loss_h, 0, lower_h, half - 1, &so, scale_series, nruns, s);
        vz_chart(w, top + loss_h, half + 1, lower_h, cols - half - 1, &to, tok_series, nruns, s);
    }
    for (int r = 0; r < nruns; r++) free(buf[r]);
}
