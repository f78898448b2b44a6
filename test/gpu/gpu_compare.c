/* test/gpu/gpu_compare.c — the comparison harness declared in gpu_compare.h: input building,
 * host read-back, the element-wise comparison with its worst-element report, and the op and
 * layer runners (CPU run, GPU run on copies of the same inputs, same upstream gradient). */
#include "gpu_compare.h"

static bool verbose(void) {
    const char *v = getenv("DG_TEST_VERBOSE");
    return v && *v && strcmp(v, "0") != 0;
}

bool gt_on_cpu_selfcheck(void) {
    const char *v = getenv("DG_GPU_TESTS_ON_CPU");
    return v && *v && strcmp(v, "0") != 0;
}
dg_device gt_dut(void) { return gt_on_cpu_selfcheck() ? dg_cpu() : (dg_device){ DG_CUDA, 0 }; }
const char *gt_dut_name(void) { return gt_on_cpu_selfcheck() ? "cpu" : "gpu:0"; }

void gt_use(const char *name) {
    cr_assert_eq(dg_set_device(name), 0, "set_device(%s): %s", name, dg_last_error());
}

void gt_gpu_begin(void) {
    dg_clear_error();
    /* main() only starts the workers when gpu:0 answered, so a failure here is a real error */
    cr_assert_eq(dg_set_device(gt_dut_name()), 0, "%s not usable in the test worker: %s", gt_dut_name(), dg_last_error());
    cr_assert(!dg_get_allow_tf32(), "TF32 must be off by default: GPU f32 math must round like the CPU's");
    /* the suite's tolerances are for sums in another order; FFT and Winograd convolutions, the
     * default's fastest picks, round in a transformed domain (test_gpu_edges checks them) */
    cr_assert(!dg_get_exact_gpu_conv(), "exact GPU convolutions must be off by default");
    dg_set_exact_gpu_conv(true);
    gt_use("cpu");
}

dg_tensor *gt_make_input(const gt_input *in, const char *op, int i) {
    double lo = in->lo, hi = in->hi;
    if (lo == 0 && hi == 0) { lo = -1; hi = 1; }
    dg_tensor *t = NULL;
    switch (in->kind) {
    case GT_GRAD:
    case GT_CONST: t = dg_uniform(in->shape, lo, hi, DG_F32); break;
    case GT_GRAD64: t = dg_uniform(in->shape, lo, hi, DG_F64); break;
    case GT_LABELS:
    case GT_LABELS32:
        /* U[0,1) * hi cast toward zero: every class in [0, hi); the factor keeps float rounding of
         * u close to 1 from reaching hi itself */
        t = dg_cast(dg_mul_scalar(dg_rand(in->shape, DG_F32), in->hi * (1 - 1e-6)), in->kind == GT_LABELS ? DG_I64 : DG_I32);
        break;
    case GT_INTF: t = dg_cast(dg_cast(dg_uniform(in->shape, 0, hi - lo, DG_F32), DG_I64), DG_F32);
        t = t ? dg_add_scalar(t, lo) : NULL;
        break;
    case GT_MASK: t = dg_greater(dg_rand(in->shape, DG_F32), dg_scalar(0.5, DG_F32)); break;
    case GT_SOFT: t = dg_softmax(dg_uniform(in->shape, -2, 2, DG_F32), -1); break;
    }
    cr_assert(t, "%s: building input %d on the CPU failed: %s", op, i, dg_last_error());
    if (in->kind == GT_GRAD || in->kind == GT_GRAD64)
        cr_assert_eq(dg_set_requires_grad(t, true), 0, "%s: input %d: %s", op, i, dg_last_error());
    return t;
}

dg_tensor *gt_to_gpu(const dg_tensor *cpu, bool grad, const char *op) {
    /* no_grad: the copy must be a leaf of its own, not a node hanging off the CPU tensor */
    dg_no_grad_begin();
    dg_tensor *g = dg_to_device(cpu, gt_dut());
    dg_no_grad_end();
    cr_assert(g, "%s: copy to %s failed: %s", op, gt_dut_name(), dg_last_error());
    if (grad) cr_assert_eq(dg_set_requires_grad(g, true), 0, "%s: %s", op, dg_last_error());
    return g;
}

