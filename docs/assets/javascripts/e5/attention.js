// Scaled dot-product attention of one head, its softmax and its masks.
// Python twins: mha/attention.py (softmax, attention_scores, scaled_dot_product_attention) and
// mha/masks.py (causal_mask, sliding_window_mask).
//
// The heads live side by side in (n, d_model) arrays: head j is the 32-wide column block
// j * d_k ... (j + 1) * d_k - 1 (mha.multihead.split_heads). Arrays are flat, row-major.

import { release } from "./e5bin.js";

/**
 * Softmax of each row of a (rows, cols) array, in place: e^(x - max) / sum. A -Infinity entry
 * (a hidden key) becomes exactly 0; a row that is all -Infinity becomes all zeros (mha.softmax).
 * The exponentials and their sum stay in double precision; only the result is stored, so a
 * Float32Array and a Float64Array of the same logits give the same float32 weights.
 */
export function softmaxRows(x, rows, cols) {
  const e = new Float64Array(cols);
  for (let r = 0; r < rows; r++) {
    const o = r * cols;
    let m = -Infinity;
    for (let c = 0; c < cols; c++) if (x[o + c] > m) m = x[o + c];
    if (m === -Infinity) { x.fill(0, o, o + cols); continue; }
    let total = 0;
    for (let c = 0; c < cols; c++) { e[c] = Math.exp(x[o + c] - m); total += e[c]; }
    for (let c = 0; c < cols; c++) x[o + c] = e[c] / total;
  }
  return x;
}

/** Head j's columns of a (n, d_model) array, as a contiguous (n, d_k) array. */
export function headColumns(a, n, dModel, dk, head) {
  const out = new Float32Array(n * dk);
  for (let t = 0; t < n; t++) {
    const at = t * dModel + head * dk;
    out.set(a.subarray(at, at + dk), t * dk);
  }
  return out;
}

/**
 * out (m, p) = a (m, k) b (p, k)^T: every row of a dotted with every row of b, two rows of a
 * times four rows of b at a time (each loaded number serves several products). The matrix
 * product of the scores and of the weighted values.
 */
export function rowsTimesRows(a, m, b, p, k, out = new Float32Array(m * p)) {
  let i = 0;
  for (; i + 2 <= m; i += 2) {
    const a0 = i * k, a1 = a0 + k;
    let t = 0;
    for (; t + 4 <= p; t += 4) {
      const b0 = t * k, b1 = b0 + k, b2 = b1 + k, b3 = b2 + k;
      let s00 = 0, s01 = 0, s02 = 0, s03 = 0, s10 = 0, s11 = 0, s12 = 0, s13 = 0;
      for (let d = 0; d < k; d++) {
        const x0 = a[a0 + d], x1 = a[a1 + d];
        const y0 = b[b0 + d], y1 = b[b1 + d], y2 = b[b2 + d], y3 = b[b3 + d];
        s00 += x0 * y0; s01 += x0 * y1; s02 += x0 * y2; s03 += x0 * y3;
        s10 += x1 * y0; s11 += x1 * y1; s12 += x1 * y2; s13 += x1 * y3;
      }
      const o = i * p + t;
      out[o] = s00; out[o + 1] = s01; out[o + 2] = s02; out[o + 3] = s03;
      out[o + p] = s10; out[o + p + 1] = s11; out[o + p + 2] = s12; out[o + p + 3] = s13;
    }
    for (; t < p; t++) {                                          // the last 1 to 3 rows of b
      let s0 = 0, s1 = 0;
      for (let d = 0; d < k; d++) { const y = b[t * k + d]; s0 += a[a0 + d] * y; s1 += a[a1 + d] * y; }
      out[i * p + t] = s0;
      out[(i + 1) * p + t] = s1;
    }
  }
  for (; i < m; i++) {                                            // the last row of a
    for (let t = 0; t < p; t++) {
      let s = 0;
      for (let d = 0; d < k; d++) s += a[i * k + d] * b[t * k + d];
      out[i * p + t] = s;
    }
  }
  return out;
}

/**
 * The scores of one head: S = (Q_j * scale) K_j^T, scale = 1 / sqrt(d_k) (attention_scores).
 * qj, kj: (n, d_k), one head's queries and keys; out: (n, n), row = query, column = key.
 */
