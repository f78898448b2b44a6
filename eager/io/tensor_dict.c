/* eager/io/tensor_dict.c — an ordered name -> tensor map: what a checkpoint holds, and what
 * layers and optimizers hand to the safetensors writer. */
#include "../internal.h"

struct dg_tensor_dict {
    int n, cap;
    char **names;
    dg_tensor **tensors;
};

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
    free(d);
}

dg_tensor *dg_tensor_dict_get(const dg_tensor_dict *d, const char *name) {
    if (!d || !name) return NULL;
    for (int i = 0; i < d->n; i++) if (strcmp(d->names[i], name) == 0) return d->tensors[i];
    return NULL;
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
        d->cap = cap;
    }
    char *copy = strdup(name);
    if (!copy) { DG_ERR(DG_ENOMEM, "tensor_dict_set: out of memory"); return DG_ENOMEM; }
    dg_tensor_retain(t);
    d->names[d->n] = copy;
    d->tensors[d->n++] = t;
    return 0;
}

int dg_tensor_dict_size(const dg_tensor_dict *d) { return d ? d->n : 0; }
const char *dg_tensor_dict_name(const dg_tensor_dict *d, int i) { return d && i >= 0 && i < d->n ? d->names[i] : NULL; }
dg_tensor *dg_tensor_dict_tensor(const dg_tensor_dict *d, int i) { return d && i >= 0 && i < d->n ? d->tensors[i] : NULL; }