double *gt_host_f64(const dg_tensor *t, const char *op, const char *what) {
    int64_t n = dg_numel(t);
    double *out = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    cr_assert(out, "%s %s: out of host memory", op, what);
    dg_scope *s = dg_scope_begin();
    dg_no_grad_begin();
    /* the cast runs on the CPU, after the raw values came down: the comparison must not depend
     * on the GPU's own cast kernel */
    dg_tensor *host = dg_to_device(dg_detach(t), dg_cpu());
    dg_tensor *d = host ? dg_cast(host, DG_F64) : NULL;
    int rc = d ? dg_to_host(d, out, sizeof(double) * (size_t)n) : DG_EINVAL;
    dg_no_grad_end();
    dg_scope_end(s);
    cr_assert_eq(rc, 0, "%s %s: reading the values back failed: %s", op, what, dg_last_error());
    return out;
}

/* "[1, 0, 3]" for flat index k of shape s. */
static void index_str(dg_shape s, int64_t k, char *buf, size_t len) {
    int64_t idx[DG_MAX_DIMS];
    for (int i = s.ndim - 1; i >= 0; i--) {
        idx[i] = s.d[i] ? k % s.d[i] : 0;
        k = s.d[i] ? k / s.d[i] : 0;
    }
    size_t at = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < s.ndim && at < len; i++) at += (size_t)snprintf(buf + at, len - at, "%s%lld", i ? ", " : "", (long long)idx[i]);
    if (at < len) snprintf(buf + at, len - at, "]");
}

void gt_expect_on_gpu(const char *op, const char *what, const dg_tensor *t) {
    if (!t) return;
    dg_device d = dg_device_of(t), want = gt_dut();
    cr_expect(d.type == want.type && d.index == want.index, "%s: %s is on %s, expected %s", op, what,
              dg_device_name(d, (char[16]){0}, 16), gt_dut_name());
}

bool gt_compare(const char *op, const char *what, const dg_tensor *cpu, const dg_tensor *gpu, gt_tol tol) {
    if (!cpu || !gpu) {
        cr_expect(false, "%s: %s: %s is missing", op, what, !cpu && !gpu ? "both tensors" : !cpu ? "the CPU tensor" : "the GPU tensor");
        return false;
    }
    char sa[96], sb[96];
    dg_shape_str(cpu, sa, sizeof sa);
    dg_shape_str(gpu, sb, sizeof sb);
    if (strcmp(sa, sb) != 0 || dg_dtype_of(cpu) != dg_dtype_of(gpu)) {
        cr_expect(false, "%s: %s: cpu gives %s %s, gpu gives %s %s", op, what, sa, dg_dtype_name(dg_dtype_of(cpu)), sb,
                  dg_dtype_name(dg_dtype_of(gpu)));
        return false;
    }
    int64_t n = dg_numel(cpu);
    double *a = gt_host_f64(cpu, op, what), *b = gt_host_f64(gpu, op, what);
    double maxabs_ref = 0;
    for (int64_t i = 0; i < n; i++) if (isfinite(a[i])) maxabs_ref = fmax(maxabs_ref, fabs(a[i]));
    double atol = tol.atol_of_max ? tol.atol * fmax(maxabs_ref, 1e-30) : tol.atol;
    double max_abs = 0, max_rel = 0, worst_ratio = 0;
    int64_t worst = -1;
    for (int64_t i = 0; i < n; i++) {
        double d, ratio;
        if (isnan(a[i]) || isnan(b[i])) {
            d = isnan(a[i]) && isnan(b[i]) ? 0 : INFINITY;
        } else if (isinf(a[i]) || isinf(b[i])) {
            d = a[i] == b[i] ? 0 : INFINITY;
        } else {
            d = fabs(a[i] - b[i]);
        }
        double bound = atol + tol.rtol * fabs(a[i]);
        ratio = d == 0 ? 0 : bound > 0 ? d / bound : INFINITY;
        double rel = d == 0 ? 0 : a[i] != 0 ? d / fabs(a[i]) : INFINITY;
        max_abs = fmax(max_abs, d);
        max_rel = fmax(max_rel, rel);
        if (ratio > worst_ratio || worst < 0) { worst_ratio = ratio; worst = i; }
    }
    bool ok = worst_ratio <= 1;
    char at[128] = "[]";
    if (worst >= 0) index_str(dg_shape_of(cpu), worst, at, sizeof at);
    double wa = worst >= 0 ? a[worst] : 0, wb = worst >= 0 ? b[worst] : 0;
    if (verbose())
        fprintf(stderr, "gpu %-4s %s: %s %s: max abs err %.3g, max rel err %.3g, worst %s cpu %.9g gpu %.9g "
                "(tol %g + %g*|cpu|)\n", ok ? "ok" : "FAIL", op, what, sa, max_abs, max_rel, at, wa, wb, atol, tol.rtol);
    cr_expect(ok, "%s: %s %s differs between cpu and %s: max abs err %.3g, max rel err %.3g; worst element %s "
              "(flat %lld): cpu %.9g, gpu %.9g; allowed |gpu-cpu| <= %g + %g*|cpu|",
              op, what, sa, gt_dut_name(), max_abs, max_rel, at, (long long)worst, wa, wb, atol, tol.rtol);
    free(a);
    free(b);
    return ok;
}

