// Builds the TF.js fixtures of tests/importers/test_tfjs_import.py (see README.md next to this file):
//
//   cd tools/tfjs_fixtures && npm install && node make_fixtures.js
//
// Each case is a small layers model with seeded weights, saved with tf.io.withSaveHandler
// into tests/data/tfjs/<case>/ (model.json, *.bin shards) together with case.json, seeded
// inputs and TF.js's own outputs (.npy), computed on the cpu backend from the model as
// re-loaded from those files. dcgan_channels_first is the exception (tfjs issue #1106).
'use strict';

const path = require('path');
const tf = require('@tensorflow/tfjs');
const lib = require('./fixture_lib');
const {writeTensor} = require('./tfjs_files');

const L = tf.layers;

function input(shape, seed, scale = 1) {
  return lib.randomTensor(lib.rng(seed), [1, ...shape], scale);
}

// The webcam autoencoder, smaller: Conv2D 4×4 s2 twice, Conv2DTranspose back. An odd input
// size makes TF's "same" padding asymmetric (the extra row and column at the bottom/right).
function autoencoder() {
  const m = tf.sequential({name: 'autoencoder'});
  m.add(L.conv2d({name: 'enc1', inputShape: [15, 17, 3], filters: 8, kernelSize: 4, strides: 2,
                  padding: 'same', activation: 'relu'}));
  m.add(L.conv2d({name: 'enc2', filters: 16, kernelSize: 4, strides: 2, padding: 'same',
                  activation: 'relu'}));
  m.add(L.conv2dTranspose({name: 'dec1', filters: 8, kernelSize: 4, strides: 2, padding: 'same',
                           activation: 'relu'}));
  m.add(L.conv2dTranspose({name: 'dec2', filters: 3, kernelSize: 4, strides: 2, padding: 'same',
                           activation: 'sigmoid'}));
  return m;
}

// The DCGAN generator (z → 32×32 RGB), small widths, in either data format.
function dcgan(dataFormat) {
  const first = dataFormat === 'channelsFirst';
  const m = tf.sequential({name: first ? 'dcgan_channels_first' : 'dcgan'});
  const common = {kernelSize: 4, useBias: false, dataFormat};
  const widths = [16, 8, 4];
  widths.forEach((filters, i) => {
    const options = i === 0 ?
        {inputShape: first ? [8, 1, 1] : [1, 1, 8], strides: 1, padding: 'valid'} :
        {strides: 2, padding: 'same'};
    m.add(L.conv2dTranspose({name: `g${i + 1}`, filters, ...common, ...options}));
    m.add(L.batchNormalization({name: `bn${i + 1}`, axis: first ? 1 : -1, epsilon: 1e-3}));
    m.add(i === 1 ? L.reLU({name: `relu${i + 1}`}) :
        L.activation({name: `relu${i + 1}`, activation: 'relu'}));
  });
  m.add(L.conv2dTranspose({name: 'g4', filters: 3, strides: 2, padding: 'same',
                           activation: 'tanh', ...common}));
  return m;
}

// MobileNet-style: strided conv + BN + ReLU6, depthwise/pointwise, a strided SeparableConv2D,
// a DepthwiseConv2D with a depth multiplier, a dilated SeparableConv2D, ZeroPadding2D,
// "same" pools, a softmax head. TF.js 4.22 quirks this avoids: SeparableConv2D does not
// save its depth_multiplier (a multiplier other than 1 cannot be re-loaded), and
// DepthwiseConv2D ignores dilation_rate (glcnn refuses that combination).
function mobilenet() {
  const m = tf.sequential({name: 'mobilenet'});
  m.add(L.conv2d({name: 'conv1', inputShape: [17, 17, 3], filters: 8, kernelSize: 3,
                  strides: 2, padding: 'same', useBias: false}));
  m.add(L.batchNormalization({name: 'bn1'}));
  m.add(L.reLU({name: 'relu6_1', maxValue: 6}));
  m.add(L.depthwiseConv2d({name: 'dw1', kernelSize: 3, padding: 'same', useBias: false}));
  m.add(L.batchNormalization({name: 'bn2'}));
  m.add(L.activation({name: 'relu6_2', activation: 'relu6'}));
  m.add(L.conv2d({name: 'pw1', filters: 16, kernelSize: 1, activation: 'relu'}));
  m.add(L.separableConv2d({name: 'sep1', filters: 16, kernelSize: 3, strides: 2,
                           padding: 'same', activation: 'relu'}));
  m.add(L.depthwiseConv2d({name: 'dw2', kernelSize: 3, padding: 'same', depthMultiplier: 2,
                           activation: 'relu6'}));
  m.add(L.separableConv2d({name: 'sep2', filters: 24, kernelSize: 3, dilationRate: 2,
                           padding: 'same', activation: 'relu'}));
  m.add(L.zeroPadding2d({name: 'pad', padding: [[1, 0], [0, 1]]}));
  m.add(L.averagePooling2d({name: 'avg', poolSize: 3, strides: 2, padding: 'same'}));
  m.add(L.maxPooling2d({name: 'max', poolSize: 2, strides: 1, padding: 'same'}));
  m.add(L.globalAveragePooling2d({name: 'gap'}));
  m.add(L.dropout({name: 'drop', rate: 0.5}));
  m.add(L.dense({name: 'logits', units: 10, activation: 'softmax'}));
  return m;
}

