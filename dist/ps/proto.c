/* dist/ps/proto.c — dg_ps_init_msg to and from its wire bytes, field by field (proto.h). */
#include "proto.h"

static void put_f64(unsigned char *p, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    dg_ps_put64(p, u);
}
static double get_f64(const unsigned char *p) {
    uint64_t u = dg_ps_get64(p);
    double v;
    memcpy(&v, &u, 8);
    return v;
}

void dg_ps_init_encode(const dg_ps_init_msg *m, unsigned char *out) {
    dg_ps_put64(out, m->total);
    dg_ps_put64(out + 8, m->offset);
    dg_ps_put64(out + 16, m->len);
    const uint32_t u[6] = { m->n_workers, m->mode, m->kind, m->nesterov, m->amsgrad, 0 };
    for (int i = 0; i < 6; i++) dg_ps_put32(out + 24 + 4 * i, u[i]);
    const double d[9] = { m->lr, m->weight_decay, m->momentum, m->dampening, m->beta1, m->beta2, m->eps, m->init_acc, m->lr_decay };
    for (int i = 0; i < 9; i++) put_f64(out + 48 + 8 * i, d[i]);
}

void dg_ps_init_decode(const unsigned char *in, dg_ps_init_msg *m) {
    memset(m, 0, sizeof *m);
    m->total = dg_ps_get64(in);
    m->offset = dg_ps_get64(in + 8);
    m->len = dg_ps_get64(in + 16);
    m->n_workers = dg_ps_get32(in + 24);
    m->mode = dg_ps_get32(in + 28);
    m->kind = dg_ps_get32(in + 32);
    m->nesterov = dg_ps_get32(in + 36);
    m->amsgrad = dg_ps_get32(in + 40);
    double *d[9] = { &m->lr, &m->weight_decay, &m->momentum, &m->dampening, &m->beta1, &m->beta2, &m->eps, &m->init_acc, &m->lr_decay };
    for (int i = 0; i < 9; i++) *d[i] = get_f64(in + 48 + 8 * i);
}

void dg_ps_sparse_encode(const dg_ps_sparse_msg *m, unsigned char *out) {
    dg_ps_put32(out, m->dim);
    dg_ps_put32(out + 4, m->kind);
    dg_ps_put32(out + 8, m->n_workers);
    dg_ps_put32(out + 12, m->mode);
    dg_ps_put64(out + 16, m->seed);
    const double d[4] = { m->lr, m->eps, m->init_acc, m->init_range };
    for (int i = 0; i < 4; i++) put_f64(out + 24 + 8 * i, d[i]);
    dg_ps_put32(out + 56, m->entry);
    dg_ps_put32(out + 60, 0);
    put_f64(out + 64, m->beta1);
    put_f64(out + 72, m->beta2);
}

void dg_ps_sparse_decode(const unsigned char *in, dg_ps_sparse_msg *m) {
    memset(m, 0, sizeof *m);
    m->dim = dg_ps_get32(in);
    m->kind = dg_ps_get32(in + 4);
    m->n_workers = dg_ps_get32(in + 8);
    m->mode = dg_ps_get32(in + 12);
    m->seed = dg_ps_get64(in + 16);
    double *d[4] = { &m->lr, &m->eps, &m->init_acc, &m->init_range };
    for (int i = 0; i < 4; i++) *d[i] = get_f64(in + 24 + 8 * i);
    m->entry = dg_ps_get32(in + 56);
    m->pad = dg_ps_get32(in + 60);
    m->beta1 = get_f64(in + 64);
    m->beta2 = get_f64(in + 72);
}
