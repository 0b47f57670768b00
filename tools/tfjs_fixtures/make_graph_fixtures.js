// Builds the TF.js graph-model fixtures of tests/importers/test_tfjs_graph.py:
//
//   cd tools/tfjs_fixtures && npm install && node make_graph_fixtures.js [case ...]
//
// TensorFlow is not needed: each case is a GraphDef written here node by node (the ops
// tensorflowjs_converter emits for converted CNNs) with seeded weights, saved into
// tests/data/tfjs_graph/<case>/ (model.json, one shard) with case.json, a seeded input and
// TF.js's own outputs (cpu backend) of the model as tf.loadGraphModel reads it from disk.
'use strict';

const fs = require('fs');
const path = require('path');
const tf = require('@tensorflow/tfjs');
const {rng} = require('./fixture_lib');
const {writeTensor} = require('./tfjs_files');
const {A, GraphBuilder, loadGraphDir} = require('./graph_files');

const OUT = path.join(__dirname, '..', '..', 'tests', 'data', 'tfjs_graph');

function values(r, n, scale = 1, offset = 0) {
  return Array.from({length: n}, () => offset + scale * r.normal());
}

const prod = (shape) => shape.reduce((a, b) => a * b, 1);

// A random float Const of `shape`, scaled by 1/sqrt(fan-in) for filters and matrices.
function weight(g, r, name, shape, {scale = null, offset = 0} = {}) {
  const fanIn = shape.length >= 2 ? prod(shape.slice(0, -1)) : 1;
  return g.constant(name, values(r, prod(shape), scale ?? 1 / Math.sqrt(fanIn), offset), shape);
}

function conv(g, name, op, x, filter, options = {}) {
  const {strides = 1, padding = 'SAME', dilations = 1, fused = null, args = [],
         explicit = null, alpha = null} = options;
  const attr = {T: A.type('DT_FLOAT'), strides: A.ints([1, strides, strides, 1]),
                padding: A.s(padding), data_format: A.s('NHWC'),
                dilations: A.ints([1, dilations, dilations, 1])};
  if (explicit) attr.explicit_paddings = A.ints(explicit);
  if (fused) {
    Object.assign(attr, {fused_ops: A.strs(fused), num_args: A.i(args.length),
                         epsilon: A.f(0)});
    if (alpha !== null) attr.leakyrelu_alpha = A.f(alpha);
  }
  return g.node(name, op, [x, filter, ...args], attr);
}

const T = {T: A.type('DT_FLOAT')};