// A functional graph with skips: Add and Concatenate (with the input itself), LeakyReLU,
// a dilated "valid" conv, Cropping2D, bilinear UpSampling2D, a sigmoid gate (Multiply),
// PReLU shared over H and W, ELU (TF.js supports only alpha = 1), an odd-kernel strided Conv2DTranspose (output 1), and
// Flatten → Dropout → Dense → Dense on a channels_last map (output 2, TF's H,W,C order).
function skips() {
  const x = L.input({name: 'image', shape: [16, 16, 4]});
  const a = L.conv2d({name: 'a', filters: 8, kernelSize: 3, padding: 'same', activation: 'relu'})
      .apply(x);
  const b = L.conv2d({name: 'b', filters: 8, kernelSize: 3, padding: 'same'}).apply(a);
  const sum = L.add({name: 'sum'}).apply([a, b]);
  const leaky = L.leakyReLU({name: 'leaky', alpha: 0.2}).apply(sum);
  const c = L.conv2d({name: 'c', filters: 4, kernelSize: 1}).apply(leaky);
  const cat = L.concatenate({name: 'cat', axis: -1}).apply([leaky, c, x]);
  const pool = L.maxPooling2d({name: 'pool', poolSize: 2}).apply(cat);
  const dil = L.conv2d({name: 'dil', filters: 6, kernelSize: 3, dilationRate: 2})
      .apply(pool);
  const crop = L.cropping2D({name: 'crop', cropping: [[1, 0], [0, 1]]}).apply(dil);
  const up = L.upSampling2d({name: 'up', size: [2, 3], interpolation: 'bilinear'}).apply(crop);
  const gate = L.conv2d({name: 'gate', filters: 6, kernelSize: 1, activation: 'sigmoid'})
      .apply(up);
  const gated = L.multiply({name: 'gated'}).apply([up, gate]);
  const prelu = L.prelu({name: 'prelu', sharedAxes: [1, 2]}).apply(gated);
  const elu = L.elu({name: 'elu'}).apply(prelu);
  const up3 = L.conv2dTranspose({name: 'up3', filters: 5, kernelSize: 3, strides: 2,
                                 padding: 'same'}).apply(elu);
  const flat = L.flatten({name: 'flat'}).apply(elu);
  const drop = L.dropout({name: 'drop', rate: 0.3}).apply(flat);
  const fc1 = L.dense({name: 'fc1', units: 8, activation: 'swish'}).apply(drop);
  const probs = L.dense({name: 'probs', units: 3, activation: 'softmax'}).apply(fc1);
  return tf.model({name: 'skips', inputs: x, outputs: [up3, probs]});
}

const ACTIVATIONS = ['relu', 'relu6', 'elu', 'selu', 'sigmoid', 'hardSigmoid', 'tanh',
                     'softmax', 'swish', 'linear'];

