// ONNX Runtime's time per op type on a model, the peer of `dprun bench MODEL --profile`:
// node ort_profile.js MODEL.onnx BATCH THREADS ITERS [SEQ]   (NODE_PATH from ort_install.sh)
// Profiles ITERS runs and drops the first (a session profiles from its start, and the first
// run pays for first-touch allocations), then prints "op calls/run ms/run share" rows, slowest
// first, summed over ONNX Runtime's kernels (its fused and layout nodes under their own names,
// as dprun's --profile shows its rewritten ones). With ORT_PROFILE_NODES=1 it also prints a
// "node op ms/run input-shapes" row per node, in execution order. Times are ONNX Runtime's
// with profiling on: on efficientnet_b0 their sum is about 30% above an unprofiled run's time.
// The profile file ONNX Runtime writes goes to a temporary folder and is removed.
const ort = require('onnxruntime-node');
const fs = require('fs');
const os = require('os');
const path = require('path');

function feedsFor(session, batch, seq) {
  const feeds = {};
  for (const meta of session.inputMetadata) {
    const dims = meta.shape.map((d, i) => (typeof d === 'number' ? d : i === 0 ? batch : seq));
    const count = dims.reduce((a, b) => a * b, 1);
    feeds[meta.name] = meta.type === 'int64'
      ? new ort.Tensor('int64', BigInt64Array.from({length: count}, (_, k) => BigInt((k * 7919) % 1000)), dims)
      : new ort.Tensor('float32', Float32Array.from({length: count}, (_, k) => Math.sin(k)), dims);
  }
  return feeds;
}

async function main() {
  const [model, batchText, threadsText, itersText, seqText] = process.argv.slice(2);
  if (!model || !itersText || Number(itersText) < 2) {
    console.error('usage: node ort_profile.js MODEL.onnx BATCH THREADS ITERS [SEQ]  (ITERS >= 2)');
    process.exit(2);
  }
  const iters = Number(itersText);
  const prefix = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ort-profile-')), 'p');
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threadsText), interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all', enableProfiling: true, profileFilePrefix: prefix,
  });
  const feeds = feedsFor(session, Number(batchText), Number(seqText || 128));
  for (let i = 0; i < iters; ++i) await session.run(feeds);
  await session.release();  // flushes the profile
  const dir = path.dirname(prefix);
  const file = fs.readdirSync(dir).map((f) => path.join(dir, f))[0];
  const events = JSON.parse(fs.readFileSync(file, 'utf8'));
  fs.rmSync(dir, {recursive: true});
  const runs = iters - 1;
  const byOp = new Map();
  const byNode = new Map();  // in first-seen order, which is execution order
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    if (!byNode.has(e.name)) {  // the first run's call: dropped
      byNode.set(e.name, {op: e.args.op_name, us: 0, shapes: e.args.input_type_shape});
      continue;
    }
    byNode.get(e.name).us += e.dur;
    const entry = byOp.get(e.args.op_name) || {us: 0, calls: 0};
    entry.us += e.dur;
    entry.calls += 1;
    byOp.set(e.args.op_name, entry);
  }
  const total = [...byOp.values()].reduce((a, e) => a + e.us, 0);
  console.log(`${'op'.padEnd(24)} ${'calls/run'.padStart(9)} ${'ms/run'.padStart(10)} ${'share'.padStart(7)}`);
  for (const [op, e] of [...byOp.entries()].sort((a, b) => b[1].us - a[1].us))
    console.log(`${op.padEnd(24)} ${(e.calls / runs).toFixed(0).padStart(9)} ` +
                `${(e.us / runs / 1000).toFixed(3).padStart(10)} ${(100 * e.us / total).toFixed(1).padStart(6)}%`);
  if (process.env.ORT_PROFILE_NODES === '1')
    for (const [name, n] of byNode)
      console.log(`${name.replace(/_kernel_time$/, '')} ${n.op} ${(n.us / runs / 1000).toFixed(3)} ` +
                  JSON.stringify((n.shapes || []).map((s) => Object.values(s)[0])));
}
main().catch((e) => { console.error(e.message); process.exit(1); });
