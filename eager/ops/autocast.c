/* eager/ops/autocast.c — autocast regions (dygraph/autocast.h): a per-thread stack of regions,
 * each with its low dtype and the policy of every op that takes part (Paddle's white and black
 * lists, moved by the region's custom lists; the defaults are registry.h's autocast column). The
 * entry path (op_entry.c) asks dg_autocast_pick; when it names a dtype the op runs on cast
 * inputs, with autocast paused so the ops it is made of do not cast a second time. */
#include "op_util.h"
#include "registry.h"

/* A region's policy per op: 2 bits each (DG_AC_* of registry.h), so a region fits the
 * snapshot recompute keeps in its node. */
#define MAX_DEPTH 16
typedef struct region { dg_dtype dtype; unsigned char policy[(DG_OP_COUNT * 2 + 7) / 8]; } region;
static inline int policy_of(const region *r, int op) { return (r->policy[op >> 2] >> ((op & 3) * 2)) & 3; }
static inline void set_policy(region *r, int op, int v) {
    r->policy[op >> 2] = (unsigned char)((r->policy[op >> 2] & ~(3 << ((op & 3) * 2))) | (v << ((op & 3) * 2)));
}
static __thread region g_stack[MAX_DEPTH];
__thread int dg_autocast_depth;   /* op_util.h: the entry path skips autocast while it is 0 */
#define g_depth dg_autocast_depth
static __thread int g_paused;   /* > 0 while an op runs its cast inputs */

dg_autocast_params dg_autocast_default_params(void) { return (dg_autocast_params){ .params_tag = DG_PARAMS_TAG, .dtype = DG_BF16 }; }

/* ops that take part: every registered op whose policy is not NONE */
static int op_index(const char *name) {
    int k = dg_op_find(name);
    return k >= 0 && dg_op_table[k].autocast != DG_AC_NONE ? k : -1;
}

static int apply_list(region *r, const char *const *names, int n, int policy, const char *which) {
    DG_CHECK_INT(n >= 0 && (n == 0 || names), "autocast_begin: %s has %d names but no array", which, n);
    for (int i = 0; i < n; i++) {
        int k = op_index(names[i]);
        if (k < 0) {
            char known[1024] = "";
            for (int j = 0; j < DG_OP_COUNT; j++) {
                if (dg_op_table[j].autocast == DG_AC_NONE) continue;
                if (known[0]) strncat(known, ", ", sizeof known - strlen(known) - 1);
                strncat(known, dg_op_table[j].name, sizeof known - strlen(known) - 1);
            }
            DG_ERR(DG_EINVAL, "autocast_begin: %s names '%s', which does not take part in autocast (ops that do: %s)", which,
                   names[i] ? names[i] : "(null)", known);
            return DG_EINVAL;
        }
        set_policy(r, k, policy);
    }
    return 0;
}

int dg_autocast_begin_ext(dg_autocast_params p) {
    DG_CHECK_PARAMS_INT("autocast_begin_ext", p, dg_autocast_default_params);
    DG_CHECK_INT(p.dtype == DG_BF16 || p.dtype == DG_F16, "autocast_begin: dtype must be float16 or bfloat16, got %s",
                 dg_dtype_name(p.dtype));
    DG_CHECK_INT(g_depth < MAX_DEPTH, "autocast_begin: more than %d nested regions", MAX_DEPTH);
    region r = { .dtype = p.dtype };
    for (int k = 0; k < DG_OP_COUNT; k++) set_policy(&r, k, dg_op_table[k].autocast);
    int rc = apply_list(&r, p.custom_white_list, p.n_white, DG_AC_WHITE, "custom_white_list");
    if (!rc) rc = apply_list(&r, p.custom_black_list, p.n_black, DG_AC_BLACK, "custom_black_list");
    for (int i = 0; !rc && i < p.n_white; i++)
        for (int j = 0; j < p.n_black; j++)
            DG_CHECK_INT(strcmp(p.custom_white_list[i], p.custom_black_list[j]) != 0,
                         "autocast_begin: '%s' is on both the custom white list and the custom black list", p.custom_white_list[i]);
    if (rc) return rc;
    g_stack[g_depth++] = r;
    return 0;
}
int dg_autocast_begin(dg_dtype dtype) {
    dg_autocast_params p = dg_autocast_default_params();
    p.dtype = dtype;
    return dg_autocast_begin_ext(p);
}
int dg_autocast_end(void) {
    DG_CHECK_INT(g_depth > 0, "autocast_end: no autocast region is open on this thread");
    g_depth--;
    return 0;
}
bool dg_autocast_enabled(void) { return g_depth > 0; }
dg_dtype dg_autocast_dtype(void) { return g_depth > 0 ? g_stack[g_depth - 1].dtype : DG_F32; }

/* float32 and the half types are cast; float64 and integers never are (torch's rule) */
static bool castable(const dg_tensor *t) { return t && (t->dtype == DG_F32 || dg_dtype_is_half(t->dtype)); }

int dg_autocast_pick(int op, const dg_tensor *const *in, int n) {
    if (g_depth == 0 || g_paused) return -1;
    const region *r = &g_stack[g_depth - 1];
    int pol = policy_of(r, op);
    if (pol != DG_AC_WHITE && pol != DG_AC_BLACK) return -1;
    dg_dtype want = pol == DG_AC_WHITE ? r->dtype : DG_F32;
    for (int i = 0; i < n; i++)
        if (castable(in[i]) && dg_tensor_live(in[i]) && in[i]->dtype != want) return (int)want;
    return -1;
}

const dg_tensor *dg_autocast_cast(const dg_tensor *t, int dtype) {
    return castable(t) && dg_tensor_live(t) && t->dtype != (dg_dtype)dtype ? dg_cast(t, (dg_dtype)dtype) : t;
}

dg_scope *dg_autocast_enter(void) {
    g_paused++;
    return dg_scope_begin();
}
dg_tensor *dg_autocast_leave(dg_scope *s, dg_tensor *y) {
    g_paused--;
    return dg_composite_end(s, y);
}

void dg_autocast_pause(int delta) { g_paused += delta; }

_Static_assert(sizeof(region) <= sizeof(((dg_autocast_snapshot *)0)->region), "autocast snapshot too small for a region");
void dg_autocast_save(dg_autocast_snapshot *s) {
    memset(s, 0, sizeof *s);
    s->active = g_depth > 0;
    s->paused = g_paused;
    if (s->active) memcpy(s->region, &g_stack[g_depth - 1], sizeof(region));
}
int dg_autocast_apply(const dg_autocast_snapshot *s) {
    DG_CHECK_INT(!s->active || g_depth < MAX_DEPTH, "recompute: %d autocast regions are open; the forward's needs one more",
                 g_depth);
    int old = g_paused;
    if (s->active) memcpy(&g_stack[g_depth++], s->region, sizeof(region));
    /* a forward that ran outside every region runs again outside them, even when backward is
     * called inside one: paused, any region open now is ignored */
    g_paused = s->active ? s->paused : s->paused + 1;
    return old;
}
void dg_autocast_unapply(const dg_autocast_snapshot *s, int old_paused) {
    if (s->active && g_depth > 0) g_depth--;
    g_paused = old_paused;
}
void dg_autocast_reset(void) { g_depth = 0; g_paused = 0; }
