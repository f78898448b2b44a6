/* optim/train_checkpoint.c — everything a resume needs, in one safetensors file: the model's
 * state ("model.<name>"), the optimizer's ("optimizer.<name>"), the LR scheduler's
 * ("scheduler.<name>", when one is given: "scheduler.epoch" for the schedules that are a function
 * of their epoch counter, plus ReduceLROnPlateau's best value and counters; files from before
 * that scheduler hold only the epoch and still load),
 * the random generator's position ("rng.seed", "rng.offset") and the progress counters
 * ("progress.epoch", "progress.step", "progress.batch": with the DataLoader's order a function of
 * (seed, epoch, batch), these are the loader's position too), marked by "dygraph.train_checkpoint"
 * (the format version), and the loss scaler's ("scaler.scale", "scaler.incr_count",
 * "scaler.decr_count": dygraph/amp.h, Paddle's GradScaler.state_dict names) when one is given.
 *
 * Why one file: separate model, optimizer and meta files are each atomic but not as a set, and a
 * kill between two renames leaves a mix of epochs that a resume cannot tell apart. One file is
 * one rename (dg_save_safetensors writes a temporary, fsyncs it, renames it over the old file
 * and fsyncs the folder), so a reader sees the old set or the new one, never a mix. A load checks
 * every part before it changes anything: a model-only file, another program's file or a set that
 * does not fit the model and optimizer is refused naming what disagrees, and the caller's model,
 * optimizer and generator are left as they were. */
#include "optim_internal.h"
#include <dygraph/checkpoint.h>

#define FORMAT_KEY "dygraph.train_checkpoint"
#define FORMAT_VERSION 1

/* The status of the failure a callee recorded (it returned NULL); DG_ENOMEM when it left none. */
static int failed_status(void) { return dg_last_status() ? dg_last_status() : DG_ENOMEM; }

static int put_i64(dg_tensor_dict *d, const char *name, int64_t v) {
    dg_tensor *t = dg_from_data(DG_SHAPE(1), DG_I64, &v);
    if (!t) return failed_status();
    int rc = dg_tensor_dict_set(d, name, t);
    dg_tensor_free(t);
    return rc;
}

/* prefix + name, or an error when it does not fit a safetensors key of ours */
static int key(char *out, size_t cap, const char *prefix, const char *name) {
    int n = snprintf(out, cap, "%s%s", prefix, name);
    if (n < 0 || (size_t)n >= cap) { DG_ERR(DG_EINVAL, "train checkpoint: name '%s%s' is too long", prefix, name); return DG_EINVAL; }
    return 0;
}

static dg_generator *generator_of(const dg_train_state *s) { return s->generator ? s->generator : dg_default_generator(); }

int dg_train_checkpoint_save(const char *path, const dg_train_state *s) {
    DG_CHECK_INT(path, "train_checkpoint_save: path is NULL");
    DG_CHECK_INT(s && s->model, "train_checkpoint_save: no model to save");
    dg_tensor_dict *d = dg_tensor_dict_new(), *m = dg_layer_state_to_dict(s->model);
    int rc = d && m ? 0 : failed_status();
    char k[512];
    for (int i = 0; !rc && i < dg_tensor_dict_size(m); i++) {
        rc = key(k, sizeof k, "model.", dg_tensor_dict_name(m, i));
        if (!rc) rc = dg_tensor_dict_set(d, k, dg_tensor_dict_tensor(m, i));
    }
    for (int i = 0; !rc && s->optimizer && i < dg_optimizer_state_count(s->optimizer); i++) {
        rc = key(k, sizeof k, "optimizer.", dg_optimizer_state_name(s->optimizer, i));
        if (!rc) rc = dg_tensor_dict_set(d, k, dg_optimizer_state_tensor(s->optimizer, i));
    }
    dg_generator_state g;
    if (!rc) rc = dg_generator_get_state(generator_of(s), &g);
    if (!rc) rc = put_i64(d, "rng.seed", (int64_t)g.seed);      /* the bits of the uint64 */
    if (!rc) rc = put_i64(d, "rng.offset", (int64_t)g.offset);
    for (int i = 0; !rc && s->scheduler && i < dg_lr_scheduler_state_count(s->scheduler); i++) {
        rc = key(k, sizeof k, "scheduler.", dg_lr_scheduler_state_name(s->scheduler, i));
        if (!rc) rc = dg_tensor_dict_set(d, k, dg_lr_scheduler_state_tensor(s->scheduler, i));
    }
    if (!rc && s->scaler) {
        dg_tensor_dict *a = dg_amp_state_dict(s->scaler);
        rc = a ? 0 : failed_status();
        for (int i = 0; !rc && i < dg_tensor_dict_size(a); i++) {
            rc = key(k, sizeof k, "scaler.", dg_tensor_dict_name(a, i));
            if (!rc) rc = dg_tensor_dict_set(d, k, dg_tensor_dict_tensor(a, i));
        }
        dg_tensor_dict_free(a);
    }
    if (!rc) rc = put_i64(d, "progress.epoch", s->epoch);
    if (!rc) rc = put_i64(d, "progress.step", s->step);
    if (!rc) rc = put_i64(d, "progress.batch", s->batch);
    if (!rc) rc = put_i64(d, FORMAT_KEY, FORMAT_VERSION);
    if (!rc) rc = dg_save_safetensors(path, d);
    dg_tensor_dict_free(m);
    dg_tensor_dict_free(d);
    return rc;
}

