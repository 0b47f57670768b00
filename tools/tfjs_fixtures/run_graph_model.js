// Runs a TF.js graph model (a folder with model.json and its shards) on one .npy input with
// the cpu backend and writes its first output as .npy; with OUTDIR, every output as
// OUTDIR/<i>.npy and their node names, in that order, as OUTDIR/names.json:
//
//   node run_graph_model.js MODEL_DIR INPUT.npy OUTPUT.npy [OUTDIR]
//
// tests/importers/test_tfjs_graph.py uses it for TF.js's own output of a model from npm.
'use strict';

const fs = require('fs');
const path = require('path');
const tf = require('@tensorflow/tfjs');
const {readNpy, writeTensor} = require('./tfjs_files');
const {loadGraphDir} = require('./graph_files');

async function main([dir, input, output, outdir]) {
  if (!output) {
    throw new Error('usage: node run_graph_model.js MODEL_DIR INPUT.npy OUTPUT.npy [OUTDIR]');
  }
  await tf.setBackend('cpu');
  const model = await loadGraphDir(dir);
  const names = model.outputNodes;
  let ys = model.execute(readNpy(input), names);
  ys = Array.isArray(ys) ? ys : [ys];
  await writeTensor(output, ys[0]);
  if (outdir) {
    fs.mkdirSync(outdir, {recursive: true});
    for (let i = 0; i < ys.length; i++) await writeTensor(path.join(outdir, `${i}.npy`), ys[i]);
    fs.writeFileSync(path.join(outdir, 'names.json'), JSON.stringify(names));
  }
}

main(process.argv.slice(2)).catch((err) => {
  console.error(err.message || err);
  process.exit(1);
});