// --- cases ----------------------------------------------------------------------------------
// Convolutions: TF's SAME padding on odd sizes with stride 2, dilation, EXPLICIT padding,
// depthwise with a multiplier, and every fused activation TF.js runs.
function convs(g, r) {
  const x = g.input('image', [-1, 11, 13, 3]);
  const c1 = conv(g, 'conv1', 'Conv2D', x, weight(g, r, 'conv1/filter', [3, 3, 3, 8]),
                  {strides: 2});
  const b1 = g.node('conv1/bias_add', 'BiasAdd', [c1, weight(g, r, 'conv1/bias', [8],
                                                             {scale: 0.2})], T);
  const r1 = g.node('conv1/relu', 'Relu', [b1], T);
  const c2 = conv(g, 'conv2', '_FusedConv2D', r1, weight(g, r, 'conv2/filter', [3, 3, 8, 8]),
                  {dilations: 2, fused: ['BiasAdd', 'Relu6'],
                   args: [weight(g, r, 'conv2/bias', [8], {scale: 0.5})]});
  const d1 = conv(g, 'dw1', 'DepthwiseConv2dNative', c2,
                  weight(g, r, 'dw1/filter', [3, 3, 8, 2]), {strides: 2});
  const d2 = conv(g, 'dw2', 'FusedDepthwiseConv2dNative', c2,
                  weight(g, r, 'dw2/filter', [3, 3, 8, 1]),
                  {padding: 'VALID', fused: ['BiasAdd', 'Elu'],
                   args: [weight(g, r, 'dw2/bias', [8], {scale: 0.2})]});
  const c3 = conv(g, 'conv3', '_FusedConv2D', d1, weight(g, r, 'conv3/filter', [2, 2, 16, 6]),
                  {padding: 'EXPLICIT', explicit: [0, 0, 1, 0, 0, 1, 0, 0],
                   fused: ['BiasAdd', 'LeakyRelu'], alpha: 0.1,
                   args: [weight(g, r, 'conv3/bias', [6], {scale: 0.2})]});
  const c4 = conv(g, 'conv4', '_FusedConv2D', c3, weight(g, r, 'conv4/filter', [1, 1, 6, 5]),
                  {fused: ['BiasAdd', 'Prelu'],
                   args: [weight(g, r, 'conv4/bias', [5], {scale: 0.2}),
                          weight(g, r, 'conv4/alpha', [5], {scale: 0.1, offset: 0.25})]});
  conv(g, 'head_a', '_FusedConv2D', c4, weight(g, r, 'head_a/filter', [3, 3, 5, 4]),
       {strides: 2, fused: ['BiasAdd', 'Sigmoid'],
        args: [weight(g, r, 'head_a/bias', [4], {scale: 0.2})]});
  conv(g, 'head_b', '_FusedConv2D', d2, weight(g, r, 'head_b/filter', [3, 3, 8, 4]),
       {strides: 2, fused: ['BiasAdd'], args: [weight(g, r, 'head_b/bias', [4], {scale: 0.2})]});
  conv(g, 'head_c', '_FusedConv2D', x, weight(g, r, 'head_c/filter', [5, 5, 3, 4]),
       {strides: 3, padding: 'VALID', fused: ['BiasAdd', 'Relu'],
        args: [weight(g, r, 'head_c/bias', [4], {scale: 0.2})]});
}

// Batch norm, every activation op, arithmetic with constants of every broadcast shape (and
// constants first), tensor-tensor products (swish as x·sigmoid(x)), clipping.
function elementwise(g, r) {
  const x = g.input('x', [-1, 6, 7, 5]);
  const bn = g.node('bn', 'FusedBatchNormV3', [
    x, weight(g, r, 'bn/scale', [5], {scale: 0.3, offset: 1}),
    weight(g, r, 'bn/offset', [5], {scale: 0.2}), weight(g, r, 'bn/mean', [5], {scale: 0.5}),
    g.constant('bn/variance', values(r, 5, 0.2, 0.8).map(Math.abs), [5])],
  {...T, U: A.type('DT_FLOAT'), epsilon: A.f(0.001), data_format: A.s('NHWC'),
   is_training: A.b(false)});
  const m = g.node('scale3', 'Mul', [bn, g.constant('three', [3], [])], T);
  const r6 = g.node('relu6', 'Relu6', [m], T);
  const e = g.node('elu', 'Elu', [g.node('sub_c', 'Sub', [r6, weight(g, r, 'shift', [5])], T)], T);
  const l = g.node('leaky', 'LeakyRelu', [e], {...T, alpha: A.f(0.3)});
  const p = g.node('prelu', 'Prelu', [l, weight(g, r, 'slope', [5], {scale: 0.1, offset: 0.2})],
                   T);
  const s = g.node('sigmoid', 'Sigmoid', [p], T);
  const t = g.node('tanh', 'Tanh', [p], T);
  const sw = g.node('swish', 'Mul', [p, s], T);
  const add = g.node('add_tt', 'AddV2', [sw, t], T);
  const add2 = g.node('add_full', 'Add', [add, weight(g, r, 'full', [1, 6, 7, 5], {scale: 0.3})],
                      T);
  const sub2 = g.node('one_minus', 'Sub', [g.constant('one', [1], []), add2], T);
  const div = g.node('div_c', 'RealDiv', [sub2, g.constant('divisor', [1.5, -2, 3, 0.5, 4],
                                                           [1, 1, 1, 5])], T);
  const den = g.node('den', 'AddV2', [s, g.constant('half', [0.5], [])], T);
  const rdiv = g.node('two_over', 'RealDiv', [g.constant('two', [2], []), den], T);
  const mx = g.node('max_c', 'Maximum', [div, g.constant('low', [-0.5], [])], T);
  const mn = g.node('min_c', 'Minimum', [mx, g.constant('high', [1.5], [])], T);
  const clip = g.node('clip', 'ClipByValue', [rdiv, g.constant('clip/lo', [1.5], []),
                                               g.constant('clip/hi', [3], [])], T);
  const sum = g.node('sum', 'AddV2', [mn, clip], T);
  const se = g.node('se', 'Mean', [sum, g.ints('se/axes', [1, 2])], {...T, keep_dims: A.b(true)});
  const gated = g.node('gated', 'Mul', [sum, se], T);
  g.node('out', 'Sub', [gated, t], T);
}

