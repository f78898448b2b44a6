#!/usr/bin/env python3
"""test/onnx/check.py — checks dygraph's ONNX exports (make test-onnx).

usage: check.py OUTDIR ORT_NODE_MODULES
       check.py --checker-only FILE.onnx...   (the samples' --export-onnx files)

For every model in OUTDIR/manifest.txt (written by test/onnx/export_models.c): onnx.checker
(Debian's python3-onnx, full check with shape inference) on the file; then ONNX Runtime
(onnxruntime-node, through test/onnx/run_ort.js) on each recorded input, compared with dygraph's
eval output: max |ort - dygraph| / max |dygraph| must be at most 1e-5 (an int64 output, TopK's
or ArgMax's indices, must be equal element for element), and the output shapes equal. Prints one line per model and batch size; exit 1 on any failure."""
import os, subprocess, sys
import numpy as np
import onnx

TOL = 1e-5

# what each export must (not) contain: BatchNorm as BatchNormalization or folded away, Dropout
# removed, LayerNormalization at opset 17 only, state-dict names, the dynamic batch axis "N"
EXPECT = {
    'resnet18': (['BatchNormalization', 'Conv', 'GlobalAveragePool', 'Gemm'], ['Dropout'], ['layer1.0.bn1.running_mean', 'fc.weight']),
    'resnet18_folded': (['Conv', 'GlobalAveragePool'], ['BatchNormalization', 'Dropout'], ['fc.weight']),
    'facenet': (['BatchNormalization', 'Gemm'], ['Dropout'], ['backbone.layer4.1.bn2.running_var', 'outLayer1.0.weight']),
    'mnist_cnn': (['Conv', 'MaxPool', 'Relu', 'Flatten', 'Gemm'], [], ['conv1.weight', 'fc.bias']),
    'cifar_mynet': (['Conv', 'MaxPool', 'Gemm'], [], ['conv3.weight', 'linear2.bias']),
    'embed_layernorm': (['Gather', 'LayerNormalization', 'MatMul', 'ReduceMean'], ['Dropout'], ['emb.weight', 'ln.weight']),
    'embed_layernorm_opset13': (['Gather', 'ReduceMean', 'Sqrt'], ['LayerNormalization', 'Dropout'], ['emb.weight', 'ln.bias']),
    'custom_chain': (['Pad', 'Conv', 'AveragePool', 'MaxPool', 'Erf', 'Tanh', 'Slice', 'Transpose', 'LogSoftmax'], [], ['conv_weight', 'proj']),
    # op_models.c: each must be written with the ONNX operator it is about, not something else
    'topk_values': (['TopK', 'GatherElements', 'Cast'], [], ['shift']),
    'topk_indices': (['TopK'], [], ['shift']),
    'argsort_indices': (['TopK'], [], ['shift']),
    'argmax': (['ArgMax'], [], ['shift']),
    'argmin_keepdim': (['ArgMin'], [], ['shift']),
    'where_mask': (['Greater', 'Equal', 'Where', 'Expand', 'Shape', 'ReduceMax'], [], ['w', 'thresh']),
    'cumsum_scatter': (['CumSum', 'ScatterElements', 'TopK', 'Slice'], ['Pad'], ['shift']),
    'conv1d_pool1d_groupnorm': (['Conv', 'MaxPool', 'AveragePool', 'Sqrt'], [], ['w', 'gn.weight']),
    'pool_ceil_mode': (['MaxPool', 'AveragePool'], [], []),
    'lstm_2l_bi_batch_first': (['LSTM', 'Concat', 'MatMul'], ['Dropout', 'Gather'],
                               ['lstm.weight_ih_l0+onnx_iofc', 'lstm.weight_hh_l1_reverse+onnx_iofc', 'lstm.bias_ih_l1+onnx_iofc']),
    'gru_functional': (['GRU', 'Gather'], [], ['w_hh+onnx_zrh', 'b2_hh+onnx_zrh']),
    'rnn_tanh_2l': (['RNN', 'MatMul'], ['Gather'], ['rnn.weight_ih_l0', 'rnn.weight_hh_l1']),
    'lstm_rnn_lengths_fixed': (['LSTM', 'RNN', 'Cast'], [], ['lengths', 'h0', 'lstm.weight_ih_l0_reverse+onnx_iofc']),
}
# exported at a fixed batch (no dynamic axis "N"): lengths are a constant [N]
FIXED = {'lstm_rnn_lengths_fixed'}
# exactly one TopK where the values and indices of one topk are both read
ONE = {'topk_values': 'TopK'}

