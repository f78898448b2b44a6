// test/onnx/run_ort.js — runs ONNX models in ONNX Runtime (CPU, the npm package onnxruntime-node)
// on raw little-endian inputs. Reads lines "model input_file dtype shape out_file" on stdin
// (shape comma-separated), writes each model's first output as raw float32 to out_file and
// prints "ok out_file dims". Sessions are cached per model file.
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

async function main() {
  const lines = fs.readFileSync(0, 'utf8').split('\n').filter((l) => l.trim());
  const sessions = new Map();
  for (const line of lines) {
    const [model, inFile, dtype, shapeStr, outFile] = line.trim().split(/\s+/);
    if (!sessions.has(model)) sessions.set(model, await ort.InferenceSession.create(model, { executionProviders: ['cpu'] }));
    const sess = sessions.get(model);
    const dims = shapeStr.split(',').map(Number);
    const buf = fs.readFileSync(inFile);
    const ab = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
    const data = dtype === 'float32' ? new Float32Array(ab) : new BigInt64Array(ab);
    const feeds = { [sess.inputNames[0]]: new ort.Tensor(dtype, data, dims) };
    const res = await sess.run(feeds);
    const out = res[sess.outputNames[0]];
    fs.writeFileSync(outFile, Buffer.from(out.data.buffer, out.data.byteOffset, out.data.byteLength));
    console.log(`ok ${outFile} ${out.dims.join(',')}`);
  }
}
main().catch((e) => { console.error(`run_ort: ${e && e.message ? e.message : e}`); process.exit(1); });
