// The Web Worker (type "module") that runs multilingual-e5-small for the page: it answers the
// messages of the contract between the browser model and the page (load, run, layer, head,
// embed), one at a time, in the order they came.
// Python twin: mha/models/e5.py (the model it runs; see e5.js).
//
// Every request carries a numeric id that its replies repeat. Errors are replied, never
// swallowed: {type: "error", id, code, message, detail}, code "too-long" (before any compute),
// "download", "format" or "internal". Result arrays are transferred, not copied.
//
// The worker keeps, for the last few runs, only their token ids and hidden states
// ((layers + 1) * n * d_model float32, 10 MB at 512 tokens): a "layer" or "head" request
// recomputes what it needs from its layer's input, a "strip" request copies one token's
// vectors ((layers + 1, d_model)) out of them.

import { loadE5, QUERY } from "./e5.js";
import { release } from "./e5bin.js";

/** Runs whose hidden states are kept for "layer" and "head" requests (oldest dropped first). */
const KEPT_RUNS = 2;

let model = null;              // E5, after "load"
let ready = null;              // the "ready" reply's fields, for a repeated "load"
const runs = new Map();        // run id -> {tokens, ids, n, hidden}

const handlers = {
  async load({ id, base }) {
    if (!base) throw new Error('"load" needs base, the URL of the folder assets/e5/');
    if (!model) {
      const loaded = await loadE5(base, ({ loaded, total }) =>
        post({ type: "progress", id, phase: "download", loaded, total }));
      model = loaded.model;
      const m = model.manifest;
      ready = {
        manifest: { ...m.sizes, special: m.special, source_sha256: m.source_sha256,
          download_bytes: loaded.total, files: m.files },
        cached: loaded.cached,
      };
    }
    post({ type: "ready", id, ...ready });
  },

  async run({ id, text, hidden: send = true }) {
    const e5 = needModel();
    const { tokens, ids } = e5.encode(String(text));             // "too-long" before any compute
    const n = ids.length;
    post({ type: "tokens", id, tokens, ids: Int32Array.from(ids) });
    const x0 = await e5.embed0(ids, ({ loaded, total }) =>
      post({ type: "progress", id, phase: "rows", loaded, total }));
    const start = performance.now();
    const { hidden, attentions, norms } = e5.forward(x0, n, {
      onLayer: layer => post({ type: "progress", id, phase: "layer", layer, layers: e5.layers }),
    });
    const ms = performance.now() - start;
    release(x0);
    runs.set(id, { tokens, ids, n, hidden });
    while (runs.size > KEPT_RUNS) runs.delete(runs.keys().next().value);
    // The worker keeps its own hidden states; the page gets a copy only if it asks (hidden:
    // false: 10 MB less at 512 tokens, its "strip" requests fetch a token's rows).
    const copy = send ? hidden.slice() : null;
    post({ type: "result", id, n, tokens, ids: Int32Array.from(ids), attentions, norms,
      ...(copy ? { hidden: copy } : {}), ms },
      [attentions.buffer, norms.buffer, ...(copy ? [copy.buffer] : [])]);
  },

  async strip({ id, run, token }) {
    const e5 = needModel();
    const kept = needRun(run);
    const rows = e5.strip(kept.hidden, kept.n, token);
    post({ type: "strip", id, run, token, rows }, [rows.buffer]);
  },

  async layer({ id, run, layer, head = null, parts: names = null }) {
    const e5 = needModel();
    const kept = needRun(run);
    checkLayer(layer, e5);
    if (head !== null && !(Number.isInteger(head) && head >= 0 && head < e5.h)) {
      throw coded("internal", `head must be 0..${e5.h - 1} or null, got ${head}`, { head });
    }
    const parts = pick(e5.layer(kept.hidden, kept.n, layer, head), names, "a layer");
    const buffers = [...new Set(Object.values(parts).map(a => a.buffer))];
    post({ type: "layer", id, run, layer, head, n: kept.n, parts }, buffers);
  },

  async head({ id, run, layer, head, temperature = 1, mask = "none", window = 0, parts: names = null }) {
    const e5 = needModel();
    const kept = needRun(run);
    checkLayer(layer, e5);
    const wanted = names === null ? null : [].concat(names);
    const outputs = !wanted || wanted.includes("output") || wanted.includes("baseline_output");
    const out = pick(e5.head(kept.hidden, kept.n, layer, head, { temperature, mask, window, outputs }),
      wanted, "a head's reply");
    post({ type: "head", id, run, layer, head, n: kept.n, ...out },
      Object.values(out).map(a => a.buffer));
  },

  async embed({ id, text, prefix = QUERY }) {
    const e5 = needModel();
    const vector = await e5.embed(String(text), prefix, ({ loaded, total }) =>
      post({ type: "progress", id, phase: "rows", loaded, total }));
    post({ type: "embed", id, vector }, [vector.buffer]);
  },
};

/**
 * Only the arrays of `all` named in `names` (null: all of them), the others freed now; a name
 * that is not one of them is refused: "no such part of <what>: ...; the parts are ...".
 */
function pick(all, names, what) {
  if (names === null) return all;
  const wanted = [].concat(names);
  const unknown = wanted.filter(name => !Object.hasOwn(all, name));
  if (unknown.length) {
    for (const array of Object.values(all)) release(array);
    throw coded("internal", `no such part of ${what}: ${unknown.join(", ")}; the parts are `
      + Object.keys(all).join(", "), { parts: unknown });
  }
  for (const name of Object.keys(all)) {
    if (!wanted.includes(name)) { release(all[name]); delete all[name]; }
  }
  return all;
}

function needModel() {
  if (!model) throw coded("internal", 'the model is not loaded: send "load" first');
  return model;
}

function needRun(run) {
  const kept = runs.get(run);
  if (!kept) throw coded("internal", `no run ${run} is kept (the last ${KEPT_RUNS} runs are)`, { run });
  return kept;
}

function checkLayer(layer, e5) {
  if (!(Number.isInteger(layer) && layer >= 0 && layer < e5.layers)) {
    throw coded("internal", `layer must be 0..${e5.layers - 1}, got ${layer}`, { layer });
  }
}

function coded(code, message, detail) {
  const error = new Error(message);
  error.code = code;
  error.detail = detail;
  return error;
}

function post(message, transfer = []) {
  self.postMessage(message, transfer);
}

// One request at a time, in order: each waits for the one before it.
let queue = Promise.resolve();

self.onmessage = event => {
  const request = event.data || {};
  queue = queue.then(async () => {
    const handler = Object.hasOwn(handlers, request.type) ? handlers[request.type] : null;
    try {
      if (!handler) throw coded("internal", `unknown request type ${request.type}`);
      await handler(request);
    } catch (error) {
      post({ type: "error", id: request.id, code: error.code || "internal",
        message: String(error && error.message || error), detail: error.detail ?? null });
    }
  });
};

// Anything thrown outside a request (a promise nobody awaited) is reported too.
self.addEventListener("unhandledrejection", event => {
  const error = event.reason || {};
  post({ type: "error", id: null, code: error.code || "internal",
    message: String(error.message || error), detail: error.detail ?? null });
});