def structure(name, model):
    ops = {n.op_type for n in model.graph.node}
    inits = {i.name for i in model.graph.initializer}
    must, must_not, names = EXPECT.get(name, ([], [], []))
    bad = [f'{name}: no {op} node' for op in must if op not in ops]
    bad += [f'{name}: has a {op} node' for op in must_not if op in ops]
    bad += [f'{name}: no initializer {n}' for n in names if n not in inits]
    if name in ONE:
        count = sum(n.op_type == ONE[name] for n in model.graph.node)
        # topk_values: one topk read twice (values and indices), one read for values, one sort
        if count != 3:
            bad.append(f'{name}: {count} {ONE[name]} nodes, expected 3 (one per topk / sort)')
    for v in list(model.graph.input) + list(model.graph.output):
        if name not in FIXED and v.type.tensor_type.shape.dim[0].dim_param != 'N':
            bad.append(f'{name}: {v.name} has no dynamic batch axis')
    return bad

def checker_only(paths):
    for p in paths:
        model = onnx.load(p)
        onnx.checker.check_model(model, full_check=True)
        dims = [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
        if dims[0] != 'N':
            sys.exit(f'check.py: {p}: input {dims} has no dynamic batch axis')
        print(f'onnx.checker: {p} ok (input {dims}, {len(model.graph.node)} nodes)')

def main():
    if sys.argv[1] == '--checker-only':
        return checker_only(sys.argv[2:])
    outdir, node_modules = sys.argv[1], sys.argv[2]
    rows = [l.split() for l in open(os.path.join(outdir, 'manifest.txt')) if l.strip()]
    bad = []
    checked = set()
    jobs = []
    for name, batch, inp, dtype, ishape, ref, oshape, odtype in rows:
        path = os.path.join(outdir, name + '.onnx')
        if path not in checked:
            model = onnx.load(path)
            onnx.checker.check_model(model, full_check=True)
            checked.add(path)
            bad += structure(name, model)
            print(f'onnx.checker: {name}.onnx ok (opset {model.opset_import[0].version}, {len(model.graph.node)} nodes, '
                  f'{len(model.graph.initializer)} initializers)')
        jobs.append((name, batch, path, inp, dtype, ishape, ref, oshape, ref + '.ort', odtype))
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'run_ort.js')
    env = dict(os.environ, NODE_PATH=node_modules)
    feed = ''.join(f'{p} {i} {d} {s} {o}\n' for _, _, p, i, d, s, _, _, o, _ in jobs)
    run = subprocess.run(['node', script], input=feed, text=True, capture_output=True, env=env)
    if run.returncode != 0:
        print(run.stdout + run.stderr, file=sys.stderr)
        sys.exit(1)
    got_dims = {l.split()[1]: l.split()[2] for l in run.stdout.splitlines() if l.startswith('ok ')}
    for name, batch, _, _, _, _, ref, oshape, out, odtype in jobs:
        want = np.fromfile(ref, dtype=np.dtype(odtype))
        have = np.fromfile(out, dtype=np.dtype(odtype))
        if got_dims.get(out) != oshape or have.size != want.size:
            bad.append(f'{name} batch {batch}: ONNX Runtime gave shape {got_dims.get(out)}, dygraph {oshape}')
            continue
        if odtype == 'int64':
            wrong = int(np.count_nonzero(have != want))
            print(f'onnxruntime: {name:26s} batch {batch}: output {oshape:>10s}  int64, {wrong} of {want.size} differ  '
                  f'{"ok" if not wrong else "FAIL"}')
            if wrong:
                bad.append(f'{name} batch {batch}: {wrong} of {want.size} int64 outputs differ')
            continue
        rel = float(np.max(np.abs(have - want)) / max(float(np.max(np.abs(want))), 1e-30))
        ok = np.isfinite(have).all() and rel <= TOL
        print(f'onnxruntime: {name:26s} batch {batch}: output {oshape:>10s}  max rel diff {rel:.3e}  {"ok" if ok else "FAIL"}')
        if not ok:
            bad.append(f'{name} batch {batch}: max relative difference {rel:.3e} > {TOL}')
    for b in bad:
        print('check.py: ' + b, file=sys.stderr)
    if bad:
        sys.exit(1)
    print(f'check.py: {len(checked)} models, {len(jobs)} runs within {TOL} of dygraph')

if __name__ == '__main__':
    main()
