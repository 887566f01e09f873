#!/usr/bin/env node
// Runs one ONNX model once on ONNX Runtime (CPU, onnxruntime-node) and writes every output as
// DIR/NAME.npy, so scripts/ort_compare.py can compare it with `consensor run` on the same inputs.
//
//   node bench/models/ort_run.js --model FILE.onnx --out DIR [--input NAME=FILE.npy]...
//                                [--threads 1]
//
// Inputs and outputs are .npy (version 1.0, little-endian, C order) of dtype f32, f64, f16,
// i8, u8, i16, u16, i32, u32, i64, u64 or bool. Output file names replace every character
// outside [A-Za-z0-9._-] with '_', as `consensor run --out` does. Prints one JSON line:
// {"ort_version": ..., "outputs": {NAME: {"file": ..., "dtype": ..., "shape": [...]}}}.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));

// .npy descr <-> ONNX Runtime tensor type and typed array.
const DTYPES = [
  {descr: '<f4', ort: 'float32', array: Float32Array},
  {descr: '<f8', ort: 'float64', array: Float64Array},
  {descr: '<f2', ort: 'float16', array: Uint16Array},
  {descr: '|i1', ort: 'int8', array: Int8Array},
  {descr: '|u1', ort: 'uint8', array: Uint8Array},
  {descr: '<i2', ort: 'int16', array: Int16Array},
  {descr: '<u2', ort: 'uint16', array: Uint16Array},
  {descr: '<i4', ort: 'int32', array: Int32Array},
  {descr: '<u4', ort: 'uint32', array: Uint32Array},
  {descr: '<i8', ort: 'int64', array: BigInt64Array},
  {descr: '<u8', ort: 'uint64', array: BigUint64Array},
  {descr: '|b1', ort: 'bool', array: Uint8Array},
];

function parseArgs(argv) {
  const a = {threads: '1', inputs: []};
  for (let i = 2; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (i + 1 >= argv.length) throw new Error('--' + key + ' needs a value');
    if (key === 'input') a.inputs.push(argv[i + 1]);
    else if (['model', 'out', 'threads'].includes(key)) a[key] = argv[i + 1];
    else throw new Error('unknown option --' + key);
  }
  if (!a.model || !a.out) throw new Error('usage: ort_run.js --model FILE.onnx --out DIR [--input NAME=FILE.npy]...');
  return a;
}

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(file + ': not an .npy file');
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + headerLen;
  const header = buf.toString('latin1', start - headerLen, start);
  if (header.includes("'fortran_order': True")) throw new Error(file + ': Fortran order is not supported');
  const descr = (header.match(/'descr':\s*'([^']*)'/) || [])[1];
  const type = DTYPES.find(t => t.descr === descr || (t.descr[0] === '|' && '<' + t.descr.slice(1) === descr));
  if (!type) throw new Error(file + ': unsupported dtype ' + descr);
  const shape = header.match(/'shape':\s*\(([^)]*)\)/)[1].split(',').filter(s => s.trim()).map(Number);
  // Copy: typed arrays need an aligned buffer.
  const bytes = new Uint8Array(buf.subarray(start));
  const count = shape.reduce((x, y) => x * y, 1);
  if (bytes.length !== count * type.array.BYTES_PER_ELEMENT) throw new Error(file + ': size does not match its shape');
  let data = new type.array(bytes.buffer, 0, count);
  if (type.ort === 'bool') data = new Uint8Array(data);
  return new ort.Tensor(type.ort, data, shape);
}

function writeNpy(file, tensor) {
  const type = DTYPES.find(t => t.ort === tensor.type);
  if (!type) throw new Error('output of unsupported type ' + tensor.type);
  const dims = tensor.dims;
  let header = "{'descr': '" + type.descr + "', 'fortran_order': False, 'shape': (" + dims.join(', ') +
      (dims.length === 1 ? ',' : '') + '), }';
  header += ' '.repeat((64 - ((10 + header.length + 1) % 64)) % 64) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1;
  pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const data = tensor.data;
  const body = type.ort === 'bool' ? Buffer.from(Uint8Array.from(data, v => (v ? 1 : 0)))
                                   : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
  return type.descr;
}

async function main() {
  const a = parseArgs(process.argv);
  const feeds = {};
  for (const spec of a.inputs) {
    const eq = spec.indexOf('=');
    if (eq <= 0) throw new Error('--input takes NAME=FILE.npy, got ' + spec);
    feeds[spec.slice(0, eq)] = readNpy(spec.slice(eq + 1));
  }
  const session = await ort.InferenceSession.create(a.model, {
    intraOpNumThreads: Number(a.threads), interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const out = await session.run(feeds);
  fs.mkdirSync(a.out, {recursive: true});
  const report = {
    ort_version: require(path.join(__dirname, 'node_modules', 'onnxruntime-node', 'package.json')).version,
    outputs: {},
  };
  for (const name of session.outputNames) {
    const file = path.join(a.out, name.replace(/[^A-Za-z0-9._-]/g, '_') + '.npy');
    const descr = writeNpy(file, out[name]);
    report.outputs[name] = {file, dtype: descr, shape: out[name].dims};
  }
  await session.release();
  process.stdout.write(JSON.stringify(report) + '\n');
}

main().catch(e => {
  process.stderr.write('ort_run: ' + (e && e.message ? e.message : e) + '\n');
  process.exit(1);
});
