// The page side of the TF.js benchmark: builds glcnn's reference models from the weights that
// run_tfjs.py wrote (NHWC, TF.js filter layouts), checks the output against the PyTorch (or
// numpy) reference, then times them. runner.js loads this page in headless Chromium and calls
// window.runBench(cfg) once per browser (one backend per browser).
/* global tf */
'use strict';

function log(msg) {
  console.log(msg);
  document.getElementById('log').textContent += msg + '\n';
}

// PyTorch Conv2d(k=4, s=2, p=1) on an even size == TF 'same' (total pad 2, split 1/1), and
// ConvTranspose2d(k=4, s=2, p=1) == conv2dTranspose 'same' with output = 2 × input (its
// gradient). ConvTranspose2d(k=4, s=1, p=0) on 1×1 == conv2dTranspose 'valid' → 4×4. The
// numerical check against the reference (below) is what proves it.
const ARCHS = {
  // Conv 4×4 s2 3→64 ReLU, Conv 4×4 s2 64→256 ReLU, ConvT 256→64 ReLU, ConvT 64→3 Sigmoid.
  // The convs use tf.fused.conv2d (bias + ReLU fused), as tf.layers' Conv2D does.
  autoencoder(w, x) {
    const [n, h, wd] = x.shape;
    let y = tf.fused.conv2d({x, filter: w['enc1.weight'], strides: 2, pad: 'same',
                             bias: w['enc1.bias'], activation: 'relu'});
    y = tf.fused.conv2d({x: y, filter: w['enc2.weight'], strides: 2, pad: 'same',
                         bias: w['enc2.bias'], activation: 'relu'});
    y = tf.conv2dTranspose(y, w['dec1.weight'], [n, h / 2, wd / 2, 64], 2, 'same');
    y = tf.relu(tf.add(y, w['dec1.bias']));
    y = tf.conv2dTranspose(y, w['dec2.weight'], [n, h, wd, 3], 2, 'same');
    return tf.sigmoid(tf.add(y, w['dec2.bias']));
  },
  // The DCGAN generator as a TF.js model runs it: ConvT, a separate batchNorm op, ReLU.
  dcgan(w, z) {
    let y = z, size = 1;
    for (const i of [0, 3, 6, 9]) {
      const filter = w[`main.${i}.weight`];  // [4, 4, out, in]
      const first = i === 0;
      size = first ? 4 : size * 2;
      y = tf.conv2dTranspose(y, filter, [1, size, size, filter.shape[2]], first ? 1 : 2,
                             first ? 'valid' : 'same');
      const bn = `main.${i + 1}`;
      y = tf.relu(tf.batchNorm(y, w[`${bn}.running_mean`], w[`${bn}.running_var`],
                               w[`${bn}.bias`], w[`${bn}.weight`], 1e-5));
    }
    y = tf.conv2dTranspose(y, w['main.12.weight'], [1, size * 2, size * 2, 3], 2, 'same');
    return tf.tanh(y);
  },
  // The same generator with BatchNorm folded into the ConvT weights and a bias (what a
  // graph-model conversion with BN folding, or glcnn's optimize(), runs).
  dcgan_folded(w, z) {
    let y = z, size = 1;
    for (const i of [0, 3, 6, 9]) {
      const filter = w[`main.${i}.weight`];
      const first = i === 0;
      size = first ? 4 : size * 2;
      y = tf.conv2dTranspose(y, filter, [1, size, size, filter.shape[2]], first ? 1 : 2,
                             first ? 'valid' : 'same');
      y = tf.relu(tf.add(y, w[`main.${i}.bias`]));
    }
    y = tf.conv2dTranspose(y, w['main.12.weight'], [1, size * 2, size * 2, 3], 2, 'same');
    return tf.tanh(y);
  },
};

function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function glInfo() {
  const gl = tf.backend().gpgpu && tf.backend().gpgpu.gl;
  if (!gl) return {};
  const ext = gl.getExtension('WEBGL_debug_renderer_info');
  return {
    webgl_renderer: ext ? gl.getParameter(ext.UNMASKED_RENDERER_WEBGL) : gl.getParameter(gl.RENDERER),
    webgl_vendor: ext ? gl.getParameter(ext.UNMASKED_VENDOR_WEBGL) : gl.getParameter(gl.VENDOR),
    webgl_version_string: gl.getParameter(gl.VERSION),
    tfjs_webgl_version: tf.env().getNumber('WEBGL_VERSION'),
    render_float32: tf.env().getBool('WEBGL_RENDER_FLOAT32_ENABLED'),
    pack: tf.env().getBool('WEBGL_PACK'),
  };
}

