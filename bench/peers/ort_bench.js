// Times ONNX Runtime (onnxruntime-node) on a model with inputs like dprun bench generates:
// node ort_bench.js MODEL.onnx BATCH THREADS ITERS [SEQ]
// Prints one JSON line: {"runtime":"onnxruntime", "samples_per_s": ...}.
const ort = require('onnxruntime-node');

async function main() {
  const [model, batchText, threadsText, itersText, seqText] = process.argv.slice(2);
  const batch = Number(batchText), threads = Number(threadsText), iters = Number(itersText);
  const seq = Number(seqText || 128);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const feeds = {};
  for (const name of session.inputNames) {
    const meta = session.inputMetadata ? session.inputMetadata.find((m) => m.name === name) : null;
    const dims = (meta && meta.shape ? meta.shape : [batch]).map((d, i) =>
      typeof d === 'number' ? d : (i === 0 ? batch : seq));
    const count = dims.reduce((a, b) => a * b, 1);
    const type = meta && meta.type ? meta.type : 'float32';
    if (type === 'int64') {
      feeds[name] = new ort.Tensor('int64', BigInt64Array.from({length: count}, (_, k) => BigInt((k * 7919) % 1000)), dims);
    } else {
      feeds[name] = new ort.Tensor('float32', Float32Array.from({length: count}, (_, k) => name === 'attention_mask' ? 1 : Math.sin(k)), dims);
    }
  }
  for (let i = 0; i < 3; ++i) await session.run(feeds);
  const start = process.hrtime.bigint();
  for (let i = 0; i < iters; ++i) await session.run(feeds);
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  console.log(JSON.stringify({runtime: 'onnxruntime', model, batch, threads, iters,
                              samples_per_s: batch * iters / seconds}));
}
main().catch((e) => { console.error(e.message); process.exit(1); });
