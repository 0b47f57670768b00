#!/usr/bin/env node
// Serves bench.html + the npm packages + the weights from 127.0.0.1, then, for each backend
// configuration, launches a fresh headless Chromium (puppeteer-core), loads the page and calls
// window.runBench(cfg). Prints one JSON document on stdout; progress goes to stderr.
//
//   node runner.js --modules DIR/node_modules --data DATA_DIR [--chromium /usr/bin/chromium]
//       [--configs webgl,webgl-llvmpipe,wasm,wasm-threads,wasm-1thread,cpu] [--models autoencoder,dcgan]
//       [--runs 30] [--warmup 5] [--budget 120] [--tolerance 1e-3] [--timeout 1800]
//
// Normally run through run_tfjs.py, which installs the packages and writes DATA_DIR.
'use strict';

const fs = require('fs');
const http = require('http');
const os = require('os');
const path = require('path');

const HERE = __dirname;
let currentBrowser = null;  // killed on the overall timeout

// puppeteer starts Chromium in its own process group: SIGKILL that whole group.
function killBrowser(browser) {
  const proc = browser && browser.process();
  if (!proc || proc.exitCode !== null) return;
  try {
    process.kill(-proc.pid, 'SIGKILL');
  } catch (e) {
    proc.kill('SIGKILL');
  }
}
const COMMON_FLAGS = [
  '--no-sandbox', '--disable-quic', '--no-first-run', '--no-default-browser-check',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--disable-default-apps', '--disable-extensions', '--mute-audio', '--disable-breakpad',
  '--disable-background-timer-throttling', '--disable-renderer-backgrounding',
  '--disable-backgrounding-occluded-windows', '--metrics-recording-only',
];
// WebGL on SwiftShader (Chromium's own software Vulkan, through ANGLE): the default WebGL of
// a GPU-less headless Chromium, made explicit.
const SWIFTSHADER = ['--use-gl=angle', '--use-angle=swiftshader', '--enable-unsafe-swiftshader',
                     '--ignore-gpu-blocklist'];
// WebGL through ANGLE on the system's EGL, i.e. Mesa llvmpipe: the same GL driver glcnn uses.
const LLVMPIPE = ['--use-gl=angle', '--use-angle=gl-egl', '--ignore-gpu-blocklist'];

const CONFIGS = {
  webgl: {backend: 'webgl', flags: SWIFTSHADER, expectRenderer: /swiftshader/i},
  'webgl-llvmpipe': {backend: 'webgl', flags: LLVMPIPE, expectRenderer: /llvmpipe/i},
  // TF.js's default: the threaded SIMD binary (the page is cross-origin isolated) with
  // min(8, hardwareConcurrency / 2) threads: 1 on a 2-core machine.
  wasm: {backend: 'wasm', flags: SWIFTSHADER, wasmThreads: null},
  // One thread per core: navigator.hardwareConcurrency is overridden (CDP) to 2 × cores so
  // that TF.js's cores / 2 cap allows setThreadsCount(cores).
  'wasm-threads': {backend: 'wasm', flags: SWIFTSHADER, wasmThreads: 'cores'},
  'wasm-1thread': {backend: 'wasm', flags: SWIFTSHADER, wasmThreads: 1},  // SIMD, no threads
  cpu: {backend: 'cpu', flags: SWIFTSHADER},
};

function parseArgs(argv) {
  const args = {
    modules: null, data: null, chromium: process.env.CHROMIUM || '/usr/bin/chromium',
    configs: 'webgl,webgl-llvmpipe,wasm,wasm-threads,wasm-1thread,cpu', models: 'autoencoder,dcgan,dcgan_folded',
    runs: 30, warmup: 5, budget: 120, tolerance: 1e-3, timeout: 1800, minRuns: 3,
  };
  for (let i = 2; i < argv.length; i++) {
    const key = argv[i].replace(/^--/, '').replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    if (!(key in args)) throw new Error(`unknown option ${argv[i]}`);
    const value = argv[++i];
    if (value === undefined) throw new Error(`${argv[i - 1]} needs a value`);
    args[key] = typeof args[key] === 'number' ? Number(value) : value;
  }
  if (!args.modules || !args.data) throw new Error('--modules and --data are required');
  return args;
}

const TYPES = {'.html': 'text/html', '.js': 'application/javascript', '.wasm': 'application/wasm',
               '.json': 'application/json', '.bin': 'application/octet-stream',
               '.map': 'application/json'};