/* ---------------- op runner ---------------- */

/* Backward on both devices from the same random upstream gradient (drawn on the CPU from seed),
 * so every output element weighs differently; fails the test if either backward fails. */
static void backward_both(const char *name, dg_tensor *yc, dg_tensor *yg, uint64_t seed) {
    gt_use("cpu");
    dg_manual_seed(seed);
    dg_tensor *wc = dg_uniform(dg_shape_of(yc), 0.5, 1.5, dg_dtype_of(yc));
    cr_assert(wc, "%s: upstream gradient: %s", name, dg_last_error());
    dg_tensor *wg = gt_to_gpu(wc, false, name);
    dg_backward_params bwp = dg_backward_default_params();
    bwp.grad_output = wc;
    cr_assert_eq(dg_backward_ext(yc, bwp), 0, "%s: CPU backward failed: %s",
                 name, dg_last_error());
    gt_use(gt_dut_name());
    dg_backward_params bwp2 = dg_backward_default_params();
    bwp2.grad_output = wg;
    cr_assert_eq(dg_backward_ext(yg, bwp2), 0, "%s: GPU backward failed: %s",
                 name, dg_last_error());
}

void gt_expect_op_matches_cpu(const gt_op_case *c, uint64_t seed) {
    gt_gpu_begin();
    dg_scope *s = dg_scope_begin();
    dg_tensor *cin[GT_MAX_IN] = {0}, *gin[GT_MAX_IN] = {0};
    bool grad[GT_MAX_IN] = {0};
    cr_assert(c->n_in >= 0 && c->n_in <= GT_MAX_IN, "%s: bad input count %d", c->name, c->n_in);
    dg_manual_seed(seed);
    for (int i = 0; i < c->n_in; i++) {
        grad[i] = c->in[i].kind == GT_GRAD || c->in[i].kind == GT_GRAD64;
        cin[i] = gt_make_input(&c->in[i], c->name, i);
        gin[i] = gt_to_gpu(cin[i], grad[i], c->name);
    }

    gt_use("cpu");
    dg_manual_seed(seed + 1);
    dg_tensor *yc = c->fn(cin);
    cr_assert(yc, "%s: CPU forward failed: %s", c->name, dg_last_error());
    gt_use(gt_dut_name());
    dg_manual_seed(seed + 1);   /* same stream position: dropout and random init draw the same numbers */
    dg_tensor *yg = c->fn(gin);
    cr_assert(yg, "%s: GPU forward failed: %s", c->name, dg_last_error());
    gt_expect_on_gpu(c->name, "output", yg);
    gt_compare(c->name, "forward", yc, yg, c->fwd);

    if (dg_requires_grad(yc)) {
        cr_assert(dg_requires_grad(yg), "%s: the CPU output requires grad, the GPU output does not", c->name);
        backward_both(c->name, yc, yg, seed + 2);
        for (int i = 0; i < c->n_in; i++) {
            if (!grad[i]) continue;
            char what[32];
            snprintf(what, sizeof what, "grad of input %d", i);
            dg_tensor *gc = dg_grad(cin[i]), *gg = dg_grad(gin[i]);
            cr_expect((gc == NULL) == (gg == NULL), "%s: %s exists on %s only", c->name, what, gc ? "the CPU" : "the GPU");
            if (!gc || !gg) continue;
            gt_expect_on_gpu(c->name, what, gg);
            gt_compare(c->name, what, gc, gg, c->grad);
        }
    } else {
        cr_expect(!dg_requires_grad(yg), "%s: the GPU output requires grad, the CPU output does not", c->name);
    }
    gt_use("cpu");
    dg_scope_end(s);
}

