// BERT's encoder layer and its parts: LayerNorm, GELU, the linear map.
// Python twin: mha/models/encoder.py (layer_norm, gelu, linear, bert_layer).
//
// Arrays are flat and row-major Float32Arrays: x (n, d) is token t's vector at t * d ... t * d + d - 1.
// Sums run in double precision (JavaScript's numbers) and are stored as float32.

import { multiHeadAttention } from "./attention.js";
import { release } from "./e5bin.js";

/**
 * LayerNorm over each row of x (n, d): gamma * (x - mean) / sqrt(var + eps) + beta, the variance
 * biased (mean of squares). Writes into out (n, d), which may be x.
 */
export function layerNorm(x, n, d, gamma, beta, eps, out = new Float32Array(n * d)) {
  for (let t = 0; t < n; t++) {
    const o = t * d;
    let mean = 0;
    for (let i = 0; i < d; i++) mean += x[o + i];
    mean /= d;
    let variance = 0;
    for (let i = 0; i < d; i++) { const c = x[o + i] - mean; variance += c * c; }
    variance /= d;
    const inv = 1 / Math.sqrt(variance + eps);
    for (let i = 0; i < d; i++) out[o + i] = (x[o + i] - mean) * inv * gamma[i] + beta[i];
  }
  return out;
}

/**
 * GELU, x * Phi(x) = x / 2 * (1 + erf(x / sqrt 2)), erf by Abramowitz and Stegun 7.1.26 (error
 * below 1.5e-7), the formula of mha's gelu. In place on x, or into out.
 */
export function gelu(x, out = x) {
  for (let i = 0; i < x.length; i++) {
    const v = x[i];
    const z = Math.abs(v) * Math.SQRT1_2;
    const t = 1 / (1 + 0.3275911 * z);
    const poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741
      + t * (-1.453152027 + t * 1.061405429))));
    const erf = 1 - poly * Math.exp(-z * z);                      // erf(|x| / sqrt 2)
    out[i] = 0.5 * v * (1 + (v < 0 ? -erf : erf));
  }
  return out;
}

/** Tokens multiplied by one pair of dequantised weight rows: blocks of this many stay in cache. */
const TOKEN_TILE = 64;

/**
 * A linear layer, x @ W.T + b: out[t][j] = sum_i x[t][i] W[j][i] + b[j].
 * x (n, d_in); W a Q4Matrix (d_out, d_in), d_out even, kept 4-bit: rows W[j] and W[j + 1] are
 * dequantised once per tile of up to 64 tokens into two scratch rows, then dotted with the
 * tile's tokens four at a time (2 rows x 4 tokens: each loaded weight and input serves several
 * products). Returns out (n, d_out).
 */
export function linear(x, n, W, b, out = new Float32Array(n * W.rows)) {
  const dIn = W.cols, dOut = W.rows;
  if (x.length < n * dIn) throw new Error(`linear: x has ${x.length} values, expected ${n} x ${dIn}`);
  if (dOut % 2) throw new Error(`linear: the matrix needs an even number of rows, got ${dOut}`);
  const r0 = new Float32Array(dIn), r1 = new Float32Array(dIn);  // W[j], W[j + 1], dequantised
  for (let t0 = 0; t0 < n; t0 += TOKEN_TILE) {
    const t1 = Math.min(n, t0 + TOKEN_TILE);
    for (let j = 0; j < dOut; j += 2) {
      W.row(j, r0);
      W.row(j + 1, r1);
      const b0 = b[j], b1 = b[j + 1];
      let t = t0;
      for (; t + 4 <= t1; t += 4) {                               // tokens t .. t + 3
        const a0 = t * dIn, a1 = a0 + dIn, a2 = a1 + dIn, a3 = a2 + dIn;
        let s00 = 0, s01 = 0, s02 = 0, s03 = 0;                   // row j, tokens t .. t + 3
        let s10 = 0, s11 = 0, s12 = 0, s13 = 0;                   // row j + 1
        for (let i = 0; i < dIn; i++) {
          const w0 = r0[i], w1 = r1[i];
          const x0 = x[a0 + i], x1 = x[a1 + i], x2 = x[a2 + i], x3 = x[a3 + i];
          s00 += x0 * w0; s01 += x1 * w0; s02 += x2 * w0; s03 += x3 * w0;
          s10 += x0 * w1; s11 += x1 * w1; s12 += x2 * w1; s13 += x3 * w1;
        }
        const o = t * dOut + j;
        out[o] = s00 + b0; out[o + dOut] = s01 + b0;
        out[o + 2 * dOut] = s02 + b0; out[o + 3 * dOut] = s03 + b0;
        out[o + 1] = s10 + b1; out[o + 1 + dOut] = s11 + b1;
        out[o + 1 + 2 * dOut] = s12 + b1; out[o + 1 + 3 * dOut] = s13 + b1;
      }
      for (; t < t1; t++) {                                       // the last 1 to 3 tokens
        const a = t * dIn;
        let s0 = 0, s1 = 0;
        for (let i = 0; i < dIn; i++) { const xi = x[a + i]; s0 += xi * r0[i]; s1 += xi * r1[i]; }
        out[t * dOut + j] = s0 + b0;
        out[t * dOut + j + 1] = s1 + b1;
      }
    }
  }
  return out;
}

