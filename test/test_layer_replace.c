/* test/test_layer_replace.c — dg_layer_replace_sublayer: the new sublayer takes the old one's
 * name and place (iteration, state dict, forward, built-in models included), the old one is
 * released, and every refusal (no such sublayer, a cycle, NULLs) releases the layer handed over. */
#include "test_util.h"
#include <dygraph/extension.h>

/* a layer that doubles its input and counts its calls, to see which layer a parent runs */
static const dg_layer_class doubler_class = DG_LAYER_CLASS("Doubler");
static int g_calls;
static dg_tensor *doubler_forward(dg_layer *self, const dg_tensor *x) {
    g_calls++;
    return dg_mul_scalar(x, 2.0);
}
static dg_layer *doubler(void) { return dg_layer_new(&doubler_class, doubler_forward, NULL, NULL); }

Test(layer_replace, takes_the_name_and_place_and_releases_the_old_one) {
    dg_layer *seq = dg_nn_sequential(3, dg_nn_linear(4, 4), dg_nn_relu(), dg_nn_linear(4, 2));
    cr_assert(seq, "%s", dg_last_error());
    size_t live = dg_live_tensors();
    dg_layer *kept = dg_layer_ref(dg_layer_child(seq, 0));   /* to see the release */
    cr_assert_eq(dg_layer_replace_sublayer(seq, "0", doubler()), 0, "%s", dg_last_error());
    cr_assert_eq(dg_layer_num_children(seq), 3);
    cr_assert_str_eq(dg_layer_child_name(seq, 0), "0");
    cr_assert_str_eq(dg_layer_type(dg_layer_child(seq, 0)), "Doubler");
    cr_assert_str_eq(dg_layer_type(dg_layer_sublayer(seq, "0")), "Doubler");
    char path[64];
    cr_assert_str_eq(dg_layer_full_name(dg_layer_child(seq, 0), path, sizeof path), "0");
    int n;
    dg_named_tensor *sd = dg_layer_state_dict(seq, &n);
    cr_assert_eq(n, 2, "the replaced Linear's parameters are gone from the tree");
    cr_assert_str_eq(sd[0].name, "2.weight");
    free(sd);
    /* the tree no longer holds the old Linear: ours is the last reference */
    cr_assert_eq(dg_live_tensors(), live);
    char buf[64];
    cr_assert_str_eq(dg_layer_full_name(kept, buf, sizeof buf), "", "the old child is detached from its parent");
    dg_layer_free(kept);
    cr_assert_eq(dg_live_tensors(), live - 2);
    /* forward runs the new one */
    dg_scope *sc = dg_scope_begin();
    g_calls = 0;
    cr_assert(dg_forward(seq, dg_ones(DG_SHAPE(3, 4), DG_F32)), "%s", dg_last_error());
    cr_assert_eq(g_calls, 1);
    dg_scope_end(sc);
    /* handing over the layer already there changes nothing and keeps the count right */
    dg_layer *same = dg_layer_ref(dg_layer_child(seq, 2));
    cr_assert_eq(dg_layer_replace_sublayer(seq, "2", same), 0, "%s", dg_last_error());
    cr_assert_str_eq(dg_layer_type(dg_layer_child(seq, 2)), "Linear");
    dg_layer_free(seq);
}

Test(layer_replace, dotted_paths_reach_inside_built_in_models) {
    dg_resnet_params rp = dg_resnet_default_params();
    rp.num_classes = 3;
    dg_layer *net = dg_resnet18(rp);
    cr_assert(net, "%s", dg_last_error());
    /* a doubler where layer1.0's bn2 was: the block's forward must run it */
    cr_assert_eq(dg_layer_replace_sublayer(net, "layer1.0.bn2", doubler()), 0, "%s", dg_last_error());
    cr_assert_str_eq(dg_layer_type(dg_layer_sublayer(net, "layer1.0.bn2")), "Doubler");
    char path[64];
    cr_assert_str_eq(dg_layer_full_name(dg_layer_sublayer(net, "layer1.0.bn2"), path, sizeof path), "layer1.0.bn2");
    cr_assert_null(dg_layer_parameter(net, "layer1.0.bn2.weight"));
    cr_assert_eq(dg_layer_replace_sublayer(net, "layer2.0.downsample.1", doubler()), 0, "%s", dg_last_error());
    cr_assert_eq(dg_layer_replace_sublayer(net, "fc", dg_nn_linear(512, 7)), 0, "%s", dg_last_error());
    dg_scope *sc = dg_scope_begin();
    g_calls = 0;
    dg_tensor *y = dg_forward(net, dg_randn(DG_SHAPE(2, 3, 32, 32), DG_F32));
    cr_assert(y, "%s", dg_last_error());
    cr_assert_eq(g_calls, 2, "the blocks ran the replacements (%d calls)", g_calls);
    cr_assert_eq(dg_dim(y, 1), 7, "the network ran the new fc");
    dg_scope_end(sc);
    dg_layer_free(net);
}

Test(layer_replace, refusals_name_the_problem_and_release_the_layer) {
    dg_layer *seq = dg_nn_sequential(2, dg_nn_relu(), dg_nn_sequential(1, dg_nn_relu()));
    size_t live = dg_live_tensors();
    /* no such sublayer: the Linear handed over is freed */
    cr_assert_lt(dg_layer_replace_sublayer(seq, "7", dg_nn_linear(3, 3)), 0);
    cr_assert(strstr(dg_last_error(), "no sublayer named '7'"), "%s", dg_last_error());
    cr_assert_eq(dg_live_tensors(), live, "the refused layer was released");
    cr_assert_lt(dg_layer_replace_sublayer(seq, "1.5", dg_nn_linear(3, 3)), 0);
    cr_assert_lt(dg_layer_replace_sublayer(seq, "9.0", dg_nn_linear(3, 3)), 0);
    cr_assert_lt(dg_layer_replace_sublayer(seq, NULL, dg_nn_linear(3, 3)), 0);
    cr_assert_eq(dg_live_tensors(), live);
    /* a cycle: seq under its own child */
    cr_assert_lt(dg_layer_replace_sublayer(seq, "1.0", dg_layer_ref(seq)), 0);
    cr_assert(strstr(dg_last_error(), "cycles"), "%s", dg_last_error());
    /* NULLs */
    dg_clear_error();
    cr_assert_lt(dg_layer_replace_sublayer(seq, "0", NULL), 0);
    cr_assert_lt(dg_layer_replace_sublayer(NULL, "0", dg_nn_linear(3, 3)), 0);
    cr_assert_eq(dg_live_tensors(), live);
    cr_assert_str_eq(dg_layer_type(dg_layer_child(seq, 0)), "ReLU", "refusals changed nothing");
    dg_layer_free(seq);
}
