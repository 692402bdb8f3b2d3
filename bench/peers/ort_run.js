// Runs a model in ONNX Runtime (onnxruntime-node) on inputs from .npy files and writes every
// output to OUT_DIR/NAME.npy (NAME with characters other than [A-Za-z0-9._-] replaced by '_',
// as `dprun run --output-dir` names them), and the output names in order to OUT_DIR/outputs.txt.
// node ort_run.js MODEL.onnx OUT_DIR [--rows N INPUTS_DIR] NAME=FILE.npy...
// With --rows, only the first N rows of every input are fed, and those rows are written to
// INPUTS_DIR/NAME.npy so another engine can be given the same batch.
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');
const {readNpy, writeNpy, firstRows} = require('./npy.js');

const safeName = (name) => name.replace(/[^A-Za-z0-9._-]/g, '_');

async function main() {
  const args = process.argv.slice(2);
  const [model, outDir] = args.splice(0, 2);
  let rows = 0, inputsDir = '';
  if (args[0] === '--rows') [, rows, inputsDir] = args.splice(0, 3);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential',
    logSeverityLevel: 3,  // the training graph's optional input loss_weight draws a warning
  });
  const feeds = {};
  for (const spec of args) {
    const eq = spec.indexOf('=');
    const name = spec.slice(0, eq);
    let array = readNpy(spec.slice(eq + 1));
    if (rows) {
      array = firstRows(array, Number(rows));
      fs.mkdirSync(inputsDir, {recursive: true});
      writeNpy(path.join(inputsDir, safeName(name) + '.npy'), array.ort, array.shape, array.data);
    }
    feeds[name] = new ort.Tensor(array.ort, array.data, array.shape);
  }
  const results = await session.run(feeds);
  fs.mkdirSync(outDir, {recursive: true});
  for (const name of session.outputNames) {
    const t = results[name];
    writeNpy(path.join(outDir, safeName(name) + '.npy'), t.type, t.dims, t.data);
  }
  fs.writeFileSync(path.join(outDir, 'outputs.txt'), session.outputNames.join('\n') + '\n');
}
main().catch((e) => { console.error(e.message); process.exit(1); });
