/* optim/lbfgs_internal.h — LBFGS's state (torch.optim.LBFGS keeps it as the state of its first
 * parameter) and the flat-vector helpers its files share. Vectors are 1-D CPU tensors of the
 * parameters' dtype over all parameters, flattened in parameter order (torch's
 * _gather_flat_grad); every element operation runs in that dtype, scalars (dot products, step
 * lengths, losses) in double. Not part of the public API. */
#ifndef DG_OPTIM_LBFGS_INTERNAL_H
#define DG_OPTIM_LBFGS_INTERNAL_H

#include "optim_internal.h"

typedef struct dg_lbfgs {
    /* settings (torch's param_groups[0] less lr, which is the optimizer's group 0 lr) */
    int max_iter, max_eval, history_size;
    double tolerance_grad, tolerance_change;
    bool strong_wolfe;
    dg_dtype dt;                  /* every parameter's: float32 or float64 */
    int64_t numel;
    /* state, as torch's: func_evals, n_iter (both over every step), d, t, old_dirs, old_stps,
     * ro, H_diag, prev_flat_grad, prev_loss; d NULL until the first iteration */
    int64_t func_evals, n_iter;
    dg_tensor *d, *prev_flat_grad;
    double t, H_diag, prev_loss;
    int n_old, cap_old;           /* history in use (oldest first), and allocated */
    dg_tensor **old_dirs, **old_stps;
    double *ro;
    /* exported views of the scalars (0-d CPU tensors: i64 counts, f64 the rest), refreshed at
     * the end of each step and by loads */
    dg_tensor *func_evals_t, *n_iter_t, *t_t, *H_diag_t, *prev_loss_t;
    dg_tensor **ro_t;
    char (*hist_name)[3][32];     /* "0.old_dirs.<k>", "0.old_stps.<k>", "0.ro.<k>" */
} dg_lbfgs_st;

/* ---- flat vectors (lbfgs.c): n elements of dtype dt at a and b ---- */
double dg_lbfgs_dot(dg_dtype dt, const void *a, const void *b, int64_t n);
void dg_lbfgs_axpy(dg_dtype dt, void *y, double alpha, const void *x, int64_t n);   /* y += alpha x */
double dg_lbfgs_abs_max(dg_dtype dt, const void *a, int64_t n);
/* A new 1-D CPU tensor of the flat length, owned by the caller; NULL and a message on failure. */
dg_tensor *dg_lbfgs_vec(const dg_lbfgs_st *L);

/* The evaluation the line search calls (torch's _directional_evaluate): params += t d, loss and
 * flat gradient into *f and g, params back to x. 0 or a negative status. */
typedef struct dg_lbfgs_eval {
    dg_optimizer *o;
    int (*closure)(void *user, double *loss);
    void *user;
} dg_lbfgs_eval;
int dg_lbfgs_directional(const dg_lbfgs_eval *ev, const void *x, double t, const void *d, double *f, void *g);

/* lbfgs_search.c: torch's _strong_wolfe from step t along d, from loss f and flat gradient g
 * with directional derivative gtd; x holds the parameters to return to. On success *f_out,
 * g_out (a vector of the flat length), *t_out and *evals are the accepted point's. */
int dg_lbfgs_strong_wolfe(const dg_lbfgs_eval *ev, const void *x, double t, const void *d, double f, const void *g,
                          double gtd, double *f_out, void *g_out, double *t_out, int *evals);

/* lbfgs_state.c: the state list of an LBFGS optimizer (after the groups' lr) */
int dg_lbfgs_state_count(const dg_optimizer *o);
const char *dg_lbfgs_state_name(const dg_optimizer *o, int k);
dg_tensor *dg_lbfgs_state_tensor(const dg_optimizer *o, int k);
/* Checks the name and value's shape and, unless check_only, loads one entry "0.<key>"; DG_EINVAL
 * and a message naming what does not fit. */
int dg_lbfgs_load_state(dg_optimizer *o, const char *name, const dg_tensor *value, bool check_only);
/* Refreshes the exported scalars from the state. */
int dg_lbfgs_sync_scalars(dg_lbfgs_st *L);
/* Grows the history arrays to hold at least n entries. */
int dg_lbfgs_reserve(dg_lbfgs_st *L, int n);

#endif
