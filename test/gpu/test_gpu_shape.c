/* test/gpu/test_gpu_shape.c — CPU vs gpu:0 for the shape and indexing ops (reshape, flatten,
 * transpose, permute, squeeze/unsqueeze, expand, slice, contiguous, concat, split, index_select,
 * gather, one_hot, cast, clone) and the in-place updates of tensor.h (fill_, copy_, add_, axpy_,
 * scale_). Views come back strided, so the read-back also exercises the GPU's strided copy. */
#include "gpu_compare.h"

#define F(name, expr) static dg_tensor *name(dg_tensor *const *in) { return (expr); }
#define IN(...) { __VA_ARGS__ }
#define G(...) { GT_GRAD, GT_SHAPE(__VA_ARGS__), 0, 0 }
#define C(...) { GT_CONST, GT_SHAPE(__VA_ARGS__), 0, 0 }
#define LAB(hi, ...) { GT_LABELS, GT_SHAPE(__VA_ARGS__), 0, hi }
#define LAB32(hi, ...) { GT_LABELS32, GT_SHAPE(__VA_ARGS__), 0, hi }

static const int perm201[] = {2, 0, 1}, perm3102[] = {3, 1, 0, 2};
F(f_reshape, dg_reshape(in[0], DG_SHAPE(4, -1)))
F(f_reshape_strided, dg_reshape(dg_transpose(in[0], 0, 1), DG_SHAPE(-1)))
F(f_flatten, dg_flatten(in[0], 1, -1))
F(f_flatten01, dg_flatten(in[0], 0, 1))
F(f_transpose, dg_transpose(in[0], 0, 2))
F(f_permute, dg_permute(in[0], perm201))
F(f_permute4, dg_permute(in[0], perm3102))
F(f_squeeze, dg_squeeze(in[0], 1))
F(f_squeeze_all, dg_squeeze(in[0], 99))
F(f_unsqueeze, dg_unsqueeze(in[0], -1))
F(f_expand, dg_expand(in[0], DG_SHAPE(2, 3, 4)))
F(f_expand_keep, dg_expand(in[0], DG_SHAPE(3, 2, -1, 2)))
F(f_slice, dg_slice(in[0], 1, 1, 4, 2))
F(f_slice0, dg_slice(in[0], 0, 2, 5, 1))
F(f_contiguous, dg_contiguous(dg_transpose(in[0], 0, 2)))
F(f_clone, dg_clone(in[0]))
F(f_concat1, dg_concat(in, 2, 1))
F(f_concat0_3, dg_concat(in, 3, 0))
static dg_tensor *f_concat_views(dg_tensor *const *in) {
    dg_tensor *v[2] = { dg_transpose(in[0], 0, 1), in[1] };
    return v[0] ? dg_concat(v, 2, -1) : NULL;
}
/* split's parts weighed differently and put back together, so each part's gradient is checked */
static dg_tensor *f_split_sizes(dg_tensor *const *in) {
    dg_tensor *p[3];
    if (dg_split(in[0], 3, (const int64_t[]){1, 2, 1}, 1, p)) return NULL;
    dg_tensor *q[3] = { dg_mul_scalar(p[0], 2.0), dg_mul_scalar(p[1], -3.0), p[2] };
    return dg_concat(q, 3, 1);
}
static dg_tensor *f_split_equal(dg_tensor *const *in) {
    dg_tensor *p[2];
    if (dg_split(in[0], 2, NULL, 0, p)) return NULL;
    return dg_sub(dg_mul_scalar(p[0], 0.5), dg_exp(p[1]));
}
F(f_index_select1, dg_index_select(in[0], in[1], 1))
F(f_index_select0, dg_index_select(in[0], in[1], 0))
F(f_gather1, dg_gather(in[0], in[1], 1))
F(f_gather0, dg_gather(in[0], in[1], 0))
F(f_one_hot, dg_one_hot(in[0], 5))
F(f_cast_f64, dg_cast(in[0], DG_F64))
F(f_cast_f32, dg_cast(in[0], DG_F32))
F(f_cast_i64, dg_cast(in[0], DG_I64))
F(f_cast_i32, dg_cast(in[0], DG_I32))
F(f_cast_bool, dg_cast(in[0], DG_BOOL))

/* in-place updates on a clone of a constant input (in-place writes are refused on tensors that
 * need grad) */
#define INPLACE(name, call) static dg_tensor *name(dg_tensor *const *in) { \
        dg_tensor *t = dg_clone(in[0]); return t && (call) == 0 ? t : NULL; }
INPLACE(f_fill_, dg_fill_(t, 3.25))
INPLACE(f_copy_bcast_, dg_copy_(t, in[1]))
INPLACE(f_add_bcast_, dg_add_(t, in[1]))
INPLACE(f_axpy_, dg_axpy_(t, -0.75, in[1]))
INPLACE(f_scale_, dg_scale_(t, 1.5))
static dg_tensor *f_copy_strided_(dg_tensor *const *in) {
    dg_tensor *t = dg_clone(in[0]);   /* [4, 3] <- transposed [3, 4] */
    return t && dg_copy_(t, dg_transpose(in[1], 0, 1)) == 0 ? t : NULL;
}