// Static files, cross-origin isolated (COOP/COEP) so that the wasm backend may use threads.
function serve(args) {
  const roots = {'/modules/': args.modules, '/data/': args.data, '/': HERE};
  const server = http.createServer((req, res) => {
    const url = decodeURIComponent(new URL(req.url, 'http://localhost').pathname);
    const prefix = Object.keys(roots).find((p) => url.startsWith(p));
    const root = path.resolve(roots[prefix]);
    const file = path.resolve(root, url.slice(prefix.length) || 'bench.html');
    const headers = {'Cross-Origin-Opener-Policy': 'same-origin',
                     'Cross-Origin-Embedder-Policy': 'require-corp',
                     'Cross-Origin-Resource-Policy': 'same-origin', 'Cache-Control': 'no-store'};
    if (!file.startsWith(root + path.sep) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404, headers).end('not found');
      return;
    }
    headers['Content-Type'] = TYPES[path.extname(file)] || 'application/octet-stream';
    res.writeHead(200, headers);
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((resolve, reject) => {
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

async function runConfig(puppeteer, args, base, name) {
  const config = CONFIGS[name];
  if (!config) throw new Error(`unknown config ${name} (known: ${Object.keys(CONFIGS)})`);
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'glcnn-tfjs-chromium-'));
  let browser;
  try {
    try {
      browser = await puppeteer.launch({
        executablePath: args.chromium, headless: true, userDataDir, timeout: 60000,
        protocolTimeout: args.timeout * 1000, args: [...COMMON_FLAGS, ...config.flags],
        pipe: true,
      });
    } catch (e) {
      throw new Error(`Chromium (${args.chromium}) did not start: ${e.message}`);
    }
    currentBrowser = browser;
    const version = await browser.version();
    const page = await browser.newPage();
    let wasmThreads = config.wasmThreads;
    if (wasmThreads === 'cores') {
      wasmThreads = os.availableParallelism ? os.availableParallelism() : os.cpus().length;
      const cdp = await page.createCDPSession();
      await cdp.send('Emulation.setHardwareConcurrencyOverride',
                     {hardwareConcurrency: 2 * wasmThreads});
    }
    page.on('console', (m) => process.stderr.write(`[${name}] ${m.text()}\n`));
    page.on('pageerror', (e) => process.stderr.write(`[${name}] page error: ${e.message}\n`));
    await page.goto(`${base}/bench.html`, {waitUntil: 'load', timeout: 60000});
    if (!(await page.evaluate(() => window.benchReady === true))) {
      throw new Error('the page did not load tf.min.js / tf-backend-wasm.min.js');
    }
    const cfg = {
      label: name, backend: config.backend, wasmThreads,
      wasmPath: `${base}/modules/@tensorflow/tfjs-backend-wasm/dist/`, dataUrl: `${base}/data/`,
      models: args.models.split(','), runs: args.runs, warmup: args.warmup,
      minRuns: args.minRuns, budgetMs: args.budget * 1000, tolerance: args.tolerance,
    };
    const result = await page.evaluate((c) => window.runBench(c), cfg);
    result.chromium = version;
    result.flags = config.flags;
    if (config.expectRenderer && !config.expectRenderer.test(result.info.webgl_renderer || '')) {
      result.warning = `WebGL renderer ${JSON.stringify(result.info.webgl_renderer)} does not ` +
                       `match ${config.expectRenderer}`;
      process.stderr.write(`[${name}] WARNING: ${result.warning}\n`);
    }
    return result;
  } finally {
    if (browser) {
      currentBrowser = null;
      await Promise.race([browser.close().catch(() => {}),
                          new Promise((r) => setTimeout(r, 10000))]);
      killBrowser(browser);
    }
    fs.rmSync(userDataDir, {recursive: true, force: true});
  }
}

async function main() {
  const args = parseArgs(process.argv);
  const hardStop = setTimeout(() => {
    process.stderr.write(`runner.js: overall timeout of ${args.timeout} s reached\n`);
    killBrowser(currentBrowser);
    process.exit(3);
  }, args.timeout * 1000);
  hardStop.unref();
  if (!fs.existsSync(args.chromium)) throw new Error(`Chromium not found at ${args.chromium}`);
  const puppeteer = require(require.resolve('puppeteer-core', {paths: [args.modules]}));
  const tfjsVersion = require(path.join(args.modules, '@tensorflow/tfjs/package.json')).version;
  const server = await serve(args);
  const base = `http://127.0.0.1:${server.address().port}`;
  const out = {tfjs: tfjsVersion, node: process.version, configs: {}};
  try {
    for (const name of args.configs.split(',')) {
      process.stderr.write(`[${name}] launching Chromium\n`);
      try {
        out.configs[name] = await runConfig(puppeteer, args, base, name);
      } catch (e) {
        process.stderr.write(`[${name}] ERROR: ${e.message}\n`);
        out.configs[name] = {error: e.message};
      }
    }
  } finally {
    server.close();
  }
  process.stdout.write(JSON.stringify(out) + '\n');
  const ok = Object.values(out.configs).some((c) => !c.error);
  process.exit(ok ? 0 : 2);
}

main().catch((e) => {
  process.stderr.write(`runner.js: ${e.stack || e}\n`);
  process.exit(1);
});