function pool(g, name, op, x, k, s, padding) {
  return g.node(name, op, [x], {...T, ksize: A.ints([1, k, k, 1]),
                                strides: A.ints([1, s, s, 1]), padding: A.s(padding),
                                data_format: A.s('NHWC')});
}

function resize(g, name, op, x, size, corners, half) {
  return g.node(name, op, [x, g.ints(`${name}/size`, size)],
                {...T, align_corners: A.b(corners), half_pixel_centers: A.b(half)});
}

// Pools with SAME / VALID padding, pads (constant, value, reflect), concatenation,
// every resize mode TF.js has, depth to space, transpose.
function spatial(g, r) {
  const x = g.input('x', [-1, 9, 11, 4]);
  const ap = pool(g, 'avg_same', 'AvgPool', x, 3, 2, 'SAME');
  pool(g, 'max_valid', 'MaxPool', x, 2, 2, 'VALID');
  const mp = pool(g, 'max_same', 'MaxPool', x, 3, 2, 'SAME');
  const cat = g.node('cat', 'ConcatV2', [ap, mp, g.ints('cat/axis', [3], [])],
                     {...T, N: A.i(2)});
  const cat2 = g.node('cat2', 'ConcatV2', [cat, ap, g.ints('cat2/axis', [-1], [])],
                      {...T, N: A.i(2)});
  g.node('depth_to_space', 'DepthToSpace', [cat2], {...T, block_size: A.i(2),
                                                    data_format: A.s('NHWC')});
  g.node('pad', 'Pad', [x, g.ints('pad/paddings', [0, 0, 1, 2, 0, 3, 0, 0], [4, 2])], T);
  const pads = g.ints('paddings', [0, 0, 2, 1, 1, 2, 0, 0], [4, 2]);
  const pv = g.node('pad_value', 'PadV2', [x, pads, g.constant('pad_value/value', [1.5], [])],
                    T);
  const mirror = g.node('mirror', 'MirrorPad', [x, pads], {...T, mode: A.s('REFLECT')});
  g.node('pads_sum', 'AddV2', [pv, mirror], T);
  // SYMMETRIC repeats the edge; pads up to the size itself (H 9, W 11).
  g.node('mirror_symmetric', 'MirrorPad',
         [x, g.ints('mirror_symmetric/paddings', [0, 0, 3, 9, 0, 11, 0, 0], [4, 2])],
         {...T, mode: A.s('SYMMETRIC')});
  resize(g, 'bilinear', 'ResizeBilinear', mp, [9, 13], false, false);
  resize(g, 'bilinear_corners', 'ResizeBilinear', mp, [9, 13], true, false);
  resize(g, 'bilinear_half', 'ResizeBilinear', mp, [7, 4], false, true);
  resize(g, 'nearest', 'ResizeNearestNeighbor', mp, [10, 12], false, false);
  resize(g, 'nearest_corners', 'ResizeNearestNeighbor', mp, [9, 13], true, false);
  resize(g, 'nearest_half', 'ResizeNearestNeighbor', mp, [3, 17], false, true);
  g.node('transpose', 'Transpose', [x, g.ints('transpose/perm', [0, 2, 1, 3])], T);
}

