/* test/test_checkpoint.c — layer and optimizer checkpoints: save -> load -> continue is
 * bit-identical to training without the break; strict loads report missing/unexpected/
 * mismatched names and load nothing; non-strict loads what matches. */
#include "test_util.h"
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

static dg_layer *small_net(uint64_t seed) {
    dg_manual_seed(seed);
    return dg_nn_sequential(5, dg_nn_linear(6, 8), dg_nn_batch_norm1d(8, dg_nn_batch_norm_default_params()), dg_nn_relu(),
                            dg_nn_dropout(0.2), dg_nn_linear(8, 3));
}

/* One step whose data and dropout mask depend only on the step number. */
static void train_step(dg_layer *net, dg_optimizer *opt, int step) {
    dg_scope *s = dg_scope_begin();
    dg_manual_seed(1000 + (uint64_t)step);
    dg_tensor *x = dg_randn(DG_SHAPE(16, 6), DG_F32);
    dg_tensor *y = dg_from_data(DG_SHAPE(16), DG_I64, (int64_t[]){0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0});
    dg_tensor *loss = dg_cross_entropy(dg_forward(net, x), y);
    cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
    cr_assert_eq(dg_optimizer_step(opt), 0, "%s", dg_last_error());
    dg_optimizer_clear_grad(opt);
    dg_scope_end(s);
}

static dg_optimizer *adam_for(dg_layer *net) {
    int n;
    dg_tensor **p = dg_layer_parameters(net, &n);
    dg_adam_params adp = dg_adam_default_params();
    adp.lr = 0.01;
    adp.weight_decay = 1e-4;
    dg_optimizer *o = dg_adam(p, n, adp);
    free(p);
    return o;
}

static bool states_identical(const dg_layer *a, const dg_layer *b) {
    int na, nb;
    dg_named_tensor *sa = dg_layer_state_dict(a, &na), *sb = dg_layer_state_dict(b, &nb);
    bool same = na == nb;
    for (int i = 0; same && i < na; i++) {
        size_t bytes = (size_t)dg_numel(sa[i].tensor) * dg_dtype_size(dg_dtype_of(sa[i].tensor));
        same = strcmp(sa[i].name, sb[i].name) == 0 && memcmp(dg_data(sa[i].tensor), dg_data(sb[i].tensor), bytes) == 0;
    }
    free(sa); free(sb);
    return same;
}

Test(checkpoint, resume_is_bit_identical) {
    char mp[] = "/tmp/dg_ck_model_XXXXXX", op[] = "/tmp/dg_ck_opt_XXXXXX";
    close(mkstemp(mp)); close(mkstemp(op));
    dg_layer *a = small_net(1);
    dg_optimizer *oa = adam_for(a);
    for (int step = 0; step < 5; step++) train_step(a, oa, step);
    cr_assert_eq(dg_layer_save(a, mp), 0, "%s", dg_last_error());
    cr_assert_eq(dg_optimizer_save(oa, op), 0, "%s", dg_last_error());
    for (int step = 5; step < 10; step++) train_step(a, oa, step);

    dg_layer *b = small_net(99);                       /* different init */
    dg_optimizer *ob = adam_for(b);
    cr_assert(!states_identical(a, b));
    dg_load_report r;
    cr_assert_eq(dg_layer_load(b, mp, dg_load_default_params(), &r), 0, "%s", dg_last_error());
    cr_assert_eq(r.loaded, 9, "4 params + BN's weight/bias/running stats/count: %d", r.loaded);
    cr_assert_eq(dg_optimizer_load(ob, op), 0, "%s", dg_last_error());
    for (int step = 5; step < 10; step++) train_step(b, ob, step);
    cr_assert(states_identical(a, b), "resumed training differs from uninterrupted training");

    dg_optimizer_free(oa); dg_optimizer_free(ob);
    dg_layer_free(a); dg_layer_free(b);
    unlink(mp); unlink(op);
    cr_assert_eq(dg_live_tensors(), 0);
}

