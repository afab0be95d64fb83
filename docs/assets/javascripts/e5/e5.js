// multilingual-e5-small (4-bit) in the browser: its files, its word embeddings fetched by shard,
// the forward pass, and what the views ask of one layer or one head.
// Python twin: mha/models/e5.py (load_e5, E5.forward, E5.embed, E5Weights.word_embeddings), on
// the layer of mha/models/encoder.py (bert_layer) and the files of mha/site/e5web.py.
//
// Sizes: n tokens (<s> ... </s>, at most 512), d_model = 384, h = 12 heads, d_k = 32,
// d_ff = 1536, layers = 12. Arrays are flat, row-major Float32Arrays; hidden states are
// (layers + 1, n, d_model), attention weights (layers, h, n, n).

import { checkManifest, embeddingRow, release, tensor } from "./e5bin.js";
import { bertLayer, layerNorm, linear } from "./encoder.js";
import { headScores, hide, softmaxRows, visibility } from "./attention.js";
import { loadTokenizer } from "./sentencepiece.js";

/** The prefix E5.embed writes before a text by default (mha.models.e5.QUERY). */
export const QUERY = "query: ";

/** An Error carrying one of the protocol's codes ("download", "too-long", ...) and a detail. */
export function codedError(code, message, detail) {
  const error = new Error(message);
  error.code = code;
  error.detail = detail;
  return error;
}

// ---- files: fetched with progress, kept in Cache Storage ---------------------------------------

/**
 * The bytes at `url` as an ArrayBuffer, read as a stream so that `onBytes(count)` hears of every
 * chunk. `expected` (bytes, or null) is checked. Errors carry code "download" (HTTP status) or
 * "format" (a size that is not the manifest's).
 */
export async function fetchBytes(url, expected, onBytes = () => {}) {
  const response = await fetch(url);
  if (!response.ok) {
    throw codedError("download", `HTTP ${response.status} for ${url}`,
      { status: response.status, url });
  }
  return readBody(response, url, expected, onBytes);
}

async function readBody(response, url, expected, onBytes) {
  if (!response.body || !response.body.getReader) {
    const buffer = await response.arrayBuffer();
    onBytes(buffer.byteLength);
    return checkSize(buffer, url, expected);
  }
  const reader = response.body.getReader();
  // With the size known, the chunks go straight into one buffer (the file is in memory once,
  // not also as its chunks); otherwise they are joined at the end.
  let bytes = expected != null ? new Uint8Array(expected) : null;
  const chunks = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (bytes && size + value.length <= bytes.length) bytes.set(value, size);
    else chunks.push(value);
    size += value.length;
    onBytes(value.length);
    if (bytes) release(value);
  }
  if (!bytes || size !== bytes.length) {                        // unknown size, or not the manifest's
    if (bytes) return checkSize(new ArrayBuffer(size), url, expected);
    bytes = new Uint8Array(size);
    let at = 0;
    for (const chunk of chunks) { bytes.set(chunk, at); at += chunk.length; }
  }
  return checkSize(bytes.buffer, url, expected);
}

function checkSize(buffer, url, expected) {
  if (expected != null && buffer.byteLength !== expected) {
    throw codedError("format", `${url} has ${buffer.byteLength} bytes, the manifest says ${expected}`,
      { url, bytes: buffer.byteLength, expected });
  }
  return buffer;
}

/**
 * The Cache Storage of this model's files ("e5-" + the weights' SHA-256), or null where there is
 * none (not a secure context). Caches of other versions ("e5-..." of another hash) are deleted.
 */
export async function openCache(manifest) {
  if (typeof caches === "undefined") return null;
  const name = "e5-" + manifest.source_sha256;
  try {
    for (const key of await caches.keys()) {
      if (key.startsWith("e5-") && key !== name) await caches.delete(key);
    }
    return await caches.open(name);
  } catch (error) {
    return null;                                                // storage refused: plain fetch
  }
}

/**
 * The bytes of `url`: read out of `cache` if it holds them with the expected size, otherwise
 * fetched (counting progress) and put in the cache. Returns {buffer, cached}.
 */
