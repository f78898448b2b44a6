/* eager/cpu/update.c — the CPU backend's fused optimizer step: one pass over each parameter
 * applying eager/update_rule.h per element (parameter, gradient and state read and written
 * once, no temporaries), threads splitting the elements of large tensors. */
#include "../backend.h"

/* below this many elements a tensor is updated by one thread: waking the team costs more */
#define PAR_MIN 32768

int dg_cpu_fused_update(const dg_update_params *u, dg_dtype dt, const dg_update_tensor *t, int n) {
    for (int k = 0; k < n; k++) {
        const dg_update_tensor *tk = &t[k];
        int64_t m = tk->n;
        /* a small tensor never enters an OpenMP region: even a region with if(false) costs
         * about a microsecond, more than updating a few hundred elements */
        if (m < PAR_MIN || dg_threads() == 1) {
            if (dt == DG_F32) for (int64_t i = 0; i < m; i++) dg_update_elem_float(u, tk, i);
            else for (int64_t i = 0; i < m; i++) dg_update_elem_double(u, tk, i);
        } else if (dt == DG_F32) {
            #pragma omp parallel for schedule(static) num_threads(dg_threads())
            for (int64_t i = 0; i < m; i++) dg_update_elem_float(u, tk, i);
        } else {
            #pragma omp parallel for schedule(static) num_threads(dg_threads())
            for (int64_t i = 0; i < m; i++) dg_update_elem_double(u, tk, i);
        }
    }
    return 0;
}
