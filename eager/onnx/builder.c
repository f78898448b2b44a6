/* eager/onnx/builder.c — building and writing the ONNX protobuf with protobuf-c (Debian's
 * libprotobuf-c; the C code for onnx.proto is generated at build time by protoc-c). Every
 * message, string and array lives in one arena that ox_free releases, so the exporter's error
 * paths never have a half-freed model to unwind; an allocation failure sets g->oom, later calls
 * become no-ops and the writer refuses. */
#include "onnx_internal.h"
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <unistd.h>

void *ox_alloc(ox_graph *g, size_t n) {
    if (g->oom) return NULL;
    if (g->n_blocks == g->cap_blocks) {
        size_t cap = g->cap_blocks ? 2 * g->cap_blocks : 256;
        void **b = realloc(g->blocks, sizeof *b * cap);
        if (!b) { g->oom = true; return NULL; }
        g->blocks = b;
        g->cap_blocks = cap;
    }
    void *p = calloc(1, n ? n : 1);
    if (!p) { g->oom = true; return NULL; }
    g->blocks[g->n_blocks++] = p;
    return p;
}

void ox_free(ox_graph *g) {
    for (size_t i = 0; i < g->n_blocks; i++) free(g->blocks[i]);
    free(g->blocks);
    free(g->nodes);
    free(g->inits);
    memset(g, 0, sizeof *g);
}

char *ox_fmt(ox_graph *g, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? ox_alloc(g, (size_t)n + 1) : NULL;
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* appends p to a growable array of pointers (not in the arena: it grows) */
static bool push(ox_graph *g, void ***arr, size_t *n, size_t *cap, void *p) {
    if (!p || g->oom) { g->oom = true; return false; }
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        void **a = realloc(*arr, sizeof *a * c);
        if (!a) { g->oom = true; return false; }
        *arr = a;
        *cap = c;
    }
    (*arr)[(*n)++] = p;
    return true;
}

const char *ox_tmp(ox_graph *g, const char *hint) { return ox_fmt(g, "%s_%d", hint, g->counter++); }

Onnx__NodeProto *ox_node(ox_graph *g, const char *op_type, const char *const *in, int n_in, const char *out) {
    return ox_node_outs(g, op_type, in, n_in, &out, 1);
}

Onnx__NodeProto *ox_node_outs(ox_graph *g, const char *op_type, const char *const *in, int n_in, const char *const *out, int n_out) {
    Onnx__NodeProto *n = ox_alloc(g, sizeof *n);
    char **ins = ox_alloc(g, sizeof *ins * (size_t)(n_in ? n_in : 1));
    char **outs = ox_alloc(g, sizeof *outs * (size_t)n_out);
    bool named = true;
    for (int i = 0; i < n_out; i++) named = named && out[i];
    if (!n || !ins || !outs || !named) { g->oom = true; return NULL; }
    onnx__node_proto__init(n);
    for (int i = 0; i < n_in; i++) ins[i] = (char *)(in[i] ? in[i] : "");
    for (int i = 0; i < n_out; i++) outs[i] = (char *)out[i];
    n->n_input = (size_t)n_in;
    n->input = ins;
    n->n_output = (size_t)n_out;
    n->output = outs;
    n->op_type = (char *)op_type;
    n->name = ox_fmt(g, "%s_%d", op_type, g->counter++);
    if (!push(g, (void ***)&g->nodes, &g->n_nodes, &g->cap_nodes, n)) return NULL;
    return n;
}

