// Files shared by make_fixtures.js and run_layers_model.js: .npy arrays (float32, written
// and read by hand: a 10-byte preamble, a Python-dict header padded to 64 bytes, raw data)
// and TF.js layers models as a directory of model.json + *.bin weight shards.
'use strict';

const fs = require('fs');
const path = require('path');
const tf = require('@tensorflow/tfjs');

// --- .npy ------------------------------------------------------------------------------
function writeNpy(file, shape, values) {
  const data = Float32Array.from(values);
  const dims = shape.length === 1 ? `${shape[0]},` : shape.join(', ');
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${dims}), }`;
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';
  const preamble = Buffer.alloc(10);
  preamble.write('\x93NUMPY', 0, 'latin1');
  preamble[6] = 1;  // format version 1.0
  preamble.writeUInt16LE(header.length, 8);
  fs.writeFileSync(file, Buffer.concat([preamble, Buffer.from(header, 'latin1'),
                                        Buffer.from(data.buffer)]));
}

function readNpy(file) {
  const bytes = fs.readFileSync(file);
  if (bytes.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${file}: not .npy`);
  const length = bytes.readUInt16LE(8);
  const header = bytes.toString('latin1', 10, 10 + length);
  if (!header.includes("'<f4'") || header.includes("'fortran_order': True")) {
    throw new Error(`${file}: expected a C-order little-endian float32 array: ${header}`);
  }
  const shape = header.match(/\(([^)]*)\)/)[1].split(',').filter((s) => s.trim())
      .map(Number);
  const data = bytes.subarray(10 + length);
  const values = new Float32Array(data.buffer.slice(data.byteOffset,
                                                    data.byteOffset + data.length));
  return tf.tensor(values, shape);
}

async function writeTensor(file, tensor) {
  writeNpy(file, tensor.shape, await tensor.data());
}

// --- layers models on disk ----------------------------------------------------------------
// `groups` lists manifest groups as {weights: [spec...], data: Uint8Array}; each group's
// bytes are split into shards of at most `shardBytes` (as tfjs-converter does at 4 MB).
function writeModelDir(dir, modelTopology, groups, shardBytes) {
  fs.mkdirSync(dir, {recursive: true});
  const weightsManifest = groups.map((group, g) => {
    const count = Math.max(1, Math.ceil(group.data.length / shardBytes));
    const paths = [];
    for (let s = 0; s < count; s++) {
      const name = `group${g + 1}-shard${s + 1}of${count}.bin`;
      fs.writeFileSync(path.join(dir, name),
                       group.data.subarray(s * shardBytes, (s + 1) * shardBytes));
      paths.push(name);
    }
    return {paths, weights: group.weights};
  });
  const model = {format: 'layers-model', generatedBy: `TensorFlow.js tfjs-layers v${tf.version.tfjs}`,
                 convertedBy: null, modelTopology, weightsManifest};
  fs.writeFileSync(path.join(dir, 'model.json'), JSON.stringify(model));
}

// A TF.js IOHandler reading a model directory (layers or graph model) the way TF.js reads URLs:
// every group's shards concatenated in manifest order, then decoded by TF.js itself
// (including uint8/uint16/float16 dequantization).
function dirHandler(dir) {
  return {
    load: async () => {
      const model = JSON.parse(fs.readFileSync(path.join(dir, 'model.json'), 'utf8'));
      const buffers = [];
      const weightSpecs = [];
      for (const group of model.weightsManifest) {
        for (const shard of group.paths) buffers.push(fs.readFileSync(path.join(dir, shard)));
        weightSpecs.push(...group.weights);
      }
      const all = Buffer.concat(buffers);
      const weightData = all.buffer.slice(all.byteOffset, all.byteOffset + all.length);
      return {modelTopology: model.modelTopology, weightSpecs, weightData,
              format: model.format, userDefinedMetadata: model.userDefinedMetadata,
              signature: model.signature};
    },
  };
}

async function loadModelDir(dir) {
  return tf.loadLayersModel(dirHandler(dir));
}

module.exports = {writeNpy, readNpy, writeTensor, writeModelDir, loadModelDir, dirHandler};
