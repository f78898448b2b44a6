/* eager/io/tensor_dict.c — an ordered name -> tensor map: what a checkpoint holds, and what
 * layers and optimizers hand to the safetensors writer. Names are also indexed by an
 * open-addressing hash, so set (which refuses a present name) and get stay O(1): a checkpoint of
 * 80k tensors must not cost 80k^2/2 string compares. */
#include "../internal.h"

struct dg_tensor_dict {
    int n, cap;
    char **names;
    dg_tensor **tensors;
    int *slots;      /* hash of name -> index + 1 (0: empty); nslots a power of two, >= 2 * cap */
    size_t nslots;
};

static uint64_t name_hash(const char *s) {   /* FNV-1a */
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* the slot holding name, or the empty slot where it would go */
static size_t find_slot(const dg_tensor_dict *d, const char *name) {
    size_t m = d->nslots - 1, h = (size_t)name_hash(name) & m;
    while (d->slots[h] && strcmp(d->names[d->slots[h] - 1], name) != 0) h = (h + 1) & m;
    return h;
}

dg_tensor_dict *dg_tensor_dict_new(void) {
    dg_tensor_dict *d = calloc(1, sizeof *d);
    if (!d) DG_ERR(DG_ENOMEM, "tensor_dict_new: out of memory");
    return d;
}

void dg_tensor_dict_free(dg_tensor_dict *d) {
    if (!d) return;
    for (int i = 0; i < d->n; i++) { free(d->names[i]); dg_tensor_release(d->tensors[i]); }
    free(d->names);
    free(d->tensors);
    free(d->slots);
    free(d);
}

dg_tensor *dg_tensor_dict_get(const dg_tensor_dict *d, const char *name) {
    if (!d || !name || !d->slots) return NULL;
    int k = d->slots[find_slot(d, name)];
    return k ? d->tensors[k - 1] : NULL;
}

int dg_tensor_dict_set(dg_tensor_dict *d, const char *name, dg_tensor *t) {
    DG_CHECK_HANDLE_INT(d, "tensor_dict_set: dict is NULL");
    DG_CHECK_INPUT_INT("tensor_dict_set", t);
    DG_CHECK_INT(name, "tensor_dict_set: name is NULL");
    DG_CHECK_INT(*name, "tensor_dict_set: empty name");
    DG_CHECK_INT(!dg_tensor_dict_get(d, name), "tensor_dict_set: name '%s' already present", name);
    if (d->n == d->cap) {
        int cap = d->cap ? d->cap * 2 : 16;
        char **nm = realloc(d->names, sizeof *nm * (size_t)cap);
        if (nm) d->names = nm;
        dg_tensor **ts = nm ? realloc(d->tensors, sizeof *ts * (size_t)cap) : NULL;
        if (!ts) { DG_ERR(DG_ENOMEM, "tensor_dict_set: out of memory"); return DG_ENOMEM; }
        d->tensors = ts;
        /* rehash into a table at least twice the capacity: probes stay short */
        size_t ns = 16;
        while (ns < 2 * (size_t)cap) ns *= 2;
        int *sl = calloc(ns, sizeof *sl);
        if (!sl) { DG_ERR(DG_ENOMEM, "tensor_dict_set: out of memory"); return DG_ENOMEM; }
        free(d->slots);
        d->slots = sl;
        d->nslots = ns;
        d->cap = cap;
        for (int i = 0; i < d->n; i++) d->slots[find_slot(d, d->names[i])] = i + 1;
    }
    char *copy = strdup(name);
    if (!copy) { DG_ERR(DG_ENOMEM, "tensor_dict_set: out of memory"); return DG_ENOMEM; }
    dg_tensor_retain(t);
    d->names[d->n] = copy;
    d->tensors[d->n++] = t;
    d->slots[find_slot(d, copy)] = d->n;
    return 0;
}

int dg_tensor_dict_size(const dg_tensor_dict *d) { return d ? d->n : 0; }
const char *dg_tensor_dict_name(const dg_tensor_dict *d, int i) { return d && i >= 0 && i < d->n ? d->names[i] : NULL; }
dg_tensor *dg_tensor_dict_tensor(const dg_tensor_dict *d, int i) { return d && i >= 0 && i < d->n ? d->tensors[i] : NULL; }