export async function cachedBytes(cache, url, expected, onBytes) {
  if (cache) {
    const hit = await cache.match(url).catch(() => null);     // storage trouble: fetch instead
    if (hit) {
      const buffer = await hit.arrayBuffer();
      if (expected == null || buffer.byteLength === expected) {
        onBytes(buffer.byteLength);
        return { buffer, cached: true };
      }
      await cache.delete(url).catch(() => false);               // a broken copy: fetch again
    }
  }
  const buffer = await fetchBytes(url, expected, onBytes);
  if (cache) {
    try {
      const headers = { "Content-Type": "application/octet-stream" };
      await cache.put(url, new Response(buffer, { headers }));
    } catch (error) { /* quota: the page still works, only the next visit downloads again */ }
  }
  return { buffer, cached: false };
}

/**
 * Download (or read from the cache) manifest.json, layers.bin and vocab.bin under `base` (the
 * folder assets/e5/, ending in "/"), and build the model. onProgress({loaded, total}) in bytes;
 * total is manifest.json's bytes plus the two files' sizes from the manifest.
 * Returns {model: E5, cached: whether both files came from the cache}.
 */
export async function loadE5(base, onProgress = () => {}) {
  const manifestBuffer = await fetchBytes(new URL("manifest.json", base).href, null);
  let manifest;
  try {
    manifest = JSON.parse(new TextDecoder().decode(manifestBuffer));
  } catch (error) {
    throw codedError("format", `manifest.json is not JSON: ${error.message}`);
  }
  checkManifest(manifest);
  const files = manifest.files;
  const total = manifestBuffer.byteLength + files["layers.bin"].bytes + files["vocab.bin"].bytes;
  let loaded = manifestBuffer.byteLength;
  const count = bytes => { loaded += bytes; onProgress({ loaded, total }); };
  onProgress({ loaded, total });
  const cache = await openCache(manifest);
  const [layers, vocab] = await Promise.all(["layers.bin", "vocab.bin"].map(
    name => cachedBytes(cache, new URL(name, base).href, files[name].bytes, count)));
  const tokenizer = await loadTokenizer(manifest, vocab.buffer);
  release(new Uint8Array(vocab.buffer));                        // read into the tokenizer: 4 MB
  const model = new E5(manifest, layers.buffer, tokenizer, { base, cache });
  return { model, cached: layers.cached && vocab.cached, total };
}

// ---- the model -------------------------------------------------------------------------------

export class E5 {
  /**
   * @param manifest   manifest.json, parsed
   * @param layers     layers.bin (ArrayBuffer): every tensor but the word embeddings
   * @param tokenizer  SentencePieceTokenizer (sentencepiece.js)
   * @param base       the URL of assets/e5/, where the emb/<k>.bin shards are
   * @param cache      Cache Storage for the shards, or null
   */
  constructor(manifest, layers, tokenizer, { base, cache = null }) {
    const s = manifest.sizes;
    this.manifest = manifest;
    this.tokenizer = tokenizer;
    this.base = base;
    this.cache = cache;
    this.layers = s.layers;
    this.h = s.h;
    this.dModel = s.d_model;
    this.dk = s.d_model / s.h;
    this.dFf = s.d_ff;
    this.eps = s.eps;
    this.maxTokens = s.max_positions;
    const t = name => tensor(manifest, layers, name);
    this.position = t("emb.pos");                               // (max_tokens, d_model)
    this.segment = t("emb.type");                               // (2, d_model)
    this.embeddingNorm = { w: t("emb.ln.w"), b: t("emb.ln.b") };  // (d_model,) each
    this.weights = [];                                          // per layer: {q, k, v, ao, fi, fo, aln, oln}
    for (let l = 0; l < this.layers; l++) {
      const layer = {};
      for (const part of ["q", "k", "v", "ao", "fi", "fo", "aln", "oln"]) {
        layer[part] = { w: t(`l${l}.${part}.w`), b: t(`l${l}.${part}.b`) };
      }
      this.weights.push(layer);
    }
    this.shards = new Map();                                    // k -> Uint8Array, fetched once
    this.gramCache = [];                                        // per layer: (h, d_k, d_k), see grams
  }

  /** <s>, the pieces of text, </s>: {tokens, ids}; code "too-long" past max_tokens (512). */
  encode(text) {
    const { tokens, ids } = this.tokenizer.encode(text);
    if (ids.length > this.maxTokens) {
      throw codedError("too-long", `the text has ${ids.length} tokens, more than the model's `
        + `${this.maxTokens} positions`, { tokens: ids.length, max: this.maxTokens });
    }
    return { tokens, ids };
  }