/* ---------------- layers ---------------- */

static dg_named_tensor *state_of(const dg_layer *l, int *n, const char *op) {
    dg_named_tensor *sd = dg_layer_state_dict(l, n);
    cr_assert(sd, "%s: state_dict: %s", op, dg_last_error());
    return sd;
}

void gt_compare_state(const char *op, const char *what, const dg_layer *cpu, const dg_layer *gpu, gt_tol tol) {
    int nc, ng;
    dg_named_tensor *a = state_of(cpu, &nc, op), *b = state_of(gpu, &ng, op);
    cr_assert_eq(nc, ng, "%s: state_dict has %d entries on the CPU, %d on the GPU", op, nc, ng);
    for (int i = 0; i < nc; i++) {
        cr_assert_str_eq(a[i].name, b[i].name, "%s: state_dict entry %d", op, i);
        char w[192];
        snprintf(w, sizeof w, "%s %s", what, a[i].name);
        gt_compare(op, w, a[i].tensor, b[i].tensor, tol);
    }
    free(a);
    free(b);
}

void gt_copy_state(const char *op, const dg_layer *cpu, dg_layer *gpu) {
    int nc, ng;
    dg_named_tensor *a = state_of(cpu, &nc, op), *b = state_of(gpu, &ng, op);
    cr_assert_eq(nc, ng, "%s: state_dict has %d entries on the CPU, %d on the GPU", op, nc, ng);
    dg_no_grad_begin();
    for (int i = 0; i < nc; i++) {
        cr_assert_str_eq(a[i].name, b[i].name, "%s: state_dict entry %d", op, i);
        cr_assert_eq(dg_dtype_of(a[i].tensor), dg_dtype_of(b[i].tensor), "%s: %s dtype", op, a[i].name);
        cr_assert_eq(dg_numel(a[i].tensor), dg_numel(b[i].tensor), "%s: %s size", op, a[i].name);
        size_t nb = (size_t)dg_numel(a[i].tensor) * dg_dtype_size(dg_dtype_of(a[i].tensor));
        void *buf = malloc(nb ? nb : 1);
        cr_assert(buf, "%s: out of host memory", op);
        cr_assert_eq(dg_to_host(a[i].tensor, buf, nb), 0, "%s: %s: %s", op, a[i].name, dg_last_error());
        cr_assert_eq(dg_copy_from_host(b[i].tensor, buf, nb), 0, "%s: %s: %s", op, a[i].name, dg_last_error());
        free(buf);
    }
    dg_no_grad_end();
    free(a);
    free(b);
}

void gt_compare_param_grads(const char *op, const dg_layer *cpu, const dg_layer *gpu, gt_tol tol) {
    int nc, ng;
    dg_named_tensor *a = dg_layer_named_parameters(cpu, &nc), *b = dg_layer_named_parameters(gpu, &ng);
    cr_assert(a && b, "%s: named_parameters: %s", op, dg_last_error());
    cr_assert_eq(nc, ng, "%s: %d parameters on the CPU, %d on the GPU", op, nc, ng);
    for (int i = 0; i < nc; i++) {
        char w[192];
        snprintf(w, sizeof w, "grad of %s", a[i].name);
        dg_tensor *gc = dg_grad(a[i].tensor), *gg = dg_grad(b[i].tensor);
        cr_expect((gc == NULL) == (gg == NULL), "%s: %s exists on %s only", op, w, gc ? "the CPU" : "the GPU");
        if (!gc || !gg) continue;
        gt_expect_on_gpu(op, w, gg);
        gt_compare(op, w, gc, gg, tol);
    }
    free(a);
    free(b);
}

static dg_tensor *layer_forward(const gt_layer_case *c, dg_layer *l, dg_tensor *x, dg_tensor *label) {
    return c->loss ? dg_loss_forward(l, x, label) : dg_forward(l, x);
}