Test(checkpoint, strict_load_reports_and_loads_nothing) {
    char path[] = "/tmp/dg_ck_strict_XXXXXX";
    close(mkstemp(path));
    dg_layer *a = small_net(1);
    /* a file with one key missing, one unexpected and one wrong shape */
    dg_tensor_dict *d = dg_layer_state_to_dict(a);
    dg_tensor_dict *bad = dg_tensor_dict_new();
    dg_scope *s = dg_scope_begin();
    for (int i = 0; i < dg_tensor_dict_size(d); i++) {
        const char *name = dg_tensor_dict_name(d, i);
        if (strcmp(name, "1.running_var") == 0) continue;
        if (strcmp(name, "4.bias") == 0) { dg_tensor_dict_set(bad, name, dg_zeros(DG_SHAPE(4), DG_F32)); continue; }
        dg_tensor_dict_set(bad, name, dg_tensor_dict_tensor(d, i));
    }
    dg_tensor_dict_set(bad, "head.weight", dg_zeros(DG_SHAPE(2), DG_F32));
    dg_scope_end(s);
    cr_assert_eq(dg_save_safetensors(path, bad), 0);

    dg_layer *b = small_net(7);
    dg_layer *b_copy = small_net(7);
    dg_clear_error();
    dg_load_report r;
    cr_assert_neq(dg_layer_load(b, path, dg_load_default_params(), &r), 0);
    const char *m = dg_last_error();
    cr_assert(strstr(m, path) && strstr(m, "1.running_var") && strstr(m, "head.weight") && strstr(m, "4.bias"), "%s", m);
    cr_assert(strstr(m, "[4]") && strstr(m, "[3]"), "both shapes named: %s", m);
    cr_assert_eq(r.missing, 1);
    cr_assert_eq(r.unexpected, 1);
    cr_assert_eq(r.mismatched, 1);
    cr_assert(states_identical(b, b_copy), "a failed strict load changes nothing");
    dg_clear_error();

    dg_load_params lp = dg_load_default_params();
    lp.strict = false;
    cr_assert_eq(dg_layer_load(b, path, lp, &r), 0, "%s", dg_last_error());
    cr_assert_eq(r.loaded, 7);
    cr_assert(max_rel_err(dg_layer_parameter(b, "0.weight"), dg_layer_parameter(a, "0.weight"), 1) == 0);
    cr_assert(max_rel_err(dg_layer_parameter(b, "4.bias"), dg_layer_parameter(b_copy, "4.bias"), 1) == 0, "mismatched entry untouched");

    dg_tensor_dict_free(d); dg_tensor_dict_free(bad);
    dg_layer_free(a); dg_layer_free(b); dg_layer_free(b_copy);
    unlink(path);
    cr_assert_eq(dg_live_tensors(), 0);
}

Test(checkpoint, optimizer_bad_entries_load_nothing) {
    dg_layer *net = small_net(3);
    dg_optimizer *o = adam_for(net);
    train_step(net, o, 0);
    dg_tensor_dict *d = dg_tensor_dict_new();
    dg_scope *s = dg_scope_begin();
    dg_tensor_dict_set(d, "lr", dg_scalar(0.5, DG_F64));
    dg_tensor_dict_set(d, "0.momentum_buffer", dg_zeros(DG_SHAPE(8, 6), DG_F32));
    dg_scope_end(s);
    dg_clear_error();
    cr_assert_neq(dg_optimizer_load_dict(o, d), 0);
    cr_assert(strstr(dg_last_error(), "momentum_buffer") && strstr(dg_last_error(), "adam"), "%s", dg_last_error());
    cr_assert_float_eq(dg_optimizer_get_lr(o), 0.01, 1e-12, "lr unchanged: nothing loaded");
    dg_clear_error();
    dg_tensor_dict_free(d);
    d = dg_tensor_dict_new();
    s = dg_scope_begin();
    dg_tensor_dict_set(d, "0.exp_avg", dg_zeros(DG_SHAPE(6, 8), DG_F32));
    dg_scope_end(s);
    cr_assert_neq(dg_optimizer_load_dict(o, d), 0);
    cr_assert(strstr(dg_last_error(), "[6, 8]"), "%s", dg_last_error());
    dg_clear_error();
    dg_tensor_dict_free(d);
    dg_optimizer_free(o);
    dg_layer_free(net);
    cr_assert_eq(dg_live_tensors(), 0);
}

/* One step whose data is fixed by the step number but whose dropout mask comes from the default
 * generator's running stream: only a checkpoint that carries the generator's position resumes it
 * exactly. */
static void train_step_running_rng(dg_layer *net, dg_optimizer *opt, int step) {
    dg_scope *s = dg_scope_begin();
    dg_generator *data = dg_generator_new(2000 + (uint64_t)step);
    dg_tensor *x = dg_generator_randn(data, DG_SHAPE(16, 6), DG_F32);
    dg_generator_free(data);
    dg_tensor *y = dg_from_data(DG_SHAPE(16), DG_I64, (int64_t[]){0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0});
    cr_assert_eq(dg_backward(dg_cross_entropy(dg_forward(net, x), y)), 0, "%s", dg_last_error());
    cr_assert_eq(dg_optimizer_step(opt), 0, "%s", dg_last_error());
    dg_optimizer_clear_grad(opt);
    dg_scope_end(s);
}