static Onnx__AttributeProto *attr(ox_graph *g, Onnx__NodeProto *n, const char *name, int type) {
    if (!n || g->oom) return NULL;
    Onnx__AttributeProto *a = ox_alloc(g, sizeof *a);
    Onnx__AttributeProto **list = ox_alloc(g, sizeof *list * (n->n_attribute + 1));
    if (!a || !list) return NULL;
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = type;
    if (n->n_attribute) memcpy(list, n->attribute, sizeof *list * n->n_attribute);
    list[n->n_attribute++] = a;
    n->attribute = list;
    return a;
}
void ox_attr_i(ox_graph *g, Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (a) { a->has_i = 1; a->i = v; }
}
void ox_attr_f(ox_graph *g, Onnx__NodeProto *n, const char *name, float v) {
    Onnx__AttributeProto *a = attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (a) { a->has_f = 1; a->f = v; }
}
void ox_attr_ints(ox_graph *g, Onnx__NodeProto *n, const char *name, const int64_t *v, int cnt) {
    Onnx__AttributeProto *a = attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *c = ox_alloc(g, sizeof *c * (size_t)(cnt ? cnt : 1));
    if (!a || !c) return;
    memcpy(c, v, sizeof *c * (size_t)cnt);
    a->n_ints = (size_t)cnt;
    a->ints = c;
}
void ox_attr_s(ox_graph *g, Onnx__NodeProto *n, const char *name, const char *s) {
    Onnx__AttributeProto *a = attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    if (!a) return;
    a->has_s = 1;
    a->s.data = (uint8_t *)s;
    a->s.len = strlen(s);
}

void ox_attr_strs(ox_graph *g, Onnx__NodeProto *n, const char *name, const char *const *v, int cnt) {
    Onnx__AttributeProto *a = attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);
    ProtobufCBinaryData *d = ox_alloc(g, sizeof *d * (size_t)(cnt ? cnt : 1));
    if (!a || !d) return;
    for (int i = 0; i < cnt; i++) {
        d[i].data = (uint8_t *)v[i];
        d[i].len = strlen(v[i]);
    }
    a->n_strings = (size_t)cnt;
    a->strings = d;
}

const char *ox_init(ox_graph *g, const char *name, int dt, const int64_t *dims, int ndim, const void *data, size_t nbytes) {
    Onnx__TensorProto *t = ox_alloc(g, sizeof *t);
    int64_t *d = ox_alloc(g, sizeof *d * (size_t)(ndim ? ndim : 1));
    void *raw = ox_alloc(g, nbytes);
    char *nm = ox_fmt(g, "%s", name);
    if (!t || !d || !raw || !nm) return NULL;
    onnx__tensor_proto__init(t);
    if (ndim) memcpy(d, dims, sizeof *d * (size_t)ndim);
    if (nbytes) memcpy(raw, data, nbytes);   /* x86-64 is little-endian, as raw_data is */
    t->n_dims = (size_t)ndim;
    t->dims = d;
    t->has_data_type = 1;
    t->data_type = dt;
    t->name = nm;
    t->has_raw_data = 1;
    t->raw_data.data = raw;
    t->raw_data.len = nbytes;
    if (!push(g, (void ***)&g->inits, &g->n_inits, &g->cap_inits, t)) return NULL;
    return nm;
}

const char *ox_const_f(ox_graph *g, float v) {
    return ox_init(g, ox_fmt(g, "const_%d", g->counter++), ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, NULL, 0, &v, sizeof v);
}
const char *ox_const_fv(ox_graph *g, const float *v, int64_t n) {
    return ox_init(g, ox_fmt(g, "const_%d", g->counter++), ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, &n, 1, v,
                   sizeof *v * (size_t)n);
}
const char *ox_const_i64(ox_graph *g, const int64_t *v, int n) {
    int64_t d = n;
    return ox_init(g, ox_fmt(g, "const_%d", g->counter++), ONNX__TENSOR_PROTO__DATA_TYPE__INT64, &d, 1, v,
                   sizeof *v * (size_t)n);
}

int ox_onnx_dtype(dg_dtype dt) {
    switch (dt) {
    case DG_F32: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    case DG_I64: return ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    case DG_I32: return ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
    case DG_BOOL: return ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    default: return 0;
    }
}