/** a + b elementwise into out, a new array by default (the residual connections). */
function add(a, b, out = new Float32Array(a.length)) {
  for (let i = 0; i < a.length; i++) out[i] = a[i] + b[i];
  return out;
}

/**
 * One post-LayerNorm BERT encoder layer (bert_layer), every token attending to every token:
 *   A  = LayerNorm(X + Concat(head_1..head_h) W_O + b_O),
 *        head_j = Attention(X W_j^Q + b_j^Q, X W_j^K + b_j^K, X W_j^V + b_j^V)
 *   X' = LayerNorm(A + GELU(A W_1 + b_1) W_2 + b_2)
 * x (n, d_model); weights: {q, k, v, ao, fi, fo: {w: Q4Matrix, b: Float32Array}, aln, oln: {w, b}}.
 * Returns {out (n, d_model), weights (h, n, n), v (n, d_model)}; with keep, also every intermediate under
 * parts (the protocol's "layer" reply: x, q, k, v, scores, weights, context, attention_out,
 * residual1, norm1, ffn_in, gelu, ffn_out, residual2, norm2). Without keep, every other
 * intermediate is released (see release) before it returns.
 * head: "all" (default) keeps every head's weights (and with keep, scores) as above; a head j
 * keeps that head's (n, n) only; "none" keeps none (weights null) and hands each head's weights
 * to onWeights(j, weights_j) instead, in memory the next head reuses (multiHeadAttention).
 */
export function bertLayer(x, n, weights, h, eps, { keep = false, head = "all", onWeights = null } = {}) {
  const L = weights;
  const d = L.q.w.rows;
  const q = linear(x, n, L.q.w, L.q.b);                           // (n, d_model)
  const k = linear(x, n, L.k.w, L.k.b);                           // (n, d_model)
  const v = linear(x, n, L.v.w, L.v.b);                           // (n, d_model)
  const attention = multiHeadAttention(q, k, v, n, d, h,          // (h, n, n) or less, (n, d)
    { keepScores: keep, keep: head, onWeights });
  const attentionOut = linear(attention.context, n, L.ao.w, L.ao.b);   // (n, d_model)
  const residual1 = add(x, attentionOut);
  const norm1 = layerNorm(residual1, n, d, L.aln.w, L.aln.b, eps);      // (n, d_model)
  const ffnIn = linear(norm1, n, L.fi.w, L.fi.b);                       // (n, d_ff)
  const activated = gelu(ffnIn, keep ? new Float32Array(ffnIn.length) : ffnIn);  // (n, d_ff)
  const ffnOut = linear(activated, n, L.fo.w, L.fo.b);                  // (n, d_model)
  const residual2 = add(norm1, ffnOut);
  const norm2 = layerNorm(residual2, n, d, L.oln.w, L.oln.b, eps, keep ? undefined : residual2);
  const result = { out: norm2, weights: attention.weights, v };
  if (!keep) release(q, k, attention.context, attentionOut, residual1, norm1, ffnIn, ffnOut);
  if (keep) {
    result.parts = {
      x, q, k, v, scores: attention.scores, weights: attention.weights, context: attention.context,
      attention_out: attentionOut, residual1, norm1, ffn_in: ffnIn, gelu: activated,
      ffn_out: ffnOut, residual2, norm2,
    };
  }
  return result;
}