Test(checkpoint, one_file_resume_carries_the_generator_and_the_counters) {
    char path[] = "/tmp/dg_ck_train_XXXXXX";
    close(mkstemp(path));
    dg_layer *a = small_net(1);
    dg_optimizer *oa = adam_for(a);
    dg_manual_seed(7);
    for (int step = 0; step < 4; step++) train_step_running_rng(a, oa, step);
    dg_train_state sa = { .model = a, .optimizer = oa, .epoch = 2, .step = 4, .batch = 1 };
    cr_assert_eq(dg_train_checkpoint_save(path, &sa), 0, "%s", dg_last_error());
    for (int step = 4; step < 9; step++) train_step_running_rng(a, oa, step);

    dg_layer *b = small_net(99);
    dg_optimizer *ob = adam_for(b);
    dg_manual_seed(12345);                              /* the generator elsewhere */
    dg_train_state sb = { .model = b, .optimizer = ob };
    cr_assert_eq(dg_train_checkpoint_load(path, &sb), 0, "%s", dg_last_error());
    cr_expect(sb.epoch == 2 && sb.step == 4 && sb.batch == 1, "counters %lld %lld %lld", (long long)sb.epoch,
              (long long)sb.step, (long long)sb.batch);
    for (int step = 4; step < 9; step++) train_step_running_rng(b, ob, step);
    cr_assert(states_identical(a, b), "resumed training (dropout from the running generator) differs");

    /* the old three-file way loses the generator's position: the same resume then differs */
    dg_layer *c = small_net(99);
    dg_optimizer *oc = adam_for(c);
    dg_train_state sc = { .model = c, .optimizer = oc };
    cr_assert_eq(dg_train_checkpoint_load(path, &sc), 0, "%s", dg_last_error());
    dg_manual_seed(7);                                  /* what a resume without the position can do */
    for (int step = 4; step < 9; step++) train_step_running_rng(c, oc, step);
    cr_expect(!states_identical(a, c), "the test cannot tell a lost generator position");

    dg_optimizer_free(oa); dg_optimizer_free(ob); dg_optimizer_free(oc);
    dg_layer_free(a); dg_layer_free(b); dg_layer_free(c);
    unlink(path);
    cr_assert_eq(dg_live_tensors(), 0);
}

/* The LR scheduler's position travels in the same file; a scheduler given to a file without
 * one, or a file with one and none given, is refused and changes nothing. */
Test(checkpoint, the_scheduler_position_is_part_of_the_set) {
    char path[] = "/tmp/dg_ck_sched_XXXXXX", plain[] = "/tmp/dg_ck_nosched_XXXXXX";
    close(mkstemp(path)); close(mkstemp(plain));
    dg_layer *a = small_net(1);
    dg_optimizer *oa = adam_for(a);
    dg_cosine_annealing_lr_params cp = dg_cosine_annealing_lr_default_params();
    cp.t_max = 20;
    dg_lr_scheduler *sa = dg_cosine_annealing_lr(oa, cp);
    for (int k = 0; k < 7; k++) cr_assert_eq(dg_lr_scheduler_step(sa), 0);
    dg_train_state st = { .model = a, .optimizer = oa, .scheduler = sa, .epoch = 1, .step = 7, .batch = 2 };
    cr_assert_eq(dg_train_checkpoint_save(path, &st), 0, "%s", dg_last_error());
    dg_train_state st2 = { .model = a, .optimizer = oa };
    cr_assert_eq(dg_train_checkpoint_save(plain, &st2), 0, "%s", dg_last_error());

    dg_layer *b = small_net(5);
    dg_optimizer *ob = adam_for(b);
    dg_lr_scheduler *sb = dg_cosine_annealing_lr(ob, cp);
    dg_train_state lb = { .model = b, .optimizer = ob, .scheduler = sb };
    cr_assert_eq(dg_train_checkpoint_load(path, &lb), 0, "%s", dg_last_error());
    cr_expect_eq(dg_lr_scheduler_epoch(sb), 7);
    cr_expect_eq(dg_lr_scheduler_get_lr(sb), dg_lr_scheduler_get_lr(sa));
    cr_expect_eq(dg_optimizer_get_lr(ob), dg_optimizer_get_lr(oa), "the optimizer's rate follows the restored schedule");
    cr_expect(lb.epoch == 1 && lb.batch == 2 && lb.step == 7);

    dg_lr_scheduler *sc = dg_cosine_annealing_lr(ob, cp);
    dg_train_state lc = { .model = b, .optimizer = ob, .scheduler = sc };
    cr_assert_eq(dg_train_checkpoint_load(plain, &lc), DG_EFORMAT);
    cr_expect(strstr(dg_last_error(), "no LR scheduler position"), "%s", dg_last_error());
    cr_expect_eq(dg_lr_scheduler_epoch(sc), 0, "a refused load moved the scheduler");
    dg_train_state ld = { .model = b, .optimizer = ob };
    cr_assert_eq(dg_train_checkpoint_load(path, &ld), DG_EFORMAT);
    cr_expect(strstr(dg_last_error(), "no scheduler was given"), "%s", dg_last_error());

    dg_lr_scheduler_free(sa); dg_lr_scheduler_free(sb); dg_lr_scheduler_free(sc);
    dg_optimizer_free(oa); dg_optimizer_free(ob);
    dg_layer_free(a); dg_layer_free(b);
    unlink(path); unlink(plain);
    cr_assert_eq(dg_live_tensors(), 0);
}