  /**
   * The word embeddings of ids (n,): (n, d_model), dequantised from the shards emb/<k>.bin that
   * hold them (E5Weights.word_embeddings); shards not yet in memory are fetched first, with
   * onProgress({loaded, total}) in bytes.
   */
  async wordEmbeddings(ids, onProgress = () => {}) {
    const { rows_per_shard: perShard, row_bytes: rowBytes, rows, path } = this.manifest.embeddings;
    const d = this.dModel;
    const missing = [...new Set(Array.from(ids, id => Math.floor(id / perShard)))]
      .filter(k => !this.shards.has(k));
    const size = k => Math.min(perShard, rows - k * perShard) * rowBytes;
    const total = missing.reduce((sum, k) => sum + size(k), 0);
    let loaded = 0;
    if (missing.length) onProgress({ loaded, total });
    await Promise.all(missing.map(async k => {
      const url = new URL(path.replace("{k}", String(k)), this.base).href;
      const { buffer } = await cachedBytes(this.cache, url, size(k), bytes => {
        loaded += bytes;
        onProgress({ loaded, total });
      });
      this.shards.set(k, new Uint8Array(buffer));
    }));
    const out = new Float32Array(ids.length * d);
    for (let t = 0; t < ids.length; t++) {
      const id = ids[t];
      if (!(id >= 0 && id < rows)) throw codedError("internal", `token id ${id} is outside [0, ${rows})`);
      const shard = this.shards.get(Math.floor(id / perShard));
      embeddingRow(shard, id % perShard, rowBytes, out.subarray(t * d, (t + 1) * d));
    }
    return out;
  }

  /** X0 = LayerNorm(word[id_i] + pos[i] + type[0]), positions from 0 at <s>: (n, d_model). */
  async embed0(ids, onProgress) {
    const n = ids.length, d = this.dModel;
    const x = await this.wordEmbeddings(ids, onProgress);       // (n, d_model)
    for (let t = 0; t < n; t++) {
      for (let i = 0; i < d; i++) {
        x[t * d + i] = x[t * d + i] + this.position[t * d + i] + this.segment[i];
      }
    }
    return layerNorm(x, n, d, this.embeddingNorm.w, this.embeddingNorm.b, this.eps, x);
  }

  /**
   * The forward pass from X0 (n, d_model) through every layer (Encoder._encode).
   * Returns {hidden ((layers + 1), n, d_model) Float32Array} and, with analysis (default), what
   * the views draw: attentions ((layers, h, n, n) Uint8Array, round(255 * weight)) and norms
   * ((layers, n, h) Float32Array, ||v_k^j W_O^j|| of key k in head j: with the weights, each
   * key's contribution, Kobayashi et al. 2020; the page divides w_qk * norm by its row's sum).
   * onLayer(l) after layer l (1..layers).
   */
  forward(x0, n, { analysis = true, onLayer = () => {} } = {}) {
    const { layers, h, dModel: d } = this;
    const hidden = new Float32Array((layers + 1) * n * d);
    hidden.set(x0);
    const attentions = analysis ? new Uint8Array(layers * h * n * n) : null;
    const norms = analysis ? new Float32Array(layers * n * h) : null;
    for (let l = 0; l < layers; l++) {
      const x = hidden.subarray(l * n * d, (l + 1) * n * d);
      // Each head's weights are turned into bytes as soon as they are made, in one (n, n)
      // array the next head reuses: 1 MB at 512 tokens, not every head's 12.6 MB.
      const onWeights = analysis ? (j, w) => {
        const at = (l * h + j) * n * n;
        for (let i = 0; i < w.length; i++) attentions[at + i] = Math.round(w[i] * 255);
      } : null;
      const { out, v } = bertLayer(x, n, this.weights[l], h, this.eps, { head: "none", onWeights });
      hidden.set(out, (l + 1) * n * d);
      if (analysis) norms.set(valueNorms(v, n, this.grams(l), h), l * n * h);
      release(out, v);                                          // see release (e5bin.js)
      onLayer(l + 1);
    }
    return { hidden, attentions, norms };
  }

