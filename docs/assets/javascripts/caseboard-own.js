/*
 * The case board's "your own case" (docs/<lang>/caseboard.md, #your-case): the reader types a
 * sentence and the browser's multilingual-e5-small (docs/assets/javascripts/e5/, run in the Web
 * Worker e5/worker.js; the contract is the worker's header) reads it, layer by layer.
 *
 * Four views, each in the container the page puts under its heading:
 * - #own-case (input): the sentence, a button that says what the first run downloads (the
 *   build's data-download, in bytes), a progress line, the tokens as chips, and the sentence
 *   handed to the real-heads board (window.caseBoardReal.addOwn, caseboard-real.js);
 * - #own-case-head (inside one head): a layer and a head (following the real board while it
 *   shows this sentence), the head's weights as a heatmap; a cell (query i, key j) taken apart
 *   into its d_k = 32 products q_i[c] k_j[c], their sum, times 1/sqrt(d_k), the score, and the
 *   row's softmax that gives the weight, from the worker's "head" reply;
 * - #own-case-knobs (knobs on a real head): temperature factor and mask on that head's real
 *   scores (the worker's "head" request), its new weights and how far its output moved;
 * - #own-case-forward (the forward pass): a token's 384 numbers after the embeddings and each
 *   layer (the worker's "strip" reply: the hidden states stay in the worker), how much each
 *   layer changed them, and one layer stepped through its parts (the worker's "layer" reply).
 *
 * Nothing is requested until the button is pressed: the worker is started then, and it fetches
 * only the files under assets/e5/ (kept in Cache Storage). The sentence goes to the worker only,
 * never over the network. Without data-download (a build without the model) nothing is built.
 *
 * Colours: weights in the ink of the text at strength sqrt(weight), as the other boards draw
 * them; signed numbers purple (positive) and olive (negative) at strength |value| / SCALE, the
 * lab's colours. Heatmaps are canvases one pixel per cell, scaled up by CSS.
 *
 * Tests read window.caseBoardOwn (state and the numbers each view shows) and drive the views
 * through their controls.
 */
