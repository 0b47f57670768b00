// Unpacks a TF.js model that an npm package ships as JavaScript modules (nsfwjs 4: the
// model.json object in model.min.js, each weight shard a base64 string in <shard>.min.js)
// into a plain folder of model.json + binary shards, as tf.loadGraphModel would fetch them:
//
//   node unpack_js_model.js PACKAGE_MODEL_DIR OUT_DIR
//
// Only `require`s the package's own files (each a UMD bundle exporting one value).
'use strict';

const fs = require('fs');
const path = require('path');

function main([src, out]) {
  if (!out) throw new Error('usage: node unpack_js_model.js PACKAGE_MODEL_DIR OUT_DIR');
  const model = require(path.resolve(src, 'model.min.js'));
  fs.mkdirSync(out, {recursive: true});
  for (const group of model.weightsManifest) {
    for (const shard of group.paths) {
      const text = require(path.resolve(src, `${shard}.min.js`));
      if (typeof text !== 'string') throw new Error(`${shard}.min.js: not a base64 string`);
      fs.writeFileSync(path.join(out, path.basename(shard)), Buffer.from(text, 'base64'));
    }
  }
  fs.writeFileSync(path.join(out, 'model.json'), JSON.stringify(model));
}

try {
  main(process.argv.slice(2));
} catch (err) {
  console.error(err.message || err);
  process.exit(1);
}
