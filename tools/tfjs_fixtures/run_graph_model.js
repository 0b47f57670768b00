// Runs a TF.js graph model (a folder with model.json and its shards) on one .npy input with
// the cpu backend and writes its first output as .npy:
//
//   node run_graph_model.js MODEL_DIR INPUT.npy OUTPUT.npy
//
// tests/importers/test_tfjs_graph.py uses it for TF.js's own output of a model from npm.
'use strict';

const tf = require('@tensorflow/tfjs');
const {readNpy, writeTensor} = require('./tfjs_files');
const {loadGraphDir} = require('./graph_files');

async function main([dir, input, output]) {
  if (!output) throw new Error('usage: node run_graph_model.js MODEL_DIR INPUT.npy OUTPUT.npy');
  await tf.setBackend('cpu');
  const model = await loadGraphDir(dir);
  const y = model.predict(readNpy(input));
  await writeTensor(output, Array.isArray(y) ? y[0] : y);
}

main(process.argv.slice(2)).catch((err) => {
  console.error(err.message || err);
  process.exit(1);
});
