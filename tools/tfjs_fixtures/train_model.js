// Times training steps of a conv / transposed-conv stack in TF.js (bench/bench_train.py).
//
//   node train_model.js CONFIG.json
//
// CONFIG: {tools, backend ("cpu" | "wasm"), layers: [{op: "conv" | "convT", weight, bias,
// stride, pad ("same" | "valid"), out: [H, W], act ("relu" | "sigmoid" | "tanh" | null)}],
// input, target (NCHW .npy), lr, betas, eps, warmup, runs, budget_ms}. Weights are .npy files
// in PyTorch's layouts (Conv2d (Co, Ci, kh, kw), ConvTranspose2d (Ci, Co, kh, kw)); bias may be
// null. Each step is Adam's `minimize` of the mean squared error, its loss read back (`data()`).
// Prints one JSON line: {tfjs, node, backend, first_loss, times_ms} or {..., error}.
'use strict';

const fs = require('fs');
const path = require('path');
const tf = require('@tensorflow/tfjs');

const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const {readNpy} = require(path.join(cfg.tools, 'tfjs_files.js'));

// PyTorch (Co, Ci, kh, kw) / (Ci, Co, kh, kw) -> TF.js [kh, kw, Ci, Co] / [kh, kw, Co, Ci].
function layerVariables(layer) {
  const w = readNpy(layer.weight);
  const v = {w: tf.variable(tf.transpose(w, [2, 3, 1, 0]))};
  w.dispose();
  if (layer.bias) v.b = tf.variable(readNpy(layer.bias));
  return v;
}

const ACTIVATIONS = {relu: tf.relu, sigmoid: tf.sigmoid, tanh: tf.tanh};

function forward(layers, vars, x) {
  let h = x;
  layers.forEach((layer, i) => {
    const {w, b} = vars[i];
    const s = [layer.stride, layer.stride];
    h = layer.op === 'conv' ? tf.conv2d(h, w, s, layer.pad)
        : tf.conv2dTranspose(h, w, [h.shape[0], ...layer.out, w.shape[2]], s, layer.pad);
    if (b) h = tf.add(h, b);
    if (layer.act) h = ACTIVATIONS[layer.act](h);
  });
  return h;
}

async function time(step) {
  const first = await step();
  let deadline = performance.now() + cfg.budget_ms / 2;
  for (let i = 0; i < cfg.warmup && performance.now() < deadline; i++) await step();
  const times = [];
  deadline = performance.now() + cfg.budget_ms;
  const needed = Math.min(cfg.runs, 3);
  while (times.length < cfg.runs && (times.length < needed || performance.now() < deadline)) {
    const start = performance.now();
    await step();
    times.push(performance.now() - start);
  }
  return {first_loss: first, times_ms: times};
}

async function main() {
  const out = {tfjs: tf.version.tfjs, node: process.version, backend: cfg.backend};
  if (cfg.backend === 'wasm') {
    const wasm = require('@tensorflow/tfjs-backend-wasm');
    wasm.setWasmPaths(path.join(path.dirname(require.resolve('@tensorflow/tfjs-backend-wasm')),
                                path.sep));
  }
  if (!(await tf.setBackend(cfg.backend))) throw new Error(`backend ${cfg.backend} did not start`);
  await tf.ready();
  const vars = cfg.layers.map(layerVariables);
  const nhwc = (file) => tf.tidy(() => tf.transpose(readNpy(file), [0, 2, 3, 1]));
  const x = nhwc(cfg.input), target = nhwc(cfg.target);
  const optimizer = tf.train.adam(cfg.lr, cfg.betas[0], cfg.betas[1], cfg.eps);
  const trainable = vars.flatMap((v) => (v.b ? [v.w, v.b] : [v.w]));
  const step = async () => {
    const loss = optimizer.minimize(
        () => tf.mean(tf.squaredDifference(forward(cfg.layers, vars, x), target)), true,
        trainable);
    const value = (await loss.data())[0];
    loss.dispose();
    return value;
  };
  try {
    Object.assign(out, await time(step));
  } catch (err) {
    out.error = String(err.message || err).split('\n')[0];
  }
  console.log(JSON.stringify(out));
}
main().catch((err) => { console.error(err.stack || err); process.exit(1); });