Test(checkpoint, a_file_of_another_kind_or_shape_is_refused_and_changes_nothing) {
    char model_only[] = "/tmp/dg_ck_m_XXXXXX", sgd_ck[] = "/tmp/dg_ck_s_XXXXXX";
    close(mkstemp(model_only)); close(mkstemp(sgd_ck));
    dg_layer *a = small_net(1);
    cr_assert_eq(dg_layer_save(a, model_only), 0, "%s", dg_last_error());
    /* a checkpoint of the same model with SGD's (momentum) state */
    int n;
    dg_tensor **p = dg_layer_parameters(a, &n);
    dg_optimizer *mom = dg_momentum(p, n, dg_momentum_default_params());
    free(p);
    dg_manual_seed(3);
    train_step_running_rng(a, mom, 0);
    dg_train_state s = { .model = a, .optimizer = mom };
    cr_assert_eq(dg_train_checkpoint_save(sgd_ck, &s), 0, "%s", dg_last_error());

    dg_layer *b = small_net(99);
    dg_optimizer *ob = adam_for(b);
    dg_manual_seed(42);
    dg_generator_state g0, g1;
    dg_generator_get_state(dg_default_generator(), &g0);
    dg_layer *b0 = small_net(99);                        /* b's state, to compare with */
    dg_generator_set_state(dg_default_generator(), &g0);
    dg_train_state sb = { .model = b, .optimizer = ob };

    cr_assert_eq(dg_train_checkpoint_load(model_only, &sb), DG_EFORMAT);
    cr_expect(strstr(dg_last_error(), "not a training checkpoint of this library"), "%s", dg_last_error());
    cr_expect(strstr(dg_last_error(), model_only), "names the file: %s", dg_last_error());

    cr_assert_eq(dg_train_checkpoint_load(sgd_ck, &sb), DG_EFORMAT);
    cr_expect(strstr(dg_last_error(), "momentum_buffer") && strstr(dg_last_error(), "adam"), "names what disagrees: %s", dg_last_error());
    cr_expect(states_identical(b, b0), "the model was changed by a refused load");
    dg_generator_get_state(dg_default_generator(), &g1);
    cr_expect(g1.seed == g0.seed && g1.offset == g0.offset, "the generator was moved by a refused load");

    dg_train_state none = { .model = b };
    cr_assert_eq(dg_train_checkpoint_load(sgd_ck, &none), DG_EFORMAT);
    cr_expect(strstr(dg_last_error(), "no optimizer was given"), "%s", dg_last_error());

    dg_optimizer_free(mom); dg_optimizer_free(ob);
    dg_layer_free(a); dg_layer_free(b); dg_layer_free(b0);
    unlink(model_only); unlink(sgd_ck);
    cr_assert_eq(dg_live_tensors(), 0);
}