void gt_expect_layer_matches_cpu(const gt_layer_case *c, uint64_t seed) {
    gt_gpu_begin();
    /* both layers draw their initial values from the same stream position: the GPU's own init
     * must give the CPU's numbers (random init on the device) */
    gt_use("cpu");
    dg_manual_seed(seed);
    dg_layer *lc = c->make();
    cr_assert(lc, "%s: CPU constructor failed: %s", c->name, dg_last_error());
    gt_use(gt_dut_name());
    dg_manual_seed(seed);
    dg_layer *lg = c->make();
    cr_assert(lg, "%s: GPU constructor failed: %s", c->name, dg_last_error());
    int np;
    dg_named_tensor *ps = dg_layer_named_parameters(lg, &np);
    cr_assert(ps, "%s: %s", c->name, dg_last_error());
    for (int i = 0; i < np; i++) gt_expect_on_gpu(c->name, ps[i].name, ps[i].tensor);
    free(ps);
    gt_compare_state(c->name, "initial", lc, lg, c->init);
    /* from here on the GPU layer holds the CPU's exact values, so later differences are the
     * forward/backward kernels' own */
    gt_copy_state(c->name, lc, lg);

    gt_use("cpu");
    dg_scope *s = dg_scope_begin();
    dg_manual_seed(seed + 1);
    bool xgrad = c->in.kind == GT_GRAD || c->in.kind == GT_GRAD64;
    dg_tensor *xc = gt_make_input(&c->in, c->name, 0), *xg = gt_to_gpu(xc, xgrad, c->name);
    dg_tensor *yc_label = NULL, *yg_label = NULL;
    if (c->loss) {
        yc_label = gt_make_input(&c->label, c->name, 1);
        yg_label = gt_to_gpu(yc_label, false, c->name);
    }
    if (c->eval) {
        /* one training-mode forward moves the running statistics off their 0/1 start */
        const char *dev[2] = { "cpu", gt_dut_name() };
        dg_layer *l[2] = { lc, lg };
        dg_tensor *x[2] = { xc, xg };
        for (int d = 0; d < 2; d++) {
            gt_use(dev[d]);
            dg_manual_seed(seed + 2);
            cr_assert_eq(dg_layer_train(l[d]), 0, "%s: %s", c->name, dg_last_error());
            dg_no_grad_begin();
            dg_tensor *warm = dg_forward(l[d], x[d]);
            dg_no_grad_end();
            cr_assert(warm, "%s: warm-up forward on %s failed: %s", c->name, dev[d], dg_last_error());
            cr_assert_eq(dg_layer_eval(l[d]), 0, "%s: %s", c->name, dg_last_error());
        }
    }

    gt_use("cpu");
    dg_manual_seed(seed + 3);
    dg_tensor *yc = layer_forward(c, lc, xc, yc_label);
    cr_assert(yc, "%s: CPU forward failed: %s", c->name, dg_last_error());
    gt_use(gt_dut_name());
    dg_manual_seed(seed + 3);
    dg_tensor *yg = layer_forward(c, lg, xg, yg_label);
    cr_assert(yg, "%s: GPU forward failed: %s", c->name, dg_last_error());
    gt_expect_on_gpu(c->name, "output", yg);
    gt_compare(c->name, "forward", yc, yg, c->fwd);
    /* running statistics and counters after the forward */
    gt_compare_state(c->name, "after forward:", lc, lg, c->fwd);

    if (dg_requires_grad(yc)) {
        cr_assert(dg_requires_grad(yg), "%s: the CPU output requires grad, the GPU output does not", c->name);
        backward_both(c->name, yc, yg, seed + 4);
        if (xgrad) {
            cr_expect((dg_grad(xc) == NULL) == (dg_grad(xg) == NULL), "%s: input gradient on one device only", c->name);
            if (dg_grad(xc) && dg_grad(xg)) gt_compare(c->name, "grad of input", dg_grad(xc), dg_grad(xg), c->grad);
        }
        gt_compare_param_grads(c->name, lc, lg, c->grad);
    }
    gt_use("cpu");
    dg_scope_end(s);
    dg_layer_free(lc);
    dg_layer_free(lg);
}
