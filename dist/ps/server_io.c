/* dist/ps/server_io.c — a parameter server's tables to and from a directory.
 *
 * Save (worker 0's dg_fleet_save_persistables, a SAVE request to every server): server i of S
 * writes DIR/server.<i>-of-<S>.safetensors — atomically, as every checkpoint (dg_save_safetensors
 * writes a temporary, fsyncs and renames) — holding per table k: "t<k>.version" and for a dense
 * shard "t<k>.geo" (total, offset, len, n_workers, mode, kind, nesterov, amsgrad), "t<k>.hyper"
 * (lr, weight_decay, momentum, dampening, beta1, beta2, eps, init_acc, lr_decay), "t<k>.value"
 * and the optimizer's state as "t<k>.opt.<its state names>"; for a sparse shard "t<k>.sparse"
 * (its settings; "t<k>.sparse2": entry threshold, beta1, beta2), "t<k>.ids", "t<k>.rows", "t<k>.acc"
 * (Adagrad's sum or Adam's exp_avg), "t<k>.acc2" (Adam's exp_avg_sq) and "t<k>.meta" (per row:
 * the rule's steps, the pushes that named it, the version it was last used at). Worker 0 then writes DIR/manifest
 * (the format and S) the same way, last: a directory with a manifest is a whole save.
 *
 * Load (dg_fleet_init_server(DIR)): server i of S' reads the manifest and every one of the S
 * files, and keeps what is its own under S': for a dense table the elements [i*N/S', (i+1)*N/S')
 * gathered from the old shards (values and per-element optimizer state; the per-table counters
 * are the same on every shard), for a sparse table the rows whose id % S' == i. So the same S
 * restores the tables bit for bit and another S gives the same values, re-sharded. */
#include "../dist_internal.h"
#include "server_internal.h"
#include <dygraph/checkpoint.h>
#include "env.h"
#include <errno.h>
#include <unistd.h>

#define MANIFEST "manifest"
#define FORMAT "dygraph parameter-server save 2"

static int put(dg_tensor_dict *d, const char *name, dg_tensor *t) {
    int rc = t ? dg_tensor_dict_set(d, name, t) : (dg_last_status() ? dg_last_status() : DG_ENOMEM);
    return rc;
}

