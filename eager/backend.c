/* eager/backend.c — what a backend table provides, asked by number (eager/backend_entries.h):
 * the entries' names, the check every instance passes before the device registry hands it out
 * (dg_backend_validate), and the op-side check of entries and dtypes (dg_backend_require). Also
 * the compile-time proof that the entry list and struct dg_backend agree field for field, which
 * dg_backend_has's offset arithmetic relies on. */
#include "half_via_f32.h"

/* Each listed entry sits at its number's place and is one function pointer; the struct ends
 * after the last one. So a field added to the struct without a list line (or the reverse, or a
 * reordering) fails the build here. */
_Static_assert(offsetof(struct dg_backend, alloc) == offsetof(struct dg_backend, half) + sizeof(void *),
               "struct dg_backend: the entries must follow the header fields (name .. half) directly");
#define DG_BE_ENTRY(name, kind)                                                                       \
    _Static_assert(offsetof(struct dg_backend, name) == DG_BE_ENTRY_OFFSET(DG_BE_##name) &&           \
                   sizeof(((struct dg_backend *)0)->name) == sizeof(void (*)(void)),                  \
                   "eager/backend_entries.h: entry '" #name "' is not at its place in struct dg_backend");
#include "backend_entries.h"
#undef DG_BE_ENTRY
_Static_assert(sizeof(struct dg_backend) == DG_BE_ENTRY_OFFSET(DG_BE_COUNT),
               "struct dg_backend has a field that eager/backend_entries.h does not list");

static const char *const entry_names[DG_BE_COUNT] = {
#define DG_BE_ENTRY(name, kind) #name,
#include "backend_entries.h"
#undef DG_BE_ENTRY
};
static const bool entry_required[DG_BE_COUNT] = {
#define DG_BE_ENTRY(name, kind) DG_BE_##kind == DG_BE_REQUIRED,
#include "backend_entries.h"
#undef DG_BE_ENTRY
};

const char *dg_backend_entry_name(dg_be_entry e) { return (unsigned)e < DG_BE_COUNT ? entry_names[e] : "?"; }
bool dg_backend_entry_required(dg_be_entry e) { return (unsigned)e < DG_BE_COUNT && entry_required[e]; }

/* Entry e of table t, as a plain function pointer (to compare, never to call). */
static void (*entry_of(const dg_backend *t, dg_be_entry e))(void) {
    void (*fn)(void);
    memcpy(&fn, (const char *)t + DG_BE_ENTRY_OFFSET(e), sizeof fn);
    return fn;
}

static const char *device_of(const dg_backend *be, char *buf, size_t len) {
    return dg_device_name((dg_device){ be->type, be->index }, buf, len);
}

/* Appends ", name" (or the first "name") to list. */
static void list_add(char *list, size_t cap, const char *name) {
    size_t used = strlen(list);
    snprintf(list + used, cap - used, "%s%s", used ? ", " : "", name);
}

int dg_backend_validate(const dg_backend *be) {
    DG_CHECK_INT(be, "backend check: the table is NULL");
    char dev[32], missing[512] = "", half[512] = "";
    const char *name = be->name ? be->name : "(unnamed)";
    device_of(be, dev, sizeof dev);
    for (int e = 0; e < DG_BE_COUNT; e++)
        if (entry_required[e] && !dg_backend_has(be, (dg_be_entry)e)) list_add(missing, sizeof missing, entry_names[e]);
    /* the wrappers of eager/half_via_f32.c run be->half->kernels' entry of the same name: a
     * wrapped entry without one would call NULL on its first half operand. A module's wrappers
     * are its own copy, known here through its `half`; a table without `half` is compared with
     * the core's. */
    const dg_half_via_f32 *h = be->half;
    const dg_backend *wrappers = h ? h->wrappers : &dg_half_wrappers;
    for (int e = 0; e < DG_BE_COUNT && wrappers; e++) {
        void (*fn)(void) = entry_of(be, (dg_be_entry)e);
        if (fn && fn == entry_of(wrappers, (dg_be_entry)e) && !(h && h->kernels && dg_backend_has(h->kernels, (dg_be_entry)e)))
            list_add(half, sizeof half, entry_names[e]);
    }
    if (missing[0]) {
        DG_ERR(DG_EDEVICE, "backend '%s' for %s lacks the required entr%s %s: its table cannot serve the device "
               "(core and backend module from different builds?)", name, dev, strchr(missing, ',') ? "ies" : "y", missing);
        return DG_EDEVICE;
    }
    if (!be->name) {
        DG_ERR(DG_EDEVICE, "backend for %s has no name: its table cannot serve the device", dev);
        return DG_EDEVICE;
    }
    if (dg_backend_has(be, DG_BE_host_alloc) != dg_backend_has(be, DG_BE_host_free)) {
        DG_ERR(DG_EDEVICE, "backend '%s' for %s has %s without %s: pinned memory it hands out could not go back", name, dev,
               dg_backend_has(be, DG_BE_host_alloc) ? "host_alloc" : "host_free",
               dg_backend_has(be, DG_BE_host_alloc) ? "host_free" : "host_alloc");
        return DG_EDEVICE;
    }
    if (h && !h->wrappers) {
        DG_ERR(DG_EDEVICE, "backend '%s' for %s: its half-precision descriptor does not name its wrappers "
               "(.wrappers = &dg_half_wrappers)", name, dev);
        return DG_EDEVICE;
    }
    if (half[0]) {
        DG_ERR(DG_EDEVICE, "backend '%s' for %s points %s at the half-precision wrapper%s with no kernel behind %s "
               "(eager/half_via_f32.h: the table's `half` must name one per wrapped entry)", name, dev, half,
               strchr(half, ',') ? "s" : "", strchr(half, ',') ? "them" : "it");
        return DG_EDEVICE;
    }
    return 0;
}

int dg_backend_require(const dg_backend *be, const dg_be_entry *entries, int n, dg_dtype dt, const char *op) {
    if (!op) op = "?";
    DG_CHECK_INT(be && (entries || n == 0) && n >= 0, "op %s: backend check without a table or entry list", op);
    for (int i = 0; i < n; i++) {
        dg_be_entry e = entries[i];
        if ((unsigned)e >= DG_BE_COUNT) {
            DG_ERR(DG_EINVAL, "op %s lists backend entry %d, which is not one (0..%d)", op, (int)e, DG_BE_COUNT - 1);
            return DG_EINVAL;
        }
        bool has = dg_backend_has(be, e);
        if (has && (!be->supports || be->supports(be, e, dt))) continue;
        char dev[32];
        device_of(be, dev, sizeof dev);
        if (has)
            DG_ERR(DG_EUNSUPPORTED, "op %s needs backend entry '%s' for dtype %s, which %s on %s does not provide", op,
                   entry_names[e], dg_dtype_name(dt), be->name, dev);
        else
            DG_ERR(DG_EUNSUPPORTED, "op %s needs backend entry '%s', which %s on %s does not provide", op, entry_names[e],
                   be->name, dev);
        return DG_EUNSUPPORTED;
    }
    return 0;
}
