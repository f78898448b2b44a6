/* nn/layer_print.c — a layer tree as text, in torch's Module.__repr__ layout: the class name,
 * its extra_repr in parentheses, each child indented as "(name): ...". Written on the public
 * tree API (and the extra_repr accessor of nn_internal.h). */
#include "nn_internal.h"

typedef struct { char *s; size_t n, cap; bool failed; } strbuf;

static void sb_put(strbuf *b, const char *s, size_t len) {
    if (b->failed) return;
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + len + 1) cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) { b->failed = true; return; }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, len);
    b->n += len;
    b->s[b->n] = 0;
}
static void sb_str(strbuf *b, const char *s) { sb_put(b, s, strlen(s)); }
static void sb_indent(strbuf *b, int depth) { for (int i = 0; i < depth; i++) sb_str(b, "  "); }

static void repr(const dg_layer *l, strbuf *b, int depth) {
    sb_str(b, dg_layer_type(l));
    sb_str(b, "(");
    const char *extra = dg_nn_layer_extra_repr(l);
    int nc = dg_layer_num_children(l);
    if (!nc) { sb_str(b, extra); sb_str(b, ")"); return; }
    sb_str(b, "\n");
    if (extra[0]) { sb_indent(b, depth + 1); sb_str(b, extra); sb_str(b, "\n"); }
    for (int i = 0; i < nc; i++) {
        sb_indent(b, depth + 1);
        sb_str(b, "(");
        sb_str(b, dg_layer_child_name(l, i));
        sb_str(b, "): ");
        repr(dg_layer_child(l, i), b, depth + 1);
        sb_str(b, "\n");
    }
    sb_indent(b, depth);
    sb_str(b, ")");
}

char *dg_layer_to_string(const dg_layer *l) {
    DG_CHECK_HANDLE(l, "layer_to_string: layer is NULL");
    strbuf b = {0};
    repr(l, &b, 0);
    if (b.failed || !b.s) { free(b.s); DG_ERR(DG_ENOMEM, "layer_to_string: out of memory"); return NULL; }
    return b.s;
}

int dg_layer_print(const dg_layer *l) {
    char *s = dg_layer_to_string(l);
    if (!s) return dg_last_status() ? dg_last_status() : DG_EINVAL;
    puts(s);
    free(s);
    return 0;
}