/* The one int64 of entry `name`, or an error naming the file and the entry. */
static int get_i64(const dg_tensor_dict *d, const char *path, const char *name, int64_t *out) {
    dg_tensor *t = dg_tensor_dict_get(d, name);
    if (!t || dg_dtype_of(t) != DG_I64 || dg_numel(t) != 1) {
        DG_ERR(DG_EFORMAT, "train checkpoint %s: entry '%s' %s", path, name, t ? "is not one int64" : "is missing");
        return DG_EFORMAT;
    }
    return dg_to_host(t, out, sizeof *out);
}

/* A copy of the model's current state, to put back when a later part of the load fails. */
static dg_tensor_dict *snapshot(const dg_layer *model) {
    dg_tensor_dict *live = dg_layer_state_to_dict(model), *copy = dg_tensor_dict_new();
    int rc = live && copy ? 0 : DG_ENOMEM;
    dg_no_grad_begin();
    for (int i = 0; !rc && i < dg_tensor_dict_size(live); i++) {
        dg_tensor *c = dg_clone(dg_tensor_dict_tensor(live, i));
        rc = c ? dg_tensor_dict_set(copy, dg_tensor_dict_name(live, i), c) : DG_ENOMEM;
        dg_tensor_free(c);
    }
    dg_no_grad_end();
    dg_tensor_dict_free(live);
    if (rc) { dg_tensor_dict_free(copy); return NULL; }
    return copy;
}