export function headScores(qj, kj, n, dk, out) {
  const scale = Math.fround(1 / Math.sqrt(dk));
  // q * scale, float32. A loop, not Float32Array.from(qj, f): that boxes each number on the
  // JavaScript heap first (144 times a forward pass: 40 MB of garbage at 512 tokens).
  const qs = new Float32Array(qj.length);
  for (let i = 0; i < qj.length; i++) qs[i] = qj[i] * scale;
  rowsTimesRows(qs, n, kj, n, dk, out);
  release(qs);
  return out;
}

/** Which keys a query sees: (query, key) -> bool, or null for all (mha.masks). */
export function visibility(mask, window) {
  if (mask === undefined || mask === null || mask === "none") return null;
  if (mask === "causal") return (i, j) => j <= i;                          // causal_mask
  if (mask === "window") {                                                  // sliding_window_mask
    const w = Number(window);
    if (!Number.isInteger(w) || w < 0) {
      throw new Error(`window must be an integer >= 0, got ${window}`);
    }
    return (i, j) => j <= i && j >= i - w;
  }
  throw new Error(`mask must be "none", "causal" or "window", got ${mask}`);
}

/** Hide keys in (n, n) scores, in place: -Infinity where visible(i, j) is false (mha's _hide). */
export function hide(scores, n, visible) {
  if (!visible) return scores;
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) if (!visible(i, j)) scores[i * n + j] = -Infinity;
  }
  return scores;
}

/**
 * One head's weighted sum of the values: out[i] = sum_t w[i][t] v_j[t]; w: (n, n); vj: (n, d_k).
 * The result goes into head j's column block of out (n, d_model), the merged heads
 * (mha.multihead.merge_heads). The values are read transposed, (d_k, n), so that each output
 * is a dot product of two contiguous rows (rowsTimesRows).
 */
export function weightedValues(w, vj, n, dModel, dk, head, out) {
  const vt = new Float32Array(dk * n);                            // v_j transposed (d_k, n)
  for (let t = 0; t < n; t++) for (let d = 0; d < dk; d++) vt[d * n + t] = vj[t * dk + d];
  const sums = rowsTimesRows(w, n, vt, dk, n);                    // (n, d_k)
  for (let i = 0; i < n; i++) out.set(sums.subarray(i * dk, (i + 1) * dk), i * dModel + head * dk);
  release(vt, sums);
  return out;
}

/**
 * Multi-head scaled dot-product attention of every head: for each head j,
 * weights_j = softmax(Q_j K_j^T / sqrt(d_k)), context_j = weights_j V_j.
 * q, k, v: (n, d_model). Returns {scores, weights, context (n, d_model)}, where what is kept of
 * the scores and weights depends on `keep`:
 *   "all"   weights (h, n, n), and scores (h, n, n) with keepScores (the "layer" reply);
 *   j       head j's only: weights (n, n), and scores (n, n) with keepScores;
 *   "none"  neither (null): each head's (n, n) weights go to onWeights(j, weights_j) and the
 *           next head reuses their memory (the forward pass: one (n, n) array, not h of them).
 */
export function multiHeadAttention(q, k, v, n, dModel, h,
                                   { keepScores = false, keep = "all", onWeights = null } = {}) {
  const dk = dModel / h;
  const all = keep === "all";
  const one = Number.isInteger(keep) ? keep : null;
  if (!all && keep !== "none" && !(one !== null && one >= 0 && one < h)) {
    throw new Error(`keep must be "all", "none" or a head 0..${h - 1}, got ${keep}`);
  }
  const weights = all ? new Float32Array(h * n * n) : one !== null ? new Float32Array(n * n) : null;
  const scores = keepScores && weights ? new Float32Array(weights.length) : null;
  const scratch = all ? null : new Float32Array(n * n);          // (n, n), reused by every head
  const context = new Float32Array(n * dModel);
  for (let j = 0; j < h; j++) {
    const wj = all ? weights.subarray(j * n * n, (j + 1) * n * n) : scratch;   // (n, n)
    const qj = headColumns(q, n, dModel, dk, j), kj = headColumns(k, n, dModel, dk, j);
    headScores(qj, kj, n, dk, wj);
    if (scores && (all || j === one)) scores.set(wj, all ? j * n * n : 0);
    softmaxRows(wj, n, n);
    if (j === one) weights.set(wj);
    if (onWeights) onWeights(j, wj);
    const vj = headColumns(v, n, dModel, dk, j);
    weightedValues(wj, vj, n, dModel, dk, j, context);
    release(qj, kj, vj);
  }
  release(scratch);
  return { scores, weights, context };
}