int dg_ps_server_save(dg_ps_server *s, const char *dir, int index, int count) {
    DG_CHECK_INT(index >= 0 && index < count, "ps save: server %d of %d", index, count);
    char path[4096], name[96];
    snprintf(path, sizeof path, "%s/server.%d-of-%d.safetensors", dir, index, count);
    dg_scope *sc = dg_scope_begin();
    dg_tensor_dict *d = dg_tensor_dict_new();
    int rc = d ? 0 : DG_ENOMEM;
    for (int k = 0; k < DG_PS_MAX_TABLES && !rc; k++) {
        ps_table *t = &s->t[k];
        if (!t->made) continue;
        snprintf(name, sizeof name, "t%d.version", k);
        int64_t ver = (int64_t)t->version;
        rc = put(d, name, dg_from_data(DG_SHAPE(1), DG_I64, &ver));
        if (!rc && t->sparse) {
            const dg_ps_sparse_msg *m = dg_ps_sparse_table_settings(t->sparse);
            double set[9] = { m->dim, m->kind, m->n_workers, m->mode, (double)(m->seed >> 32), (double)(m->seed & 0xffffffffu),
                              m->lr, m->eps, m->init_acc };
            double range = m->init_range;
            snprintf(name, sizeof name, "t%d.sparse", k);
            rc = put(d, name, dg_from_data(DG_SHAPE(9), DG_F64, set));
            snprintf(name, sizeof name, "t%d.range", k);
            if (!rc) rc = put(d, name, dg_from_data(DG_SHAPE(1), DG_F64, &range));
            int64_t n = dg_ps_sparse_table_rows(t->sparse);
            int64_t *ids = malloc(sizeof(int64_t) * (size_t)(n + 1));
            if (!rc && !ids) rc = DG_ENOMEM;
            for (int64_t r = 0; !rc && r < n; r++) ids[r] = dg_ps_sparse_table_id(t->sparse, r);
            snprintf(name, sizeof name, "t%d.ids", k);
            if (!rc) rc = put(d, name, dg_from_data(DG_SHAPE(n), DG_I64, ids));
            free(ids);
            snprintf(name, sizeof name, "t%d.rows", k);
            if (!rc) rc = put(d, name, dg_from_data(DG_SHAPE(n, m->dim), DG_F32, n ? dg_ps_sparse_table_row_at(t->sparse, 0) : NULL));
            snprintf(name, sizeof name, "t%d.acc", k);
            if (!rc) rc = put(d, name, dg_from_data(DG_SHAPE(n, m->dim), DG_F32, n ? dg_ps_sparse_table_s0_at(t->sparse, 0) : NULL));
            snprintf(name, sizeof name, "t%d.acc2", k);
            if (!rc && m->kind == DG_PS_SPARSE_ADAM)
                rc = put(d, name, dg_from_data(DG_SHAPE(n, m->dim), DG_F32, n ? dg_ps_sparse_table_s1_at(t->sparse, 0) : NULL));
            double extra[3] = { m->entry, m->beta1, m->beta2 };
            snprintf(name, sizeof name, "t%d.sparse2", k);
            if (!rc) rc = put(d, name, dg_from_data(DG_SHAPE(3), DG_F64, extra));
            int64_t *meta = malloc(sizeof(int64_t) * 3 * (size_t)(n + 1));
            if (!rc && !meta) rc = DG_ENOMEM;
            for (int64_t r = 0; !rc && r < n; r++) {
                const dg_ps_row_meta *mr = dg_ps_sparse_table_meta_at(t->sparse, r);
                meta[3 * r] = mr->steps, meta[3 * r + 1] = mr->count, meta[3 * r + 2] = (int64_t)mr->last;
            }
            snprintf(name, sizeof name, "t%d.meta", k);
            if (!rc) rc = put(d, name, dg_from_data(DG_SHAPE(n, 3), DG_I64, meta));
            free(meta);
        } else if (!rc) {
            const dg_ps_init_msg *g = &t->init;
            int64_t geo[8] = { (int64_t)g->total, (int64_t)g->offset, (int64_t)g->len, g->n_workers, g->mode, g->kind, g->nesterov, g->amsgrad };
            double hyper[9] = { g->lr, g->weight_decay, g->momentum, g->dampening, g->beta1, g->beta2, g->eps, g->init_acc, g->lr_decay };
            snprintf(name, sizeof name, "t%d.geo", k);
            rc = put(d, name, dg_from_data(DG_SHAPE(8), DG_I64, geo));
            snprintf(name, sizeof name, "t%d.hyper", k);
            if (!rc) rc = put(d, name, dg_from_data(DG_SHAPE(9), DG_F64, hyper));
            snprintf(name, sizeof name, "t%d.value", k);
            if (!rc) rc = dg_tensor_dict_set(d, name, t->value);
            for (int e = 0; !rc && e < dg_optimizer_state_count(t->opt); e++) {
                const char *en = dg_optimizer_state_name(t->opt, e);
                if (strcmp(en, "lr") == 0) continue;   /* in hyper */
                snprintf(name, sizeof name, "t%d.opt.%s", k, en);
                rc = dg_tensor_dict_set(d, name, dg_optimizer_state_tensor(t->opt, e));
            }
        }
    }
    if (!rc) rc = dg_save_safetensors(path, d);
    dg_tensor_dict_free(d);
    dg_scope_end(sc);
    return rc;
}

int dg_ps_write_manifest(const char *dir, int count) {
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/" MANIFEST, dir);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    DG_CHECK_INT(f, "fleet_save_persistables: %s: %s", tmp, strerror(errno));
    fprintf(f, "%s\nservers %d\n", FORMAT, count);
    bool ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        DG_ERR(DG_EIO, "fleet_save_persistables: %s: %s", path, strerror(e));
        return DG_EIO;
    }
    return 0;
}

/* The number of servers of the save in dir, from its manifest. */
static int read_manifest(const char *dir, int *count) {
    char path[4096], line[128];
    snprintf(path, sizeof path, "%s/" MANIFEST, dir);
    FILE *f = fopen(path, "r");
    DG_CHECK_INT(f, "fleet_init_server: %s: %s (a directory that dg_fleet_save_persistables finished has one)", path, strerror(errno));
    bool ok = fgets(line, sizeof line, f) && strncmp(line, FORMAT, strlen(FORMAT)) == 0 && line[strlen(FORMAT)] == '\n' &&
              fgets(line, sizeof line, f) && sscanf(line, "servers %d", count) == 1 && *count >= 1 && *count <= DG_PS_MAX_SERVERS;
    fclose(f);
    DG_CHECK_INT(ok, "fleet_init_server: %s is not a parameter-server save's manifest ('%s', then 'servers N')", path, FORMAT);
    return 0;
}