/* ---- saves that are killed, fail, or meet a umask ---- */
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* How many entries of dir start with prefix. */
static int count_prefixed(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    cr_assert(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

/* Every parameter and buffer of net filled with v, so a loaded file shows which save it was. */
static void fill_state(dg_layer *net, double v) {
    int n;
    dg_named_tensor *st = dg_layer_state_dict(net, &n);
    dg_no_grad_begin();
    for (int i = 0; i < n; i++) cr_assert_eq(dg_fill_(st[i].tensor, v), 0, "%s", dg_last_error());
    dg_no_grad_end();
    free(st);
}

/* The value every entry of net holds, or NAN when they disagree (a torn set). */
static double uniform_value(const dg_layer *net) {
    int n;
    dg_named_tensor *st = dg_layer_state_dict(net, &n);
    double v = NAN;
    dg_scope *s = dg_scope_begin();
    for (int i = 0; i < n; i++) {
        dg_tensor *f = dg_cast(st[i].tensor, DG_F64);
        double lo = dg_item(dg_min(f, NULL, 0, false)), hi = dg_item(dg_max(f, NULL, 0, false));
        if (lo != hi || (i && lo != v)) { v = NAN; break; }
        v = lo;
    }
    dg_scope_end(s);
    free(st);
    return v;
}

/* A fresh folder (dir, a mkdtemp template) holding DIR/train.ckpt of a net whose every value and
 * epoch counter is k; returns the net. */
static dg_layer *first_checkpoint(char *dir, char *path, size_t cap, int64_t k) {
    cr_assert(mkdtemp(dir));
    snprintf(path, cap, "%s/train.ckpt", dir);
    dg_layer *net = small_net(1);
    fill_state(net, (double)k);
    dg_train_state s = { .model = net, .epoch = k };
    cr_assert_eq(dg_train_checkpoint_save(path, &s), 0, "%s", dg_last_error());
    return net;
}

Test(checkpoint, kill_9_during_saves_never_leaves_a_mixed_set_and_the_next_save_cleans_up) {
    char dir[] = "/tmp/dg_ck_kill_XXXXXX", path[256];
    dg_layer *net = first_checkpoint(dir, path, sizeof path, 0);
    dg_train_state s0 = { .model = net, .epoch = 0 };
    srand(12345);
    int loaded = 0;
    for (int round = 0; round < 30; round++) {
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {   /* saves of epoch k with every value k, as fast as it can */
            for (int64_t k = 1;; k++) {
                fill_state(net, (double)k);
                dg_train_state s = { .model = net, .epoch = k };
                if (dg_train_checkpoint_save(path, &s)) _exit(3);
            }
        }
        usleep(1000 + (useconds_t)(rand() % 20000));
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        cr_assert(WIFSIGNALED(status), "the saving child ended on its own (status %d): %s", status, dg_last_error());
        dg_layer *back = small_net(99);
        dg_train_state s = { .model = back };
        cr_assert_eq(dg_train_checkpoint_load(path, &s), 0, "round %d: %s", round, dg_last_error());
        double v = uniform_value(back);
        cr_assert(v == (double)s.epoch, "round %d: a torn set: the file says epoch %lld, its tensors hold %g", round,
                  (long long)s.epoch, v);
        loaded++;
        dg_layer_free(back);
    }
    cr_expect_eq(loaded, 30);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "train.ckpt.tmp.");
    int left = count_prefixed(dir, prefix);
    cr_log_info("30 kills: %d left a temporary behind (killed inside a save)", left);
    cr_assert_eq(dg_train_checkpoint_save(path, &s0), 0, "%s", dg_last_error());
    cr_expect_eq(count_prefixed(dir, prefix), 0, "the next save left %d temporaries (%d before it)", count_prefixed(dir, prefix), left);
    dg_layer_free(net);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

Test(checkpoint, a_save_that_fails_for_space_leaves_the_previous_one_and_no_temporary) {
    char dir[] = "/tmp/dg_ck_full_XXXXXX", path[256];
    dg_layer *net = first_checkpoint(dir, path, sizeof path, 1);
    pid_t pid = fork();
    if (pid == 0) {   /* a disk that fills after 300 bytes: writes past it fail (EFBIG) */
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit r = { 300, 300 };
        setrlimit(RLIMIT_FSIZE, &r);
        fill_state(net, 2);
        dg_train_state s2 = { .model = net, .epoch = 2 };
        int rc = dg_train_checkpoint_save(path, &s2);
        _exit(rc == DG_EIO && strstr(dg_last_error(), "previous file, if any, is untouched") ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the failing save did not report DG_EIO and an untouched file");
    dg_layer *back = small_net(99);
    dg_train_state s = { .model = back };
    cr_assert_eq(dg_train_checkpoint_load(path, &s), 0, "%s", dg_last_error());
    cr_expect(s.epoch == 1 && uniform_value(back) == 1.0, "the previous checkpoint changed: epoch %lld", (long long)s.epoch);
    cr_expect_eq(count_prefixed(dir, "train.ckpt.tmp."), 0, "a failed save left its temporary");
    dg_layer_free(back);
    dg_layer_free(net);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* A real file system that runs out of space: a 4 MiB tmpfs, mounted in a mount namespace of
 * this test's own (so nothing outlives it), holding a checkpoint of about 0.9 MiB. Before each
 * save a filler leaves F bytes free, F from 0 to more than the checkpoint in 24 steps, so the
 * writes fail at every point of the file (the header, tensor data, the last page) or succeed.
 * Every save either succeeds (the file is the new set) or fails naming ENOSPC with the previous
 * set untouched; no temporary is left; with the space back the next save succeeds. Needs root
 * (CAP_SYS_ADMIN) for the mount; the RLIMIT_FSIZE test above covers a non-root run. */
static void fill_to_free(const char *filler, off_t free_bytes, const char *dir) {
    int fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert(fd >= 0);
    static char zeros[1 << 16];
    off_t n = 0;
    for (;;) {
        ssize_t w = write(fd, zeros, sizeof zeros);
        if (w <= 0) break;
        n += w;
    }
    cr_assert_eq(errno, ENOSPC);
    cr_assert_eq(ftruncate(fd, n > free_bytes ? n - free_bytes : 0), 0);
    close(fd);
    struct statvfs v;
    cr_assert_eq(statvfs(dir, &v), 0);
}

Test(checkpoint, a_nearly_full_tmpfs_fails_saves_cleanly_and_never_mixes_sets, .timeout = 120) {
    if (unshare(CLONE_NEWNS) != 0) cr_skip_test("needs root for a tmpfs of its own (unshare: %s)", strerror(errno));
    cr_assert_eq(mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL), 0, "%s", strerror(errno));
    char dir[] = "/tmp/dg_ck_full_XXXXXX", path[256], filler[256];
    cr_assert(mkdtemp(dir));
    cr_assert_eq(mount("tmpfs", dir, "tmpfs", 0, "size=4m"), 0, "mount: %s", strerror(errno));
    snprintf(path, sizeof path, "%s/train.ckpt", dir);
    snprintf(filler, sizeof filler, "%s/filler", dir);
    dg_manual_seed(1);
    dg_layer *net = dg_nn_sequential(2, dg_nn_linear(300, 256), dg_nn_linear(256, 64));
    dg_optimizer *opt = adam_for(net);
    dg_scope *sc = dg_scope_begin();   /* one step, so Adam's moments exist: model + 2 moments, about 0.9 MiB */
    cr_assert_eq(dg_backward(dg_sum_all(dg_forward(net, dg_randn(DG_SHAPE(4, 300), DG_F32)))), 0, "%s", dg_last_error());
    cr_assert_eq(dg_optimizer_step(opt), 0, "%s", dg_last_error());
    dg_scope_end(sc);
    fill_state(net, 1);
    dg_train_state st = { .model = net, .optimizer = opt, .epoch = 1 };
    cr_assert_eq(dg_train_checkpoint_save(path, &st), 0, "%s", dg_last_error());
    struct stat fst;
    cr_assert_eq(stat(path, &fst), 0);
    off_t size = fst.st_size;
    int failed = 0, saved = 0;
    int64_t good = 1;
    for (int k = 0; k < 24; k++) {
        off_t free_bytes = (off_t)((double)k / 20.0 * (double)size);   /* 0 .. 1.15 x the file */
        fill_to_free(filler, free_bytes, dir);
        fill_state(net, (double)(k + 2));
        dg_train_state sk = { .model = net, .optimizer = opt, .epoch = k + 2 };
        int rc = dg_train_checkpoint_save(path, &sk);
        if (rc == 0) { good = k + 2; saved++; }
        else {
            failed++;
            cr_expect(strstr(dg_last_error(), "No space left on device") && strstr(dg_last_error(), "previous file, if any, is untouched"),
                      "free %lld of %lld: %s", (long long)free_bytes, (long long)size, dg_last_error());
        }
        cr_expect_eq(count_prefixed(dir, "train.ckpt.tmp."), 0, "free %lld: a temporary was left", (long long)free_bytes);
        unlink(filler);
        dg_layer *back = dg_nn_sequential(2, dg_nn_linear(300, 256), dg_nn_linear(256, 64));
        dg_optimizer *ob = adam_for(back);
        dg_train_state sb = { .model = back, .optimizer = ob };
        cr_assert_eq(dg_train_checkpoint_load(path, &sb), 0, "free %lld: the checkpoint no longer loads: %s", (long long)free_bytes,
                     dg_last_error());
        cr_expect(sb.epoch == good && uniform_value(back) == (double)good, "free %lld: epoch %lld, values %g, want %lld",
                  (long long)free_bytes, (long long)sb.epoch, uniform_value(back), (long long)good);
        dg_optimizer_free(ob);
        dg_layer_free(back);
    }
    cr_expect(failed >= 15 && saved >= 2, "the free space did not span the file: %d failed, %d saved", failed, saved);
    cr_log_info("tmpfs: %d saves failed for space, %d fitted, file %lld bytes", failed, saved, (long long)size);
    dg_optimizer_free(opt);
    dg_layer_free(net);
    umount(dir);
    rmdir(dir);
}

Test(checkpoint, saved_files_follow_the_umask_and_a_live_saves_temporary_is_kept) {
    char dir[] = "/tmp/dg_ck_mode_XXXXXX";
    cr_assert(mkdtemp(dir));
    char path[256], live[300], dead[300];
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    dg_layer *net = small_net(1);
    mode_t old = umask(022);
    cr_assert_eq(dg_layer_save(net, path), 0, "%s", dg_last_error());
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0644, "umask 022: mode %o", st.st_mode & 0777);
    umask(077);
    cr_assert_eq(dg_layer_save(net, path), 0, "%s", dg_last_error());
    cr_assert_eq(stat(path, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0600, "umask 077: mode %o", st.st_mode & 0777);
    umask(old);
    /* a leftover of this (live) process and one of a process that is gone */
    pid_t gone = fork();
    if (gone == 0) _exit(0);
    waitpid(gone, NULL, 0);
    snprintf(live, sizeof live, "%s.tmp.%ld.abcdef", path, (long)getpid());
    snprintf(dead, sizeof dead, "%s.tmp.%ld.abcdef", path, (long)gone);
    fclose(fopen(live, "w"));
    fclose(fopen(dead, "w"));
    cr_assert_eq(dg_layer_save(net, path), 0, "%s", dg_last_error());
    cr_expect_eq(access(dead, F_OK), -1, "a killed save's temporary was not removed");
    cr_expect_eq(access(live, F_OK), 0, "a live save's temporary was removed");
    dg_layer_free(net);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* ReduceLROnPlateau is not a function of its epoch: its best value and counters travel as
 * "scheduler.best", "scheduler.num_bad_epochs", "scheduler.cooldown_counter" beside
 * "scheduler.epoch", so a resumed run lowers the lr at the same metric as one that never stopped.
 * A file from before (only "scheduler.epoch", shaped [1] as the first format wrote it) still
 * loads into a schedule of the epoch, and is refused, naming what it lacks, by a plateau
 * scheduler; a one-cycle scheduler refuses an epoch past its end. Refusals change nothing. */
Test(checkpoint, plateau_scheduler_state_and_old_files) {
    char path[] = "/tmp/dg_ck_plateau_XXXXXX", old[] = "/tmp/dg_ck_oldsched_XXXXXX";
    close(mkstemp(path)); close(mkstemp(old));
    static const double metric[] = { 1.0, 0.9, 0.95, 0.96, 0.97, 0.91, 0.92, 0.93, 0.99, 0.98, 0.97, 0.96, 0.95 };
    dg_reduce_lr_on_plateau_params pp = dg_reduce_lr_on_plateau_default_params();
    pp.patience = 2;
    pp.factor = 0.5;
    pp.cooldown = 1;
    dg_layer *a = small_net(1);
    dg_optimizer *oa = adam_for(a);
    dg_lr_scheduler *sa = dg_reduce_lr_on_plateau(oa, pp);
    for (int k = 0; k < 6; k++) cr_assert_eq(dg_lr_scheduler_step_metric(sa, metric[k]), 0);
    cr_assert_lt(dg_optimizer_get_lr(oa), 0.01, "the lr dropped before the save");
    dg_train_state st = { .model = a, .optimizer = oa, .scheduler = sa, .epoch = 6 };
    cr_assert_eq(dg_train_checkpoint_save(path, &st), 0, "%s", dg_last_error());

    dg_layer *b = small_net(5);
    dg_optimizer *ob = adam_for(b);
    dg_lr_scheduler *sb = dg_reduce_lr_on_plateau(ob, pp);
    dg_train_state lb = { .model = b, .optimizer = ob, .scheduler = sb };
    cr_assert_eq(dg_train_checkpoint_load(path, &lb), 0, "%s", dg_last_error());
    cr_assert_eq(dg_lr_scheduler_epoch(sb), 6);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(dg_item(dg_lr_scheduler_state_tensor(sb, i)), dg_item(dg_lr_scheduler_state_tensor(sa, i)), "%s",
                     dg_lr_scheduler_state_name(sa, i));
    for (int k = 6; k < 13; k++) {
        cr_assert_eq(dg_lr_scheduler_step_metric(sa, metric[k]), 0);
        cr_assert_eq(dg_lr_scheduler_step_metric(sb, metric[k]), 0);
        cr_assert_eq(dg_optimizer_get_lr(ob), dg_optimizer_get_lr(oa), "metric %d: the resumed lr differs", k);
    }
    cr_assert_lt(dg_optimizer_get_lr(oa), 0.0025, "the lr dropped again after the resume point");

    /* an old file: "scheduler.epoch" alone, shaped [1] */
    dg_cosine_annealing_lr_params cp = dg_cosine_annealing_lr_default_params();
    cp.t_max = 20;
    dg_lr_scheduler *cos_a = dg_cosine_annealing_lr(oa, cp);
    for (int k = 0; k < 9; k++) dg_lr_scheduler_step(cos_a);
    dg_train_state sc = { .model = a, .optimizer = oa, .scheduler = cos_a };
    cr_assert_eq(dg_train_checkpoint_save(old, &sc), 0, "%s", dg_last_error());
    dg_tensor_dict *d = dg_load_safetensors(old), *o1 = dg_tensor_dict_new();
    cr_assert(d && o1);
    for (int i = 0; i < dg_tensor_dict_size(d); i++)
        if (strcmp(dg_tensor_dict_name(d, i), "scheduler.epoch") != 0)
            cr_assert_eq(dg_tensor_dict_set(o1, dg_tensor_dict_name(d, i), dg_tensor_dict_tensor(d, i)), 0);
    dg_tensor *e1 = dg_from_data(DG_SHAPE(1), DG_I64, (int64_t[]){ 9 });
    cr_assert_eq(dg_tensor_dict_set(o1, "scheduler.epoch", e1), 0);
    dg_tensor_free(e1);
    cr_assert_eq(dg_save_safetensors(old, o1), 0);
    dg_tensor_dict_free(d);
    dg_tensor_dict_free(o1);
    dg_lr_scheduler *cos_b = dg_cosine_annealing_lr(ob, cp);
    dg_train_state lc = { .model = b, .optimizer = ob, .scheduler = cos_b };
    cr_assert_eq(dg_train_checkpoint_load(old, &lc), 0, "%s", dg_last_error());
    cr_assert_eq(dg_lr_scheduler_epoch(cos_b), 9);
    cr_assert_eq(dg_optimizer_get_lr(ob), dg_lr_scheduler_get_lr(cos_a));

    /* the old file into a plateau scheduler: refused, naming the missing entry */
    dg_lr_scheduler *sp = dg_reduce_lr_on_plateau(ob, pp);
    double lr_before = dg_optimizer_get_lr(ob);
    dg_train_state lp = { .model = b, .optimizer = ob, .scheduler = sp };
    cr_assert_eq(dg_train_checkpoint_load(old, &lp), DG_EFORMAT);
    cr_expect(strstr(dg_last_error(), "scheduler.best") && strstr(dg_last_error(), "reduce_lr_on_plateau"), "%s",
              dg_last_error());
    cr_expect_eq(dg_lr_scheduler_epoch(sp), 0);
    cr_expect_eq(dg_optimizer_get_lr(ob), lr_before, "a refused load changed the optimizer");
    /* the plateau file into a schedule of the epoch: refused, naming the entry it cannot take */
    dg_train_state lq = { .model = b, .optimizer = ob, .scheduler = cos_b };
    cr_assert_eq(dg_train_checkpoint_load(path, &lq), DG_EFORMAT);
    cr_expect(strstr(dg_last_error(), "scheduler.best") && strstr(dg_last_error(), "cosine_annealing_lr"), "%s",
              dg_last_error());
    cr_expect_eq(dg_lr_scheduler_epoch(cos_b), 9);
    /* an epoch past a one-cycle schedule's end: refused before the model changes */
    dg_one_cycle_lr_params op = dg_one_cycle_lr_default_params();
    op.max_lr = 0.01;
    op.total_steps = 5;
    dg_lr_scheduler *oc = dg_one_cycle_lr(ob, op);
    dg_train_state lo = { .model = b, .optimizer = ob, .scheduler = oc };
    cr_assert_eq(dg_train_checkpoint_load(old, &lo), DG_EFORMAT);
    cr_expect(strstr(dg_last_error(), "total_steps"), "%s", dg_last_error());
    cr_expect_eq(dg_lr_scheduler_epoch(oc), 0);

    dg_lr_scheduler_free(sa); dg_lr_scheduler_free(sb); dg_lr_scheduler_free(sp); dg_lr_scheduler_free(oc);
    dg_lr_scheduler_free(cos_a); dg_lr_scheduler_free(cos_b);
    dg_optimizer_free(oa); dg_optimizer_free(ob);
    dg_layer_free(a); dg_layer_free(b);
    unlink(path); unlink(old);
    cr_assert_eq(dg_live_tensors(), 0);
}