  /** Layer l's Gram matrices of W_O (gramMatrices), computed on first use and kept (48 KB a layer). */
  grams(l) {
    if (!this.gramCache[l]) this.gramCache[l] = gramMatrices(this.weights[l].ao.w, this.h);
    return this.gramCache[l];
  }

  /**
   * Every intermediate of layer l, recomputed from its input hidden[l] (the "layer" reply's
   * parts). With a head j, scores and weights are that head's (n, n) only, and only those are
   * ever made (a twelfth of the memory: 1 MB each at 512 tokens instead of 12.6); without,
   * every head's (h, n, n).
   */
  layer(hidden, n, l, j = null) {
    const d = this.dModel;
    const x = hidden.slice(l * n * d, (l + 1) * n * d);
    const head = j === null ? "all" : j;
    return bertLayer(x, n, this.weights[l], this.h, this.eps, { keep: true, head }).parts;
  }

  /** Token t's vector at the embeddings and after every layer: (layers + 1, d_model), a copy. */
  strip(hidden, n, t) {
    const d = this.dModel;
    if (!(Number.isInteger(t) && t >= 0 && t < n)) {
      throw codedError("internal", `token must be 0..${n - 1}, got ${t}`, { token: t });
    }
    const rows = new Float32Array((this.layers + 1) * d);
    for (let l = 0; l <= this.layers; l++) {
      rows.set(hidden.subarray((l * n + t) * d, (l * n + t + 1) * d), l * d);
    }
    return rows;
  }

  /**
   * Head j of layer l re-weighted, recomputed from hidden[l]: scores (n, n) = q_j k_j^T / sqrt(d_k)
   * before temperature; weights = softmax(mask(scores / temperature)); output (n, d_model) =
   * weights @ (v_j W_O[:, j-block]^T), this head's share of the attention output (without b_O);
   * baseline_output the same at temperature 1, no mask; q, k, v (n, d_k) each. With outputs
   * false, neither output is computed (two (n, n) x (n, d_model) products fewer) nor returned.
   */
  head(hidden, n, l, j, { temperature = 1, mask = "none", window = 0, outputs = true } = {}) {
    if (!(temperature > 0) || !Number.isFinite(temperature)) {
      throw new Error(`temperature must be a number > 0, got ${temperature}`);
    }
    if (!(j >= 0 && j < this.h && Number.isInteger(j))) {
      throw new Error(`head must be 0..${this.h - 1}, got ${j}`);
    }
    const visible = visibility(mask, window);
    const { dModel: d, dk } = this;
    const L = this.weights[l];
    const x = hidden.subarray(l * n * d, (l + 1) * n * d);
    const rows = part => [L[part].w.rowRange(j * dk, dk), L[part].b.subarray(j * dk, (j + 1) * dk)];
    const q = linear(x, n, ...rows("q"));                         // (n, d_k)
    const k = linear(x, n, ...rows("k"));                         // (n, d_k)
    const v = linear(x, n, ...rows("v"));                         // (n, d_k)
    const scores = headScores(q, k, n, dk, new Float32Array(n * n));  // (n, n)
    // Loops and copies between typed arrays, not TypedArray.from: no number is boxed.
    const logits = new Float64Array(n * n);                       // double: s / T unrounded
    for (let i = 0; i < logits.length; i++) logits[i] = scores[i] / temperature;
    const weights = new Float32Array(softmaxRows(hide(logits, n, visible), n, n));
    release(logits);
    if (!outputs) return { scores, weights, q, k, v };
    const baseline = softmaxRows(new Float32Array(scores), n, n);
    const values = headValues(v, n, L.ao.w, j, dk);               // (n, d_model): v_j W_O^j
    const output = matmul(weights, values, n, n, d);              // (n, d_model)
    const baselineOutput = matmul(baseline, values, n, n, d);     // (n, d_model)
    release(baseline, values);
    return { scores, weights, q, k, v, output, baseline_output: baselineOutput };
  }

