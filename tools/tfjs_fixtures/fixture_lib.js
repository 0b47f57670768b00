// Helpers of make_fixtures.js: seeded numbers and weights, saving a model with
// tf.io.withSaveHandler into our own manifest and shards (optionally quantized as
// tfjs-converter does), and recording TF.js's outputs on the model re-loaded from disk.
'use strict';

const fs = require('fs');
const path = require('path');
const tf = require('@tensorflow/tfjs');
const {writeTensor, writeModelDir, loadModelDir} = require('./tfjs_files');

const OUT = path.join(__dirname, '..', '..', 'tests', 'data', 'tfjs');

// --- seeded numbers (mulberry32 + Box-Muller: independent of TF.js's own RNG) ----------
function rng(seed) {
  let a = seed >>> 0;
  const uniform = () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const normal = () => Math.sqrt(-2 * Math.log(1 - uniform())) *
      Math.cos(2 * Math.PI * uniform());
  return {uniform, normal};
}

function randomTensor(r, shape, scale = 1, offset = 0) {
  const n = shape.reduce((a, b) => a * b, 1);
  return tf.tensor(Float32Array.from({length: n}, () => offset + scale * r.normal()), shape);
}

// Weights by their Keras role: kernels scaled by 1/sqrt(fan-in), BatchNorm statistics and
// affine terms far from the identity so a wrong broadcast shows.
function seedWeights(model, seed) {
  const r = rng(seed);
  for (const layer of model.layers) {
    const values = layer.weights.map((w) => {
      const role = w.originalName.split('/').pop();
      const shape = w.shape;
      const fanIn = shape.slice(0, -1).reduce((a, b) => a * b, 1);
      if (role.endsWith('kernel')) return randomTensor(r, shape, 1 / Math.sqrt(fanIn));
      if (role === 'gamma') return randomTensor(r, shape, 0.3, 1);
      if (role === 'moving_variance') return randomTensor(r, shape, 0.2, 0.8).abs();
      if (role === 'moving_mean') return randomTensor(r, shape, 0.5);
      if (role === 'alpha') return randomTensor(r, shape, 0.1, 0.25);
      return randomTensor(r, shape, 0.2);  // bias, beta
    });
    if (values.length) layer.setWeights(values);
  }
}

// --- saving: tf.io.withSaveHandler, then our own manifest and shards --------------------
async function artifactsOf(model) {
  let artifacts = null;
  await model.save(tf.io.withSaveHandler(async (a) => {
    artifacts = a;
    return {modelArtifactsInfo: {dateSaved: new Date(), modelTopologyType: 'JSON'}};
  }));
  return artifacts;
}

// Splits the saved weights into `groupCount` manifest groups (in save order).
function plainGroups(artifacts, groupCount) {
  const bytes = new Uint8Array(artifacts.weightData);
  const specs = artifacts.weightSpecs;
  const perGroup = Math.ceil(specs.length / groupCount);
  const groups = [];
  let offset = 0;
  for (let g = 0; g * perGroup < specs.length; g++) {
    const weights = specs.slice(g * perGroup, (g + 1) * perGroup);
    const size = weights.reduce((n, w) => n + 4 * w.shape.reduce((a, b) => a * b, 1), 0);
    groups.push({weights, data: bytes.slice(offset, offset + size)});
    offset += size;
  }
  return groups;
}

// The Python tfjs-converter's wrapper around the Keras config (the layout real converted
// models such as @upscalerjs/default-model use).
function converterTopology(topology) {
  return {keras_version: '2.10.0', backend: 'tensorflow',
          model_config: {class_name: topology.class_name, config: topology.config}};
}

// Saves `model` as tests/data/tfjs/<name>/; `groups` is a number of manifest groups or a
// function from the saved artifacts to groups (see quantizedGroups).
async function saveCase(name, model, {shardBytes = 1 << 22, groups = 1, wrap = false} = {}) {
  const artifacts = await artifactsOf(model);
  const topology = wrap ? converterTopology(artifacts.modelTopology) : artifacts.modelTopology;
  const dir = path.join(OUT, name);
  fs.rmSync(dir, {recursive: true, force: true});
  const manifest = typeof groups === 'function' ? groups(artifacts) :
      plainGroups(artifacts, groups);
  writeModelDir(dir, topology, manifest, shardBytes);
  return dir;
}

// --- quantization as tfjs-converter's quantization.py does it ---------------------------
function roundHalfEven(x) {
  const r = Math.round(x);
  return (Math.abs(x % 1) === 0.5 && r % 2 !== 0) ? r - 1 : r;
}