// A classifier head: global mean and max, MatMul + BiasAdd, _FusedMatMul with transpose_b,
// reshapes (a target shape computed by Shape / StridedSlice / Pack), Squeeze, ExpandDims,
// Softmax, an Identity output; a channel Sum as a second output.
function classifier(g, r) {
  const x = g.input('x', [-1, 8, 8, 3]);
  const c = conv(g, 'conv', '_FusedConv2D', x, weight(g, r, 'conv/filter', [3, 3, 3, 6]),
                 {strides: 2, fused: ['BiasAdd', 'Relu'],
                  args: [weight(g, r, 'conv/bias', [6], {scale: 0.2})]});
  const gap = g.node('gap', 'Mean', [c, g.ints('gap/axes', [1, 2])], {...T, keep_dims: A.b(false)});
  const gmp = g.node('gmp', 'Max', [c, g.ints('gmp/axes', [1, 2])], {...T, keep_dims: A.b(true)});
  const sq = g.node('squeeze', 'Squeeze', [gmp], {...T, squeeze_dims: A.ints([1, 2])});
  const h = g.node('pooled', 'AddV2', [gap, sq], T);
  const mm = g.node('fc1', 'MatMul', [h, weight(g, r, 'fc1/w', [6, 10])],
                    {...T, transpose_a: A.b(false), transpose_b: A.b(false)});
  const b = g.node('fc1/bias_add', 'BiasAdd', [mm, weight(g, r, 'fc1/b', [10], {scale: 0.2})],
                   T);
  const rl = g.node('fc1/relu', 'Relu', [b], T);
  const fm = g.node('fc2', '_FusedMatMul', [rl, weight(g, r, 'fc2/w', [7, 10]),
                                            weight(g, r, 'fc2/b', [7], {scale: 0.2})],
                    {...T, transpose_a: A.b(false), transpose_b: A.b(true),
                     fused_ops: A.strs(['BiasAdd']), num_args: A.i(1), epsilon: A.f(0)});
  const r4 = g.node('to_map', 'Reshape', [fm, g.ints('to_map/shape', [1, 1, 1, 7])], T);
  const shape = g.node('shape', 'Shape', [fm], {...T, out_type: A.type('DT_INT32')});
  const n = g.node('classes', 'StridedSlice', [shape, g.ints('begin', [1]), g.ints('end', [2]),
                                                g.ints('stride', [1])],
                   {...T, Index: A.type('DT_INT32'), shrink_axis_mask: A.i(1),
                    begin_mask: A.i(0), end_mask: A.i(0), ellipsis_mask: A.i(0),
                    new_axis_mask: A.i(0)});
  const target = g.node('target', 'Pack', [g.ints('minus_one', [-1], []), n],
                        {...T, axis: A.i(0), N: A.i(2)});
  const back = g.node('to_vector', 'Reshape', [r4, target], T);
  const e1 = g.node('expand1', 'ExpandDims', [back, g.ints('expand1/axis', [1], [])], T);
  const e2 = g.node('expand2', 'ExpandDims', [e1, g.ints('expand2/axis', [1], [])], T);
  const sq2 = g.node('squeeze2', 'Squeeze', [e2], {...T, squeeze_dims: A.ints([1, 2])});
  const sm = g.node('softmax', 'Softmax', [sq2], T);
  g.node('probs', 'Identity', [sm], T);
  g.node('channel_sum', 'Sum', [c, g.ints('channel_sum/axes', [3])], {...T, keep_dims: A.b(true)});
}

// Maximum / Minimum of two tensors (same shape, and a per-channel (1, 1, 1, C) one
// broadcast). (SpaceToDepth: TF.js 4.22.0 runs no such op, so there is no fixture.)
function maxMin(g, r) {
  const x = g.input('x', [-1, 6, 12, 3]);
  const c = conv(g, 'conv', 'Conv2D', x, weight(g, r, 'conv/filter', [3, 3, 3, 4]));
  const t = g.node('tanh', 'Tanh', [c], T);
  const mx = g.node('max_tt', 'Maximum', [c, t], T);
  const se = g.node('se', 'Mean', [c, g.ints('se/axes', [1, 2])], {...T, keep_dims: A.b(true)});
  g.node('min_tt', 'Minimum', [se, mx], T);
}

