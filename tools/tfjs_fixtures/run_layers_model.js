// Runs a TF.js layers model (a folder with model.json and its shards) on one .npy input
// with the cpu backend and writes the first output as .npy:
//
//   node run_layers_model.js MODEL_DIR INPUT.npy OUTPUT.npy
//
// tests/importers/test_tfjs_import.py uses it for TF.js's own output of a model fetched from npm.
'use strict';

const tf = require('@tensorflow/tfjs');
const {readNpy, writeTensor, loadModelDir} = require('./tfjs_files');

async function main([dir, input, output]) {
  if (!output) throw new Error('usage: node run_layers_model.js MODEL_DIR INPUT.npy OUTPUT.npy');
  await tf.setBackend('cpu');
  const model = await loadModelDir(dir);
  const y = model.predict(readNpy(input));
  await writeTensor(output, Array.isArray(y) ? y[0] : y);
}

main(process.argv.slice(2)).catch((err) => {
  console.error(err.message || err);
  process.exit(1);
});
