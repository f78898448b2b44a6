/* eager/backend_entries.h — the one list of the backend table's entries (struct dg_backend in
 * eager/backend.h), in the struct's order: DG_BE_ENTRY(name, REQUIRED | OPTIONAL). The enum
 * dg_be_entry (DG_BE_<name>), the entry names, the load-time check of a table and DG_KCALL's
 * refusal of optional entries all come from it; eager/backend.c checks at compile time that it
 * matches the struct field for field, so an entry added to one and not the other fails the build.
 *
 * REQUIRED: every table has it; a table without one is refused when its instance is made
 * (dg_backend_validate), so an op may call it through DG_KCALL unconditionally.
 * OPTIONAL: the caller asks first (dg_backend_has, or `be->name ?`) and has a fallback or an
 * error of its own; DG_KCALL will not compile on one.
 *
 * No include guard: it is read once per list the includer builds. */
DG_BE_ENTRY(alloc, REQUIRED)
DG_BE_ENTRY(free, REQUIRED)
DG_BE_ENTRY(upload, REQUIRED)
DG_BE_ENTRY(download, REQUIRED)
DG_BE_ENTRY(copy_peer, OPTIONAL)                 /* absent: a move between instances is staged through the host */
DG_BE_ENTRY(synchronize, REQUIRED)
DG_BE_ENTRY(memory_stats, OPTIONAL)              /* absent: all zeros */
DG_BE_ENTRY(empty_cache, OPTIONAL)               /* absent: nothing cached */
DG_BE_ENTRY(host_alloc, OPTIONAL)                /* with host_free or neither (checked at load) */
DG_BE_ENTRY(host_free, OPTIONAL)
DG_BE_ENTRY(stream, OPTIONAL)                    /* absent: dg_device_stream answers NULL */
DG_BE_ENTRY(shutdown, OPTIONAL)                  /* absent: nothing to release */
DG_BE_ENTRY(supports, OPTIONAL)                  /* absent: every entry present takes every dtype */
DG_BE_ENTRY(fill, REQUIRED)
DG_BE_ENTRY(copy, REQUIRED)
DG_BE_ENTRY(unary, REQUIRED)
DG_BE_ENTRY(binary, REQUIRED)
DG_BE_ENTRY(where, REQUIRED)
DG_BE_ENTRY(reduce, REQUIRED)
DG_BE_ENTRY(random, REQUIRED)
DG_BE_ENTRY(gemm, REQUIRED)
DG_BE_ENTRY(softmax, REQUIRED)
DG_BE_ENTRY(softmax_backward, REQUIRED)
DG_BE_ENTRY(index_select, REQUIRED)
DG_BE_ENTRY(index_add, REQUIRED)
DG_BE_ENTRY(gather, REQUIRED)
DG_BE_ENTRY(scatter_add, REQUIRED)
DG_BE_ENTRY(argsort, REQUIRED)
DG_BE_ENTRY(nll, REQUIRED)
DG_BE_ENTRY(nll_backward, REQUIRED)
DG_BE_ENTRY(conv2d, REQUIRED)
DG_BE_ENTRY(conv2d_backward_data, REQUIRED)
DG_BE_ENTRY(conv2d_backward_filter, REQUIRED)
DG_BE_ENTRY(max_pool2d, REQUIRED)
DG_BE_ENTRY(max_pool2d_backward, REQUIRED)
DG_BE_ENTRY(avg_pool2d, REQUIRED)
DG_BE_ENTRY(avg_pool2d_backward, REQUIRED)
DG_BE_ENTRY(adaptive_avg_pool2d, REQUIRED)
DG_BE_ENTRY(adaptive_avg_pool2d_backward, REQUIRED)
DG_BE_ENTRY(max_pool2d_with_indices, REQUIRED)
DG_BE_ENTRY(adaptive_max_pool2d, REQUIRED)
DG_BE_ENTRY(max_pool2d_indices_backward, REQUIRED)
DG_BE_ENTRY(batch_norm, REQUIRED)
DG_BE_ENTRY(batch_norm_backward, REQUIRED)
DG_BE_ENTRY(batch_norm_relu, OPTIONAL)           /* absent: batch_norm, then relu in place */
DG_BE_ENTRY(batch_norm_relu_backward, OPTIONAL)  /* absent: the op masks gy itself */
DG_BE_ENTRY(rnn_cell, REQUIRED)
DG_BE_ENTRY(rnn_cell_backward, REQUIRED)
DG_BE_ENTRY(fused_update, REQUIRED)