function quantizeAffine(values, dtype) {
  const quantMax = dtype === 'uint8' ? 255 : 65535;
  let min = values.reduce((a, b) => Math.min(a, b));
  let max = values.reduce((a, b) => Math.max(a, b));
  const q = dtype === 'uint8' ? new Uint8Array(values.length) : new Uint16Array(values.length);
  if (min === max) return {bytes: new Uint8Array(q.buffer), meta: {min, scale: 1.0}};
  const scale = (max - min) / quantMax;
  if (min <= 0 && 0 <= max) {  // nudge so that 0 is exactly representable
    min = -roundHalfEven(-min / scale) * scale;
    max = quantMax * scale + min;
  }
  values.forEach((v, i) => {
    q[i] = roundHalfEven((Math.min(Math.max(v, min), max) - min) / scale);
  });
  return {bytes: new Uint8Array(q.buffer), meta: {min, scale}};
}

function toFloat16Bits(value) {
  const bits = new Uint32Array(Float32Array.of(value).buffer)[0];
  const sign = (bits >>> 16) & 0x8000;
  const exponent = ((bits >>> 23) & 0xff) - 127 + 15;
  let mantissa = bits & 0x7fffff;
  if (exponent >= 0x1f) return sign | 0x7c00;  // our weights never overflow or hold NaN
  let shift = 13;
  let base = exponent << 10;
  if (exponent <= 0) {  // subnormal half
    if (exponent < -10) return sign;
    mantissa |= 0x800000;
    shift = 14 - exponent;
    base = 0;
  }
  let half = base + (mantissa >>> shift);
  const rest = mantissa & ((1 << shift) - 1);
  const halfway = 1 << (shift - 1);
  if (rest > halfway || (rest === halfway && (half & 1))) half += 1;
  return sign | half;
}

function quantizeWeight(values, dtype) {
  if (dtype === 'float16') {
    const half = Uint16Array.from(values, toFloat16Bits);
    return {bytes: new Uint8Array(half.buffer), meta: {}};
  }
  return quantizeAffine(values, dtype);
}

// One group whose weights are stored as `dtypeOf(name)` ('uint8', 'uint16', 'float16' or
// 'float32'), with the manifest entries tfjs-converter writes for quantized weights.
function quantizedGroups(artifacts, dtypeOf) {
  const floats = new Float32Array(artifacts.weightData);
  const parts = [];
  const weights = [];
  let offset = 0;
  for (const spec of artifacts.weightSpecs) {
    const n = spec.shape.reduce((a, b) => a * b, 1);
    const values = Array.from(floats.subarray(offset, offset + n));
    offset += n;
    const dtype = dtypeOf(spec.name);
    if (dtype === 'float32') {
      parts.push(new Uint8Array(Float32Array.from(values).buffer));
      weights.push(spec);
      continue;
    }
    const {bytes, meta} = quantizeWeight(values, dtype);
    parts.push(bytes);
    weights.push({...spec, quantization: {dtype, ...meta, original_dtype: 'float32'}});
  }
  return [{weights, data: Buffer.concat(parts.map((p) => Buffer.from(p)))}];
}

// --- reference outputs ---------------------------------------------------------------------
async function recordCase(dir, inputs, {notes = '', layout = 'NHWC', outputs = null} = {}) {
  const model = await loadModelDir(dir);  // what TF.js itself reads from the files
  const names = model.inputs.map((t) => t.sourceLayer.name);  // InputLayer names
  const feeds = names.map((n) => inputs[n]);
  let ys = model.predict(feeds.length === 1 ? feeds[0] : feeds);
  ys = Array.isArray(ys) ? ys : [ys];
  const record = {backend: tf.getBackend(), tfjs: tf.version.tfjs, layout, notes,
                  inputs: {}, outputs: {}};
  for (const n of names) {
    record.inputs[n] = `input_${n}.npy`;
    await writeTensor(path.join(dir, record.inputs[n]), inputs[n]);
  }
  for (let i = 0; i < ys.length; i++) {
    const n = model.outputs[i].sourceLayer.name;
    record.outputs[n] = `output_${n}.npy`;
    await writeTensor(path.join(dir, record.outputs[n]), outputs ? outputs[n] : ys[i]);
  }
  fs.writeFileSync(path.join(dir, 'case.json'), JSON.stringify(record, null, 2) + '\n');
  return {model, ys};
}

module.exports = {rng, randomTensor, seedWeights, artifactsOf, saveCase, quantizedGroups,
                  recordCase, OUT};
