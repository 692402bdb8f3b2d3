// Reads and writes NumPy .npy files (version 1.0, C order, little-endian) for the peer scripts.
// Supported dtypes: <f4 <f8 <i4 <i8 |u1 |b1.
const fs = require('fs');

const DTYPES = {
  '<f4': {ort: 'float32', array: Float32Array},
  '<f8': {ort: 'float64', array: Float64Array},
  '<i4': {ort: 'int32', array: Int32Array},
  '<i8': {ort: 'int64', array: BigInt64Array},
  '|u1': {ort: 'uint8', array: Uint8Array},
  '|b1': {ort: 'bool', array: Uint8Array},
};

// Returns {descr, ort, shape, data} with data a typed array over a copy of the file's values.
function readNpy(path) {
  const buf = fs.readFileSync(path);
  if (buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${path}: not a .npy file`);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + headerLen;
  const header = buf.toString('latin1', major === 1 ? 10 : 12, start);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${path}: Fortran order`);
  const shapeText = /'shape':\s*\(([^)]*)\)/.exec(header)[1];
  const shape = shapeText.split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  const type = DTYPES[descr];
  if (!type) throw new Error(`${path}: dtype ${descr} is not supported`);
  const count = shape.reduce((a, b) => a * b, 1);
  const bytes = buf.subarray(start, start + count * type.array.BYTES_PER_ELEMENT);
  const copy = new Uint8Array(bytes);  // aligned
  return {descr, ort: type.ort, shape, data: new type.array(copy.buffer, 0, count)};
}

function descrOf(ortType) {
  for (const [descr, t] of Object.entries(DTYPES)) if (t.ort === ortType) return descr;
  throw new Error(`no .npy dtype for ${ortType}`);
}

function writeNpy(path, ortType, shape, data) {
  const shapeText = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let header = `{'descr': '${descrOf(ortType)}', 'fortran_order': False, 'shape': ${shapeText}, }`;
  const pad = 64 - ((10 + header.length + 1) % 64);
  header += ' '.repeat(pad % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(path, Buffer.concat([head, Buffer.from(header, 'latin1'), body]));
}

// The first `rows` rows (dim 0) of an array from readNpy.
function firstRows(array, rows) {
  const n = Math.min(rows, array.shape[0]);
  const per = array.shape.slice(1).reduce((a, b) => a * b, 1);
  return {...array, shape: [n, ...array.shape.slice(1)], data: array.data.slice(0, n * per)};
}

module.exports = {readNpy, writeNpy, firstRows};