Onnx__ValueInfoProto *ox_value_info(ox_graph *g, const char *name, int elem, const int64_t *dims, int ndim, int dyn_axis) {
    Onnx__ValueInfoProto *v = ox_alloc(g, sizeof *v);
    Onnx__TypeProto *tp = ox_alloc(g, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = ox_alloc(g, sizeof *tt);
    Onnx__TensorShapeProto *sh = ox_alloc(g, sizeof *sh);
    Onnx__TensorShapeProto__Dimension **dl = ox_alloc(g, sizeof *dl * (size_t)(ndim ? ndim : 1));
    if (!v || !tp || !tt || !sh || !dl) return NULL;
    onnx__value_info_proto__init(v);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sh);
    for (int i = 0; i < ndim; i++) {
        Onnx__TensorShapeProto__Dimension *d = ox_alloc(g, sizeof *d);
        if (!d) return NULL;
        onnx__tensor_shape_proto__dimension__init(d);
        if (i == dyn_axis) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = "N";
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = dims[i];
        }
        dl[i] = d;
    }
    sh->n_dim = (size_t)ndim;
    sh->dim = dl;
    tt->has_elem_type = 1;
    tt->elem_type = elem;
    tt->shape = sh;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    v->name = (char *)name;
    v->type = tp;
    return v;
}

/* The whole buffer to fd; false with errno set on failure. */
static bool write_all(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

int ox_write_model(ox_graph *g, const char *path, int opset, const char *producer, Onnx__ValueInfoProto *in,
                   Onnx__ValueInfoProto *out) {
    if (g->oom || !in || !out) { DG_ERR(DG_ENOMEM, "onnx_export: out of memory building the model for '%s'", path); return DG_ENOMEM; }
    Onnx__ModelProto m;
    Onnx__GraphProto gr;
    Onnx__OperatorSetIdProto os;
    onnx__model_proto__init(&m);
    onnx__graph_proto__init(&gr);
    onnx__operator_set_id_proto__init(&os);
    os.domain = "";
    os.has_version = 1;
    os.version = opset;
    Onnx__OperatorSetIdProto *osl[1] = { &os };
    Onnx__ValueInfoProto *ins[1] = { in }, *outs[1] = { out };
    gr.name = "dygraph";
    gr.n_node = g->n_nodes;
    gr.node = g->nodes;
    gr.n_initializer = g->n_inits;
    gr.initializer = g->inits;
    gr.n_input = 1;
    gr.input = ins;
    gr.n_output = 1;
    gr.output = outs;
    m.has_ir_version = 1;
    m.ir_version = 8;   /* ONNX 1.10..1.12's IR, which opsets 13..17 belong to */
    m.n_opset_import = 1;
    m.opset_import = osl;
    m.producer_name = (char *)producer;
    m.producer_version = "0.1.0";
    m.graph = &gr;
    size_t len = onnx__model_proto__get_packed_size(&m);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) { DG_ERR(DG_ENOMEM, "onnx_export: out of memory packing %zu bytes for '%s'", len, path); return DG_ENOMEM; }
    onnx__model_proto__pack(&m, buf);
    /* a temporary beside the target, renamed when complete: a reader never sees half a model */
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= sizeof tmp) {
        free(buf);
        DG_ERR(DG_EINVAL, "onnx_export: path '%s' is too long", path);
        return DG_EINVAL;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        free(buf);
        DG_ERR(DG_EIO, "onnx_export: cannot write '%s': %s", path, strerror(e));
        return DG_EIO;
    }
    bool ok = write_all(fd, buf, len);
    int e = errno;
    ok = ok && fsync(fd) == 0;
    if (!ok) e = errno;
    close(fd);
    free(buf);
    if (ok && rename(tmp, path) != 0) { ok = false; e = errno; }
    if (!ok) {
        unlink(tmp);
        DG_ERR(DG_EIO, "onnx_export: writing '%s' failed: %s", path, strerror(e));
        return DG_EIO;
    }
    return 0;
}