  /**
   * The sentence embedding (E5.embed): prefix + text through the model, the mean of the last
   * layer's vectors over every token, divided by its length. Returns Float32Array(d_model).
   */
  async embed(text, prefix = QUERY, onProgress) {
    const { ids } = this.encode(prefix + text);
    const n = ids.length, d = this.dModel;
    const x0 = await this.embed0(ids, onProgress);
    const { hidden } = this.forward(x0, n, { analysis: false });
    release(x0);
    const last = hidden.subarray(this.layers * n * d);
    const mean = new Float64Array(d);
    for (let t = 0; t < n; t++) for (let i = 0; i < d; i++) mean[i] += last[t * d + i];
    let norm = 0;
    for (let i = 0; i < d; i++) { mean[i] /= n; norm += mean[i] * mean[i]; }
    norm = Math.sqrt(norm);
    release(hidden);
    return Float32Array.from(mean, value => value / norm);
  }
}

// ---- what each head adds: value vectors through W_O ---------------------------------------------

/**
 * f = v_j W_O[:, j-block]^T for every token: (n, d_model), head j's value vectors carried into the
 * model's space by its block of columns of W_O (d_model, d_model).
 */
export function headValues(vj, n, WO, j, dk) {
  const d = WO.rows;
  const row = new Float32Array(WO.cols);
  const out = new Float32Array(n * d);
  for (let o = 0; o < d; o++) {
    WO.row(o, row);
    for (let t = 0; t < n; t++) {
      let s = 0;
      for (let c = 0; c < dk; c++) s += vj[t * dk + c] * row[j * dk + c];
      out[t * d + o] = s;
    }
  }
  return out;
}

/**
 * Each head's Gram matrix of W_O, G_j = W_O^j^T W_O^j (d_k, d_k), W_O^j = W_O[:, j-block]
 * (d_model, d_k): (h, d_k, d_k) Float64Array, so that ||v W_O^j^T||^2 = v^T G_j v for a
 * value vector v (d_k) of head j: 32 x 32 products a token instead of 384 x 32.
 */
export function gramMatrices(WO, h) {
  const d = WO.rows, dk = WO.cols / h;
  const row = new Float32Array(WO.cols);
  const columns = new Float32Array(WO.cols * d);                  // W_O transposed (d_in, d_out)
  for (let o = 0; o < d; o++) {
    WO.row(o, row);
    for (let c = 0; c < WO.cols; c++) columns[c * d + o] = row[c];
  }
  const grams = new Float64Array(h * dk * dk);
  for (let j = 0; j < h; j++) {
    for (let a = 0; a < dk; a++) {
      const ca = (j * dk + a) * d;
      for (let b = a; b < dk; b++) {                              // symmetric: b >= a, mirrored
        const cb = (j * dk + b) * d;
        let s = 0;
        for (let o = 0; o < d; o++) s += columns[ca + o] * columns[cb + o];
        grams[(j * dk + a) * dk + b] = grams[(j * dk + b) * dk + a] = s;
      }
    }
  }
  return grams;
}

/**
 * ||f_k^j|| = ||v_k^j W_O[:, j-block]^T|| for every token k and head j: (n, h), from v
 * (n, d_model) and the Gram matrices of W_O (gramMatrices): sqrt(v_k^j^T G_j v_k^j).
 */
export function valueNorms(v, n, grams, h) {
  const dk = Math.round(Math.sqrt(grams.length / h)), d = h * dk;
  const norms = new Float64Array(n * h);
  for (let t = 0; t < n; t++) {
    for (let j = 0; j < h; j++) {
      const v0 = t * d + j * dk, g0 = j * dk * dk;
      let square = 0;
      for (let a = 0; a < dk; a++) {
        let s = 0;
        for (let b = 0; b < dk; b++) s += grams[g0 + a * dk + b] * v[v0 + b];
        square += v[v0 + a] * s;
      }
      norms[t * h + j] = Math.sqrt(Math.max(square, 0));
    }
  }
  return norms;
}

/** a (m, k) @ b (k, p) -> (m, p). */
function matmul(a, b, m, k, p) {
  const out = new Float32Array(m * p);
  const acc = new Float64Array(p);
  for (let i = 0; i < m; i++) {
    acc.fill(0);
    for (let t = 0; t < k; t++) {
      const w = a[i * k + t];
      if (w === 0) continue;
      for (let c = 0; c < p; c++) acc[c] += w * b[t * p + c];
    }
    out.set(acc, i * p);
  }
  return out;
}