// Open height and width (-1): TF's SAME padding at whatever size the input has.
function openSize(g, r) {
  const x = g.input('x', [-1, -1, -1, 3]);
  const c = conv(g, 'conv', '_FusedConv2D', x, weight(g, r, 'conv/filter', [3, 3, 3, 8]),
                 {strides: 2, fused: ['BiasAdd', 'Relu'],
                  args: [weight(g, r, 'conv/bias', [8], {scale: 0.2})]});
  const d = conv(g, 'dw', 'DepthwiseConv2dNative', c, weight(g, r, 'dw/filter', [3, 3, 8, 1]));
  pool(g, 'pool', 'AvgPool', d, 2, 2, 'SAME');
}

// Element moves on tensors computed at run time, as detector heads write them: a conv map
// reshaped to (1, H·W·A, K) sequences (TF order: anchors inside pixels), concatenated along
// the sequence, an anchor constant added, a rank-3 transpose, expand_dims / squeeze, a strided
// slice with steps, a 4-D transpose moving the batch-1 axes and a flatten to a vector.
function views(g, r) {
  const x = g.input('x', [-1, 4, 6, 5]);
  const c = conv(g, 'head', '_FusedConv2D', x, weight(g, r, 'head/filter', [3, 3, 5, 12]),
                 {fused: ['BiasAdd'], args: [weight(g, r, 'head/bias', [12], {scale: 0.2})]});
  const boxes = g.node('boxes', 'Reshape', [c, g.ints('boxes/shape', [1, -1, 4])], T);
  const pooled = pool(g, 'pooled', 'MaxPool', c, 2, 2, 'VALID');
  const more = g.node('more', 'Reshape', [pooled, g.ints('more/shape', [1, 18, 4])], T);
  const all = g.node('all', 'ConcatV2', [boxes, more, g.ints('all/axis', [1], [])],
                     {...T, N: A.i(2)});
  const anchored = g.node('anchored', 'AddV2',
                          [all, weight(g, r, 'anchors', [1, 90, 4], {scale: 1})], T);
  g.node('scores', 'Sigmoid', [anchored], T);
  g.node('by_coord', 'Transpose', [anchored, g.ints('by_coord/perm', [0, 2, 1])], T);
  const seq = g.node('seq', 'Reshape', [x, g.ints('seq/shape', [1, 24, 5])], T);
  // (1, 24, 5) -> (1, 1, 24, 5) -> (1, 24, 5): glcnn (5, 1, 24) throughout, no pass.
  const ex = g.node('ex', 'ExpandDims', [seq, g.ints('ex/axis', [1], [])], T);
  g.node('sq', 'Squeeze', [ex], {...T, squeeze_dims: A.ints([1])});
  g.node('strided', 'StridedSlice',
         [c, g.ints('strided/begin', [0, 1, 0, 2]), g.ints('strided/end', [1, 4, 6, 11]),
          g.ints('strided/strides', [1, 2, 3, 4])],
         {...T, Index: A.type('DT_INT32'), begin_mask: A.i(1), end_mask: A.i(1),
          shrink_axis_mask: A.i(0), ellipsis_mask: A.i(0), new_axis_mask: A.i(0)});
  g.node('hw_swap', 'Transpose', [c, g.ints('hw_swap/perm', [0, 3, 1, 2])], T);
  g.node('flat', 'Reshape', [pooled, g.ints('flat/shape', [1, -1])], T);
}