int dg_train_checkpoint_load(const char *path, dg_train_state *s) {
    DG_CHECK_INT(path, "train_checkpoint_load: path is NULL");
    DG_CHECK_INT(s && s->model, "train_checkpoint_load: no model to load into");
    dg_tensor_dict *d = dg_load_safetensors(path);
    if (!d) return failed_status();
    dg_tensor_dict *model = dg_tensor_dict_new(), *optim = dg_tensor_dict_new(), *sched = dg_tensor_dict_new(),
                   *amp = dg_tensor_dict_new(), *before = NULL;
    int64_t version = 0, seed = 0, offset = 0, epoch = 0, step = 0, batch = 0, sched_epoch = 0;
    int rc = model && optim && sched && amp ? 0 : DG_ENOMEM;
    if (!rc && !dg_tensor_dict_get(d, FORMAT_KEY)) {
        DG_ERR(DG_EFORMAT, "train checkpoint %s: no '%s' entry: not a training checkpoint of this library "
               "(a model-only file loads with dg_layer_load)", path, FORMAT_KEY);
        rc = DG_EFORMAT;
    }
    if (!rc) rc = get_i64(d, path, FORMAT_KEY, &version);
    if (!rc && version != FORMAT_VERSION) {
        DG_ERR(DG_EFORMAT, "train checkpoint %s: format version %lld, this library reads %d", path, (long long)version, FORMAT_VERSION);
        rc = DG_EFORMAT;
    }
    /* every entry belongs to a known part */
    for (int i = 0; !rc && i < dg_tensor_dict_size(d); i++) {
        const char *n = dg_tensor_dict_name(d, i);
        dg_tensor *t = dg_tensor_dict_tensor(d, i);
        if (strncmp(n, "model.", 6) == 0) rc = dg_tensor_dict_set(model, n + 6, t);
        else if (strncmp(n, "optimizer.", 10) == 0) rc = dg_tensor_dict_set(optim, n + 10, t);
        else if (strncmp(n, "scheduler.", 10) == 0) rc = dg_tensor_dict_set(sched, n + 10, t);
        else if (strncmp(n, "scaler.", 7) == 0) rc = dg_tensor_dict_set(amp, n + 7, t);
        else if (strcmp(n, FORMAT_KEY) && strcmp(n, "rng.seed") && strcmp(n, "rng.offset") && strcmp(n, "progress.epoch") &&
                 strcmp(n, "progress.step") && strcmp(n, "progress.batch")) {
            DG_ERR(DG_EFORMAT, "train checkpoint %s: entry '%s' belongs to no part (model., optimizer., scheduler., scaler., "
                   "rng., progress.)", path, n);
            rc = DG_EFORMAT;
        }
    }
    if (!rc) rc = get_i64(d, path, "rng.seed", &seed);
    if (!rc) rc = get_i64(d, path, "rng.offset", &offset);
    if (!rc) rc = get_i64(d, path, "progress.epoch", &epoch);
    if (!rc) rc = get_i64(d, path, "progress.step", &step);
    if (!rc) rc = get_i64(d, path, "progress.batch", &batch);
    bool has_sched = dg_tensor_dict_get(d, "scheduler.epoch") != NULL;
    if (!rc && has_sched) rc = get_i64(d, path, "scheduler.epoch", &sched_epoch);
    if (!rc && s->scheduler && !has_sched) {
        DG_ERR(DG_EFORMAT, "train checkpoint %s: has no LR scheduler position, but a scheduler was given to restore", path);
        rc = DG_EFORMAT;
    }
    if (!rc && !s->scheduler && dg_tensor_dict_size(sched) > 0) {
        DG_ERR(DG_EFORMAT, "train checkpoint %s: holds an LR scheduler position (epoch %lld) but no scheduler was given to "
               "restore it into", path, (long long)sched_epoch);
        rc = DG_EFORMAT;
    }
    if (!rc && (sched_epoch < 0 || batch < 0 || epoch < 0 || step < 0)) {
        DG_ERR(DG_EFORMAT, "train checkpoint %s: negative position (epoch %lld, batch %lld, step %lld, scheduler epoch %lld)",
               path, (long long)epoch, (long long)batch, (long long)step, (long long)sched_epoch);
        rc = DG_EFORMAT;
    }
    if (!rc && s->optimizer && dg_tensor_dict_size(optim) == 0) {
        DG_ERR(DG_EFORMAT, "train checkpoint %s: has no optimizer state, but an optimizer (%s) was given to restore",
               path, dg_optimizer_name(s->optimizer));
        rc = DG_EFORMAT;
    }
    if (!rc && !s->optimizer && dg_tensor_dict_size(optim) > 0) {
        DG_ERR(DG_EFORMAT, "train checkpoint %s: holds optimizer state but no optimizer was given to restore it into", path);
        rc = DG_EFORMAT;
    }
    if (!rc && s->scaler && dg_tensor_dict_size(amp) == 0) {
        DG_ERR(DG_EFORMAT, "train checkpoint %s: has no loss scaler state, but a scaler was given to restore", path);
        rc = DG_EFORMAT;
    }
    if (!rc && !s->scaler && dg_tensor_dict_size(amp) > 0) {
        DG_ERR(DG_EFORMAT, "train checkpoint %s: holds a loss scaler's state but no scaler was given to restore it into", path);
        rc = DG_EFORMAT;
    }
    if (!rc && s->scaler) {
        char where[600];
        snprintf(where, sizeof where, "train checkpoint %s", path);
        rc = dg_amp_load_dict_checked(s->scaler, amp, where, true);
    }
    /* the scheduler's entries are checked before anything changes (its epoch must have an lr:
     * a one-cycle schedule ends, a lambda may refuse) and loaded last */
    if (!rc && s->scheduler) rc = dg_lr_scheduler_load_dict(s->scheduler, sched, path, true);
    /* model then optimizer, each checked in full before it changes anything; if the optimizer
     * refuses, the model goes back to what it was */
    if (!rc && s->optimizer && !(before = snapshot(s->model))) rc = failed_status();
    if (!rc) rc = dg_layer_load_dict(s->model, model, dg_load_default_params(), NULL);
    if (!rc && s->optimizer && (rc = dg_optimizer_load_dict(s->optimizer, optim)) != 0) {
        dg_error_saved why;
        dg_error_save(&why);
        dg_layer_load_dict(s->model, before, dg_load_default_params(), NULL);
        dg_error_restore(&why);
    }
    if (!rc) {
        dg_generator_state g = { (uint64_t)seed, (uint64_t)offset };
        rc = dg_generator_set_state(generator_of(s), &g);
    }
    /* last, as it was checked above */
    if (!rc && s->scheduler) rc = dg_lr_scheduler_load_dict(s->scheduler, sched, path, false);
    if (!rc && s->scaler) rc = dg_amp_load_dict_checked(s->scaler, amp, path, false);   /* checked above */
    if (!rc) { s->epoch = epoch; s->step = step; s->batch = batch; }
    dg_tensor_dict_free(before);
    dg_tensor_dict_free(model);
    dg_tensor_dict_free(optim);
    dg_tensor_dict_free(sched);
    dg_tensor_dict_free(amp);
    dg_tensor_dict_free(d);
    return rc;
}
