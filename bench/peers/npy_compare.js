// Compares the .npy files of two folders, file by file: |a - b| <= atol + rtol * |b|.
// node npy_compare.js EXPECTED_DIR ACTUAL_DIR [RTOL] [ATOL]
// Prints one line per file (shape and the largest absolute and relative differences) and
// exits 1 when a file is missing, a shape differs or a value is out of tolerance.
const fs = require('fs');
const path = require('path');
const {readNpy} = require('./npy.js');

const [expectedDir, actualDir, rtolText, atolText] = process.argv.slice(2);
const rtol = Number(rtolText || 1e-4), atol = Number(atolText || 1e-6);
let ok = true;
for (const file of fs.readdirSync(expectedDir).filter((f) => f.endsWith('.npy')).sort()) {
  const want = readNpy(path.join(expectedDir, file));
  const gotPath = path.join(actualDir, file);
  if (!fs.existsSync(gotPath)) {
    console.log(`  ${file}: missing from ${actualDir}`);
    ok = false;
    continue;
  }
  const got = readNpy(gotPath);
  if (want.shape.join(',') !== got.shape.join(',')) {
    console.log(`  ${file}: shape [${got.shape}] != [${want.shape}]`);
    ok = false;
    continue;
  }
  let maxAbs = 0, maxRel = 0, bad = 0;
  for (let i = 0; i < want.data.length; ++i) {
    const a = Number(got.data[i]), b = Number(want.data[i]);
    const diff = Math.abs(a - b);
    if (!(diff <= atol + rtol * Math.abs(b))) ++bad;
    maxAbs = Math.max(maxAbs, diff);
    if (b !== 0) maxRel = Math.max(maxRel, diff / Math.abs(b));
  }
  if (bad) ok = false;
  console.log(`  ${file} [${want.shape}]: max abs ${maxAbs.toExponential(2)}, max rel ` +
              `${maxRel.toExponential(2)}${bad ? `, ${bad} out of tolerance` : ''}`);
}
process.exit(ok ? 0 : 1);