// What TF.js graphs of real models (@vladmandic/human) use besides: transposed convs as
// Conv2DBackpropInput (SAME stride 2 to an odd size; VALID stride 2 with the row a strided
// VALID conv never reads), AddN of three tensors, channels padded with zeros before a
// residual add, Maximum and Minimum with the constant first (PReLU written out), Neg, Square,
// Sqrt and Rsqrt (an L2 normalisation written out).
function moreOps(g, r) {
  const x = g.input('x', [-1, 5, 6, 4]);
  const up = g.node('up', 'Conv2DBackpropInput',
                    [g.ints('up/sizes', [1, 9, 11, 3]), weight(g, r, 'up/filter', [3, 3, 3, 4]), x],
                    {...T, strides: A.ints([1, 2, 2, 1]), padding: A.s('SAME'),
                     data_format: A.s('NHWC'), dilations: A.ints([1, 1, 1, 1])});
  g.node('up_valid', 'Conv2DBackpropInput',
         [g.ints('up_valid/sizes', [1, 12, 14, 2]), weight(g, r, 'up_valid/filter', [3, 3, 2, 4]),
          x],
         {...T, strides: A.ints([1, 2, 2, 1]), padding: A.s('VALID'), data_format: A.s('NHWC'),
          dilations: A.ints([1, 1, 1, 1])});
  const c = conv(g, 'conv', 'Conv2D', x, weight(g, r, 'conv/filter', [1, 1, 4, 4]));
  const wide = g.node('wide', 'Pad', [x, g.ints('wide/paddings', [0, 0, 0, 0, 0, 0, 1, 2],
                                                 [4, 2])], T);
  const c7 = conv(g, 'conv7', 'Conv2D', x, weight(g, r, 'conv7/filter', [1, 1, 4, 7]));
  g.node('residual', 'AddV2', [wide, c7], T);
  g.node('sum3', 'AddN', [x, c, g.node('neg', 'Neg', [c], T)], {...T, N: A.i(3)});
  const squared = g.node('squared', 'Square', [c], T);
  g.node('norm', 'Mul', [c, g.node('rsqrt', 'Rsqrt', [g.node('eps', 'AddV2',
    [squared, g.constant('eps/value', [1e-3], [])], T)], T)], T);
  g.node('root', 'Sqrt', [squared], T);
  const pos = g.node('pos', 'Maximum', [g.constant('zero', [0], []), up], T);
  const neg = g.node('negpart', 'Minimum', [g.constant('zero2', [0], []), up], T);
  g.node('prelu', 'AddV2', [pos, g.node('scaled', 'Mul', [neg, g.constant('alpha', [0.25], [])],
                                        T)], T);
}

const CASES = {
  convs: [convs, [11, 13, 3]],
  elementwise: [elementwise, [6, 7, 5]],
  spatial: [spatial, [9, 11, 4]],
  classifier: [classifier, [8, 8, 3]],
  open_size: [openSize, [9, 7, 3]],
  max_min: [maxMin, [6, 12, 3]],
  views: [views, [4, 6, 5]],
  more_ops: [moreOps, [5, 6, 4]],
};

// Outputs: the nodes no other node reads (Consts aside), as TF.js finds them.
function outputNames(nodes) {
  const read = new Set(nodes.flatMap((n) => n.input.map((i) => i.split(':')[0])));
  return nodes.filter((n) => !read.has(n.name) && n.op !== 'Const').map((n) => n.name);
}

async function makeCase(name, build, inputShape, seed) {
  const dir = path.join(OUT, name);
  fs.rmSync(dir, {recursive: true, force: true});
  const g = new GraphBuilder();
  const r = rng(seed);
  build(g, r);
  g.write(dir);
  const model = await loadGraphDir(dir);
  const inputName = g.nodes.find((n) => n.op === 'Placeholder').name;
  const x = tf.tensor(Float32Array.from(values(r, prod(inputShape))), [1, ...inputShape]);
  const outputs = outputNames(g.nodes);
  let ys = model.execute({[inputName]: x}, outputs);
  ys = Array.isArray(ys) ? ys : [ys];
  const record = {backend: tf.getBackend(), tfjs: tf.version.tfjs, layout: 'NHWC', notes: '',
                  inputs: {[inputName]: `input_${inputName}.npy`}, outputs: {}};
  await writeTensor(path.join(dir, record.inputs[inputName]), x);
  for (let i = 0; i < outputs.length; i++) {
    record.outputs[outputs[i]] = `output_${outputs[i]}.npy`;
    await writeTensor(path.join(dir, record.outputs[outputs[i]]), ys[i]);
  }
  fs.writeFileSync(path.join(dir, 'case.json'), JSON.stringify(record, null, 2) + '\n');
}

async function main() {
  await tf.setBackend('cpu');
  // node make_graph_fixtures.js [case ...]: only those cases (each keeps its seed)
  const only = process.argv.slice(2);
  let seed = 1;
  for (const [name, [build, shape]] of Object.entries(CASES)) {
    if (!only.length || only.includes(name)) {
      await makeCase(name, build, shape, seed);
      console.log(`wrote ${name}`);
    }
    seed++;
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