static const gt_op_case cases[] = {
    { "reshape [2,3,4]->[4,-1]", f_reshape, 1, IN(G(2, 3, 4)), GT_EXACT, GT_EXACT },
    { "reshape of a transposed view", f_reshape_strided, 1, IN(G(2, 3)), GT_EXACT, GT_EXACT },
    { "flatten 1..-1", f_flatten, 1, IN(G(2, 3, 4, 5)), GT_EXACT, GT_EXACT },
    { "flatten 0..1", f_flatten01, 1, IN(G(2, 3, 4)), GT_EXACT, GT_EXACT },
    { "transpose 0,2", f_transpose, 1, IN(G(2, 3, 4)), GT_EXACT, GT_EXACT },
    { "permute 2,0,1", f_permute, 1, IN(G(2, 3, 4)), GT_EXACT, GT_EXACT },
    { "permute 3,1,0,2", f_permute4, 1, IN(G(2, 3, 4, 5)), GT_EXACT, GT_EXACT },
    { "squeeze axis 1", f_squeeze, 1, IN(G(2, 1, 3, 1)), GT_EXACT, GT_EXACT },
    { "squeeze all", f_squeeze_all, 1, IN(G(1, 2, 1, 3, 1)), GT_EXACT, GT_EXACT },
    { "unsqueeze -1", f_unsqueeze, 1, IN(G(2, 3)), GT_EXACT, GT_EXACT },
    { "expand [3,1]->[2,3,4]", f_expand, 1, IN(G(3, 1)), GT_EXACT, GT_RED },
    { "expand with -1", f_expand_keep, 1, IN(G(2, 1, 2)), GT_EXACT, GT_RED },
    { "slice axis 1 step 2", f_slice, 1, IN(G(3, 5)), GT_EXACT, GT_EXACT },
    { "slice axis 0", f_slice0, 1, IN(G(6, 4)), GT_EXACT, GT_EXACT },
    { "contiguous of a transposed view", f_contiguous, 1, IN(G(2, 3, 4)), GT_EXACT, GT_EXACT },
    { "clone", f_clone, 1, IN(G(3, 2)), GT_EXACT, GT_EXACT },
    { "concat axis 1", f_concat1, 2, IN(G(2, 3), G(2, 4)), GT_EXACT, GT_EXACT },
    { "concat 3 inputs axis 0", f_concat0_3, 3, IN(G(1, 3, 2), G(4, 3, 2), G(2, 3, 2)), GT_EXACT, GT_EXACT },
    { "concat of a strided view", f_concat_views, 2, IN(G(3, 2), G(2, 5)), GT_EXACT, GT_EXACT },
    { "split sizes 1,2,1 axis 1", f_split_sizes, 1, IN(G(2, 4, 3)), GT_EXACT, GT_ULP2 },
    { "split equal axis 0", f_split_equal, 1, IN(G(6, 3)), GT_ULP2, GT_ULP2 },
    { "index_select axis 1 (i64)", f_index_select1, 2, IN(G(2, 3, 2), LAB(3, 7)), GT_EXACT, GT_RED },
    { "index_select axis 0 (i32)", f_index_select0, 2, IN(G(5, 4), LAB32(5, 9)), GT_EXACT, GT_RED },
    { "index_select rows [1000,16]", f_index_select0, 2, IN(G(1000, 16), LAB(1000, 3000)), GT_EXACT, GT_RED },
    { "gather axis 1", f_gather1, 2, IN(G(3, 4), LAB(4, 3, 6)), GT_EXACT, GT_RED },
    { "gather axis 0", f_gather0, 2, IN(G(4, 3, 2), LAB(4, 5, 3, 2)), GT_EXACT, GT_RED },
    { "one_hot 5 classes", f_one_hot, 1, IN(LAB(5, 8)), GT_EXACT, GT_EXACT },
    { "one_hot [2,3] labels", f_one_hot, 1, IN(LAB(5, 2, 3)), GT_EXACT, GT_EXACT },
    { "cast f32->f64", f_cast_f64, 1, IN(G(3, 4)), GT_EXACT, GT_EXACT },
    { "cast f64->f32", f_cast_f32, 1, IN({ GT_GRAD64, GT_SHAPE(3, 4), 0, 0 }), GT_EXACT, GT_EXACT },
    { "cast f32->i64 (toward zero)", f_cast_i64, 1, IN({ GT_CONST, GT_SHAPE(5, 4), -20, 20 }), GT_EXACT, GT_EXACT },
    { "cast f32->i32", f_cast_i32, 1, IN({ GT_CONST, GT_SHAPE(5, 4), -20, 20 }), GT_EXACT, GT_EXACT },
    { "cast i64->f32", f_cast_f32, 1, IN(LAB(1000, 6, 5)), GT_EXACT, GT_EXACT },
    { "cast bool->f32", f_cast_f32, 1, IN({ GT_MASK, GT_SHAPE(4, 5), 0, 0 }), GT_EXACT, GT_EXACT },
    { "cast f32->bool", f_cast_bool, 1, IN({ GT_INTF, GT_SHAPE(4, 5), -1, 2 }), GT_EXACT, GT_EXACT },
    { "fill_", f_fill_, 1, IN(C(3, 4)), GT_EXACT, GT_EXACT },
    { "copy_ broadcast", f_copy_bcast_, 2, IN(C(3, 4), C(4)), GT_EXACT, GT_EXACT },
    { "copy_ from a strided view", f_copy_strided_, 2, IN(C(4, 3), C(3, 4)), GT_EXACT, GT_EXACT },
    { "add_ broadcast", f_add_bcast_, 2, IN(C(3, 4), C(3, 1)), GT_ULP2, GT_ULP2 },
    { "axpy_", f_axpy_, 2, IN(C(5, 7), C(5, 7)), GT_ULP2, GT_ULP2 },
    { "scale_", f_scale_, 1, IN(C(5, 7)), GT_ULP2, GT_ULP2 },
};

GT_TABLE_TESTS(gpu_shape, cases, gt_expect_op_matches_cpu, 3000)
