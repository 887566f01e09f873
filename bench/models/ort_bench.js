#!/usr/bin/env node
// ONNX Runtime reference for bench/onnx_bench: steady-state CPU inference time of one model on
// one .npy input (f32, little-endian, C order), at each requested thread count.
//
//   node bench/models/ort_bench.js --model FILE.onnx --input NAME=FILE.npy [--threads 1,2]
//                                  [--warmup 5] [--reps 30] [--idle-ms 0] [--out FILE.npy]
//
// With --idle-ms N, the process sleeps N ms before each timed run, as a node's worker idles
// between tasks: caches then hold whatever else ran meanwhile (docs/PERFORMANCE.md, issue 17).
//
// Prints one JSON line: {"threads": {"1": {"median_ms": ..., "min_ms": ...}, ...}}. With --out,
// writes the first output (f32) as .npy so the caller can compare values.
//
// With --serve 1 (onnx_bench --pairs): one session at the first thread count, warmed up, then
// one line from stdin at a time: N runs N timed inferences and prints {"median_ms": ...,
// "min_ms": ...}; end of input ends the process. The caller times its own runs in between, so
// both sides see the same minutes of a noisy machine.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));

function parseArgs(argv) {
  const a = {threads: '1,2', warmup: '5', reps: '30', 'idle-ms': '0'};
  for (let i = 2; i + 1 < argv.length; i += 2) a[argv[i].replace(/^--/, '')] = argv[i + 1];
  if (!a.model || !a.input) throw new Error('usage: ort_bench.js --model FILE.onnx --input NAME=FILE.npy');
  return a;
}

// Only what onnx_bench writes: version 1.0 headers, '<f4', C order.
function readNpyF32(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(file + ': not an .npy file');
  const headerLen = buf.readUInt16LE(8);
  const header = buf.toString('latin1', 10, 10 + headerLen);
  if (!header.includes("'descr': '<f4'") || header.includes("'fortran_order': True")) {
    throw new Error(file + ': only little-endian f32 in C order is supported, header ' + header);
  }
  const shape = header.match(/'shape': \(([^)]*)\)/)[1].split(',').filter(s => s.trim()).map(Number);
  const start = 10 + headerLen;
  const data = new Float32Array(buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + buf.length));
  return {shape, data};
}

function writeNpyF32(file, dims, data) {
  let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims.join(', ') +
      (dims.length === 1 ? ',' : '') + '), }';
  const pad = 64 - ((10 + header.length + 1) % 64);
  header += ' '.repeat(pad % 64) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1;
  pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), Buffer.from(data.buffer, data.byteOffset, data.byteLength)]));
}

function median(v) {
  const s = [...v].sort((x, y) => x - y);
  return s[Math.floor((s.length - 1) / 2)];
}

async function timeRuns(session, feeds, reps, idleMs) {
  const times = [];
  for (let i = 0; i < reps; ++i) {
    if (idleMs > 0) await new Promise(resolve => setTimeout(resolve, idleMs));
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return {median_ms: median(times), min_ms: Math.min(...times)};
}

async function serve(a, feeds) {
  const t = Number(a.threads.split(',')[0]);
  const session = await ort.InferenceSession.create(a.model, {
    intraOpNumThreads: t, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all',
  });
  for (let i = 0; i < Number(a.warmup); ++i) await session.run(feeds);
  process.stdout.write(JSON.stringify({ready: true}) + '\n');
  const lines = require('readline').createInterface({input: process.stdin});
  for await (const line of lines) {
    const reps = Number(line.trim());
    if (!Number.isInteger(reps) || reps < 1) throw new Error('expected a number of runs, got ' + JSON.stringify(line));
    process.stdout.write(JSON.stringify(await timeRuns(session, feeds, reps, Number(a['idle-ms']))) + '\n');
  }
  await session.release();
}

async function main() {
  const a = parseArgs(process.argv);
  const [inputName, inputFile] = a.input.split('=');
  const x = readNpyF32(inputFile);
  const feeds = {[inputName]: new ort.Tensor('float32', x.data, x.shape)};
  if (a.serve === '1') return serve(a, feeds);
  const report = {ort_version: require(path.join(__dirname, 'node_modules', 'onnxruntime-node', 'package.json')).version, threads: {}};
  for (const t of a.threads.split(',').map(Number)) {
    // Sequential execution, as Consensor runs ops in canonical order; intra-op threads only.
    const session = await ort.InferenceSession.create(a.model, {
      intraOpNumThreads: t, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all',
    });
    for (let i = 0; i < Number(a.warmup); ++i) await session.run(feeds);
    report.threads[String(t)] = await timeRuns(session, feeds, Number(a.reps), Number(a['idle-ms']));
    if (a.out) {
      const out = await session.run(feeds);
      const first = out[session.outputNames[0]];
      writeNpyF32(a.out, first.dims, first.data);
    }
    await session.release();
  }
  process.stdout.write(JSON.stringify(report) + '\n');
}

main().catch(e => {
  process.stderr.write('ort_bench: ' + (e && e.message ? e.message : e) + '\n');
  process.exit(1);
});
