/* test/gpu/test_gpu_seq.c — CPU vs gpu:0 for embedding (padding_idx, max_norm, the sparse row
 * gradient), layer_norm and group_norm, f32 and f64. The ops are compositions and the sparse
 * rows are coalesced on the host, so this checks that every piece lands on the device and that
 * values and gradients agree with the CPU's; and gather with an index smaller than its input. */
#include "gpu_compare.h"

#define F(name, expr) static dg_tensor *name(dg_tensor *const *in) { return (expr); }
#define IN(...) { __VA_ARGS__ }
#define G(...) { GT_GRAD, GT_SHAPE(__VA_ARGS__), 0, 0 }
#define G64(...) { GT_GRAD64, GT_SHAPE(__VA_ARGS__), 0, 0 }
#define IDS(hi, ...) { GT_LABELS, GT_SHAPE(__VA_ARGS__), 0, hi }
#define IDS32(hi, ...) { GT_LABELS32, GT_SHAPE(__VA_ARGS__), 0, hi }
#define TOL_F64 { 1e-10, 1e-12, false }

static dg_embedding_params emb(int64_t pad, double max_norm) {
    dg_embedding_params p = dg_embedding_default_params();
    p.padding_idx = pad;
    p.max_norm = max_norm;
    return p;
}
F(f_emb, dg_embedding(in[1], in[0], emb(DG_NO_PADDING_IDX, 0)))
F(f_emb_pad, dg_embedding(in[1], in[0], emb(3, 0)))
F(f_emb_max_norm, dg_embedding(in[1], in[0], emb(-1, 0.8)))
F(f_layer_norm, dg_layer_norm(in[0], DG_SHAPE(4, 5), in[1], in[2], 1e-5))
F(f_layer_norm_plain, dg_layer_norm(in[0], DG_SHAPE(300), NULL, NULL, 1e-5))
F(f_group_norm, dg_group_norm(in[0], 3, in[1], in[2], 1e-5))
F(f_gather_small, dg_gather(in[0], in[1], 1))
F(f_group_norm_plain, dg_group_norm(in[0], 2, NULL, NULL, 1e-5))

static const gt_op_case cases[] = {
    { "embedding", f_emb, 2, IN(G(9, 5), IDS(9, 4, 6)), GT_EXACT, GT_RED },
    { "embedding int32 ids", f_emb, 2, IN(G(9, 5), IDS32(9, 7)), GT_EXACT, GT_RED },
    { "embedding padding_idx", f_emb_pad, 2, IN(G(6, 4), IDS(6, 3, 8)), GT_EXACT, GT_RED },
    { "embedding max_norm", f_emb_max_norm, 2, IN(G(7, 3), IDS(7, 2, 5)), GT_EW, GT_RED },
    { "embedding f64", f_emb_pad, 2, IN(G64(6, 4), IDS(6, 3, 8)), GT_EXACT, TOL_F64 },
    { "layer_norm [4, 5] affine", f_layer_norm, 3, IN(G(3, 4, 5), G(4, 5), G(4, 5)), GT_RED, GT_RED },
    { "layer_norm 300 wide", f_layer_norm_plain, 1, IN(G(6, 300)), GT_RED, GT_RED },
    { "layer_norm f64", f_layer_norm, 3, IN(G64(3, 4, 5), G64(4, 5), G64(4, 5)), TOL_F64, TOL_F64 },
    { "group_norm 3 groups affine", f_group_norm, 3, IN(G(2, 6, 3, 3), G(6), G(6)), GT_RED, GT_RED },
    { "group_norm [N, C]", f_group_norm_plain, 1, IN(G(4, 6)), GT_RED, GT_RED },
    { "gather with an index smaller off the axis", f_gather_small, 2, IN(G(3, 5), IDS(5, 2, 4)), GT_EXACT, GT_EXACT },
    { "group_norm f64", f_group_norm, 3, IN(G64(2, 6, 3, 3), G64(6), G64(6)), TOL_F64, TOL_F64 },
};

GT_TABLE_TESTS(gpu_seq, cases, gt_expect_op_matches_cpu, 4100)

/* The sparse rows made on gpu:0 equal the CPU's and stay on the device; folded, they equal the
 * dense gradient. */
Test(gpu_seq, sparse_embedding_gradient_on_the_device, .init = gt_gpu_begin) {
    dg_scope *s = dg_scope_begin();
    dg_manual_seed(5);
    dg_tensor *w = dg_randn(DG_SHAPE(12, 3), DG_F32);
    dg_tensor *ids = dg_from_data(DG_SHAPE(2, 4), DG_I64, (int64_t[]){ 4, 0, 11, 4, 7, 0, 2, 7 });
    dg_tensor *gout = dg_uniform(DG_SHAPE(2, 4, 3), 0.5, 1.5, DG_F32);
    dg_embedding_params p = emb(2, 0);
    p.sparse = true;
    dg_tensor *wg = gt_to_gpu(w, true, "sparse"), *wcpu = w;
    cr_assert_eq(dg_set_requires_grad(wcpu, true), 0, "%s", dg_last_error());
    cr_assert_eq(dg_backward(dg_sum_all(dg_mul(dg_embedding(ids, wcpu, p), gout))), 0, "%s", dg_last_error());
    dg_tensor *ids_g = dg_to_device(ids, gt_dut()), *gout_g = dg_to_device(gout, gt_dut());
    cr_assert_eq(dg_backward(dg_sum_all(dg_mul(dg_embedding(ids_g, wg, p), gout_g))), 0, "%s", dg_last_error());
    dg_tensor *ic, *rc, *ig, *rg;
    cr_assert_eq(dg_sparse_grad(wcpu, &ic, &rc), 4, "ids 0 4 7 11 (2 is padding)");
    cr_assert_eq(dg_sparse_grad(wg, &ig, &rg), 4);
    gt_expect_on_gpu("sparse embedding", "ids", ig);
    gt_expect_on_gpu("sparse embedding", "rows", rg);
    gt_compare("sparse embedding", "ids", dg_cast(ic, DG_F64), dg_cast(ig, DG_F64), (gt_tol)GT_EXACT);
    gt_compare("sparse embedding", "rows", rc, rg, (gt_tol)GT_EW);
    gt_compare("sparse embedding", "folded", dg_grad(wcpu), dg_grad(wg), (gt_tol)GT_EW);
    gt_expect_on_gpu("sparse embedding", "folded", dg_grad(wg));
    dg_scope_end(s);
}
