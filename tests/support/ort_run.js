// Runs an exported qemb model in ONNX Runtime's CPU engine (npm
// onnxruntime-node) and writes its `embedding` output as a float32 .npy.
// usage: node ort_run.js MODULE_DIR MODEL.onnx IDS(1,2,3) int64|int32 OUT.npy
'use strict';
const fs = require('fs');
const path = require('path');

async function main() {
  const [moduleDir, modelPath, idList, idType, outPath] = process.argv.slice(2);
  if (!outPath) throw new Error('usage: ort_run.js MODULE_DIR MODEL.onnx IDS int64|int32 OUT.npy');
  const ort = require(path.resolve(moduleDir, 'onnxruntime-node'));
  const ids = idList.split(',').map(Number);
  const data = idType === 'int32' ? Int32Array.from(ids) : BigInt64Array.from(ids.map(BigInt));
  const session = await ort.InferenceSession.create(modelPath, { executionProviders: ['cpu'] });
  const out = (await session.run({ indices: new ort.Tensor(idType, data, [ids.length]) })).embedding;
  if (out.type !== 'float32') throw new Error('output type ' + out.type + ', expected float32');
  const dims = out.dims.map(Number);
  let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims.join(', ') +
      (dims.length === 1 ? ',' : '') + '), }';
  while ((10 + header.length + 1) % 64 !== 0) header += ' ';
  header += '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1;
  pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const body = Buffer.from(out.data.buffer, out.data.byteOffset, out.data.byteLength);
  fs.writeFileSync(outPath, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
  console.log('onnxruntime-node ' + require(path.resolve(moduleDir, 'onnxruntime-node/package.json')).version);
}

main().catch((e) => {
  console.error('ort_run: ' + e.message);
  process.exit(1);
});
