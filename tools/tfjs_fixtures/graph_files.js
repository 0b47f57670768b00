// TF.js graph models on disk, for make_graph_fixtures.js and run_graph_model.js: a small
// GraphDef builder writing model.json ("format": "graph-model", the GraphDef as protobuf
// JSON: string attributes base64, integers as strings) and one weight shard, and a loader
// that hands a model folder to tf.loadGraphModel through an IOHandler (as tf.io.http would).
'use strict';

const fs = require('fs');
const path = require('path');
const tf = require('@tensorflow/tfjs');
const {dirHandler} = require('./tfjs_files');

// --- attribute values as protobuf JSON ------------------------------------------------------
const b64 = (text) => Buffer.from(text, 'utf8').toString('base64');
const A = {
  s: (text) => ({s: b64(text)}),
  i: (n) => ({i: String(n)}),
  f: (x) => ({f: x}),
  b: (v) => ({b: v}),
  ints: (list) => ({list: {i: list.map(String)}}),
  strs: (list) => ({list: {s: list.map(b64)}}),
  type: (t) => ({type: t}),
  shape: (dims) => ({shape: {dim: dims.map((d) => ({size: String(d)}))}}),
};

// --- a GraphDef with its weights --------------------------------------------------------------
class GraphBuilder {
  constructor() {
    this.nodes = [];
    this.specs = [];
    this.parts = [];
  }

  node(name, op, input = [], attr = {}) {
    this.nodes.push({name, op, input, attr});
    return name;
  }

  input(name, shape) {
    return this.node(name, 'Placeholder', [], {shape: A.shape(shape), dtype: A.type('DT_FLOAT')});
  }

  // A Const whose value goes to the weights manifest (as tensorflowjs_converter writes it).
  constant(name, values, shape, dtype = 'float32') {
    const data = dtype === 'int32' ? Int32Array.from(values) : Float32Array.from(values);
    this.specs.push({name, shape, dtype});
    this.parts.push(Buffer.from(data.buffer));
    const dt = dtype === 'int32' ? 'DT_INT32' : 'DT_FLOAT';
    return this.node(name, 'Const', [], {
      value: {tensor: {dtype: dt, tensorShape: {dim: shape.map((d) => ({size: String(d)}))}}},
      dtype: A.type(dt)});
  }

  ints(name, values, shape = [values.length]) {
    return this.constant(name, values, shape, 'int32');
  }

  write(dir) {
    fs.mkdirSync(dir, {recursive: true});
    fs.writeFileSync(path.join(dir, 'group1-shard1of1.bin'), Buffer.concat(this.parts));
    const model = {
      format: 'graph-model', generatedBy: 'glcnn tools/tfjs_fixtures/make_graph_fixtures.js',
      convertedBy: null, modelTopology: {node: this.nodes, versions: {producer: 1}},
      weightsManifest: [{paths: ['group1-shard1of1.bin'], weights: this.specs}],
    };
    fs.writeFileSync(path.join(dir, 'model.json'), JSON.stringify(model));
  }
}

// --- loading and running ------------------------------------------------------------------------
async function loadGraphDir(dir) {
  return tf.loadGraphModel(dirHandler(dir));
}

module.exports = {A, GraphBuilder, loadGraphDir};