async function setup(cfg) {
  if (cfg.backend === 'wasm') {
    tf.wasm.setWasmPaths(cfg.wasmPath);
    // wasmThreads: null = TF.js's default (the threaded SIMD binary when cross-origin isolated,
    // with min(8, navigator.hardwareConcurrency / 2) threads, so 1 on a 2-core machine);
    // 1 = the SIMD binary without threads; n > 1 = setThreadsCount(n) (runner.js raises
    // navigator.hardwareConcurrency so that TF.js's cores / 2 cap lets n through).
    if (cfg.wasmThreads === 1) {
      tf.env().set('WASM_HAS_MULTITHREAD_SUPPORT', false);
    } else if (cfg.wasmThreads > 1) {
      tf.wasm.setThreadsCount(cfg.wasmThreads);
    }
  }
  if (!(await tf.setBackend(cfg.backend))) throw new Error(`tf.setBackend('${cfg.backend}') failed`);
  await tf.ready();
  const info = {
    tfjs: tf.version.tfjs, backend: tf.getBackend(), user_agent: navigator.userAgent,
    hardware_concurrency: navigator.hardwareConcurrency, cross_origin_isolated: crossOriginIsolated,
  };
  if (cfg.backend === 'webgl') Object.assign(info, glInfo());
  if (cfg.backend === 'wasm') {
    const simd = await tf.env().getAsync('WASM_HAS_SIMD_SUPPORT');
    const threads = await tf.env().getAsync('WASM_HAS_MULTITHREAD_SUPPORT');
    Object.assign(info, {
      wasm_simd: simd, wasm_multithread: threads, wasm_threads: tf.wasm.getThreadsCount(),
      wasm_binary: threads && simd ? 'tfjs-backend-wasm-threaded-simd.wasm'
        : simd ? 'tfjs-backend-wasm-simd.wasm' : 'tfjs-backend-wasm.wasm',
      tfjs_backend_wasm: tf.wasm.version_wasm,
    });
  }
  return info;
}

async function loadModel(cfg, spec) {
  const buf = await (await fetch(cfg.dataUrl + spec.file)).arrayBuffer();
  const all = new Float32Array(buf);
  const arrays = {};
  for (const [name, t] of Object.entries(spec.tensors)) {
    const size = t.shape.reduce((a, b) => a * b, 1);
    arrays[name] = {data: all.subarray(t.offset, t.offset + size), shape: t.shape};
  }
  return arrays;
}

async function benchModel(cfg, name, spec) {
  const arrays = await loadModel(cfg, spec);
  const weights = {};
  for (const [k, a] of Object.entries(arrays)) {
    if (k !== 'input' && k !== 'reference') weights[k] = tf.tensor(a.data, a.shape);
  }
  const input = arrays.input;
  const forward = ARCHS[spec.arch];
  const tensorsBefore = tf.memory().numTensors;
  // One timed call: upload of the input, the model, readback of the output to JS.
  const once = async () => {
    const start = performance.now();
    const y = tf.tidy(() => forward(weights, tf.tensor(input.data, input.shape)));
    const out = await y.data();
    const ms = performance.now() - start;
    const shape = y.shape;
    y.dispose();
    return {ms, out, shape};
  };
  const result = {arch: spec.arch};
  try {
    const first = await once();
    result.first_ms = first.ms;
    result.output_shape = first.shape;
    const ref = arrays.reference;
    if (JSON.stringify(first.shape) !== JSON.stringify(ref.shape)) {
      throw new Error(`output shape ${JSON.stringify(first.shape)} != reference ${JSON.stringify(ref.shape)}`);
    }
    let diff = 0;
    for (let i = 0; i < ref.data.length; i++) {
      const d = Math.abs(first.out[i] - ref.data[i]);
      if (!(d <= diff)) diff = d;  // NaN propagates
    }
    result.max_abs_diff = diff;
    log(`${name} ${cfg.label}: shape ${JSON.stringify(first.shape)}, first run ${first.ms.toFixed(1)} ms, max |tfjs - ref| = ${diff.toExponential(2)}`);
    if (!(diff <= cfg.tolerance)) {
      throw new Error(`max abs diff ${diff} > ${cfg.tolerance}: refusing to time a wrong computation`);
    }
    const deadline = performance.now() + cfg.budgetMs;
    for (let i = 0; i < cfg.warmup; i++) {
      await once();
      if (performance.now() > deadline) break;
    }
    const times = [];
    while (times.length < cfg.runs && (times.length < cfg.minRuns || performance.now() < deadline)) {
      times.push((await once()).ms);
    }
    Object.assign(result, {
      median_ms: median(times), min_ms: Math.min(...times), mean_ms: times.reduce((a, b) => a + b, 0) / times.length,
      max_ms: Math.max(...times), runs: times.length, times_ms: times,
    });
    log(`${name} ${cfg.label}: median ${result.median_ms.toFixed(2)} ms, min ${result.min_ms.toFixed(2)} ms over ${times.length} runs`);
  } catch (e) {
    result.error = String(e && e.message || e);
    log(`${name} ${cfg.label}: ERROR ${result.error}`);
  }
  result.leaked_tensors = tf.memory().numTensors - tensorsBefore;
  for (const t of Object.values(weights)) t.dispose();
  return result;
}

window.runBench = async function runBench(cfg) {
  const info = await setup(cfg);
  log(`${cfg.label}: ${JSON.stringify(info)}`);
  const manifest = await (await fetch(cfg.dataUrl + 'manifest.json')).json();
  const models = {};
  for (const name of cfg.models) {
    if (!manifest.models[name]) throw new Error(`model ${name} not in manifest`);
    models[name] = await benchModel(cfg, name, manifest.models[name]);
  }
  return {info, models};
};
window.benchReady = typeof tf !== 'undefined' && typeof tf.wasm !== 'undefined';
