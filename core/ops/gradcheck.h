/* gradcheck.h: finite-difference gradient checking in double precision, and a tensor comparison helper. */
#ifndef MIXPAR_OPS_GRADCHECK_H
#define MIXPAR_OPS_GRADCHECK_H

#include <stdbool.h>
#include <stdint.h>

/* How to check a backward pass: write a function that runs the forward pass on the current inputs and
 * reduces its output to one number, e.g. loss = sum_i w_i * out_i with fixed random w (accumulated in
 * double). By the chain rule the gradient of that loss is the backward pass run with dout = w. Then
 * nudge each input element by +-h and compare the slope of the loss with the analytic gradient:
 *
 *     typedef struct { ... } my_ctx;              // inputs, outputs, w
 *     static double my_loss(void *ctx) { ...forward...; return sum of w * out in double; }
 *
 *     my_forward(...); my_backward(dinp, ..., dout = w);   // the analytic gradient
 *     ops_gradcheck_options opt = OPS_GRADCHECK_DEFAULTS;
 *     ops_gradcheck_result r = ops_gradcheck("gelu dinp", my_loss, &ctx, inp, dinp, n, &opt);
 *     if (r.failed) ...                                    // r names the worst element
 *
 * The kernel runs in fp32, so the loss carries float rounding noise of about 1e-7 * |loss|; the central
 * difference divides that noise by 2h. Its truncation error is h^2/6 times the third derivative. With
 * h = 1e-2 both are around 1e-5 for unit-sized values, which is why the default tolerances are 1e-2
 * relative plus a small absolute term, not 1e-6. */

/* The loss as a function of the inputs the checker perturbs (it reads them through ctx). */
typedef double (*ops_loss_fn)(void *ctx);

typedef struct {
    double h;        /* step: element x_i moves by +-h * max(1, |x_i|) */
    long samples;    /* elements to check: 0 (or >= n) checks all; otherwise a random sample of that size */
    uint64_t seed;   /* which random sample */
    double abs_tol;  /* element i passes when |analytic - numeric| <= abs_tol + rel_tol * |numeric| */
    double rel_tol;
} ops_gradcheck_options;

#define OPS_GRADCHECK_DEFAULTS {.h = 1e-2, .samples = 0, .seed = 1, .abs_tol = 1e-4, .rel_tol = 1e-2}

typedef struct {
    long checked;          /* elements checked */
    long failed;           /* elements outside the tolerance */
    double max_abs_err;    /* max |analytic - numeric| ... */
    long max_abs_index;    /* ... and where */
    double max_rel_err;    /* max |analytic - numeric| / max(|analytic|, |numeric|) (0 when both are 0) */
    long max_rel_index;
    long worst_index;      /* the element furthest outside (or least inside) its tolerance */
    double worst_ratio;    /* its error / its tolerance: <= 1 passes */
    double worst_numeric, worst_analytic;
} ops_gradcheck_result;

/* d loss / d x[i] by the central difference (loss(x + h) - loss(x - h)) / (2h), evaluated in double.
 * x[i] is restored before returning. The difference is divided by the step actually taken (the two
 * perturbed values as stored in float), not by 2h, which would be off by float rounding of x +- h. */
double ops_central_difference(ops_loss_fn loss, void *ctx, float *x, long i, double h);

/* Check analytic (n) against central differences of loss with respect to x (n); prints one line
 * ("gradcheck NAME: ...: OK" or "...: FAILED ...") and returns the details. */
ops_gradcheck_result ops_gradcheck(const char *name, ops_loss_fn loss, void *ctx, float *x, const float *analytic,
                                   long n, const ops_gradcheck_options *opt);

/* Compare two tensors: element i matches when |got - expected| <= tol * max(1, |expected|) (absolute
 * for small values, relative for large ones); NaN matches only NaN. Prints one line with the worst
 * difference and its index, e.g.
 *     compare matmul out: 1024 elements, worst |diff| 2.4e-07 at [517] (expected 1.25, got 1.25), 0 outside tol 1e-05: OK
 * and returns whether every element matched. */
bool ops_compare(const char *name, const float *expected, const float *got, long n, double tol);

#endif