/* entry name of dict d, with its dtype and element count checked; NULL (error set) otherwise */
static dg_tensor *need(const dg_tensor_dict *d, const char *file, const char *name, dg_dtype dt, int64_t numel) {
    dg_tensor *t = dg_tensor_dict_get(d, name);
    if (!t || dg_dtype_of(t) != dt || (numel >= 0 && dg_numel(t) != numel)) {
        DG_ERR(DG_EFORMAT, "fleet_init_server: %s: entry '%s' %s", file, name,
               !t ? "is missing" : dg_dtype_of(t) != dt ? "has the wrong dtype" : "has the wrong size");
        return NULL;
    }
    return t;
}

int dg_ps_server_load(dg_ps_server *s, const char *dir, int index, int count) {
    int old = 0, rc = read_manifest(dir, &old);
    if (rc) return rc;
    dg_tensor_dict **f = calloc((size_t)old, sizeof *f);
    char (*names)[4200] = calloc((size_t)old, sizeof *names);
    if (!f || !names) { free(f); free(names); DG_ERR(DG_ENOMEM, "fleet_init_server: out of memory"); return DG_ENOMEM; }
    for (int i = 0; i < old && !rc; i++) {
        snprintf(names[i], sizeof names[i], "%s/server.%d-of-%d.safetensors", dir, i, old);
        if (!(f[i] = dg_load_safetensors(names[i]))) rc = dg_last_status() ? dg_last_status() : DG_EIO;
    }
    char name[96];
    dg_scope *sc = dg_scope_begin();
    for (int k = 0; k < DG_PS_MAX_TABLES && !rc; k++) {
        snprintf(name, sizeof name, "t%d.version", k);
        if (!dg_tensor_dict_get(f[0], name)) continue;
        ps_table *t = &s->t[k];
        int64_t ver = 0;
        dg_tensor *vt = need(f[0], names[0], name, DG_I64, 1);
        rc = vt ? dg_to_host(vt, &ver, sizeof ver) : DG_EFORMAT;
        t->version = (uint64_t)ver;
        snprintf(name, sizeof name, "t%d.sparse", k);
        if (!rc && dg_tensor_dict_get(f[0], name)) {
            double set[9], range = 0;
            dg_tensor *st = need(f[0], names[0], name, DG_F64, 9);
            snprintf(name, sizeof name, "t%d.range", k);
            dg_tensor *rt = st ? need(f[0], names[0], name, DG_F64, 1) : NULL;
            rc = rt && !dg_to_host(st, set, sizeof set) && !dg_to_host(rt, &range, sizeof range) ? 0 : DG_EFORMAT;
            double extra[3] = { 0, 0, 0 };
            snprintf(name, sizeof name, "t%d.sparse2", k);
            dg_tensor *xt = rc ? NULL : need(f[0], names[0], name, DG_F64, 3);
            if (!rc) rc = xt && !dg_to_host(xt, extra, sizeof extra) ? 0 : DG_EFORMAT;
            dg_ps_sparse_msg m = { .dim = (uint32_t)set[0], .kind = (uint32_t)set[1], .n_workers = (uint32_t)set[2], .mode = (uint32_t)set[3],
                                   .seed = (uint64_t)set[4] << 32 | (uint64_t)set[5], .lr = set[6], .eps = set[7], .init_acc = set[8],
                                   .init_range = range, .entry = (uint32_t)extra[0], .beta1 = extra[1], .beta2 = extra[2] };
            if (!rc && m.kind > DG_PS_SPARSE_ADAM) {
                DG_ERR(DG_EFORMAT, "fleet_init_server: %s: table %d: rule %u", names[0], k, m.kind);
                rc = DG_EFORMAT;
            }
            if (!rc && (m.dim < 1 || m.dim > 65536 || m.n_workers != (uint32_t)s->n_workers)) {
                DG_ERR(DG_EFORMAT, "fleet_init_server: %s: table %d: width %u for %u workers (this job has %d)", names[0], k, m.dim,
                       m.n_workers, s->n_workers);
                rc = DG_EFORMAT;
            }
            if (!rc && (!(t->sparse = dg_ps_sparse_table_new(&m)) || (m.mode == DG_PS_MODE_SYNC && !(t->pending = dg_ps_sparse_table_new(&(dg_ps_sparse_msg){ .dim = m.dim, .n_workers = m.n_workers, .mode = m.mode }))) ||
                        !(t->pushed = calloc((size_t)s->n_workers, 1))))
                rc = DG_ENOMEM;
            for (int i = 0; i < old && !rc; i++) {   /* every old shard's rows that are ours now */
                snprintf(name, sizeof name, "t%d.ids", k);
                dg_tensor *ids = need(f[i], names[i], name, DG_I64, -1);
                int64_t n = ids ? dg_numel(ids) : 0;
                snprintf(name, sizeof name, "t%d.rows", k);
                dg_tensor *rows = ids ? need(f[i], names[i], name, DG_F32, n * m.dim) : NULL;
                snprintf(name, sizeof name, "t%d.acc", k);
                dg_tensor *acc = rows ? need(f[i], names[i], name, DG_F32, n * m.dim) : NULL;
                snprintf(name, sizeof name, "t%d.acc2", k);
                dg_tensor *acc2 = acc && m.kind == DG_PS_SPARSE_ADAM ? need(f[i], names[i], name, DG_F32, n * m.dim) : NULL;
                snprintf(name, sizeof name, "t%d.meta", k);
                dg_tensor *meta = acc ? need(f[i], names[i], name, DG_I64, n * 3) : NULL;
                if (!meta || (m.kind == DG_PS_SPARSE_ADAM && !acc2)) { rc = DG_EFORMAT; break; }
                const int64_t *ip = dg_tensor_ptr(ids), *mp = dg_tensor_ptr(meta);
                const float *rp = dg_tensor_ptr(rows), *ap = dg_tensor_ptr(acc), *a2 = acc2 ? dg_tensor_ptr(acc2) : NULL;
                for (int64_t r = 0; r < n && !rc; r++) {
                    if (ip[r] < 0 || ip[r] % count != index) continue;
                    int64_t kr = dg_ps_sparse_table_index(t->sparse, ip[r]);
                    if (kr < 0) { rc = DG_ENOMEM; break; }
                    memcpy(dg_ps_sparse_table_row_at(t->sparse, kr), rp + r * m.dim, sizeof(float) * m.dim);
                    memcpy(dg_ps_sparse_table_s0_at(t->sparse, kr), ap + r * m.dim, sizeof(float) * m.dim);
                    if (a2) memcpy(dg_ps_sparse_table_s1_at(t->sparse, kr), a2 + r * m.dim, sizeof(float) * m.dim);
                    *dg_ps_sparse_table_meta_at(t->sparse, kr) = (dg_ps_row_meta){ mp[3 * r], mp[3 * r + 1], (uint64_t)mp[3 * r + 2] };
                }
            }
            if (!rc) t->made = true;
            continue;
        }
        /* dense: the geometry and the optimizer from shard 0, the values from every shard */
        int64_t geo[8];
        double hyper[9];
        snprintf(name, sizeof name, "t%d.geo", k);
        dg_tensor *gt = rc ? NULL : need(f[0], names[0], name, DG_I64, 8);
        snprintf(name, sizeof name, "t%d.hyper", k);
        dg_tensor *ht = gt ? need(f[0], names[0], name, DG_F64, 9) : NULL;
        if (!rc) rc = ht && !dg_to_host(gt, geo, sizeof geo) && !dg_to_host(ht, hyper, sizeof hyper) ? 0 : DG_EFORMAT;
        if (rc) break;
        int64_t total = geo[0];
        if (total < count || geo[3] != s->n_workers) {
            DG_ERR(DG_EFORMAT, "fleet_init_server: %s: table %d: %lld elements for %lld workers; this job has %d servers and %d "
                   "workers", names[0], k, (long long)total, (long long)geo[3], count, s->n_workers);
            rc = DG_EFORMAT;
            break;
        }
        int64_t lo = (int64_t)((__int128)total * index / count), hi = (int64_t)((__int128)total * (index + 1) / count);
        dg_ps_init_msg m = { .total = (uint64_t)total, .offset = (uint64_t)lo, .len = (uint64_t)(hi - lo), .n_workers = (uint32_t)geo[3],
                             .mode = (uint32_t)geo[4], .kind = (uint32_t)geo[5], .nesterov = (uint32_t)geo[6], .amsgrad = (uint32_t)geo[7],
                             .lr = hyper[0], .weight_decay = hyper[1], .momentum = hyper[2], .dampening = hyper[3], .beta1 = hyper[4],
                             .beta2 = hyper[5], .eps = hyper[6], .init_acc = hyper[7], .lr_decay = hyper[8] };
        /* the new slice of the value and of each per-element state entry, from the old shards */
        float *val = calloc((size_t)(hi - lo) + 1, sizeof(float));
        if (!val) { rc = DG_ENOMEM; break; }
        int n_state = 0;
        char state_names[8][64];
        float *state[8] = { 0 };
        dg_tensor *scalars[8] = { 0 };
        char scalar_names[8][64];
        int n_scalars = 0;
        char prefix[32];
        snprintf(prefix, sizeof prefix, "t%d.opt.", k);
        for (int e = 0; e < dg_tensor_dict_size(f[0]) && !rc; e++) {
            const char *en = dg_tensor_dict_name(f[0], e);
            if (strncmp(en, prefix, strlen(prefix)) != 0) continue;
            dg_tensor *et = dg_tensor_dict_tensor(f[0], e);
            if (dg_numel(et) == 1 && dg_dtype_of(et) != DG_F32) {   /* a counter ("step"): the same on every shard */
                if (n_scalars < 8) { snprintf(scalar_names[n_scalars], 64, "%s", en + strlen(prefix)); scalars[n_scalars++] = et; }
            } else if (n_state < 8) {
                snprintf(state_names[n_state], 64, "%s", en + strlen(prefix));
                if (!(state[n_state++] = calloc((size_t)(hi - lo) + 1, sizeof(float)))) rc = DG_ENOMEM;
            }
        }
        for (int i = 0; i < old && !rc; i++) {
            snprintf(name, sizeof name, "t%d.geo", k);
            dg_tensor *gi = need(f[i], names[i], name, DG_I64, 8);
            int64_t g2[8];
            if (!gi || dg_to_host(gi, g2, sizeof g2)) { rc = DG_EFORMAT; break; }
            int64_t off = g2[1], len = g2[2];
            if (g2[0] != total || off < 0 || len < 0 || off + len > total) {
                DG_ERR(DG_EFORMAT, "fleet_init_server: %s: table %d: shard [%lld, +%lld) of %lld elements", names[i], k, (long long)off,
                       (long long)len, (long long)total);
                rc = DG_EFORMAT;
                break;
            }
            int64_t a = off > lo ? off : lo, b = off + len < hi ? off + len : hi;   /* the overlap with ours */
            snprintf(name, sizeof name, "t%d.value", k);
            dg_tensor *vi = need(f[i], names[i], name, DG_F32, len);
            if (!vi) { rc = DG_EFORMAT; break; }
            if (a < b) memcpy(val + (a - lo), (const float *)dg_tensor_ptr(vi) + (a - off), sizeof(float) * (size_t)(b - a));
            for (int e = 0; e < n_state && !rc; e++) {
                snprintf(name, sizeof name, "t%d.opt.%.63s", k, state_names[e]);   /* %.63s: a state_names entry (64 bytes) always fits name */
                dg_tensor *si = need(f[i], names[i], name, DG_F32, len);
                if (!si) { rc = DG_EFORMAT; break; }
                if (a < b) memcpy(state[e] + (a - lo), (const float *)dg_tensor_ptr(si) + (a - off), sizeof(float) * (size_t)(b - a));
            }
        }
        if (!rc) {
            t->value = dg_keep(dg_from_data(DG_SHAPE(hi - lo), DG_F32, val));
            if (t->value) dg_set_requires_grad(t->value, true);
            t->opt = t->value ? dg_ps_make_opt(t->value, &m) : NULL;
            t->init = m;
            if (!t->opt || dg_ps_table_sync_buffers(t, s->n_workers)) rc = dg_last_status() ? dg_last_status() : DG_ENOMEM;
        }
        /* the optimizer's state: the local names are "0.<slot>" (one parameter) */
        for (int e = 0; e < n_state && !rc; e++)
            rc = dg_optimizer_load_state(t->opt, state_names[e], dg_from_data(DG_SHAPE(hi - lo), DG_F32, state[e]));
        for (int e = 0; e < n_scalars && !rc; e++) rc = dg_optimizer_load_state(t->opt, scalar_names[e], scalars[e]);
        free(val);
        for (int e = 0; e < n_state; e++) free(state[e]);
        if (!rc) t->made = true;
    }
    dg_scope_end(sc);
    for (int i = 0; i < old; i++) dg_tensor_dict_free(f[i]);
    free(f);
    free(names);
    if (rc)
        for (int k = 0; k < DG_PS_MAX_TABLES; k++) dg_ps_table_clear(&s->t[k]);
    return rc;
}