(function () {
  "use strict";

  var script = document.currentScript;
  var root = document.getElementById("own-case");
  if (!script || !root || !root.hasAttribute("data-download")) return;
  var DOWNLOAD = Number(root.getAttribute("data-download"));
  var LANG = document.documentElement.lang === "en" ? "en" : "zh";
  var BASE = new URL("../e5/", script.src).href;           // assets/e5/
  var WORKER = new URL("e5/worker.js", script.src).href;   // assets/javascripts/e5/worker.js
  var LAYERS = 12, HEADS = 12, D_MODEL = 384, D_K = 32, D_FF = 1536, MAX_TOKENS = 512;
  var SCALE = 1.5;       // the hidden states' colour scale: -SCALE .. SCALE
  var HEAD_SCALE = 0.5;  // a head's output (the knobs' strips): -HEAD_SCALE .. HEAD_SCALE
  var TAUS = [-3, 3];    // the temperature factor's slider, as log2(tau), steps of 0.25
  var MARK = "\u2581";   // SentencePiece's word-start mark

  var WORDS = {
    zh: {
      input: "你的句子",
      run: "读一读",
      download_run: "下载模型（约 {size}）并读一读",
      size: "{mb} MB",
      busy: "正在读……",
      privacy: "句子只交给这个页面里的脚本，不发往任何地方；页面只从本站下载模型文件。",
      empty: "先写一句话：空白的内容没有什么可读的。",
      surrogates: "句子里有 {count} 个不成对的代理码元（半个字符），已换成 U+FFFD（�）再读。",
      starting: "正在启动模型……",
      downloading: "正在下载模型：{loaded} / {total} MB",
      rows: "正在取词元的嵌入：{loaded} / {total} KB",
      cached: "模型文件已在浏览器里，没有重新下载。",
      downloaded: "模型已下载。",
      tokenised: "切成了 {n} 个词元，开始读。",
      layer: "第 {layer} 层，共 {layers} 层",
      done: "读完了：{n} 个词元，12 层，用了 {ms} 毫秒。",
      tokens: "词元",
      word_start: "词首",
      jump: "到下面真实模型的板子上看全部注意力头",
      no_board: "真实模型的板子这次没能接收你的句子：",
      too_long: "这段文字切成了 {tokens} 个词元，模型最多只能读 {max} 个（连同 <s> 和 </s>）。请删短一些再试。",
      download_failed: "模型文件没有下载成功（{detail}）。检查一下网络，再按一次按钮试试。",
      format_failed: "模型文件的格式不对（{detail}）。",
      failed: "模型出错了：{detail}",
      worker_failed: "模型的脚本没能启动（{detail}）。",
      placeholder: "先在上面读一句话，这里就会画出来。",
      layer_label: "层",
      head_label: "注意力头",
      query: "查询",
      key: "键",
      heat_label: "{name} 的注意力权重热力图：行是查询，列是键。点一个格子，或用方向键移动，下面就把它拆开。",
      legend_weight: "注意力权重",
      legend_note: "颜色浓淡按权重的平方根",
      cell: "查询 {i}「{q}」→ 键 {j}「{k}」",
      products: "32 个乘积 q_i[c] × k_j[c]，c = 0 到 31",
      product: "c = {c}：{q} × {k} = {p}",
      sum: "32 个乘积之和",
      scaled: "乘 1/√32，就是分数 s",
      score: "模型算的分数",
      exp: "softmax：e^(s − m)，m 是这一行最大的分数",
      total: "这一行所有键的 e^(s − m) 之和",
      weight: "权重 = e^(s − m) ÷ 和",
      weight_model: "模型算的权重",
      colon: "：",
      readout: "分数 {score}，权重 {weight}",
      numbers: "32 个乘积的数",
      th_c: "c",
      temperature: "温度倍数 τ",
      sharper: "更尖",
      flatter: "更平",
      mask: "掩码",
      mask_none: "不加",
      mask_causal: "因果掩码",
      mask_window: "滑动窗口",
      window: "往前看的词元数",
      only_head: "只重算这一头：后面的层没有重算。",
      masked: "这种颜色的格子被掩码遮住，权重为 0",
      new_weights: "拧过旋钮的权重，{name}",
      change: "每个查询的输出变了多少：‖新输出 − 原输出‖",
      strip_base: "原输出",
      strip_new: "新输出",
      strip_diff: "差",
      strip_of: "查询 {i}「{q}」这一头的输出，384 个数",
      legend_signed: "正数紫色，负数橄榄绿；超出 ±{max} 的数画成最浓",
      token: "词元",
      strips: "这个词元的 384 个数，从嵌入到第 12 层",
      embeddings: "嵌入",
      layer_n: "第 {layer} 层",
      change_note: "横条：这一层让它变了多少，‖h_l − h_(l−1)‖",
      strip_read: "{layer}，第 {c} 个数：{value}",
      block: "一层里面",
      block_layer: "看哪一层",
      step_of: "第 {k} 站，共 {count} 站",
      prev: "上一站",
      next: "下一站",
      chosen_row: "你挑的词元（{token}）那一行加了框。",
      row_read: "{token} 这一行：最小 {min}，最大 {max}",
      parts: {
        x: ["输入 x", "这一层读进来的数：上一层的输出（第 1 层读的是嵌入）。"],
        weights: ["注意力权重", "选中的那个注意力头的权重，每一行和为 1。"],
        attention_out: ["注意力的输出", "12 个注意力头的报告拼起来，再乘 W^O 加偏置。"],
        residual1: ["残差连接", "x 加上注意力的输出：每个词元自己的数被原样带下去。"],
        norm1: ["层归一化", "把每一行调成平均 0、方差 1，再按学到的比例缩放和平移。"],
        ffn_in: ["前馈网络：升维", "每个词元各自乘一个 384 × 1536 的矩阵，升到 1536 维。"],
        gelu: ["前馈网络：GELU", "GELU 把负数压向 0，正数几乎原样留下。"],
        ffn_out: ["前馈网络：降维", "再乘一个 1536 × 384 的矩阵，回到 384 维。"],
        residual2: ["残差连接", "层归一化后的数加上前馈网络的输出。"],
        norm2: ["层归一化", "再归一化一次，就是这一层的输出，也就是下一层的输入 x。"]
      }
    },
    en: {
      input: "Your sentence",
      run: "Run",
      download_run: "Download the model (about {size}) and run",
      size: "{mb} MB",
      busy: "Reading…",
      privacy: "The sentence goes only to this page's own script, never over the network; the page downloads the model's files from this site only.",
      empty: "Type a sentence first: there is nothing to read in blank text.",
      surrogates: "The sentence had {count} unpaired surrogate code unit(s) (half a character); each was replaced by U+FFFD (�) before reading.",
      starting: "Starting the model…",
      downloading: "Downloading the model: {loaded} / {total} MB",
      rows: "Fetching the tokens' embeddings: {loaded} / {total} KB",
      cached: "The model's files were already in your browser: nothing downloaded.",
      downloaded: "Model downloaded.",
      tokenised: "{n} tokens; reading.",
      layer: "Layer {layer} of {layers}",
      done: "Done: {n} tokens, 12 layers, in {ms} ms.",
      tokens: "Tokens",
      word_start: "word start",
      jump: "See every head on the real-model board below",
      no_board: "The real-model board could not take your sentence this time: ",
      too_long: "This text is {tokens} tokens long; the model reads at most {max} (<s> and </s> included). Please shorten it and try again.",
      download_failed: "The model's files did not download ({detail}). Check the connection and press the button again.",
      format_failed: "The model's files are not in the expected format ({detail}).",
      failed: "The model failed: {detail}",
      worker_failed: "The model's script did not start ({detail}).",
      placeholder: "Read a sentence above and this view is drawn here.",
      layer_label: "Layer",
      head_label: "Head",
      query: "query",
      key: "key",
      heat_label: "Heatmap of {name}'s attention weights: rows are queries, columns keys. Click a cell, or move with the arrow keys, to take it apart below.",
      legend_weight: "Attention weight",
      legend_note: "colour strength follows the square root of the weight",
      cell: "Query {i} “{q}” → key {j} “{k}”",
      products: "The 32 products q_i[c] × k_j[c], c = 0 to 31",
      product: "c = {c}: {q} × {k} = {p}",
      sum: "Sum of the 32 products",
      scaled: "Times 1/√32: the score s",
      score: "The model's score",
      exp: "softmax: e^(s − m), m the row's largest score",
      total: "Sum of e^(s − m) over the row's keys",
      weight: "Weight = e^(s − m) ÷ sum",
      weight_model: "The model's weight",
      colon: ": ",
      readout: "score {score}, weight {weight}",
      numbers: "The 32 products as numbers",
      th_c: "c",
      temperature: "Temperature factor τ",
      sharper: "sharper",
      flatter: "flatter",
      mask: "Mask",
      mask_none: "none",
      mask_causal: "causal",
      mask_window: "sliding window",
      window: "tokens looked back",
      only_head: "This head only: later layers are not recomputed.",
      masked: "cells of this colour are hidden by the mask: weight 0",
      new_weights: "Weights with the knobs, {name}",
      change: "How far each query's output moved: ‖new output − original output‖",
      strip_base: "original",
      strip_new: "new",
      strip_diff: "change",
      strip_of: "This head's output for query {i} “{q}”, 384 numbers",
      legend_signed: "positive purple, negative olive; beyond ±{max} at full strength",
      token: "Token",
      strips: "This token's 384 numbers, from the embeddings to layer 12",
      embeddings: "embeddings",
      layer_n: "layer {layer}",
      change_note: "bars: how much the layer changed it, ‖h_l − h_(l−1)‖",
      strip_read: "{layer}, number {c}: {value}",
      block: "Inside one layer",
      block_layer: "Layer",
      step_of: "stage {k} of {count}",
      prev: "Previous",
      next: "Next",
      chosen_row: "The row of your token ({token}) is outlined.",
      row_read: "row of {token}: smallest {min}, largest {max}",
      parts: {
        x: ["input x", "What the layer reads: the previous layer's output (the embeddings, for layer 1)."],
        weights: ["attention weights", "The chosen head's weights; every row sums to 1."],
        attention_out: ["attention output", "The 12 heads' reports side by side, times W^O, plus its bias."],
        residual1: ["residual connection", "x plus the attention output: each token's own numbers carried on."],
        norm1: ["LayerNorm", "Each row brought to mean 0 and variance 1, then scaled and shifted as learnt."],
        ffn_in: ["feed-forward network: up", "Each token on its own times a 384 × 1536 matrix: 1536 numbers."],
        gelu: ["feed-forward network: GELU", "GELU squeezes negative numbers towards 0 and keeps positive ones nearly as they are."],
        ffn_out: ["feed-forward network: down", "Times a 1536 × 384 matrix, back to 384 numbers."],
        residual2: ["residual connection", "The normalised numbers plus the feed-forward network's output."],
        norm2: ["LayerNorm", "Normalised again: the layer's output, the next layer's input x."]
      }
    }
  }[LANG];
  var PARTS = ["x", "weights", "attention_out", "residual1", "norm1", "ffn_in", "gelu", "ffn_out",
               "residual2", "norm2"];

  // --- Small helpers ----------------------------------------------------------------------------

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function format(template, values) {
    return template.replace(/\{(\w+)\}/g, function (all, key) {
      return key in values ? values[key] : all;
    });
  }

  var uid = 0;
  function labelled(text, control) {  // a <label> for `control` (given an id if it has none)
    if (!control.id) control.id = "own-case-" + (++uid);
    var label = el("label", "own-case__label", text);
    label.htmlFor = control.id;
    return label;
  }

  function select(options, value) {
    var node = el("select", "own-case__select");
    options.forEach(function (option) {
      var item = el("option", null, option[1]);
      item.value = String(option[0]);
      node.append(item);
    });
    node.value = String(value);
    return node;
  }

  function number(x, digits) {  // a number as the page prints it: true minus sign
    digits = digits === undefined ? 4 : digits;
    var tiny = x !== 0 && Math.abs(x) < Math.pow(10, -digits);   // 3.2e-7, not 0.0000
    var text = tiny ? x.toExponential(1) : x.toFixed(digits);
    if (/^-0\.?0*$/.test(text)) text = text.slice(1);
    return text.replace(/-/g, "\u2212");
  }

  function megabytes(bytes) {
    return (bytes / 1048576).toFixed(1);
  }

  /* A token as shown: the word-start mark kept (drawn faint), control characters made visible. */
  function tokenNode(token, className) {
    var node = el("span", className || "own-case__token-text");
    var parts = token.split(MARK);
    parts.forEach(function (part, i) {
      if (i > 0) {
        node.append(el("span", "own-case__mark", MARK));
        node.lastChild.setAttribute("aria-hidden", "true");
        node.append(el("span", "own-case__sr", WORDS.word_start + " "));
      }
      if (part) node.append(document.createTextNode(visible(part)));
    });
    return node;
  }

  /* C0 controls as their Control Pictures (U+2400 + code); the invisible marks that turn the
     direction of text (a reader's token can be one) by their code point: "[U+202E]". */
  function visible(text) {
    return text.replace(/[\u0000-\u001f]/g, function (c) {
      return String.fromCharCode(0x2400 + c.charCodeAt(0));
    }).replace(/[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, function (c) {
      return "[U+" + c.charCodeAt(0).toString(16).toUpperCase() + "]";
    });
  }

  function plain(token) {  // a token in running text
    return visible(token);
  }

  /* The text with every unpaired surrogate replaced by U+FFFD, and how many there were. */
  function wellFormed(text) {
    var out = "", count = 0;
    for (var i = 0; i < text.length; i++) {
      var c = text.charCodeAt(i);
      if (c >= 0xd800 && c <= 0xdbff) {
        var d = i + 1 < text.length ? text.charCodeAt(i + 1) : 0;
        if (d >= 0xdc00 && d <= 0xdfff) { out += text[i] + text[i + 1]; i++; continue; }
        out += "\ufffd"; count++;
      } else if (c >= 0xdc00 && c <= 0xdfff) {
        out += "\ufffd"; count++;
      } else {
        out += text[i];
      }
    }
    return {text: out, count: count};
  }

  // --- Colours (from the page's CSS, so both palettes work) --------------------------------------

  var probe = null;
  function rgba(value) {  // a CSS colour as [r, g, b, a]
    if (!probe) { probe = el("span"); probe.hidden = true; root.append(probe); }
    probe.style.color = "";
    probe.style.color = value;
    var parts = getComputedStyle(probe).color.match(/[\d.]+/g).map(Number);
    return [parts[0], parts[1], parts[2], parts.length > 3 ? parts[3] : 1];
  }

  var colours = null;
  function palette() {
    if (!colours) {
      var paper = rgba("var(--md-default-bg-color)");
      var over = function (c) {  // c laid over the page's background
        return [0, 1, 2].map(function (i) { return paper[i] + (c[i] - paper[i]) * c[3]; });
      };
      colours = {paper: paper, ink: over(rgba("var(--own-ink)")),
                 pos: over(rgba("var(--own-pos)")), neg: over(rgba("var(--own-neg)")),
                 hatch: over(rgba("var(--own-hatch)"))};
    }
    return colours;
  }

  function mix(colour, strength, out, at) {  // paper -> colour at strength 0..1, into out[at..]
    var paper = colours.paper;
    out[at] = paper[0] + (colour[0] - paper[0]) * strength;
    out[at + 1] = paper[1] + (colour[1] - paper[1]) * strength;
    out[at + 2] = paper[2] + (colour[2] - paper[2]) * strength;
    out[at + 3] = 255;
  }

  /* A canvas of cols x rows pixels, one per number: values[r * cols + c] drawn by paint(value,
     out, at), or a hatch where masked(r, c). */
  function paintCanvas(canvas, values, rows, cols, paint, masked) {
    palette();
    canvas.width = cols;
    canvas.height = rows;
    var context = canvas.getContext("2d");
    var image = context.createImageData(cols, rows);
    var data = image.data;
    for (var r = 0; r < rows; r++) {
      for (var c = 0; c < cols; c++) {
        var at = (r * cols + c) * 4;
        if (masked && masked(r, c)) mix(colours.hatch, 1, data, at);
        else paint(values[r * cols + c], data, at);
      }
    }
    context.putImageData(image, 0, 0);
  }

  function paintWeight(w, out, at) { mix(colours.ink, Math.sqrt(Math.max(0, Math.min(1, w))), out, at); }

  function signedPainter(scale) {
    return function (v, out, at) {
      mix(v >= 0 ? colours.pos : colours.neg, Math.min(1, Math.abs(v) / scale), out, at);
    };
  }

  function weightLegend() {
    var legend = el("div", "own-case__legend");
    legend.append(el("span", "own-case__legend-title", WORDS.legend_weight));
    var bar = el("span", "own-case__ramp own-case__ramp--weight");
    bar.setAttribute("aria-hidden", "true");
    var ticks = el("span", "own-case__ticks");
    [["0", 0], ["0.25", 50], ["1", 100]].forEach(function (tick) {
      var t = el("span", "own-case__tick", tick[0]);
      t.style.left = tick[1] + "%";
      ticks.append(t);
    });
    var scale = el("span", "own-case__scale");
    scale.append(bar, ticks);
    legend.append(scale, el("span", "own-case__note", WORDS.legend_note));
    return legend;
  }

  function signedLegend(max) {
    var legend = el("div", "own-case__legend");
    var bar = el("span", "own-case__ramp own-case__ramp--signed");
    bar.setAttribute("aria-hidden", "true");
    var ticks = el("span", "own-case__ticks");
    [[number(-max, 1), 0], ["0", 50], [number(max, 1), 100]].forEach(function (tick) {
      var t = el("span", "own-case__tick", tick[0]);
      t.style.left = tick[1] + "%";
      ticks.append(t);
    });
    var scale = el("span", "own-case__scale");
    scale.append(bar, ticks);
    legend.append(scale, el("span", "own-case__note",
                            format(WORDS.legend_signed, {max: number(max, 1)})));
    return legend;
  }

  // --- The worker -----------------------------------------------------------------------------

  var worker = null;
  var nextId = 1;
  var pending = {};   // id -> {final, resolve, reject, each}
  var loaded = null;  // Promise of the "ready" reply

  function startWorker() {
    if (worker) return worker;
    worker = new Worker(WORKER, {type: "module"});
    worker.onmessage = function (event) {
      var message = event.data || {};
      var call = pending[message.id];
      if (!call) {  // an error of no request (thrown outside one): said, not swallowed
        if (message.type === "error") alarm(errorText(message));
        return;
      }
      if (message.type === "error") {
        delete pending[message.id];
        call.reject(message);
      } else if (message.type === call.final) {
        delete pending[message.id];
        call.resolve(message);
      } else if (call.each) {
        call.each(message);
      }
    };
    worker.onerror = function (event) {  // the module did not load, or threw outside a reply
      event.preventDefault();
      stopWorker({type: "error", code: "worker",
                  message: event.message || "worker error", detail: event.filename || ""});
    };
    worker.onmessageerror = function () {
      stopWorker({type: "error", code: "internal", message: "message could not be read"});
    };
    return worker;
  }

  function stopWorker(error) {
    if (worker) worker.terminate();
    worker = null;
    loaded = null;
    var calls = pending;
    pending = {};
    Object.keys(calls).forEach(function (id) { calls[id].reject(error); });
  }

  /* Send a request; the Promise settles with the reply of type `final` (or rejects with an
     "error" reply); `each` sees the replies before it. message.id is set. */
  function ask(message, final, each) {
    message.id = nextId++;
    return new Promise(function (resolve, reject) {
      pending[message.id] = {final: final, resolve: resolve, reject: reject, each: each};
      try {
        startWorker().postMessage(message);
      } catch (error) {
        delete pending[message.id];
        reject({type: "error", code: "worker", message: String(error && error.message || error)});
      }
    });
  }

  function load(onProgress) {
    if (!loaded) {
      loaded = ask({type: "load", base: BASE}, "ready", onProgress);
      loaded.catch(function () { stopWorker({type: "error", code: "worker", message: "stopped"}); });
    }
    return loaded;
  }

  function errorText(error) {
    error = error || {};
    var detail = error.detail;
    var detailText = detail === undefined || detail === null ? "" :
      (typeof detail === "object" ? JSON.stringify(detail) : String(detail));
    var said = [error.message, detailText].filter(Boolean).join("; ") || String(error);
    if (error.code === "too-long") {
      return format(WORDS.too_long, {tokens: detail && detail.tokens, max: detail && detail.max || MAX_TOKENS});
    }
    if (error.code === "download") return format(WORDS.download_failed, {detail: said});
    if (error.code === "format") return format(WORDS.format_failed, {detail: said});
    if (error.code === "worker") return format(WORDS.worker_failed, {detail: said});
    return format(WORDS.failed, {detail: said});
  }

  // --- State ----------------------------------------------------------------------------------

  var run = null;   // {id, text, tokens, ids, n, attentions, norms, ms}; the worker keeps the hidden states
  var sel = {layer: 0, head: 2, query: 0, key: 0, tau: 0, mask: "none", window: 2, token: 1,
             block: 0, step: 0};
  var shown = {head: null, knobs: null, layer: null, strip: null};   // the latest replies drawn
  var asked = {head: 0, knobs: 0, layer: 0, strip: 0};               // ids of the latest requests
  var ui = {};

  // --- The input view ---------------------------------------------------------------------------

  function buildInput() {
    var panel = el("div", "own-case__panel");
    ui.input = el("textarea", "own-case__input");
    ui.input.rows = 3;
    ui.input.value = root.getAttribute("data-sentence") || "";
    ui.input.spellcheck = false;
    ui.button = el("button", "own-case__button md-button md-button--primary",
                   format(WORDS.download_run, {size: format(WORDS.size, {mb: megabytes(DOWNLOAD)})}));
    ui.button.type = "button";
    ui.button.addEventListener("click", go);
    ui.input.addEventListener("keydown", function (event) {  // Ctrl/Cmd + Enter runs
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { event.preventDefault(); go(); }
    });
    ui.progress = el("progress", "own-case__progress");
    ui.progress.hidden = true;
    ui.progress.setAttribute("aria-hidden", "true");
    ui.status = el("p", "own-case__status");
    ui.status.setAttribute("role", "status");
    ui.status.setAttribute("aria-live", "polite");
    ui.alert = el("div", "own-case__alert");
    ui.alert.setAttribute("role", "alert");
    ui.note = el("p", "own-case__note own-case__privacy", WORDS.privacy);
    ui.tokens = el("ol", "own-case__tokens");
    ui.tokens.setAttribute("aria-label", WORDS.tokens);
    ui.jump = el("a", "own-case__jump", WORDS.jump);
    ui.jump.href = "#caseboard-real";
    ui.jump.hidden = true;
    var actions = el("div", "own-case__actions");
    actions.append(ui.button);
    panel.append(labelled(WORDS.input, ui.input), ui.input, actions, ui.progress, ui.status,
                 ui.alert, ui.tokens, ui.jump, ui.note);
    root.append(panel);
  }

  function say(text) { ui.status.textContent = text; }

  function alarm(text) {
    ui.alert.textContent = "";
    if (text) ui.alert.append(el("p", null, text));
  }

  var lastSaid = -1;
  function onProgress(message) {
    if (message.type !== "progress") return;
    if (message.phase === "download" || message.phase === "rows") {
      ui.progress.hidden = false;
      ui.progress.max = message.total || 1;
      ui.progress.value = message.loaded || 0;
      var tenth = Math.floor(10 * (message.loaded || 0) / (message.total || 1));
      if (tenth !== lastSaid) {  // the live region speaks every tenth, not every chunk
        lastSaid = tenth;
        say(message.phase === "download"
          ? format(WORDS.downloading, {loaded: megabytes(message.loaded), total: megabytes(message.total)})
          : format(WORDS.rows, {loaded: Math.round(message.loaded / 1024), total: Math.round(message.total / 1024)}));
      }
    } else if (message.phase === "layer") {
      ui.progress.hidden = false;
      ui.progress.max = message.layers || LAYERS;
      ui.progress.value = message.layer;
      say(format(WORDS.layer, {layer: message.layer, layers: message.layers || LAYERS}));
    }
  }

  function onRunMessage(message) {
    if (message.type === "tokens") {
      showTokens(message.tokens);
      say(format(WORDS.tokenised, {n: message.tokens.length}));
    } else {
      onProgress(message);
    }
  }

  var chipsOf = null;   // the tokens the chips show
  function showTokens(tokens) {
    // The "result" repeats the "tokens" message's tokens: the chips stay (at 512 tokens,
    // 2,500 elements not built twice).
    if (chipsOf && chipsOf.length === tokens.length &&
        chipsOf.every(function (token, i) { return token === tokens[i]; })) return;
    chipsOf = tokens.slice();
    ui.tokens.textContent = "";
    tokens.forEach(function (token, i) {
      var chip = el("li", "own-case__chip");
      chip.append(el("span", "own-case__index", String(i)), tokenNode(token));
      ui.tokens.append(chip);
    });
  }

  var running = false;
  function go() {
    if (running) return;
    alarm("");
    var checked = wellFormed(ui.input.value);
    var text = checked.text;
    if (!text.trim()) {
      alarm(WORDS.empty);
      ui.input.focus();
      return;
    }
    running = true;
    ui.button.disabled = true;
    ui.button.setAttribute("aria-busy", "true");
    var label = ui.button.textContent;
    ui.button.textContent = WORDS.busy;
    lastSaid = -1;
    say(checked.count ? format(WORDS.surrogates, {count: checked.count}) : WORDS.starting);
    var note = checked.count ? format(WORDS.surrogates, {count: checked.count}) + " " : "";
    load(onProgress).then(function (ready) {
      label = WORDS.run;
      say(note + (ready.cached ? WORDS.cached : WORDS.downloaded));
      lastSaid = -1;
      // The hidden states stay in the worker (10 MB at 512 tokens): the strips ask for a
      // token's 13 rows of them ("strip").
      return ask({type: "run", text: text, hidden: false}, "result", onRunMessage);
    }).then(function (result) {
      received(text, result);
      say(note + format(WORDS.done, {n: result.n, ms: Math.round(result.ms || 0)}));
    }).catch(function (error) {
      alarm(errorText(error));
      say("");
      if (window.console) console.warn("caseboard-own:", error);
    }).then(function () {
      running = false;
      ui.progress.hidden = true;
      ui.button.disabled = false;
      ui.button.removeAttribute("aria-busy");
      ui.button.textContent = label;
    });
  }

  /* Free the arrays of a worker's reply now, not at the page's next garbage collection (a
     layer's parts are 17 MB at 512 tokens, and a reader who changes head or layer replaces
     them often): each typed array of the reply (and of its parts) that is its whole buffer is
     detached, ArrayBuffer.prototype.transfer(0) where the browser has it. The rule of release
     in e5/e5bin.js, for this classic script; only for what this panel alone holds. */
  function release(reply) {
    if (!reply) return;
    [reply, reply.parts || {}].forEach(function (holder) {
      Object.keys(holder).forEach(function (key) {
        var a = holder[key], buffer = ArrayBuffer.isView(a) ? a.buffer : null;
        if (buffer && typeof buffer.transfer === "function" && !buffer.detached &&
            a.byteOffset === 0 && a.byteLength === buffer.byteLength) {
          buffer.transfer(0);
        }
      });
    });
  }

  /* Ask the worker for what the view `view` (head, knobs, layer, strip) draws; only the reply
     to its latest request is kept (shown[view], after keep(reply) if given) and drawn: an
     older reply, and the one the new reply replaces, are freed at once (release). */
  function askLatest(view, message, draw, keep) {
    var promise = ask(message, message.type);
    asked[view] = message.id;
    promise.then(function (reply) {
      if (reply.id !== asked[view]) { release(reply); return; }
      if (keep) keep(reply);
      release(shown[view]);
      shown[view] = reply;
      draw();
    }).catch(function (error) { alarm(errorText(error)); });
  }

  /* A run's result: kept, drawn in every view, and handed to the real-heads board. */
  function received(text, result) {
    [shown.head, shown.knobs, shown.layer, shown.strip].forEach(release);   // its attentions went to the board
    run = {id: result.id, text: text, tokens: result.tokens, ids: result.ids, n: result.n,
           attentions: result.attentions, norms: result.norms, ms: result.ms};
    showTokens(run.tokens);
    sel.query = Math.min(sel.query, run.n - 1);
    sel.key = Math.min(sel.key, run.n - 1);
    sel.token = Math.min(run.n > 2 ? 1 : 0, run.n - 1);
    sel.window = Math.min(sel.window, run.n - 1);
    shown = {head: null, knobs: null, layer: null, strip: null};
    fillTokenSelect();
    ui.window.max = String(run.n - 1);
    ui.window.value = String(sel.window);
    handToBoard();
    requestHead();
    requestKnobs();
    requestStrips();
    requestLayer();
    ["head", "knobs", "forward"].forEach(function (name) {
      ui[name + "View"].hidden = false;
      ui[name + "Empty"].hidden = true;
    });
  }

  function handToBoard() {
    var board = window.caseBoardReal;
    ui.jump.hidden = true;
    if (!board || typeof board.addOwn !== "function") {
      alarm(WORDS.no_board + "window.caseBoardReal.addOwn");
      return;
    }
    var mine = run;
    // Handed over, not copied: at 512 tokens the attentions are 12 x 12 x 512 x 512 bytes
    // (38 MB), and this panel does not read them again. The board draws contributions from
    // them and the norms (12 x 512 x 12 floats). addOwn may return a Promise.
    var attentions = run.attentions, norms = run.norms;
    run.attentions = run.norms = null;
    new Promise(function (resolve) {
      resolve(board.addOwn({text: run.text, tokens: run.tokens.slice(), layers: LAYERS,
                            heads: HEADS, n: run.n, bytes: attentions,
                            norms: norms || null}));
    }).then(function () {
      if (mine === run) ui.jump.hidden = false;
    }, function (error) {
      alarm(WORDS.no_board + String(error && error.message || error));
    });
  }

  /* The real board's choice, followed while it shows this sentence. */
  function onBoardChange(event) {
    if (!run) return;
    var board = window.caseBoardReal;
    var state = event && event.detail && typeof event.detail === "object" ? event.detail
      : (board && board.state ? board.state() : null);
    if (!state) return;
    if (state.sentence !== "own" || state.model !== "e5") return;
    var layer = Number(state.layer) - 1, head = Number(state.head) - 1;   // counted from 1 there
    if (!(layer >= 0 && layer < LAYERS && head >= 0 && head < HEADS)) return;
    if (layer === sel.layer && head === sel.head) return;
    sel.layer = layer;
    sel.head = head;
    ui.layer.value = String(layer);
    ui.head.value = String(head);
    requestHead();
    requestKnobs();
    requestLayer();
  }

  // --- A heatmap: canvas + labels + the chosen cell ---------------------------------------------

  /* A heatmap of rows x cols cells with optional row/column token labels and a chosen cell
     (or row) outlined. Returns {node, canvas, draw(values, rows, cols, paint, masked), mark(r, c)}. */
  function heatmap(options) {
    var node = el("div", "own-case__heat");
    var box = el("div", "own-case__heat-box");
    var canvas = el("canvas", "own-case__canvas");
    var mark = el("div", "own-case__mark-cell");
    var band = el("div", "own-case__mark-row");
    mark.setAttribute("aria-hidden", "true");
    band.setAttribute("aria-hidden", "true");
    var rowLabels = el("div", "own-case__row-labels");
    var colLabels = el("div", "own-case__col-labels");
    rowLabels.setAttribute("aria-hidden", "true");
    colLabels.setAttribute("aria-hidden", "true");
    var plot = el("div", "own-case__plot");
    plot.append(canvas, band, mark);
    box.append(colLabels, rowLabels, plot);
    node.append(box);
    var shape = {rows: 0, cols: 0, cell: 8, cellW: 8};

    function layout(rows, cols, rowTokens, colTokens) {
      shape.rows = rows; shape.cols = cols;
      var width = Math.max(200, (node.clientWidth || root.clientWidth || 320) - 4);
      var labels = rowTokens && rows <= 48;
      var labelWidth = labels ? Math.min(88, Math.round(width * 0.28)) : 0;
      var cellW = Math.max(1, (width - labelWidth) / cols);
      if (options.square) cellW = Math.min(cellW, 28);
      var cell = options.square ? Math.max(2, Math.floor(cellW)) : Math.max(3, Math.min(14, Math.floor(360 / rows)));
      if (options.square) cellW = cell;
      shape.cell = cell; shape.cellW = cellW;
      canvas.style.width = (cellW * cols) + "px";
      canvas.style.height = (cell * rows) + "px";
      plot.style.width = (cellW * cols) + "px";
      plot.style.height = (cell * rows) + "px";
      box.style.setProperty("--own-label", labelWidth + "px");
      rowLabels.textContent = "";
      colLabels.textContent = "";
      rowLabels.hidden = !labels;
      colLabels.hidden = !(labels && colTokens && cell >= 14);
      if (labels) {
        rowLabels.style.height = (cell * rows) + "px";
        rowTokens.forEach(function (token) {
          var label = tokenNode(token, "own-case__row-label");
          label.style.height = cell + "px";
          label.style.lineHeight = cell + "px";
          label.style.fontSize = Math.min(12, Math.max(7, cell - 3)) + "px";
          rowLabels.append(label);
        });
      }
      if (!colLabels.hidden) {
        colTokens.forEach(function (token) {
          var label = tokenNode(token, "own-case__col-label");
          label.style.width = cell + "px";
          label.style.fontSize = Math.min(12, cell - 3) + "px";
          colLabels.append(label);
        });
      }
    }

    function place(r, c) {
      if (r === null || r === undefined) { mark.hidden = true; band.hidden = true; return; }
      band.hidden = false;
      band.style.top = (r * shape.cell) + "px";
      band.style.height = shape.cell + "px";
      band.classList.toggle("own-case__mark-row--alone", c === null || c === undefined);
      if (c === null || c === undefined) { mark.hidden = true; return; }
      mark.hidden = false;
      mark.style.top = (r * shape.cell) + "px";
      mark.style.left = (c * shape.cellW) + "px";
      mark.style.width = shape.cellW + "px";
      mark.style.height = shape.cell + "px";
    }

    function cellAt(event) {
      var rect = canvas.getBoundingClientRect();
      var c = Math.floor((event.clientX - rect.left) / (rect.width / shape.cols));
      var r = Math.floor((event.clientY - rect.top) / (rect.height / shape.rows));
      if (r < 0 || c < 0 || r >= shape.rows || c >= shape.cols) return null;
      return [r, c];
    }

    return {node: node, canvas: canvas, plot: plot, layout: layout, place: place, cellAt: cellAt,
            shape: shape};
  }

  // --- Inside one head --------------------------------------------------------------------------

  function headName() {
    return "L" + (sel.layer + 1) + "-H" + (sel.head + 1);
  }

  function buildHead() {
    var container = document.getElementById("own-case-head");
    if (!container) return;
    ui.headEmpty = el("p", "own-case__empty", WORDS.placeholder);
    ui.headView = el("div", "own-case__view");
    ui.headView.hidden = true;
    var bar = el("div", "own-case__bar");
    var layers = [], heads = [];
    for (var i = 0; i < LAYERS; i++) layers.push([i, String(i + 1)]);
    for (var j = 0; j < HEADS; j++) heads.push([j, String(j + 1)]);
    ui.layer = select(layers, sel.layer);
    ui.head = select(heads, sel.head);
    [[WORDS.layer_label, ui.layer], [WORDS.head_label, ui.head]].forEach(function (pair) {
      var field = el("span", "own-case__field");
      field.append(labelled(pair[0], pair[1]), pair[1]);
      bar.append(field);
    });
    ui.layer.addEventListener("change", function () {
      sel.layer = Number(ui.layer.value); requestHead(); requestKnobs();
    });
    ui.head.addEventListener("change", function () {
      sel.head = Number(ui.head.value); requestHead(); requestKnobs(); requestLayer();
    });
    ui.headMap = heatmap({square: true});
    ui.headMap.canvas.tabIndex = 0;
    ui.headMap.canvas.setAttribute("role", "img");
    ui.headReadout = el("p", "own-case__readout");
    ui.headReadout.setAttribute("aria-live", "polite");
    ui.headMap.canvas.setAttribute("aria-describedby", "own-case-head-readout");
    ui.headReadout.id = "own-case-head-readout";
    ui.headMap.canvas.addEventListener("click", function (event) {
      var at = ui.headMap.cellAt(event);
      if (at) chooseCell(at[0], at[1]);
    });
    ui.headMap.canvas.addEventListener("keydown", function (event) {
      if (!run) return;
      var moves = {ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1],
                   Home: [0, -run.n], End: [0, run.n]};
      var move = moves[event.key];
      if (!move) return;
      event.preventDefault();
      chooseCell(Math.max(0, Math.min(run.n - 1, sel.query + move[0])),
                 Math.max(0, Math.min(run.n - 1, sel.key + move[1])));
    });
    ui.breakdown = el("div", "own-case__breakdown");
    ui.headView.append(bar, weightLegend(), ui.headMap.node, ui.headReadout, ui.breakdown);
    container.append(ui.headEmpty, ui.headView);
  }

  function requestHead() {
    if (!run) return;
    // What this view draws: not the outputs (two (n, n) x (n, 384) products fewer to compute,
    // 1.6 MB fewer at 512 tokens), nor v.
    var message = {type: "head", run: run.id, layer: sel.layer, head: sel.head, temperature: 1,
                   mask: "none", window: 0, parts: ["scores", "weights", "q", "k"]};
    askLatest("head", message, drawHead);
  }

  function drawHead() {
    var reply = shown.head;
    if (!reply || !run) return;
    var map = ui.headMap;
    map.layout(run.n, run.n, run.tokens, run.tokens);
    paintCanvas(map.canvas, reply.weights, run.n, run.n, paintWeight);
    map.canvas.setAttribute("aria-label", format(WORDS.heat_label, {name: headName()}));
    map.place(sel.query, sel.key);
    drawBreakdown();
  }

  function chooseCell(i, j) {
    sel.query = i;
    sel.key = j;
    if (shown.head) {
      ui.headMap.place(i, j);
      drawBreakdown();
    }
    if (shown.knobs) drawKnobs();
  }

  /* The cell (query i, key j) taken apart: products, sum, scaling, score, softmax. */
  function drawBreakdown() {
    var reply = shown.head, n = run.n, i = sel.query, j = sel.key;
    var q = reply.q, k = reply.k;   // (n, d_k) each
    var products = [], sum = 0;
    for (var c = 0; c < D_K; c++) {
      var p = q[i * D_K + c] * k[j * D_K + c];
      products.push(p);
      sum += p;
    }
    var scaled = sum / Math.sqrt(D_K);
    var score = reply.scores[i * n + j];
    var largest = -Infinity;
    for (var m = 0; m < n; m++) largest = Math.max(largest, reply.scores[i * n + m]);
    var total = 0;
    for (m = 0; m < n; m++) total += Math.exp(reply.scores[i * n + m] - largest);
    var e = Math.exp(score - largest);
    var weight = e / total;
    var box = ui.breakdown;
    box.textContent = "";
    var title = el("p", "own-case__cell-title",
                   format(WORDS.cell, {i: i, q: plain(run.tokens[i]), j: j, k: plain(run.tokens[j])}) +
                   " · " + headName());
    box.append(title);
    // The 32 products as bars around a zero line.
    var top = 0;
    products.forEach(function (v) { top = Math.max(top, Math.abs(v)); });
    top = top || 1;
    var svgNS = "http://www.w3.org/2000/svg";
    var svg = document.createElementNS(svgNS, "svg");
    svg.setAttribute("viewBox", "0 0 320 100");
    svg.setAttribute("class", "own-case__products");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", WORDS.products);
    var axis = document.createElementNS(svgNS, "line");
    axis.setAttribute("x1", "0"); axis.setAttribute("x2", "320");
    axis.setAttribute("y1", "50"); axis.setAttribute("y2", "50");
    axis.setAttribute("class", "own-case__axis");
    svg.append(axis);
    products.forEach(function (v, c) {
      var rect = document.createElementNS(svgNS, "rect");
      var h = 48 * Math.abs(v) / top;
      rect.setAttribute("x", String(c * 10 + 1));
      rect.setAttribute("width", "8");
      rect.setAttribute("y", String(v >= 0 ? 50 - h : 50));
      rect.setAttribute("height", String(Math.max(h, 0.5)));
      rect.setAttribute("class", v >= 0 ? "own-case__pos" : "own-case__neg");
      rect.setAttribute("data-part", "product");
      rect.setAttribute("data-value", String(v));
      var tip = document.createElementNS(svgNS, "title");
      tip.textContent = format(WORDS.product, {c: c, q: number(q[i * D_K + c]), k: number(k[j * D_K + c]), p: number(v)});
      rect.append(tip);
      svg.append(rect);
    });
    var caption = el("p", "own-case__caption", WORDS.products);
    caption.setAttribute("aria-hidden", "true");
    box.append(caption, svg);
    // The arithmetic, one line a step.
    var steps = el("dl", "own-case__steps");
    function line(term, value, part, extra) {
      var dt = el("dt", null, term);
      var dd = el("dd", null, extra || number(value));
      dd.setAttribute("data-part", part);
      dd.setAttribute("data-value", String(value));
      steps.append(dt, dd);
    }
    line(WORDS.sum, sum, "sum");
    line(WORDS.scaled, scaled, "scaled");
    line(WORDS.score, score, "score");
    line(WORDS.exp, e, "exp");
    line(WORDS.total, total, "total");
    line(WORDS.weight, weight, "weight");
    line(WORDS.weight_model, reply.weights[i * n + j], "model-weight");
    box.append(steps);
    // The numbers, for a screen reader or to check by hand.
    var details = el("details", "own-case__numbers");
    details.append(el("summary", null, WORDS.numbers));
    var table = el("table");
    var head = el("tr");
    [WORDS.th_c, "q_i[c]", "k_j[c]", "q_i[c] × k_j[c]"].forEach(function (t) { head.append(el("th", null, t)); });
    var thead = el("thead"); thead.append(head);
    var tbody = el("tbody");
    products.forEach(function (v, c) {
      var row = el("tr");
      [String(c), number(q[i * D_K + c]), number(k[j * D_K + c]), number(v)].forEach(function (t) {
        row.append(el("td", null, t));
      });
      tbody.append(row);
    });
    table.append(thead, tbody);
    var scroll = el("div", "own-case__table");
    scroll.append(table);
    details.append(scroll);
    box.append(details);
    ui.headReadout.textContent = format(WORDS.cell, {i: i, q: plain(run.tokens[i]), j: j, k: plain(run.tokens[j])}) +
      WORDS.colon + format(WORDS.readout, {score: number(score), weight: number(reply.weights[i * n + j])});
  }

  // --- Knobs on a real head ---------------------------------------------------------------------

  function tau() { return Math.pow(2, sel.tau); }

  function buildKnobs() {
    var container = document.getElementById("own-case-knobs");
    if (!container) return;
    ui.knobsEmpty = el("p", "own-case__empty", WORDS.placeholder);
    ui.knobsView = el("div", "own-case__view");
    ui.knobsView.hidden = true;
    var controls = el("div", "own-case__knobs");
    // Temperature factor: a slider over log2(tau), its two ends labelled.
    var tField = el("div", "own-case__slider");
    ui.tau = el("input", "own-case__range");
    ui.tau.type = "range";
    ui.tau.min = String(TAUS[0]);
    ui.tau.max = String(TAUS[1]);
    ui.tau.step = "0.25";
    ui.tau.value = "0";
    ui.tauOut = el("output", "own-case__value", "1");
    var ends = el("div", "own-case__ends");
    ends.append(el("span", null, number(Math.pow(2, TAUS[0]), 3) + " · " + WORDS.sharper),
                el("span", null, WORDS.flatter + " · " + number(Math.pow(2, TAUS[1]), 0)));
    var tLabel = labelled(WORDS.temperature, ui.tau);
    tLabel.append(" = ", ui.tauOut);
    tField.append(tLabel, ui.tau, ends);
    ui.tau.addEventListener("input", function () {
      sel.tau = Number(ui.tau.value);
      ui.tauOut.textContent = formatTau(tau());
      ui.tau.setAttribute("aria-valuetext", formatTau(tau()));
      requestKnobs();
    });
    ui.tau.setAttribute("aria-valuetext", "1");
    // Mask: none / causal / window, with the window's size.
    var fieldset = el("fieldset", "own-case__mask");
    fieldset.append(el("legend", null, WORDS.mask));
    ui.masks = {};
    [["none", WORDS.mask_none], ["causal", WORDS.mask_causal], ["window", WORDS.mask_window]].forEach(function (pair) {
      var input = el("input");
      input.type = "radio";
      input.name = "own-case-mask";
      input.value = pair[0];
      input.checked = pair[0] === sel.mask;
      input.id = "own-case-mask-" + pair[0];
      input.addEventListener("change", function () {
        if (!input.checked) return;
        sel.mask = pair[0];
        ui.window.disabled = sel.mask !== "window";
        requestKnobs();
      });
      ui.masks[pair[0]] = input;
      var label = el("label", "own-case__radio");
      label.append(input, " " + pair[1]);
      fieldset.append(label);
    });
    ui.window = el("input", "own-case__number");
    ui.window.type = "number";
    ui.window.min = "0";
    ui.window.step = "1";
    ui.window.value = String(sel.window);
    ui.window.disabled = true;
    ui.window.addEventListener("input", function () {
      var value = Math.floor(Number(ui.window.value));
      if (!(value >= 0)) return;
      sel.window = run ? Math.min(value, run.n - 1) : value;
      requestKnobs();
    });
    var wField = el("span", "own-case__field");
    wField.append(labelled(WORDS.window, ui.window), ui.window);
    fieldset.append(wField);
    controls.append(tField, fieldset);
    ui.onlyHead = el("p", "own-case__only", WORDS.only_head);
    ui.knobsTitle = el("p", "own-case__caption");
    ui.knobsMap = heatmap({square: true});
    ui.knobsMap.canvas.setAttribute("role", "img");
    ui.knobsMap.canvas.addEventListener("click", function (event) {
      var at = ui.knobsMap.cellAt(event);
      if (at) chooseCell(at[0], at[1]);
    });
    ui.changeTitle = el("p", "own-case__caption", WORDS.change);
    ui.change = el("div", "own-case__change");
    ui.stripTitle = el("p", "own-case__caption");
    ui.outStrips = el("div", "own-case__strips own-case__strips--out");
    ui.knobsReadout = el("p", "own-case__readout");
    ui.knobsReadout.setAttribute("aria-live", "polite");
    var legend = weightLegend();
    var swatch = el("span", "own-case__swatch");
    swatch.setAttribute("aria-hidden", "true");
    legend.append(swatch, el("span", "own-case__note", WORDS.masked));
    ui.knobsView.append(controls, ui.onlyHead, ui.knobsTitle, legend, ui.knobsMap.node,
                        ui.changeTitle, ui.change, ui.stripTitle, signedLegend(HEAD_SCALE),
                        ui.outStrips, ui.knobsReadout);
    container.append(ui.knobsEmpty, ui.knobsView);
  }

  function formatTau(t) {  // 0.125, 0.5, 1, 2.828...: three decimals at most
    return String(Math.round(t * 1000) / 1000);
  }

  var knobTimer = 0;
  function requestKnobs() {
    if (!run) return;
    clearTimeout(knobTimer);
    knobTimer = setTimeout(function () {  // a dragged slider asks once it rests a moment
      var message = {type: "head", run: run.id, layer: sel.layer, head: sel.head,
                     temperature: tau(), mask: sel.mask,
                     window: Math.max(0, Math.min(sel.window, run.n - 1)),
                     parts: ["scores", "weights", "output", "baseline_output"]};
      askLatest("knobs", message, drawKnobs, function (reply) {
        reply.setting = {temperature: message.temperature, mask: message.mask, window: message.window};
      });
    }, 60);
  }

  function masked(setting) {
    return function (i, j) {
      if (setting.mask === "causal") return j > i;
      if (setting.mask === "window") return j > i || j < i - setting.window;
      return false;
    };
  }

  function drawKnobs() {
    var reply = shown.knobs;
    if (!reply || !run) return;
    var n = run.n;
    ui.knobsTitle.textContent = format(WORDS.new_weights, {name: "L" + (reply.layer + 1) + "-H" + (reply.head + 1)}) +
      " · τ = " + formatTau(reply.setting.temperature) + " · " + WORDS.mask + ": " +
      ({none: WORDS.mask_none, causal: WORDS.mask_causal, window: WORDS.mask_window + " (" + reply.setting.window + ")"})[reply.setting.mask];
    ui.knobsMap.layout(n, n, run.tokens, run.tokens);
    paintCanvas(ui.knobsMap.canvas, reply.weights, n, n, paintWeight, masked(reply.setting));
    ui.knobsMap.canvas.setAttribute("aria-label", ui.knobsTitle.textContent);
    ui.knobsMap.place(sel.query, sel.key);
    // How far each query's output moved.
    var norms = [], top = 0;
    for (var i = 0; i < n; i++) {
      var s = 0;
      for (var c = 0; c < D_MODEL; c++) {
        var d = reply.output[i * D_MODEL + c] - reply.baseline_output[i * D_MODEL + c];
        s += d * d;
      }
      norms.push(Math.sqrt(s));
      top = Math.max(top, Math.sqrt(s));
    }
    ui.change.textContent = "";
    var list = el("ol", "own-case__bars");
    norms.forEach(function (v, i) {
      var item = el("li", "own-case__bar-row" + (i === sel.query ? " own-case__bar-row--chosen" : ""));
      var label = tokenNode(run.tokens[i], "own-case__bar-label");
      var track = el("span", "own-case__bar-track");
      var fill = el("span", "own-case__bar-fill");
      fill.style.width = (top > 0 ? 100 * v / top : 0) + "%";
      track.append(fill);
      var value = el("span", "own-case__bar-value", number(v, 3));
      value.setAttribute("data-part", "change");
      value.setAttribute("data-value", String(v));
      item.append(label, track, value);
      list.append(item);
    });
    ui.change.append(list);
    // The chosen query's 384 numbers: original, new, their difference.
    var q = sel.query;
    ui.stripTitle.textContent = format(WORDS.strip_of, {i: q, q: plain(run.tokens[q])});
    var base = reply.baseline_output.slice(q * D_MODEL, (q + 1) * D_MODEL);
    var now = reply.output.slice(q * D_MODEL, (q + 1) * D_MODEL);
    var diff = new Float32Array(D_MODEL);
    for (c = 0; c < D_MODEL; c++) diff[c] = now[c] - base[c];
    ui.outStrips.textContent = "";
    [[WORDS.strip_base, base], [WORDS.strip_new, now], [WORDS.strip_diff, diff]].forEach(function (pair) {
      ui.outStrips.append(stripRow(pair[0], pair[1], HEAD_SCALE));
    });
    ui.knobsReadout.textContent = ui.knobsTitle.textContent + "; " + WORDS.change + " " +
      plain(run.tokens[q]) + ": " + number(norms[q], 3);
  }

  /* A labelled strip of numbers (one canvas pixel each) on a signed scale. */
  function stripRow(name, values, scale, extra) {
    var row = el("div", "own-case__strip-row");
    var label = el("span", "own-case__strip-label", name);
    var canvas = el("canvas", "own-case__strip");
    canvas.setAttribute("role", "img");
    var low = Infinity, high = -Infinity;
    for (var i = 0; i < values.length; i++) { low = Math.min(low, values[i]); high = Math.max(high, values[i]); }
    canvas.setAttribute("aria-label", name + ": " + values.length + " · min " + number(low, 3) + ", max " + number(high, 3));
    paintCanvas(canvas, values, 1, values.length, signedPainter(scale));
    row.append(label, canvas);
    if (extra) row.append(extra);
    return row;
  }

  // --- The forward pass -------------------------------------------------------------------------

  function buildForward() {
    var container = document.getElementById("own-case-forward");
    if (!container) return;
    ui.forwardEmpty = el("p", "own-case__empty", WORDS.placeholder);
    ui.forwardView = el("div", "own-case__view");
    ui.forwardView.hidden = true;
    var bar = el("div", "own-case__bar");
    ui.token = select([], 0);
    var field = el("span", "own-case__field");
    field.append(labelled(WORDS.token, ui.token), ui.token);
    bar.append(field);
    ui.token.addEventListener("change", function () {
      sel.token = Number(ui.token.value);
      requestStrips();
      drawStep();
    });
    ui.stripsTitle = el("p", "own-case__caption", WORDS.strips);
    ui.strips = el("div", "own-case__strips own-case__strips--layers");
    ui.strips.tabIndex = 0;
    ui.strips.setAttribute("aria-describedby", "own-case-strip-readout");
    ui.stripReadout = el("p", "own-case__readout");
    ui.stripReadout.id = "own-case-strip-readout";
    ui.stripReadout.setAttribute("aria-live", "polite");
    var cursor = {layer: 0, c: 0};
    ui.strips.addEventListener("keydown", function (event) {
      if (!run) return;
      var moves = {ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1],
                   PageUp: [0, -32], PageDown: [0, 32]};
      var move = moves[event.key];
      if (!move) return;
      event.preventDefault();
      cursor.layer = Math.max(0, Math.min(LAYERS, cursor.layer + move[0]));
      cursor.c = Math.max(0, Math.min(D_MODEL - 1, cursor.c + move[1]));
      readStrip(cursor.layer, cursor.c);
    });
    ui.strips.addEventListener("pointermove", function (event) {
      var canvas = event.target.closest && event.target.closest("canvas[data-layer]");
      if (!canvas || !run) return;
      var rect = canvas.getBoundingClientRect();
      cursor.layer = Number(canvas.getAttribute("data-layer"));
      cursor.c = Math.max(0, Math.min(D_MODEL - 1, Math.floor((event.clientX - rect.left) / rect.width * D_MODEL)));
      readStrip(cursor.layer, cursor.c);
    });
    // One layer, stepped through.
    ui.blockTitle = el("h4", "own-case__block-title", WORDS.block);
    var blockBar = el("div", "own-case__bar");
    var layers = [];
    for (var i = 0; i < LAYERS; i++) layers.push([i, String(i + 1)]);
    ui.block = select(layers, sel.block);
    var bField = el("span", "own-case__field");
    bField.append(labelled(WORDS.block_layer, ui.block), ui.block);
    blockBar.append(bField);
    ui.block.addEventListener("change", function () { sel.block = Number(ui.block.value); requestLayer(); });
    ui.stepButtons = el("ol", "own-case__stepper");
    PARTS.forEach(function (part, k) {
      var item = el("li");
      var button = el("button", "own-case__step", (k + 1) + " " + WORDS.parts[part][0]);
      button.type = "button";
      button.addEventListener("click", function () { sel.step = k; drawStep(); });
      item.append(button);
      ui.stepButtons.append(item);
    });
    var nav = el("div", "own-case__nav");
    ui.prev = el("button", "own-case__button-small", WORDS.prev);
    ui.next = el("button", "own-case__button-small", WORDS.next);
    ui.prev.type = ui.next.type = "button";
    ui.prev.addEventListener("click", function () { sel.step = Math.max(0, sel.step - 1); drawStep(); });
    ui.next.addEventListener("click", function () { sel.step = Math.min(PARTS.length - 1, sel.step + 1); drawStep(); });
    ui.stepCount = el("span", "own-case__count");
    nav.append(ui.prev, ui.stepCount, ui.next);
    ui.stepName = el("p", "own-case__step-name");
    ui.stepText = el("p", "own-case__step-text");
    ui.stepMap = heatmap({square: false});
    ui.stepMap.canvas.setAttribute("role", "img");
    ui.stepLegend = el("div");
    ui.stepRow = el("div", "own-case__strips");
    ui.stepReadout = el("p", "own-case__readout");
    ui.stepReadout.setAttribute("aria-live", "polite");
    ui.forwardView.append(bar, ui.stripsTitle, signedLegend(SCALE),
                          el("p", "own-case__note", WORDS.change_note), ui.strips, ui.stripReadout,
                          ui.blockTitle, blockBar, ui.stepButtons, nav, ui.stepName, ui.stepText,
                          ui.stepLegend, ui.stepMap.node, ui.stepRow, ui.stepReadout);
    container.append(ui.forwardEmpty, ui.forwardView);
  }

  function fillTokenSelect() {
    if (!ui.token) return;
    ui.token.textContent = "";
    run.tokens.forEach(function (token, i) {
      var option = el("option", null, i + " · " + plain(token));
      option.value = String(i);
      ui.token.append(option);
    });
    ui.token.value = String(sel.token);
  }

  /* The chosen token's vector at the embeddings and after each layer: the worker's "strip"
     reply, rows (layers + 1, d_model), out of the hidden states it keeps. */
  function requestStrips() {
    if (!run || !ui.strips) return;
    askLatest("strip", {type: "strip", run: run.id, token: sel.token}, drawStrips);
  }

  function stripRowOf(layer) {  // the shown strip reply's row of a layer (0: embeddings), a view
    return shown.strip.rows.subarray(layer * D_MODEL, (layer + 1) * D_MODEL);
  }

  function layerName(layer) {
    return layer === 0 ? WORDS.embeddings : format(WORDS.layer_n, {layer: layer});
  }

  function drawStrips() {
    if (!run || !ui.strips || !shown.strip) return;
    ui.strips.textContent = "";
    var rows = [], changes = [0], top = 0, token = shown.strip.token;
    for (var l = 0; l <= LAYERS; l++) rows.push(stripRowOf(l));
    for (l = 1; l <= LAYERS; l++) {
      var s = 0;
      for (var c = 0; c < D_MODEL; c++) { var d = rows[l][c] - rows[l - 1][c]; s += d * d; }
      changes.push(Math.sqrt(s));
      top = Math.max(top, Math.sqrt(s));
    }
    rows.forEach(function (values, l) {
      var extra = el("span", "own-case__delta");
      if (l > 0) {
        var track = el("span", "own-case__bar-track");
        var fill = el("span", "own-case__bar-fill");
        fill.style.width = (100 * changes[l] / top) + "%";
        track.append(fill);
        var value = el("span", "own-case__bar-value", number(changes[l], 2));
        value.setAttribute("data-part", "layer-change");
        value.setAttribute("data-value", String(changes[l]));
        extra.append(track, value);
      }
      var row = stripRow(layerName(l), values, SCALE, extra);
      var canvas = row.querySelector("canvas");
      canvas.setAttribute("data-layer", String(l));
      canvas.removeAttribute("role");
      canvas.setAttribute("aria-hidden", "true");
      ui.strips.append(row);
    });
    ui.strips.setAttribute("aria-label", WORDS.strips + " · " + plain(run.tokens[token]));
    ui.stripReadout.textContent = "";
  }

  function readStrip(layer, c) {
    if (!shown.strip) return;
    var value = shown.strip.rows[layer * D_MODEL + c];
    ui.stripReadout.textContent = format(WORDS.strip_read, {layer: layerName(layer), c: c, value: number(value)});
    var rows = ui.strips.querySelectorAll(".own-case__strip-row");
    rows.forEach(function (row, l) { row.classList.toggle("own-case__strip-row--read", l === layer); });
  }

  function requestLayer() {
    if (!run || !ui.stepMap) return;
    // The parts the stepper shows, and of the weights the chosen head's only: at 512 tokens
    // 1 MB instead of every head's 12.6 MB (and no q, k, v, scores or context: 4 MB more).
    var message = {type: "layer", run: run.id, layer: sel.block, head: sel.head, parts: PARTS};
    askLatest("layer", message, drawStep);
  }

  /* The part shown by the stepper: {values, rows, cols, row (the chosen token's), signed}. */
  function stepPart() {
    var reply = shown.layer, n = run.n, part = PARTS[sel.step];
    if (part === "weights") {
      var w = reply.parts.weights;   // (n, n): the head asked for
      return {values: w, rows: n, cols: n, signed: false,
              row: w.slice(sel.token * n, (sel.token + 1) * n)};
    }
    var values = reply.parts[part];
    var cols = values.length / n;
    return {values: values, rows: n, cols: cols, signed: true,
            row: values.slice(sel.token * cols, (sel.token + 1) * cols)};
  }

  function drawStep() {
    if (!run || !shown.layer) return;
    var part = PARTS[sel.step];
    var buttons = ui.stepButtons.querySelectorAll("button");
    buttons.forEach(function (button, k) {
      if (k === sel.step) button.setAttribute("aria-current", "step");
      else button.removeAttribute("aria-current");
    });
    ui.prev.disabled = sel.step === 0;
    ui.next.disabled = sel.step === PARTS.length - 1;
    ui.stepCount.textContent = format(WORDS.step_of, {k: sel.step + 1, count: PARTS.length});
    var shape = stepPart();
    var name = WORDS.parts[part][0] + (part === "weights" ? " · L" + (sel.block + 1) + "-H" + (shown.layer.head + 1) : "") +
      " · " + format(WORDS.layer_n, {layer: sel.block + 1}) + " · " + run.n + " × " + shape.cols;
    ui.stepName.textContent = name;
    ui.stepText.textContent = WORDS.parts[part][1] + " " +
      format(WORDS.chosen_row, {token: plain(run.tokens[sel.token])});
    ui.stepLegend.textContent = "";
    ui.stepLegend.append(shape.signed ? signedLegend(SCALE) : weightLegend());
    var map = ui.stepMap;
    map.layout(shape.rows, shape.cols, run.tokens, shape.signed ? null : run.tokens);
    paintCanvas(map.canvas, shape.values, shape.rows, shape.cols, shape.signed ? signedPainter(SCALE) : paintWeight);
    map.canvas.setAttribute("aria-label", name);
    map.place(sel.token, null);
    map.node.setAttribute("data-part", part);
    ui.stepRow.textContent = "";
    var low = Infinity, high = -Infinity;
    for (var c = 0; c < shape.row.length; c++) { low = Math.min(low, shape.row[c]); high = Math.max(high, shape.row[c]); }
    if (shape.signed) ui.stepRow.append(stripRow(plain(run.tokens[sel.token]), shape.row, SCALE));
    ui.stepReadout.textContent = name + ". " + format(WORDS.row_read, {token: plain(run.tokens[sel.token]),
      min: number(low), max: number(high)});
  }

  // --- Redraw on palette change and resize --------------------------------------------------------

  function redraw() {
    colours = null;
    if (!run) return;
    drawHead();
    drawKnobs();
    drawStrips();
    drawStep();
  }

  // --- Start ----------------------------------------------------------------------------------------

  buildInput();
  buildHead();
  buildKnobs();
  buildForward();
  root.classList.add("own-case--live");
  document.addEventListener("caseboard-real:change", onBoardChange, true);
  new MutationObserver(redraw).observe(document.body, {attributes: true,
    attributeFilter: ["data-md-color-scheme", "data-md-color-primary"]});
  var width = root.clientWidth, resizeTimer = 0;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      if (root.clientWidth !== width) { width = root.clientWidth; redraw(); }
    }, 150);
  });

  /* For tests: the state and the numbers each view shows. */
  window.caseBoardOwn = {
    state: function () {
      return {text: run && run.text, tokens: run && run.tokens.slice(), n: run && run.n,
              running: running, layer: sel.layer, head: sel.head, query: sel.query, key: sel.key,
              temperature: tau(), mask: sel.mask, window: sel.window, token: sel.token,
              block: sel.block, step: PARTS[sel.step]};
    },
    head: function () {
      var r = shown.head;
      return r && {layer: r.layer, head: r.head, scores: Array.from(r.scores), weights: Array.from(r.weights)};
    },
    knobs: function () {
      var r = shown.knobs;
      return r && {layer: r.layer, head: r.head, temperature: r.setting.temperature, mask: r.setting.mask,
                   window: r.setting.window, scores: Array.from(r.scores), weights: Array.from(r.weights),
                   output: Array.from(r.output), baseline: Array.from(r.baseline_output)};
    },
    strips: function () {  // the strips drawn: {token: null, rows: null} until the first arrives
      if (!run) return null;
      if (!shown.strip) return {token: null, rows: null};
      var rows = [];
      for (var l = 0; l <= LAYERS; l++) rows.push(Array.from(stripRowOf(l)));
      return {token: shown.strip.token, rows: rows};
    },
    step: function () {
      if (!run || !shown.layer) return null;
      var shape = stepPart();
      return {layer: shown.layer.layer, head: shown.layer.head, part: PARTS[sel.step],
              rows: shape.rows, cols: shape.cols,
              row: Array.from(shape.row)};
    }
  };
})();