// Every activation (as Activation layers and as ReLU/LeakyReLU/ELU/Softmax layers) on one
// feature map, concatenated; then a squeeze-excitation (GlobalAveragePooling2D, a no-op
// Reshape, a 1×1 conv, a broadcast Multiply), nearest UpSampling2D, and GlobalMaxPooling2D.
function activations() {
  const x = L.input({name: 'x', shape: [5, 6, 3]});
  const stem = L.conv2d({name: 'stem', filters: 4, kernelSize: 3, padding: 'same'}).apply(x);
  const branches = ACTIVATIONS.map((activation) =>
    L.activation({name: `act_${activation}`, activation}).apply(stem));
  branches.push(L.reLU({name: 'relu_max', maxValue: 1.5}).apply(stem));
  branches.push(L.leakyReLU({name: 'leaky_default'}).apply(stem));
  branches.push(L.elu({name: 'elu_layer'}).apply(stem));
  branches.push(L.softmax({name: 'softmax_layer', axis: -1}).apply(stem));
  const cat = L.concatenate({name: 'all'}).apply(branches);
  const squeeze = L.globalAveragePooling2d({name: 'squeeze'}).apply(cat);
  const column = L.reshape({name: 'column', targetShape: [1, 1, 4 * branches.length]})
      .apply(squeeze);
  const excite = L.conv2d({name: 'excite', filters: 4 * branches.length, kernelSize: 1,
                           activation: 'sigmoid'}).apply(column);
  const scaled = L.multiply({name: 'scaled'}).apply([cat, excite]);
  const up = L.upSampling2d({name: 'up', size: [2, 2]}).apply(scaled);
  const gmax = L.globalMaxPooling2d({name: 'gmax'}).apply(up);
  return tf.model({name: 'activations', inputs: x, outputs: [up, gmax]});
}

// The autoencoder shape with weights stored as the converter's quantized dtypes: uint8
// kernels and biases, one uint16 kernel, one float16 kernel, one bias left float32.
function quantizedDtype(name) {
  if (name === 'dec1/kernel') return 'uint16';
  if (name === 'dec2/kernel') return 'float16';
  if (name === 'dec2/bias') return 'float32';
  return 'uint8';
}

async function buildCase(name, model, seed, saveOptions = {}) {
  lib.seedWeights(model, seed);
  return lib.saveCase(name, model, saveOptions);
}

// tfjs issue #1106: the channels_first twin of the DCGAN, with the same weights. The cpu
// backend's BatchNorm cycles the (1, C, 1, 1) statistics as if they ran along the last axis,
// so its output is wrong; the correct output is the channels_last model's, transposed.
async function channelsFirstCase(twin, twinOutput, z) {
  const model = dcgan('channelsFirst');
  model.setWeights(twin.getWeights());
  const dir = await lib.saveCase('dcgan_channels_first', model, {shardBytes: 2048});
  const zFirst = z.reshape([1, 8, 1, 1]);
  const correct = twinOutput.transpose([0, 3, 1, 2]);
  const {ys} = await lib.recordCase(dir, {g1_input: zFirst}, {
    layout: 'NCHW', outputs: {g4: correct},
    notes: 'output_g4.npy is the channels_last twin (tests/data/tfjs/dcgan, same weights) ' +
        'transposed to NCHW; output_tfjs_cpu.npy is what the TF.js cpu backend returns for ' +
        'this channels_first model (wrong: tfjs issue #1106)'});
  const wrong = ys[0];
  await writeTensor(path.join(dir, 'output_tfjs_cpu.npy'), wrong);
  const gap = wrong.sub(correct).abs().max().dataSync()[0];
  console.log(`dcgan_channels_first: TF.js cpu is off by up to ${gap.toFixed(3)} (#1106)`);
}

async function main() {
  await tf.setBackend('cpu');
  const cases = [
    ['autoencoder', autoencoder(), 1, {}, {enc1_input: input([15, 17, 3], 101)}],
    ['mobilenet', mobilenet(), 3, {groups: 2, shardBytes: 1024},
     {conv1_input: input([17, 17, 3], 103)}],
    ['skips', skips(), 4, {wrap: true}, {image: input([16, 16, 4], 104)}],
    ['activations', activations(), 5, {}, {x: input([5, 6, 3], 105, 3)}],
    ['quantized', autoencoder(), 6, {groups: (a) => lib.quantizedGroups(a, quantizedDtype)},
     {enc1_input: input([15, 17, 3], 106)}],
  ];
  for (const [name, model, seed, options, inputs] of cases) {
    const dir = await buildCase(name, model, seed, options);
    await lib.recordCase(dir, inputs);
    console.log(`${name}: written`);
  }
  const z = input([1, 1, 8], 102);
  const dir = await buildCase('dcgan', dcgan('channelsLast'), 2, {shardBytes: 2048});
  const {model, ys} = await lib.recordCase(dir, {g1_input: z});
  await channelsFirstCase(model, ys[0], z);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
