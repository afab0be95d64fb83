/*
 * The case board's real heads (docs/<lang>/caseboard.md, #caseboard-real): every attention head
 * of two real models on a few sentences, computed by `mha` at build time
 * (mha/site/caseboard.py: real_index, real_heads, real_roles) into assets/caseboard/.
 *
 * Three views of one model on one sentence (the view select):
 * - one head, drawn as in bertviz's head view: the tokens twice, queries (the tokens reading) on
 *   the left and keys (the tokens read) on the right, a line from query q to key k whose colour
 *   strength (opacity) is sqrt(weight[q][k]), as the lab draws weights. Pointing at, tapping or
 *   focusing a query shows its lines only (and bars under the keys); a key, who reads it (bars
 *   under the queries). A tap on the pinned token, "Show all" or Escape shows every line again.
 *   Up to OVERLAY - 1 other heads of the layer can be overlaid, each in its own colour; the
 *   head can also be read as a table;
 * - all heads of the layer: one small map per head, a button that opens it;
 * - all layers: every layer x head as a grid of small maps, one Tab stop (arrow keys inside).
 * Under each map, the head's pattern on this sentence (the data's `roles`, computed at build
 * time by mha.site.head_roles' rule). A legend gives the colour's numbers (0, 0.25, 1 on a
 * sqrt scale). Every change is said in a polite live region, with the new strongest key (or
 * query, for a key).
 *
 * Progressive enhancement: the container's static figure (.caseboard__fallback) stays until the
 * index and the first sentence have loaded; then the board is added and the container gets
 * .caseboard--live (caseboard.css hides the figure). Each sentence's file is fetched when it is
 * first chosen and kept. Every reader-facing word comes from the index's `words`.
 *
 * The reader's own sentence (issue #30): the own-sentence panel (#own-case) runs
 * multilingual-e5-small in a worker and gives the result to `window.caseBoardReal.addOwn`: it
 * comes first in the sentence list ("your sentence"), for that model only, with the weights
 * and the length of each key's value vector through W_O in each head, from which this board
 * draws the contributions (Kobayashi et al. 2020: the weight times that length, each row
 * divided by its sum; see contributionMap). A toggle, shown only for data that has both,
 * switches every view, the legend, the readout, the table and what is announced between the
 * two. Such a sentence can be 512 tokens long: the token lists scroll in a box at most a
 * screen tall; beyond LONG tokens the lines of every query are painted on a canvas over the
 * part in view, the maps are downsampled and the grid is painted a few maps a task. Tokens are
 * always text, each isolated in its own direction, invisible characters named.
 *
 * Every change of sentence, model, layer, head, view or quantity dispatches
 * `caseboard-real:change` on the board's root (detail: the state), for the own-sentence panel.
 *
 * Tests read `window.caseBoardReal` (state and the head shown); they drive the board through
 * its controls only.
 */
(function () {
  "use strict";

  // Read now: document.currentScript is only set while the script itself runs.
  var script = document.currentScript;
  var root = document.getElementById("caseboard-real");
  if (!script || !root) return;
  var DATA = new URL("../caseboard/", script.src);
  var LANG = document.documentElement.lang === "en" ? "en" : "zh";
  var SVG = "http://www.w3.org/2000/svg";
  // Layer 1, head 3 of multilingual-e5-small reads the previous token: a clear first example.
  var DEFAULTS = {sentence: LANG + "-case", model: "e5", layer: 0, head: 2};
  // What to say when data does not arrive: the page's own words (the data carries the others).
  var LOAD_FAILED = root && root.getAttribute("data-load-failed");
  var TOP = 3;       // keys (or queries) named in the readout
  var OVERLAY = 3;   // heads drawn at once in the one-head view, the chosen one included
  var MARK = "\u2581";  // SentencePiece's word-start mark
  var VIEWS = ["one", "all", "layers"];
  var OWN = "own";      // the id of the reader's own sentence (addOwn)
  // Longer sentences than this are drawn in ways that stay quick at n = 512: the one-head
  // view's lines on a canvas (only those in view), the maps downsampled, the grid in steps.
  var LONG = 64;
  var MAP = 128;        // the largest side of a downsampled map (pixels)
  // A long sentence's lines of every query leave out values under FAINT / 255 (0.016): the
  // thousands of fainter lines would only blur into grey, and take a second to draw.
  var FAINT = 4;
  // Invisible characters a reader's token can be: controls, bidirectional marks, overrides
  // and isolates, zero widths (`visible` names them).
  var CONTROL = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]/g;

  var index = null;       // real-<lang>.json
  var words = null;       // index.words
  var files = {};         // path -> Promise of a decoded sentence file
  var data = null;        // the decoded file shown
  var state = {sentence: null, model: null, layer: 0, head: 0, view: "one",
               quantity: "weights"};  // quantity: "weights" or "contrib" (if the data has it)
  var own = null;         // the reader's sentence, as an index entry, once addOwn has run
  var ownVersion = 0;     // how many sentences addOwn has been given
  var said = "";          // the state the last change event carried (see changed)
  var overlay = [];       // other heads of the layer drawn with the chosen one (indices)
  var hover = null;       // the token under the mouse, {side: "q" | "k", i}, or null
  var pinned = null;      // the token last focused, clicked or tapped, or null
  var downPinned = false; // whether the token pressed was the pinned one (a second tap unpins)
  var pending = 0;        // id of the latest load, so a slow older one cannot win
  var drawn = {};         // what each set of maps shows (sentence|model|layer|colours)
  var ui = {};

  // --- Data -------------------------------------------------------------------------------------

  function fetchJSON(path) {
    return fetch(new URL(path, DATA).href).then(function (response) {
      if (!response.ok) throw new Error(response.status + " " + response.url);
      return response.json();
    });
  }

  /* A sentence file's weights, base64 of bytes (layers, heads, n, n) in C order, as bytes. */
  function decode(file) {  // (the reader's own sentence: decodeOwn)
    var text = atob(file.weights);
    var bytes = new Uint8Array(text.length);
    for (var i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    if (bytes.length !== file.layers * file.heads * file.n * file.n) {
      throw new Error("weights of " + file.sentence + ": " + bytes.length + " bytes, expected " +
                      file.layers + " x " + file.heads + " x " + file.n + " x " + file.n);
    }
    return {tokens: file.tokens, layers: file.layers, heads: file.heads, n: file.n, bytes: bytes,
            roles: file.roles || []};
  }

  function load(path) {
    if (!files[path]) {
      files[path] = fetchJSON(path).then(decode);
      files[path].catch(function () { delete files[path]; });  // a later choice tries again
    }
    return files[path];
  }

  function sentenceOf(id) {
    if (id === OWN) return own;
    return index.sentences.find(function (s) { return s.id === id; });
  }

  /* The reader's sentence as addOwn receives it, checked, as a decoded file. */
  function decodeOwn(file) {
    var model = index.models.e5;
    if (!file || typeof file !== "object") throw new TypeError("addOwn needs a file object");
    var n = file.n, tokens = file.tokens;
    if (!Array.isArray(tokens) || tokens.length !== n || !(n >= 1)) {
      throw new TypeError("addOwn: tokens must be an array of n strings, got " +
                          (Array.isArray(tokens) ? tokens.length : typeof tokens) +
                          " tokens for n = " + n);
    }
    if (file.layers !== model.layers || file.heads !== model.heads) {
      throw new RangeError("addOwn: " + model.name + " has " + model.layers + " layers x " +
                           model.heads + " heads, got " + file.layers + " x " + file.heads);
    }
    var size = file.layers * file.heads * n * n;
    function bytes(name) {
      var value = file[name];
      if (value === undefined || value === null) return null;
      value = value instanceof Uint8Array ? value : Uint8Array.from(value);
      if (value.length !== size) {
        throw new RangeError("addOwn: " + name + " has " + value.length + " bytes, expected " +
                             file.layers + " x " + file.heads + " x " + n + " x " + n);
      }
      return value;
    }
    var weights = bytes("bytes");
    if (!weights) throw new TypeError("addOwn: bytes (the attention weights) are missing");
    var norms = file.norms;
    if (norms !== undefined && norms !== null) {
      norms = norms instanceof Float32Array ? norms : Float32Array.from(norms);
      if (norms.length !== file.layers * n * file.heads) {
        throw new RangeError("addOwn: norms has " + norms.length + " values, expected " +
                             file.layers + " x " + n + " x " + file.heads);
      }
    } else {
      norms = null;
    }
    return {tokens: tokens.map(String), layers: file.layers, heads: file.heads, n: n,
            bytes: weights, norms: norms, contribMaps: {layer: -1, maps: []},
            roles: file.roles || null};
  }

  /* The quantity shown: "weights", or "contrib" if the reader chose it for a sentence that
     has contributions (the reader's own). */
  function quantity() {
    return data && data.norms ? state.quantity : "weights";
  }

  /* The map of head `head` of layer `layer`, (n, n) bytes, value[q][k] = byte / 255: the
     weights, or the contributions if they are shown (those of the layer shown are kept). */
  function mapBytes(layer, head, which) {
    var n = data.n, offset = (layer * data.heads + head) * n * n;
    var weights = data.bytes.subarray(offset, offset + n * n);
    if ((which || quantity()) !== "contrib") return weights;
    var kept = data.contribMaps;
    if (layer !== state.layer) return contributionMap(layer, head, weights);
    if (kept.layer !== layer) kept.layer = layer, kept.maps = [];
    return kept.maps[head] || (kept.maps[head] = contributionMap(layer, head, weights));
  }

  /* The contributions of one head (Kobayashi et al. 2020): what key k adds to query q's
     output is the vector w_qk f_k, f_k = v_k W_O^j (its value through the head's share of the
     output projection), so its size is c_qk = w_qk ||f_k||; shown as c divided by its row's
     sum, round(255 * value). From the weights' bytes (the 1/255 cancels out) and the norms
     ||f_k|| the worker computed (data.norms, (layers, n, heads)): twelve maps of bytes would
     be 38 MB more at 512 tokens. */
  function contributionMap(layer, head, weights) {
    var n = data.n, h = data.heads, norms = data.norms, at = layer * n * h + head;
    var out = new Uint8Array(n * n), row = new Float64Array(n);
    for (var q = 0; q < n; q++) {
      var total = 0, k;
      for (k = 0; k < n; k++) {
        row[k] = weights[q * n + k] * norms[at + k * h];
        total += row[k];
      }
      for (k = 0; k < n; k++) out[q * n + k] = total > 0 ? Math.round(row[k] / total * 255) : 0;
    }
    return out;
  }

  /* value[q][k] of head `head` (default: the chosen one) of the layer shown: the weight, or
     the contribution if that is shown. */
  function weight(q, k, head) {
    var j = head === undefined ? state.head : head;
    return mapBytes(state.layer, j)[q * data.n + k] / 255;
  }

  function format(template, values) {
    return template.replace(/\{(\w+)\}/g, function (all, key) {
      return key in values ? values[key] : all;
    });
  }

  function capital(text) {  // "head" -> "Head"; Chinese is left as it is
    return text.charAt(0).toUpperCase() + text.slice(1);
  }

  /* A token as a screen reader should say it: the word-start mark named, not "lower one eighth
     block". */
  function spoken(token) {
    return visible(token).split(MARK).join(" " + words.word_start + " ")
      .replace(/\s+/g, " ").trim();
  }

  /* Text with its invisible characters (controls, bidirectional marks and overrides, zero
     widths) shown by their code point: "[U+202E]". A reader's token can be one of them. */
  function visible(text) {
    return text.replace(CONTROL, function (c) {
      return "[U+" + ("000" + c.charCodeAt(0).toString(16).toUpperCase()).slice(-4) + "]";
    });
  }

  /* "L1-H3" */
  function headName(layer, head) {
    return format(words.head_name, {layer: layer + 1, head: head + 1});
  }

  /* A head's pattern on this sentence in words: [long, short] (empty if the data has none). */
  function role(layer, head) {
    if (!data.roles) return ["", ""];
    var key = (data.roles[layer] || [])[head] || "none";
    var pair = words.roles[key] || words.roles.none;
    var token = key === "sep" ? data.tokens[data.n - 1] : data.tokens[0];
    return pair.map(function (text) { return format(text, {token: token}); });
  }

  function headRole(layer, head) {
    if (!data.roles) return headName(layer, head);
    return format(words.head_role, {name: headName(layer, head), role: role(layer, head)[0]});
  }

  // --- Building the board -----------------------------------------------------------------------

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function field(id, label, control) {
    var box = el("div", "caseboard-real__field caseboard-real__field--" + id);
    var tag = el("label", null, label);
    tag.htmlFor = control.id = "caseboard-real-" + id;
    box.append(tag, control);
    return box;
  }

  /* Options 1 .. count (layers and heads are counted from 1 on the page). */
  function numbers(select, count) {
    if (select.options.length === count) return;
    select.textContent = "";
    for (var i = 1; i <= count; i++) select.add(new Option(String(i)));
  }

  /* A token's text into `node`: the word-start mark muted and hidden from screen readers, which
     hear its name instead (`speak`: in text, as a visually hidden word; else the caller names
     the node with `spoken`). */
  function tokenInto(node, token, speak) {
    node.textContent = "";
    var box = node;
    if (node.tagName !== "SPAN") box = node.appendChild(el("span"));
    // Its own direction, isolated: a right-to-left token (or a stray override) does not
    // reorder what is around it.
    box.dir = "auto";
    token.split(MARK).forEach(function (part, i) {
      if (i > 0) {
        var mark = el("span", "caseboard-real__mark", MARK);
        mark.setAttribute("aria-hidden", "true");
        box.append(mark);
        if (speak) box.append(el("span", "caseboard-real__sr", words.word_start + " "));
      }
      if (part) box.append(visible(part));  // text, never markup
    });
  }

  function build() {
    var board = el("div", "caseboard-real");
    var bar = el("div", "caseboard-real__toolbar");

    ui.sentence = el("select");
    var groups = LANG === "en" ? ["en", "zh"] : ["zh", "en"];  // the page's language first
    groups.forEach(function (lang) {
      var group = el("optgroup");
      group.label = words["sentences_" + lang];
      index.sentences.forEach(function (s) {
        if (s.lang === lang) group.append(new Option(s.text, s.id));
      });
      ui.sentence.append(group);
    });
    ui.model = el("select");
    ui.layer = el("select");
    ui.head = el("select");
    ui.view = el("select");
    [words.one_head, words.all_heads, words.all_layers].forEach(function (text, i) {
      ui.view.add(new Option(text, VIEWS[i]));
    });
    var sentenceField = field("sentence", words.sentence, ui.sentence);
    sentenceField.classList.add("caseboard-real__field--wide");
    bar.append(sentenceField, field("model", words.model, ui.model),
               field("layer", words.layer, ui.layer),
               field("head", capital(words.terms.head), ui.head),
               field("view", words.view, ui.view), buildQuantity(), ui.quantityHelp);

    ui.legend = buildLegend();
    ui.live = el("div", "caseboard-real__sr");
    ui.live.setAttribute("aria-live", "polite");

    // One head: queries | lines | keys, one row per token.
    ui.onePanel = el("div", "caseboard-real__one");
    ui.caption = el("p", "caseboard-real__caption");
    ui.hint = el("p", "caseboard-real__hint", words.real_hint);
    ui.longHint = el("p", "caseboard-real__hint caseboard-real__hint--long",
                     format(words.long_hint, {value: (FAINT / 255).toFixed(3)}));
    ui.longHint.hidden = true;
    ui.overlayBox = el("fieldset", "caseboard-real__overlay");
    var overlayLegend = el("legend", null, words.overlay);
    ui.overlayHint = el("span", "caseboard-real__note",
                        format(words.overlay_hint, {count: OVERLAY}));
    ui.overlayBox.append(overlayLegend, ui.overlayHint);
    ui.checks = [];
    ui.key = el("ul", "caseboard-real__key");  // the colours of the heads drawn
    var tools = el("div", "caseboard-real__tools");
    ui.showAll = el("button", "caseboard-real__button", words.show_all);
    ui.showAll.type = "button";
    ui.tableButton = el("button", "caseboard-real__button", words.table);
    ui.tableButton.type = "button";
    ui.tableButton.setAttribute("aria-expanded", "false");
    ui.readout = el("p", "caseboard-real__readout");
    tools.append(ui.showAll, ui.tableButton);
    ui.diagram = el("div", "caseboard-real__diagram");
    [words.terms.query, "", words.terms.key].forEach(function (text) {
      var heading = el("span", "caseboard-real__heading", capital(text));
      heading.setAttribute("aria-hidden", "true");
      ui.diagram.append(heading);
    });
    ui.queries = el("div", "caseboard-real__queries");
    ui.queries.setAttribute("role", "group");
    ui.queries.setAttribute("aria-label", capital(words.terms.query));
    ui.keys = el("div", "caseboard-real__keys");
    ui.keys.setAttribute("role", "group");
    ui.keys.setAttribute("aria-label", capital(words.terms.key));
    var lineBox = el("div", "caseboard-real__linebox");
    ui.svg = document.createElementNS(SVG, "svg");
    ui.svg.setAttribute("class", "caseboard-real__lines");
    ui.svg.setAttribute("aria-hidden", "true");
    ui.svg.setAttribute("focusable", "false");
    ui.svg.setAttribute("preserveAspectRatio", "none");
    // A long sentence's lines of every query: on a canvas, only the part in view (paintLines).
    ui.canvas = el("canvas", "caseboard-real__canvas");
    ui.canvas.setAttribute("aria-hidden", "true");
    lineBox.append(ui.canvas, ui.svg);
    ui.lineBox = lineBox;
    ui.diagram.append(ui.queries, lineBox, ui.keys);
    ui.tableBox = el("div", "caseboard-real__tablebox");
    ui.tableBox.hidden = true;
    ui.onePanel.append(ui.caption, ui.hint, ui.longHint, ui.overlayBox, ui.key, tools, ui.readout,
                       ui.diagram, ui.tableBox);
    ui.rows = [];   // per token: {query, key, qbar, kbar}
    ui.slots = [];  // per head drawn: {every, lines[q][k], chosen, ends[i]}

    // All heads of the layer: one thumbnail button per head.
    ui.allPanel = el("div", "caseboard-real__all");
    ui.allPanel.hidden = true;
    ui.thumbs = [];

    // All layers: one small map per head of every layer, one Tab stop.
    ui.layersPanel = el("div", "caseboard-real__layers");
    ui.layersPanel.hidden = true;
    ui.grid = el("div", "caseboard-real__grid");
    ui.grid.setAttribute("role", "group");
    ui.grid.setAttribute("aria-label", words.grid);
    ui.layersPanel.append(ui.grid);
    ui.maps = [];     // [layer][head] buttons
    ui.jobs = {};     // view -> the number of its latest painting (paintMaps)
    ui.painting = Promise.resolve();
    ui.gridAt = {layer: 0, head: 0};

    board.append(bar, ui.legend, ui.onePanel, ui.allPanel, ui.layersPanel, ui.live);

    ui.sentence.addEventListener("change", function () { choose(ui.sentence.value); });
    // The sentence chosen, not the one shown: a reader (or a test) may pick a model while the
    // sentence chosen just before is still loading; its models are listed already (choose).
    ui.model.addEventListener("change", function () {
      show(ui.sentence.value, ui.model.value).then(function (shown) {
        if (shown) announce(index.models[state.model].name);
      });
    });
    ui.layer.addEventListener("change", function () {
      state.layer = Number(ui.layer.value) - 1;
      status("");
      render();
      announce("");
    });
    ui.head.addEventListener("change", function () { setHead(Number(ui.head.value) - 1); });
    ui.view.addEventListener("change", function () { setView(ui.view.value); });
    ui.quantity.addEventListener("change", function (event) { setQuantity(event.target.value); });
    ui.diagram.addEventListener("scroll", function () {
      if (data && data.n > LONG && !ui.linesFrame) {
        ui.linesFrame = requestAnimationFrame(paintLines);
      }
    }, {passive: true});
    if (window.ResizeObserver) {
      new ResizeObserver(function () {
        if (data && data.n > LONG && state.view === "one") paintLines();
      }).observe(ui.diagram);
    }
    ui.allPanel.addEventListener("click", function (event) {
      var thumb = event.target.closest(".caseboard-real__thumb");
      if (!thumb) return;
      open(state.layer, Number(thumb.dataset.head));
    });
    ui.grid.addEventListener("click", function (event) {
      var map = event.target.closest(".caseboard-real__map");
      if (!map) return;
      open(Number(map.dataset.layer), Number(map.dataset.head));
    });
    ui.grid.addEventListener("keydown", gridKey);
    ui.grid.addEventListener("focusin", function (event) {
      var map = event.target.closest(".caseboard-real__map");
      if (map) rove({layer: Number(map.dataset.layer), head: Number(map.dataset.head)});
    });
    ui.overlayBox.addEventListener("change", function (event) {
      var j = Number(event.target.value);
      var at = overlay.indexOf(j);
      if (event.target.checked && at < 0 && overlay.length < OVERLAY - 1) overlay.push(j);
      if (!event.target.checked && at >= 0) overlay.splice(at, 1);
      drawHead();
      announce(overlay.length ? format(words.overlaid, {names: overlay.map(function (h) {
        return headName(state.layer, h);
      }).join(", ")}) : words.not_overlaid);
    });
    ui.showAll.addEventListener("click", function () {
      if (!pinned) return;
      pinned = hover = null;
      highlight();
      announce(words.show_all);
    });
    ui.tableButton.addEventListener("click", function () {
      var open = ui.tableBox.hidden;
      ui.tableBox.hidden = !open;
      ui.tableButton.setAttribute("aria-expanded", String(open));
      if (open) drawTable();
    });

    [ui.queries, ui.keys].forEach(function (list) {
      var side = list === ui.queries ? "q" : "k";
      list.addEventListener("pointerover", function (event) {
        var button = event.target.closest("button");
        if (event.pointerType !== "mouse" || !button) return;
        hover = {side: side, i: Number(button.dataset.i)};
        highlight();
      });
      list.addEventListener("pointerdown", function (event) {
        var button = event.target.closest("button");
        downPinned = !!button && same(pinned, {side: side, i: Number(button.dataset.i)});
      });
      list.addEventListener("focusin", function (event) {
        var to = {side: side, i: Number(event.target.dataset.i)};
        if (same(pinned, to)) return;
        pin(to);
      });
      list.addEventListener("click", function (event) {
        var button = event.target.closest("button");
        if (!button) return;
        var to = {side: side, i: Number(button.dataset.i)};
        // A second tap (or Enter) on the pinned token unpins it; the tap that focused it pins.
        var again = event.detail === 0 ? same(pinned, to) : downPinned;
        downPinned = false;
        if (again) {
          pinned = null;
          if (event.pointerType !== "mouse") hover = null;
          highlight();
          announce(words.show_all);
        } else if (!same(pinned, to)) {
          pin(to);
        }
      });
      list.addEventListener("keydown", function (event) {
        var i = Number(event.target.dataset.i), n = data.n, to = null;
        if (event.key === "ArrowDown") to = Math.min(i + 1, n - 1);
        else if (event.key === "ArrowUp") to = Math.max(i - 1, 0);
        else if (event.key === "Home") to = 0;
        else if (event.key === "End") to = n - 1;
        else if (event.key === "Escape") {
          pinned = hover = null;
          highlight();
          announce(words.show_all);
          return;
        } else return;
        event.preventDefault();  // arrows would scroll the page
        (side === "q" ? ui.rows[to].query : ui.rows[to].key).focus();
      });
    });
    ui.diagram.addEventListener("pointerleave", function (event) {
      if (event.pointerType !== "mouse") return;
      hover = null;
      highlight();
    });

    // The maps' colours follow the palette (Material sets it on <body>).
    new MutationObserver(function () {
      drawMaps();
      if (data && data.n > LONG && state.view === "one") paintLines();
    })
      .observe(document.body, {attributes: true, attributeFilter: ["data-md-color-scheme"]});
    return board;
  }

  /* The toggle between weights and contributions (shown for a sentence that has both: the
     reader's own), and its help, which links to the real-heads page's caveats. */
  function buildQuantity() {
    var box = el("fieldset", "caseboard-real__quantity");
    box.append(el("legend", null, words.quantity));
    ui.quantityBoxes = {};
    ["weights", "contrib"].forEach(function (key) {
      var label = el("label", "caseboard-real__choice");
      var radio = el("input");
      radio.type = "radio";
      radio.name = "caseboard-real-quantity";
      radio.value = key;
      radio.id = "caseboard-real-quantity-" + key;
      label.append(radio, el("span", null, words["quantity_" + key]));
      box.append(label);
      ui.quantityBoxes[key] = radio;
    });
    ui.quantityHelp = el("p", "caseboard-real__quantity-help");
    ui.quantityHelp.id = "caseboard-real-quantity-help";
    var link = el("a", null, words.quantity_link);
    link.href = new URL("../" + words.quantity_href, location.href).href;
    ui.quantityHelp.append(words.quantity_help + " ", link);
    box.setAttribute("aria-describedby", ui.quantityHelp.id);
    box.hidden = ui.quantityHelp.hidden = true;
    ui.quantity = box;
    return box;
  }

  /* The legend: a bar from 0 to 1 on the sqrt scale, ticks 0, 0.25, 1 as text; its title and
     note name the quantity shown (quantityWords). */
  function buildLegend() {
    var legend = el("div", "caseboard-real__legend");
    var title = el("span", "caseboard-real__legend-title", words.legend);
    ui.legendTitle = title;
    var scale = el("span", "caseboard-real__scale");
    var barBox = el("span", "caseboard-real__ramp");
    barBox.setAttribute("aria-hidden", "true");
    var ticks = el("span", "caseboard-real__ticks");
    [0, 0.25, 1].forEach(function (value) {
      var tick = el("span", "caseboard-real__tick", String(value));
      tick.style.left = (100 * Math.sqrt(value)) + "%";  // where sqrt puts that weight
      tick.dataset.value = value;
      ticks.append(tick);
    });
    scale.append(barBox, ticks);
    ui.legendNote = el("span", "caseboard-real__note", words.legend_note);
    legend.append(title, scale, ui.legendNote);
    return legend;
  }

  function same(a, b) {
    return !!a && !!b && a.side === b.side && a.i === b.i;
  }

  function pin(to) {
    pinned = to;
    roving(to.side === "q" ? ui.queries : ui.keys, to.i);
    highlight();
    announce("");
  }

  /* One Tab stop per token list: the token last chosen. */
  function roving(list, i) {
    var old = list.querySelector("[tabindex='0']");
    if (old && old !== list.children[i]) old.tabIndex = -1;
    if (list.children[i]) list.children[i].tabIndex = 0;
  }

  function line(parent, y1, y2) {
    var node = document.createElementNS(SVG, "line");
    node.setAttribute("x1", "0");
    node.setAttribute("y1", y1 + 0.5);
    node.setAttribute("x2", "100");
    node.setAttribute("y2", y2 + 0.5);
    node.setAttribute("vector-effect", "non-scaling-stroke");  // 2 px however wide the box
    parent.append(node);
    return node;
  }

  /* The lines of one head drawn (slot s: 0 the chosen head, then the overlaid ones): all n x n
     (when no token is chosen, one group per query; for a long sentence none: they are painted
     on the canvas, paintLines) and the n lines of the chosen token. */
  function slot(s, n) {
    var every = document.createElementNS(SVG, "g");
    every.setAttribute("class", "caseboard-real__every caseboard-real__slot--" + s);
    var chosen = document.createElementNS(SVG, "g");
    chosen.setAttribute("class", "caseboard-real__chosen caseboard-real__slot--" + s);
    var lines = [], ends = [];
    for (var q = 0; q < n; q++) {
      if (n <= LONG) {
        var group = document.createElementNS(SVG, "g");
        group.dataset.q = q;
        var row = [];
        for (var k = 0; k < n; k++) row.push(line(group, q, k));
        every.append(group);
        lines.push(row);
      }
      ends.push(line(chosen, 0, q));
    }
    return {every: every, lines: lines, chosen: chosen, ends: ends, drawn: null, on: false};
  }

  /* n rows of tokens and the chosen head's lines. Made when n changes, otherwise reused. */
  function rows(n) {
    if (ui.rows.length === n) return;
    ui.queries.textContent = ui.keys.textContent = ui.svg.textContent = "";
    ui.diagram.classList.toggle("caseboard-real__diagram--long", n > LONG);
    ui.longHint.hidden = n <= LONG;
    ui.diagram.scrollTop = 0;
    ui.svg.setAttribute("viewBox", "0 0 100 " + n);
    ui.slots = [];
    ui.rows = [];
    ui.shown = ui.onToken = null;
    for (var i = 0; i < n; i++) {
      var query = el("button", "caseboard-real__token caseboard-real__token--q");
      var key = el("button", "caseboard-real__token caseboard-real__token--k");
      [query, key].forEach(function (button) {
        button.type = "button";
        button.dataset.i = i;
        button.tabIndex = i === 0 ? 0 : -1;
      });
      var qtext = el("span", "caseboard-real__text"), ktext = el("span", "caseboard-real__text");
      var qbar = el("span", "caseboard-real__bar"), kbar = el("span", "caseboard-real__bar");
      query.append(qtext, qbar);
      key.append(ktext, kbar);
      ui.queries.append(query);
      ui.keys.append(key);
      ui.rows.push({query: query, key: key, qtext: qtext, ktext: ktext, qbar: qbar, kbar: kbar});
    }
  }

  /* The slots the heads drawn need (the chosen head, then the overlaid ones). */
  function slots() {
    var heads = [state.head].concat(overlay);
    while (ui.slots.length < heads.length) {
      var made = slot(ui.slots.length, data.n);
      ui.svg.append(made.every, made.chosen);
      ui.slots.push(made);
    }
    ui.slots.forEach(function (s, i) {
      var on = i < heads.length;
      s.head = heads[i];
      s.on = on;
      s.every.style.display = s.chosen.style.display = on ? "" : "none";
    });
  }

  // --- Showing ----------------------------------------------------------------------------------

  function status(text) {
    ui.status.textContent = text || "";
  }

  /* Say what changed and what now stands out, politely. */
  function announce(change) {
    var parts = [];
    if (change) parts.push(change);
    if (data.norms) parts.push(words["quantity_showing_" + quantity()]);
    if (state.view === "one") {
      parts.push(format(words.now_one, {name: headRole(state.layer, state.head)}));
      var strongest = strongestText(true);
      if (strongest) parts.push(strongest);
    } else if (state.view === "all") {
      parts.push(format(words.now_all, {layer: state.layer + 1}));
    } else {
      parts.push(format(words.now_all_layers, {count: data.layers * data.heads}));
    }
    ui.live.textContent = parts.join(" · ");
  }

  /* The chosen query's strongest key, the chosen key's strongest query, or the key read most
     on average; as text (spoken: the word-start mark named). */
  function strongestText(speak) {
    var t = speak ? spoken : function (token) { return token; };
    var chosen = hover || pinned, n = data.n, best = 0, i;
    if (chosen && chosen.i < n) {
      for (i = 1; i < n; i++) {
        var a = chosen.side === "q" ? weight(chosen.i, i) : weight(i, chosen.i);
        var b = chosen.side === "q" ? weight(chosen.i, best) : weight(best, chosen.i);
        if (a > b) best = i;
      }
      var value = (chosen.side === "q" ? weight(chosen.i, best)
                                       : weight(best, chosen.i)).toFixed(2);
      return chosen.side === "q"
        ? format(words.top_key, {token: t(data.tokens[chosen.i]), key: t(data.tokens[best]),
                                 value: value})
        : format(words.top_query, {token: t(data.tokens[chosen.i]),
                                   query: t(data.tokens[best]), value: value});
    }
    var sums = [];
    for (var k = 0; k < n; k++) {
      sums.push(0);
      for (var q = 0; q < n; q++) sums[k] += weight(q, k);
      if (sums[k] > sums[best]) best = k;
    }
    return format(words.most_read, {token: t(data.tokens[best]),
                                    value: (sums[best] / n).toFixed(2)});
  }

  /* The reader picked a sentence: keep the model if the sentence has it. */
  function choose(id) {
    var models = Object.keys(sentenceOf(id).files);
    var model = models.indexOf(state.model) >= 0 ? state.model : models[0];
    var switched = id === OWN && model !== state.model;
    listModels(id, model);
    show(id, model).then(function (shown) {
      if (!shown) return;
      if (switched) status(format(words.own_switched, {model: index.models[model].name}));
      announce(id === OWN ? words.own_sentence : sentenceOf(id).text);
    });
  }

  /* The reader's own sentence (helper OWN's panel runs the model): added, or put in place of
     the one before, at the top of the sentence list for multilingual-e5-small, and shown at
     the layer and head chosen. Resolves when it is drawn (a long sentence's grid included). */
  function addOwn(file) {
    var decoded = decodeOwn(file);
    ownVersion++;
    own = {id: OWN, lang: null, text: String(file.text || ""), files: {e5: OWN}};
    files[OWN] = Promise.resolve(decoded);
    if (!ui.ownGroup) {
      ui.ownGroup = el("optgroup");
      ui.ownGroup.label = words.own_group;
      ui.ownGroup.append(new Option("", OWN));
      ui.sentence.prepend(ui.ownGroup);
    }
    var text = visible(own.text).replace(/\s+/g, " ").trim();
    ui.ownGroup.firstChild.textContent = text.length > 60 ? text.slice(0, 59) + "\u2026" : text;
    var switched = state.model !== "e5", mine = ownVersion;
    return show(OWN, "e5").then(function (shown) {
      if (!shown && mine !== ownVersion) return;  // a newer sentence took its place
      if (!shown) throw new Error("case board (real heads): the sentence was not shown");
      if (switched) status(format(words.own_switched, {model: index.models.e5.name}));
      announce(words.own_sentence);
      return state.view === "one" ? undefined : ui.painting;
    }).then(function () {
      return new Promise(function (resolve) { requestAnimationFrame(function () { resolve(); }); });
    });
  }

  /* The model list: the models that have read sentence `id` (from the index, at once), with
     `model` chosen. */
  function listModels(id, model) {
    ui.model.textContent = "";
    Object.keys(sentenceOf(id).files).forEach(function (key) {
      ui.model.add(new Option(index.models[key].name, key));
    });
    ui.model.value = model;
  }

  /* Load (once) and show one sentence through one model. Resolves to whether it is shown: on a
     failure the board keeps what it shows and says that the data did not load. */
  function show(id, model) {
    var mine = ++pending;
    var sentence = sentenceOf(id);
    if (root.classList.contains("caseboard--live")) status(words.loading);  // else: see start
    return load(sentence.files[model]).then(function (file) {
      if (mine !== pending) return false;
      // (the reader's sentence replaced by another is a change of sentence too)
      var changed = id !== state.sentence || (id === OWN && file !== data);
      var clamped = state.layer > file.layers - 1;
      data = file;
      state.sentence = id;
      state.model = model;
      state.layer = Math.min(state.layer, file.layers - 1);
      state.head = Math.min(state.head, file.heads - 1);
      overlay = overlay.filter(function (j) { return j < file.heads && j !== state.head; });
      if (changed) hover = pinned = null;
      listModels(id, model);
      numbers(ui.layer, file.layers);
      numbers(ui.head, file.heads);
      rows(file.n);
      file.tokens.forEach(function (token, i) {
        var row = ui.rows[i];
        tokenInto(row.qtext, token);
        tokenInto(row.ktext, token);
        row.query.setAttribute("aria-label", spoken(token));
        row.key.setAttribute("aria-label", spoken(token));
      });
      if (changed) {
        roving(ui.queries, 0);
        roving(ui.keys, 0);
      }
      checks(file.heads);
      status(clamped ? format(words.clamped, {model: index.models[model].name,
                                              layers: file.layers, layer: file.layers}) : "");
      render();
      return true;
    }, function (error) {
      if (mine !== pending) return false;
      status(LOAD_FAILED);
      console.warn("case board (real heads):", error);
      if (state.sentence) {  // the controls show what the board still shows
        ui.sentence.value = state.sentence;
        listModels(state.sentence, state.model);
      }
      return false;
    });
  }

  /* The overlay's check-boxes: one per head of the layer. */
  function checks(heads) {
    while (ui.checks.length < heads) {
      var j = ui.checks.length;
      var label = el("label", "caseboard-real__check");
      var box = el("input");
      box.type = "checkbox";
      box.value = j;
      var swatch = el("span", "caseboard-real__swatch");
      swatch.setAttribute("aria-hidden", "true");
      label.append(box, swatch, el("span", null, String(j + 1)));
      ui.overlayBox.insertBefore(label, ui.overlayHint);
      ui.checks.push({label: label, box: box, swatch: swatch});
    }
    ui.checks.forEach(function (check, j) { check.label.hidden = j >= heads; });
  }

  function setHead(head) {
    state.head = head;
    overlay = overlay.filter(function (j) { return j !== head; });
    render();
    announce("");
  }

  function setView(view) {
    state.view = view;
    render();
    announce("");
  }

  function setQuantity(which) {
    state.quantity = which;
    render();
    announce("");
  }

  /* A map of a grid opened: its head in the one-head view (the pinned token kept). */
  function open(layer, head) {
    state.layer = layer;
    state.head = head;
    overlay = overlay.filter(function (j) { return j !== head; });
    state.view = "one";
    status("");
    render();
    announce("");
    ui.head.focus();  // the map is hidden now: focus goes where the head is chosen
  }

  /* Everything that depends on the layer, the head and the view. */
  function render() {
    ui.sentence.value = state.sentence;
    ui.model.value = state.model;
    ui.layer.value = String(state.layer + 1);
    ui.head.value = String(state.head + 1);
    ui.view.value = state.view;
    ui.onePanel.hidden = state.view !== "one";
    ui.allPanel.hidden = state.view !== "all";
    ui.layersPanel.hidden = state.view !== "layers";
    // Weights or contributions: the toggle (for data that has both), the legend's words.
    var which = quantity();
    ui.quantity.hidden = ui.quantityHelp.hidden = !data.norms;
    ui.quantityBoxes[which].checked = true;
    ui.legendTitle.textContent = which === "contrib" ? words.legend_contrib : words.legend;
    ui.legendNote.textContent = which === "contrib" ? words.legend_note_contrib
                                                    : words.legend_note;
    if (state.view === "one") drawHead();
    else {
      paintLines();  // (clears the long sentence's canvas)
      drawMaps();
    }
    changed();
  }

  /* Tell the page what is shown (`caseboard-real:change` on the board's root, detail: the
     state), once per change of the sentence, model, layer, head, view or quantity. */
  function changed() {
    var now = publicState();
    var key = JSON.stringify([now.sentence, state.sentence === OWN ? ownVersion : 0, now.model,
                              now.layer, now.head, now.view, quantity()]);
    if (key === said) return;
    said = key;
    root.dispatchEvent(new CustomEvent("caseboard-real:change", {detail: now, bubbles: true}));
  }

  function drawHead() {
    ui.caption.textContent = headRole(state.layer, state.head);
    var heads = [state.head].concat(overlay);
    ui.checks.forEach(function (check, j) {
      var at = heads.indexOf(j);
      check.box.checked = at >= 0;
      check.box.disabled = j === state.head || (at < 0 && heads.length >= OVERLAY);
      check.box.setAttribute("aria-label", headRole(state.layer, j));
      check.label.dataset.slot = at;
    });
    ui.key.textContent = "";
    ui.key.hidden = heads.length < 2;
    ui.onePanel.classList.toggle("caseboard-real__one--overlay", heads.length > 1);
    heads.forEach(function (j, s) {
      var item = el("li", "caseboard-real__slot--" + s);
      var swatch = el("span", "caseboard-real__swatch");
      swatch.setAttribute("aria-hidden", "true");
      item.append(swatch, headRole(state.layer, j));
      ui.key.append(item);
    });
    slots();
    if (!ui.tableBox.hidden) drawTable();
    highlight(true);
  }

  /* Show the lines of the token pointed at (or last chosen), or all of them. Only what shows is
     drawn: the n lines of one token per head, or the n x n of every query. */
  function highlight(redraw) {
    var chosen = hover || pinned;
    if (chosen && (!data || chosen.i >= data.n)) chosen = null;
    var key = chosen ? chosen.side + chosen.i : null;
    ui.showAll.setAttribute("aria-disabled", String(!pinned));
    if (key === ui.shown && !redraw) return;
    var n = data.n, i, k;
    ui.diagram.classList.toggle("caseboard-real__diagram--token", chosen !== null);
    ui.diagram.classList.toggle("caseboard-real__diagram--key",
                                chosen !== null && chosen.side === "k");
    if (ui.onToken) ui.onToken.classList.remove("caseboard-real__token--on");
    ui.onToken = null;
    ui.shown = key;
    var on = ui.slots.filter(function (s) { return s.on; });
    if (chosen === null) {
      if (n > LONG) paintLines();
      on.forEach(function (s) {
        // What its lines show: redrawn when the data, quantity, layer or head changed.
        var shows = [dataKey(), state.layer, s.head].join("|");
        if (s.drawn === shows || n > LONG) return;
        for (i = 0; i < n; i++) {
          for (k = 0; k < n; k++) {
            s.lines[i][k].setAttribute("stroke-opacity", Math.sqrt(weight(i, k, s.head)));
          }
        }
        s.drawn = shows;
      });
      ui.rows.forEach(function (row) { row.qbar.style.transform = row.kbar.style.transform = ""; });
      ui.readout.textContent = "";
      return;
    }
    var side = chosen.side, c = chosen.i;
    ui.onToken = side === "q" ? ui.rows[c].query : ui.rows[c].key;
    ui.onToken.classList.add("caseboard-real__token--on");
    on.forEach(function (s) {
      s.chosen.dataset.side = side;
      s.chosen.dataset.i = c;
      for (i = 0; i < n; i++) {
        var w = side === "q" ? weight(c, i, s.head) : weight(i, c, s.head);
        var end = s.ends[i];
        end.setAttribute("y1", (side === "q" ? c : i) + 0.5);
        end.setAttribute("y2", (side === "q" ? i : c) + 0.5);
        end.setAttribute("stroke-opacity", Math.sqrt(w));
      }
    });
    for (i = 0; i < n; i++) {  // the bars: the chosen head's weights, on the other side
      var row = ui.rows[i];
      if (side === "q") {
        row.kbar.style.transform = "scaleX(" + weight(c, i) + ")";
        row.qbar.style.transform = "";
      } else {
        row.qbar.style.transform = "scaleX(" + weight(i, c) + ")";
        row.kbar.style.transform = "";
      }
    }
    readout(side, c);
  }

  /* A long sentence's lines of every query (no token chosen), on the canvas over the part of
     the line box in view: only the lines that cross it and reach FAINT, those of one value
     (a byte) stroked together, at strength sqrt(value) as the lines of a short sentence.
     Redrawn when the lists scroll, the box changes size or the head drawn changes: an n x n
     pass over bytes, quick even at n = 512, where a line element each would not be (a chosen
     token's n lines stay line elements). */
  function paintLines() {
    ui.linesFrame = 0;
    var canvas = ui.canvas;
    if (!data || data.n <= LONG || state.view !== "one") {
      canvas.width = canvas.height = 0;
      return;
    }
    var n = data.n, box = ui.lineBox;
    var height = box.clientHeight, width = box.clientWidth;
    // The part of the box in view of the scrolling lists (offsetTop: from the diagram).
    var from = Math.max(0, ui.diagram.scrollTop - box.offsetTop);
    var to = Math.min(height, ui.diagram.scrollTop + ui.diagram.clientHeight - box.offsetTop);
    var tall = Math.max(0, to - from), ratio = window.devicePixelRatio || 1;
    canvas.style.top = from + "px";
    canvas.style.height = tall + "px";
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(tall * ratio);
    if (!tall || !width) return;
    var context = canvas.getContext("2d");
    context.setTransform(ratio, 0, 0, ratio, 0, 0);
    context.lineWidth = 2;
    var step = height / n;  // one token's row
    ui.slots.forEach(function (s, at) {
      if (!s.on) return;
      var colour = rgb("var(--cbreal-slot-" + at + ")").join(",");
      var levels = [];  // byte -> [y of the query, y of the key, ...] in view
      var map = mapBytes(state.layer, s.head);
      for (var q = 0; q < n; q++) {
        var yq = (q + 0.5) * step - from;
        for (var k = 0; k < n; k++) {
          var b = map[q * n + k];
          if (b < FAINT) continue;
          var yk = (k + 0.5) * step - from;
          if ((yq < 0 && yk < 0) || (yq > tall && yk > tall)) continue;
          (levels[b] || (levels[b] = [])).push(yq, yk);
        }
      }
      levels.forEach(function (ys, b) {
        context.strokeStyle = "rgba(" + colour + "," + Math.sqrt(b / 255) + ")";
        context.beginPath();
        for (var i = 0; i < ys.length; i += 2) {
          context.moveTo(0, ys[i]);
          context.lineTo(width, ys[i + 1]);
          // A few lines a path: one path of thousands of crossing lines rasterises slowly.
          if (i % 16 === 14) {
            context.stroke();
            context.beginPath();
          }
        }
        context.stroke();
      });
    });
  }

  /* The readout: the chosen token's top TOP keys (or, for a key, queries) in the chosen head,
     and the top one of each overlaid head. */
  function readout(side, c) {
    var n = data.n, out = ui.readout;
    function w(i, head) { return side === "q" ? weight(c, i, head) : weight(i, c, head); }
    function top(head, count) {
      var order = [];
      for (var i = 0; i < n; i++) order.push(i);
      order.sort(function (a, b) { return w(b, head) - w(a, head) || a - b; });
      return order.slice(0, count);
    }
    out.textContent = "";
    // Which of the two is shown, for a sentence that has both.
    if (data.norms) out.append(words["quantity_" + quantity()] + " \u00b7 ");
    var lead = format(side === "q" ? words.looks_at : words.read_by, {token: "\u0000"})
      .split("\u0000");
    out.append(lead[0]);
    var name = el("span");
    tokenInto(name, data.tokens[c], true);
    out.append(name, lead[1] + " ");
    function items(head, count) {
      top(head, count).forEach(function (i, j) {
        if (j > 0) out.append(" · ");
        var token = el("span");
        tokenInto(token, data.tokens[i], true);
        out.append(token, " " + w(i, head).toFixed(2));
      });
    }
    items(state.head, TOP);
    overlay.forEach(function (head) {
      out.append(" | " + headName(state.layer, head) + " ");
      items(head, 1);
    });
  }

  /* The chosen head as a table: one row per query, one column per key, values in the cells
     (a long sentence: one row per query, its TOP strongest keys). */
  function drawTable() {
    var n = data.n;
    if (n > LONG) return drawTopTable();
    var table = el("table", "caseboard-real__table");
    var caption = quantity() === "contrib" ? words.table_caption_contrib : words.table_caption;
    table.append(el("caption", null, format(caption,
                                            {name: headName(state.layer, state.head)})));
    var head = el("tr");
    head.append(el("td"));
    data.tokens.forEach(function (token) {
      var th = el("th");
      th.scope = "col";
      tokenInto(th, token, true);
      head.append(th);
    });
    var thead = el("thead");
    thead.append(head);
    var body = el("tbody");
    for (var q = 0; q < n; q++) {
      var tr = el("tr"), th = el("th");
      th.scope = "row";
      tokenInto(th, data.tokens[q], true);
      tr.append(th);
      for (var k = 0; k < n; k++) tr.append(el("td", null, weight(q, k).toFixed(2)));
      body.append(tr);
    }
    table.append(thead, body);
    ui.tableBox.textContent = "";
    ui.tableBox.append(table);
  }

  function drawTopTable() {
    var n = data.n;
    var table = el("table", "caseboard-real__table");
    table.append(el("caption", null, format(words.table_caption_top, {
      name: headName(state.layer, state.head), quantity: words.quantity_names[quantity()],
      count: TOP})));
    var head = el("tr");
    head.append(el("th", null, capital(words.terms.query)));
    for (var j = 1; j <= TOP; j++) {
      var th = el("th", null, format(words.table_top, {rank: j}));
      th.scope = "col";
      head.append(th);
    }
    var thead = el("thead");
    thead.append(head);
    var body = el("tbody"), order = [];
    for (var k = 0; k < n; k++) order.push(k);
    for (var q = 0; q < n; q++) {
      var tr = el("tr"), name = el("th");
      name.scope = "row";
      tokenInto(name, data.tokens[q], true);
      tr.append(name);
      var row = function (i) { return weight(q, i); };
      order.slice().sort(function (a, b) { return row(b) - row(a) || a - b; })
        .slice(0, TOP).forEach(function (i) {
          var td = el("td"), token = el("span");
          tokenInto(token, data.tokens[i], true);
          td.append(token, " " + row(i).toFixed(2));
          tr.append(td);
        });
      body.append(tr);
    }
    table.append(thead, body);
    ui.tableBox.textContent = "";
    ui.tableBox.append(table);
  }

  /* Colour of a CSS value (a variable of the board's palette) as [r, g, b], laid over `under`
     if it is translucent (Material's text colours are): what a line of that colour shows. */
  function rgb(value, under) {
    var probe = el("span");
    probe.style.color = value;
    probe.hidden = true;
    ui.legend.append(probe);
    var parts = getComputedStyle(probe).color.match(/[\d.]+/g).map(Number);
    probe.remove();
    var alpha = parts.length > 3 ? parts[3] : 1;
    return parts.slice(0, 3).map(function (c, i) {
      return under ? under[i] + (c - under[i]) * alpha : c;
    });
  }

  /* The colour of each byte value 0 .. 255, [r, g, b] in a row: from the page's background
     (0) to the weights' colour (255), at strength sqrt(byte / 255), as the lines. */
  function ramp(paper, ink) {
    var key = paper.join() + "|" + ink.join();
    if (ui.ramp && ui.ramp.key === key) return ui.ramp.colours;
    var colours = new Uint8ClampedArray(256 * 3);  // rounds as the canvas's pixels do
    for (var b = 0; b < 256; b++) {
      var s = Math.sqrt(b / 255);
      for (var c = 0; c < 3; c++) colours[3 * b + c] = paper[c] + (ink[c] - paper[c]) * s;
    }
    ui.ramp = {key: key, colours: colours};
    return colours;
  }

  /* One head's values into a canvas: one pixel per value in the colours of `ramp`. A long
     sentence's map (n > LONG) is downsampled to at most MAP pixels a side, each pixel the
     largest value of its block, so that a thin line of strong weights still shows. */
  function paint(canvas, layer, head, paper, ink) {
    var n = data.n, bytes = mapBytes(layer, head), colours = ramp(paper, ink);
    var f = n > LONG ? Math.ceil(n / MAP) : 1, m = Math.ceil(n / f);
    var offset = 0, values = bytes, at = 0, i;
    if (f > 1) {
      values = new Uint8Array(m * m);
      at = 0;
      if (!ui.blocks || ui.blocks.length !== n || ui.blocks.f !== f) {
        ui.blocks = new Int32Array(n);  // token -> its block
        ui.blocks.f = f;
        for (i = 0; i < n; i++) ui.blocks[i] = Math.floor(i / f);
      }
      var blocks = ui.blocks;
      for (var q = 0; q < n; q++) {
        var row = blocks[q] * m, start = offset + q * n;
        for (var k = 0; k < n; k++) {
          var b = bytes[start + k], cell = row + blocks[k];
          if (b > values[cell]) values[cell] = b;
        }
      }
    }
    canvas.width = canvas.height = m;
    canvas.classList.toggle("caseboard-real__smooth", f > 1);
    var context = canvas.getContext("2d");
    var image = context.createImageData(m, m);
    var pixels = image.data;
    for (i = 0; i < m * m; i++) {
      var v = 3 * values[at + i];
      pixels[4 * i] = colours[v];
      pixels[4 * i + 1] = colours[v + 1];
      pixels[4 * i + 2] = colours[v + 2];
      pixels[4 * i + 3] = 255;
    }
    context.putImageData(image, 0, 0);
  }

  /* A small map's button: its canvas and its label (visible: short; its name: long). */
  function mapButton(className, number) {
    var button = el("button", className);
    button.type = "button";
    var picture = el("canvas");
    picture.setAttribute("aria-hidden", "true");
    var label = el("span", "caseboard-real__role");
    label.setAttribute("aria-hidden", "true");
    if (number !== undefined) {
      var tag = el("span", "caseboard-real__number", number);
      tag.setAttribute("aria-hidden", "true");
      button.append(picture, tag, label);
    } else {
      button.append(picture, label);
    }
    return button;
  }

  /* A map's name (its head and pattern) and its visible label: the pattern in its long form
     (form 0, under a thumbnail) or its short one (1, in the grid of every layer). */
  function labelMap(button, layer, head, form) {
    button.setAttribute("aria-label", headRole(layer, head));
    button.lastChild.textContent = role(layer, head)[form];
  }

  /* The maps of the view shown: the layer's heads, or every layer's. */
  function drawMaps() {
    if (!data || state.view === "one") return;
    var style = getComputedStyle(ui.legend);
    var paper = rgb(style.getPropertyValue("--md-default-bg-color"));
    var ink = rgb(style.getPropertyValue("--cbreal-weight"), paper);
    if (state.view === "all") drawThumbs(paper, ink);
    else drawGrid(paper, ink);
  }

  function drawThumbs(paper, ink) {
    var heads = data.heads;
    while (ui.thumbs.length < heads) {
      var thumb = mapButton("caseboard-real__thumb", String(ui.thumbs.length + 1));
      thumb.dataset.head = ui.thumbs.length;
      ui.allPanel.append(thumb);
      ui.thumbs.push(thumb);
    }
    ui.thumbs.forEach(function (thumb, j) {
      thumb.hidden = j >= heads;
      if (j < heads) labelMap(thumb, state.layer, j, 0);
      if (j === state.head) thumb.setAttribute("aria-current", "true");
      else thumb.removeAttribute("aria-current");
    });
    var key = [dataKey(), state.layer, paper, ink].join("|");
    if (key === drawn.all) return;
    drawn.all = key;
    var maps = [];
    for (var j = 0; j < heads; j++) maps.push([ui.thumbs[j].firstChild, state.layer, j]);
    paintMaps("all", maps, paper, ink);
  }

  function drawGrid(paper, ink) {
    var layers = data.layers, heads = data.heads;
    if (ui.maps.length !== layers || (ui.maps[0] || []).length !== heads) {
      ui.grid.textContent = "";
      ui.grid.style.setProperty("--caseboard-heads", heads);
      ui.maps = [];
      var corner = el("span", "caseboard-real__axis");
      corner.setAttribute("aria-hidden", "true");
      ui.grid.append(corner);
      for (var j = 0; j < heads; j++) {
        var top = el("span", "caseboard-real__axis", "H" + (j + 1));
        top.setAttribute("aria-hidden", "true");
        ui.grid.append(top);
      }
      for (var l = 0; l < layers; l++) {
        var side = el("span", "caseboard-real__axis", "L" + (l + 1));
        side.setAttribute("aria-hidden", "true");
        ui.grid.append(side);
        var row = [];
        for (j = 0; j < heads; j++) {
          var map = mapButton("caseboard-real__map");
          map.dataset.layer = l;
          map.dataset.head = j;
          map.tabIndex = -1;
          ui.grid.append(map);
          row.push(map);
        }
        ui.maps.push(row);
      }
      drawn.layers = "";
    }
    rove({layer: state.layer, head: state.head});
    ui.maps.forEach(function (row, l) {  // the head chosen, marked
      row.forEach(function (map, j) {
        if (l === state.layer && j === state.head) map.setAttribute("aria-current", "true");
        else map.removeAttribute("aria-current");
      });
    });
    var key = [dataKey(), paper, ink].join("|");
    if (key === drawn.layers) return;
    drawn.layers = key;
    for (l = 0; l < layers; l++) {
      for (j = 0; j < heads; j++) labelMap(ui.maps[l][j], l, j, 1);
    }
    var maps = [];
    for (l = 0; l < layers; l++) {
      for (j = 0; j < heads; j++) maps.push([ui.maps[l][j].firstChild, l, j]);
    }
    paintMaps("layers", maps, paper, ink);
  }

  /* Paint maps ([canvas, layer, head] each) of the view `view`: at once for a short sentence;
     for a long one a few at a time, each few in a task of its own, so that the page keeps
     answering. ui.painting resolves when the last is painted (or a newer painting of the
     same view took over). */
  function paintMaps(view, maps, paper, ink) {
    if (data.n <= LONG) {
      maps.forEach(function (map) { paint(map[0], map[1], map[2], paper, ink); });
      return;
    }
    var job = ui.jobs[view] = (ui.jobs[view] || 0) + 1, shown = data;
    ui.painting = new Promise(function (resolve) {
      (function next(at) {
        if (job !== ui.jobs[view] || data !== shown) return resolve();
        maps.slice(at, at + 4).forEach(function (map) {
          paint(map[0], map[1], map[2], paper, ink);
        });
        if (at + 4 < maps.length) setTimeout(next, 0, at + 4);
        else resolve();
      })(0);
    });
  }

  /* What the maps show, besides the layer and the palette: the data and the quantity. */
  function dataKey() {
    return [state.sentence, state.sentence === OWN ? ownVersion : "", state.model,
            quantity()].join("|");
  }

  /* The grid's one Tab stop: the map at `at`. */
  function rove(at) {
    var old = (ui.maps[ui.gridAt.layer] || [])[ui.gridAt.head];
    if (old) old.tabIndex = -1;
    ui.gridAt = at;
    ui.maps[at.layer][at.head].tabIndex = 0;
  }

  function gridKey(event) {
    var at = ui.gridAt, layer = at.layer, head = at.head;
    var layers = ui.maps.length, heads = ui.maps[0].length;
    if (event.key === "ArrowRight") head = Math.min(head + 1, heads - 1);
    else if (event.key === "ArrowLeft") head = Math.max(head - 1, 0);
    else if (event.key === "ArrowDown") layer = Math.min(layer + 1, layers - 1);
    else if (event.key === "ArrowUp") layer = Math.max(layer - 1, 0);
    else if (event.key === "Home") {
      head = 0;
      if (event.ctrlKey) layer = 0;
    } else if (event.key === "End") {
      head = heads - 1;
      if (event.ctrlKey) layer = layers - 1;
    } else return;
    event.preventDefault();
    rove({layer: layer, head: head});
    ui.maps[layer][head].focus();
  }

  // --- Start ------------------------------------------------------------------------------------

  ui.status = el("div", "caseboard__status");
  ui.status.setAttribute("role", "status");
  root.append(ui.status);
  // Say "loading" only if it takes a while: a quick load then changes nothing on the page twice.
  var slow = setTimeout(function () { if (words) status(words.loading); }, 500);

  var ready = fetchJSON("real-" + LANG + ".json").then(function (json) {
    index = json;
    words = json.words;
    var board = build();
    var first = sentenceOf(DEFAULTS.sentence) || index.sentences[0];
    state.layer = DEFAULTS.layer;
    state.head = DEFAULTS.head;
    return show(first.id, first.files[DEFAULTS.model] ? DEFAULTS.model
                                                      : Object.keys(first.files)[0])
      .then(function (shown) {
        if (!shown) return Promise.reject(null);  // (show said so): addOwn waits in vain
        board.firstChild.after(ui.status);
        root.append(board);
        root.classList.add("caseboard--live");
      });
  });
  ready.catch(function (error) {
    clearTimeout(slow);
    status(LOAD_FAILED);
    if (error) console.warn("case board (real heads):", error);
  }).then(function () { clearTimeout(slow); });

  /* The controls' state: layer and head counted from 1 as the page shows them; token is the
     index of the query whose lines show, or null; key likewise for a key; overlay the heads
     drawn (from 1), the chosen one first; quantity ("weights" or "contrib") only for a
     sentence that has both (the reader's own). */
  function publicState() {
    var chosen = hover || pinned;
    var out = {sentence: state.sentence, model: state.model, layer: state.layer + 1,
               head: state.head + 1, view: state.view,
               token: chosen && chosen.side === "q" ? chosen.i : null,
               key: chosen && chosen.side === "k" ? chosen.i : null,
               pinned: pinned ? {side: pinned.side, index: pinned.i} : null,
               overlay: [state.head].concat(overlay).map(function (j) { return j + 1; })};
    if (data && data.norms) out.quantity = quantity();
    return out;
  }

  window.caseBoardReal = Object.freeze({
    state: publicState,
    /* The head shown: its sentence's tokens and weights (n x n, weight[q][k] = byte / 255),
       its contributions likewise if it has them (else null), the quantity drawn, and every
       head's pattern of the data (layers x heads, a role's key or null; null if none). */
    current: function () {
      if (!data) return null;
      var n = data.n;
      function matrix(which) {
        var bytes = mapBytes(state.layer, state.head, which);
        return data.tokens.map(function (t, q) {
          return Array.from(bytes.subarray(q * n, (q + 1) * n), function (b) { return b / 255; });
        });
      }
      return {tokens: data.tokens.slice(), weights: matrix("weights"),
              contributions: data.norms ? matrix("contrib") : null, quantity: quantity(),
              roles: data.roles && data.roles.map(function (row) { return row.slice(); })};
    },
    /* The reader's own sentence: {text, tokens, layers, heads, n, bytes, norms, roles}
       (bytes: Uint8Array(layers * heads * n * n), round(255 * weight); norms:
       Float32Array(layers * n * heads), ||v_k W_O^j|| of key k in head j, or null); see
       addOwn. Returns a Promise, resolved when it is drawn. */
    addOwn: function (file) {
      return ready.then(function () { return addOwn(file); });
    },
  });
})();
