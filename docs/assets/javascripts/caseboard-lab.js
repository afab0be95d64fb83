/*
 * The case board's lab and its forward pass, live (docs/<lang>/caseboard.md, parts 2 and 3).
 *
 * Our own script, no library. It loads the lab's inputs (assets/caseboard/lab-<lang>.json,
 * written at build time by mha.site.caseboard.lab_data: the case's eight tokens, their
 * embeddings and the walkthrough's two layers, float64) and recomputes both layers in the
 * browser whenever a control changes, exactly as mha does (mha.site.caseboard.lab_trace is the
 * truth; JavaScript numbers are float64 too):
 *
 *   Q = X W_Q, K = X W_K, V = X W_V                       (n, d_model) each
 *   scores_j = Q_j K_j^T * scale, scale = 1 / (τ sqrt(d_k))   (n, n), head j = columns j*d_k ..
 *     (τ: the temperature factor of the slider; the real temperature is τ sqrt(d_k))
 *   weights_j = softmax over the visible keys of each row   (n, n), hidden keys get 0
 *   concat = [weights_0 V_0 ... weights_{h-1} V_{h-1}]      (n, d_model)
 *   output = concat W_O                                     (n, d_model), layer 2 reads it
 *
 * The lab (#caseboard-lab) shows layer 1's weights, one heatmap per head, and its output; the
 * forward pass (#caseboard-forward) steps through every stage of both layers, from the same
 * state. Each matrix is a <table> (caption, tokens as headers, each value in its cell's
 * aria-label, the arrow keys move between cells) over canvases that paint its colours and its
 * grid. Every word shown comes from the data's `words`. Without the data, the static figures stay.
 *
 * One update must take one frame on a slow phone (scripts/caseboard_perf.py measures it), so an
 * update repaints canvases and touches no table: what it writes as text sits in boxes of fixed
 * size, what is off screen waits until it comes near, and the heatmaps for another number of
 * heads are kept laid out but folded away. Both parts are built, and the data loaded, only when
 * they first come near the screen; then, in idle time, the board rehearses a few updates, so
 * that the reader's first one runs compiled code (rehearseSoon).
 *
 * For the tests: window.caseBoardLab = {state(), result()}, read-only.
 */
(function () {
  "use strict";

  // Read now: document.currentScript is only set while the script first runs.
  var script = document.currentScript;
  var dataDir = new URL("../caseboard/", script.src);
  var lang = document.documentElement.lang || "zh";
  var PLAY_EVERY_MS = 3000;  // a stage every 3 s: time to read it (review finding 17)
  var SAY_AFTER_MS = 700;    // the lab's live region speaks once the controls rest this long
  var DEFAULTS = {heads: 4, temperature: 6, mask: "none", window: 2, padding: 6};
  var REHEARSALS = 4;  // rounds of rehearsal (every mask once) after a part is built

  var labBox = document.getElementById("caseboard-lab");
  var forwardBox = document.getElementById("caseboard-forward");
  if (!labBox && !forwardBox) return;

  // Both parts lie below the page's first screen: the data is loaded, and each part built,
  // when the part first comes near the screen, so loading the page costs the reader nothing.
  var board = null, loading = null;
  [labBox, forwardBox].forEach(function (box) {
    if (!box) return;
    whenNear(box, function () {
      if (!loading) {
        loading = fetch(new URL("lab-" + lang + ".json", dataDir).href)
          .then(function (response) {
            if (!response.ok) throw new Error("HTTP " + response.status);
            return response.json();
          })
          .then(function (data) { board = start(data); }, fail);
      }
      loading.then(function () { if (board) board.show(box); });
    });
  });

  function fail() {
    [labBox, forwardBox].forEach(function (box) {
      if (!box) return;
      // The data (and so its words) did not arrive: the page's own words for that.
      var text = box.getAttribute("data-load-failed");
      box.append(el("p", {className: "caseboard__status", text: text}));
      box.classList.add("cblab-failed");
    });
  }

  // --- The computation ------------------------------------------------------------------------

  /** Row-major product of a (n, m) and b (m, p): (n, p). */
  function matmul(a, b, n, m, p) {
    var out = new Float64Array(n * p);
    for (var i = 0; i < n; i++) {
      for (var k = 0; k < m; k++) {
        var aik = a[i * m + k];
        for (var j = 0; j < p; j++) out[i * p + j] += aik * b[k * p + j];
      }
    }
    return out;
  }

  function flat(rows) {
    var cols = rows[0].length, out = new Float64Array(rows.length * cols);
    rows.forEach(function (row, i) { out.set(row, i * cols); });
    return out;
  }

  /** visible[i * n + k]: may query i see key k? (mha.site.caseboard.lab_mask) */
  function visibility(kind, value, n) {
    var visible = new Uint8Array(n * n);
    for (var i = 0; i < n; i++) {
      for (var k = 0; k < n; k++) {
        visible[i * n + k] = kind === "causal" ? k <= i
          : kind === "window" ? i - value <= k && k <= i
            : kind === "padding" ? k < value : 1;
      }
    }
    return visible;
  }

  /** Columns c0 .. c0 + width - 1 of a (n, d) matrix: (n, width). */
  function columns(a, n, d, c0, width) {
    var out = new Float64Array(n * width);
    for (var i = 0; i < n; i++) {
      for (var c = 0; c < width; c++) out[i * width + c] = a[i * d + c0 + c];
    }
    return out;
  }

  /** One layer (mha.MultiHeadAttention.trace): every stage, each head's arrays apart. */
  function layerTrace(x, layer, h, temperature, visible, n, d) {
    var dk = d / h, scale = 1 / (temperature * Math.sqrt(dk));
    // (n, d) each, head j = columns j*dk ..; the same for every setting of the controls while
    // the layer's input is (layer 1 reads the embeddings): kept with the layer until it changes.
    if (layer.input !== x) {
      layer.input = x;
      layer.q = matmul(x, layer.W_Q, n, d, d);
      layer.k = matmul(x, layer.W_K, n, d, d);
      layer.v = matmul(x, layer.W_V, n, d, d);
    }
    var q = layer.q, k = layer.k, v = layer.v;
    var concat = new Float64Array(n * d);
    var out = {x: x, q: [], k: [], v: [], scores: [], weights: [], heads: [], scale: scale, dk: dk};
    for (var j = 0; j < h; j++) {
      var c0 = j * dk;
      var scores = new Float64Array(n * n), weights = new Float64Array(n * n);
      for (var i = 0; i < n; i++) {
        var max = -Infinity;
        for (var key = 0; key < n; key++) {
          var dot = 0;
          for (var c = 0; c < dk; c++) dot += q[i * d + c0 + c] * k[key * d + c0 + c];
          var s = dot * scale;
          scores[i * n + key] = s;
          if (visible[i * n + key] && s > max) max = s;
        }
        if (max === -Infinity) continue;  // a row that sees nothing: all zeros, as mha's softmax
        var sum = 0;
        for (key = 0; key < n; key++) {
          var e = visible[i * n + key] ? Math.exp(scores[i * n + key] - max) : 0;
          weights[i * n + key] = e;
          sum += e;
        }
        for (key = 0; key < n; key++) weights[i * n + key] /= sum;
      }
      for (i = 0; i < n; i++) {  // this head's output, written into its columns of concat
        for (c = 0; c < dk; c++) {
          var acc = 0;
          for (key = 0; key < n; key++) acc += weights[i * n + key] * v[key * d + c0 + c];
          concat[i * d + c0 + c] = acc;
        }
      }
      out.q.push(columns(q, n, d, c0, dk));
      out.k.push(columns(k, n, d, c0, dk));
      out.v.push(columns(v, n, d, c0, dk));
      out.scores.push(scores);
      out.weights.push(weights);
      out.heads.push(columns(concat, n, d, c0, dk));
    }
    out.concat = concat;
    out.output = matmul(concat, layer.W_O, n, d, d);
    return out;
  }

  // --- Small helpers --------------------------------------------------------------------------

  function el(tag, props, children) {
    var node = document.createElement(tag);
    if (props) {
      Object.keys(props).forEach(function (name) {
        var value = props[name];
        if (value === null || value === undefined || value === false) return;
        if (name === "text") node.textContent = value;
        else if (name === "className") node.className = value;
        else node.setAttribute(name, value === true ? "" : value);
      });
    }
    if (children) children.forEach(function (child) { if (child) node.append(child); });
    return node;
  }

  /** Writes ``text`` into ``node`` only if it differs: an unchanged text costs no layout. */
  function setText(node, text) {
    var child = node.firstChild;
    if (child && child === node.lastChild && child.nodeType === 3) {
      if (child.nodeValue !== text) child.nodeValue = text;  // the same text node, changed
    } else if (node.textContent !== text) {
      node.textContent = text;
    }
  }

  function fill(template, values) {
    return template.replace(/\{(\w+)\}/g, function (all, name) {
      return name in values ? values[name] : all;
    });
  }

  /** Three significant digits, without trailing zeros: 0.177, 1, 1.41, 8. */
  function short(value) {
    return String(Number(value.toPrecision(3)));
  }

  function fixed(value, digits) {
    var text = value.toFixed(digits);
    return Number(text) === 0 ? (0).toFixed(digits) : text;  // no "-0.00"
  }

  /** ``hundredths / 100`` with two decimals ("-1.05", "0.00"), quicker than toFixed. */
  function hundredthsText(hundredths) {
    var size = Math.abs(hundredths), rest = size % 100;
    return (hundredths < 0 ? "-" : "") + Math.floor(size / 100) + (rest < 10 ? ".0" : ".") + rest;
  }

  /** The first letter in capitals ("head 1" -> "Head 1"); Chinese is left as it is. */
  function capital(text) {
    return text.charAt(0).toUpperCase() + text.slice(1);
  }

  /**
   * A text that changes as a control moves, in a box of fixed size (caseboard-lab.css:
   * .cblab-text, contain: strict) inside ``outer``: Chromium lays out such a box on its own,
   * where a changed text in a flex item would lay out the page. Returns the inner box.
   */
  function textBox(outer) {
    return outer.appendChild(el("span", {className: "cblab-text"}));
  }

  /**
   * Watches whether ``node`` is on or near the screen (300 px): returns {onScreen}, and calls
   * ``back`` each time it comes near. What is away from the screen is drawn when it comes near,
   * so that a change of the lab draws only what the reader sees.
   */
  function sight(node, back) {
    var seen = {onScreen: true};
    if (typeof IntersectionObserver === "function") {
      new IntersectionObserver(function (entries) {
        seen.onScreen = entries[entries.length - 1].isIntersecting;
        if (seen.onScreen) back();
      }, {rootMargin: "300px 0px"}).observe(node);
    }
    return seen;
  }

  /** Calls ``build`` once, when ``node`` first comes within a screen's height of the screen. */
  function whenNear(node, build) {
    if (typeof IntersectionObserver !== "function") return build();
    var observer = new IntersectionObserver(function (entries) {
      if (!entries[entries.length - 1].isIntersecting) return;
      observer.disconnect();
      build();
    }, {rootMargin: "100% 0px"});
    observer.observe(node);
  }

  /** Runs ``task`` when the browser is idle (or soon). */
  function later(task) {
    if (window.requestIdleCallback) window.requestIdleCallback(task, {timeout: 2000});
    else window.setTimeout(task, 200);
  }

  /**
   * Folds ``node`` away or back (caseboard-lab.css: [data-cblab-away]). An attribute of our own,
   * not a class: a change of the class attribute makes Chromium restyle the whole subtree (other
   * stylesheets have selectors on [class]), which for a stage of tables costs more than a frame.
   */
  function fold(node, away) {
    if (node.hasAttribute("data-cblab-away") === away) return;
    if (away) {
      node.setAttribute("data-cblab-away", "");
      return;
    }
    node.removeAttribute("data-cblab-away");
    // Its heatmaps were not measured while folded (Heatmap.measure): they are now, after the
    // next layout (observing again makes the ResizeObserver report them once more).
    if (!resizes) return;
    node.querySelectorAll("table.cblab-map").forEach(function (table) {
      var map = mapOfTable.get(table);
      if (map && map.unmeasured) {
        resizes.unobserve(table);
        resizes.observe(table);
      }
    });
  }

  /**
   * Adds ``node`` to ``parent`` folded away, styled and laid out first (in one task, so never
   * seen unfolded): content-visibility keeps what was laid out, so showing it later is as quick
   * as showing a node that was shown before.
   */
  function addFolded(parent, node) {
    node.setAttribute("data-cblab-warm", "");
    parent.append(node);
    void node.offsetHeight;  // style and layout, now (in idle time)
    // Its heatmaps measured now, laid out and not yet folded: never while folded, which would
    // lay out what content-visibility skips (review finding 24).
    var maps = [];
    node.querySelectorAll("table.cblab-map").forEach(function (table) {
      var map = mapOfTable.get(table);
      if (map) maps.push(map);
    });
    maps.forEach(function (map) { map.measure(); });
    maps.forEach(function (map) { map.place(); });
    node.removeAttribute("data-cblab-warm");
    fold(node, true);
  }

  var uid = 0;
  function nextId(name) {
    uid += 1;
    return "cblab-" + name + "-" + uid;
  }

  // --- Heatmaps -------------------------------------------------------------------------------
  //
  // A heatmap is a <table> (caption, tokens as headers, one cell per value, the value in the
  // cell's aria-label) whose cells are transparent: their colours are painted beneath them, on
  // a canvas of one pixel per cell that the CSS stretches over the cells, and the grid on a
  // second canvas above it. An update writes n x m pixels, where restyling n x m table cells
  // would cost a style recalculation each; the grid is repainted only when the hidden cells,
  // the size or the colour scheme change. The table itself never changes size or style on an
  // update, so an update costs no layout either. The canvases follow the cells: their edges are
  // measured whenever the table's size changes (ResizeObserver, before the frame is painted).

  var mapOfTable = new WeakMap();
  var liveMaps = [];           // every heatmap built, to repaint when the colour scheme changes
  var palette = null;          // the colours, read from the CSS (caseboard-lab.css) once a scheme
  var paletteRoot = null;
  // What is off screen is painted when it comes near (300 px): an update paints what is seen.
  var sightings = typeof IntersectionObserver === "function"
    ? new IntersectionObserver(function (entries) {
      entries.forEach(function (entry) {
        var map = mapOfTable.get(entry.target);
        if (map) map.sighted(entry.isIntersecting);
      });
    }, {rootMargin: "300px 0px"}) : null;
  // A new width: what is folded away is measured again when it is unfolded (fold).
  window.addEventListener("resize", function () {
    liveMaps.forEach(function (map) {
      if (map.table.closest("[data-cblab-away]")) map.unmeasured = true;
    });
  });
  var resizes = typeof ResizeObserver === "function" ? new ResizeObserver(function (entries) {
    var maps = entries.map(function (entry) { return mapOfTable.get(entry.target); });
    maps.forEach(function (map) { map.measure(); });  // every read first,
    maps.forEach(function (map) { map.place(); });    // then every write: one layout
  }) : null;

  function readPalette() {
    var style = getComputedStyle(paletteRoot);
    function read(name) { return style.getPropertyValue(name).trim(); }
    palette = {weight: read("--cblab-weight"), pos: read("--cblab-pos"), neg: read("--cblab-neg"),
               line: read("--cblab-line"), hatch: read("--cblab-hatch"), dash: read("--cblab-dash"),
               cut: read("--cblab-cut"), wash: read("--cblab-wash"), mark: read("--cblab-mark"),
               cross: read("--cblab-cross")};
  }

  var rgbCache = {}, probe = null;
  /** A CSS colour as [r, g, b] (0..255), as a canvas paints it. */
  function rgb(colour) {
    if (rgbCache[colour]) return rgbCache[colour];
    if (!probe) {
      probe = document.createElement("canvas").getContext("2d", {willReadFrequently: true});
    }
    probe.clearRect(0, 0, 1, 1);
    probe.fillStyle = "#000";
    probe.fillStyle = colour;
    probe.fillRect(0, 0, 1, 1);
    var pixel = probe.getImageData(0, 0, 1, 1).data;
    return (rgbCache[colour] = [pixel[0], pixel[1], pixel[2]]);
  }

  /** Repaints every heatmap in the colours of the scheme the reader (or the system) chose. */
  function watchScheme(root) {
    paletteRoot = root;
    function repaint() {
      palette = null;
      liveMaps.forEach(function (map) { map.draw(); });
    }
    var observer = new MutationObserver(repaint);
    [document.documentElement, document.body].forEach(function (node) {
      observer.observe(node, {attributes: true, attributeFilter: ["data-md-color-scheme",
                                                                  "data-md-color-primary"]});
    });
    var dark = window.matchMedia("(prefers-color-scheme: dark)");
    if (dark.addEventListener) dark.addEventListener("change", repaint);
  }

  /**
   * One matrix: n rows (the tokens) by m columns (the tokens, or the dimensions 1 .. m).
   * kind "weight": values in [0, 1] in one hue, its opacity sqrt(value) (a spread-out row still
   * shows). kind "signed": diverging, + and - in two hues, opacity |value| / `limit` (clipped at
   * 1): one fixed scale per quantity (data.scales), whatever the stage and the controls, so that
   * a value has one colour everywhere. Hidden cells (mask) are hatched, with a dash. Columns
   * may come in groups of `groupEvery` (a line between them), with a header row of their own
   * (`groups`: {label, sr}). Only one cell of the table is in the tab order; the arrow keys move
   * between them. The cell being read is outlined, its row and column lit (`setMark`).
   */
  function Heatmap(spec) {
    var n = spec.rows.length, m = spec.cols.length, self = this;
    this.kind = spec.kind;
    this.n = n;
    this.m = m;
    this.groupEvery = spec.groupEvery || 0;
    this.rowLabels = spec.rows;
    this.colLabels = spec.groups ? spec.cols.map(function (label, c) {
      return spec.groups[Math.floor(c / spec.groupEvery)].label + " " + label;
    }) : spec.cols;
    this.tokenCols = spec.tokenCols;
    this.hiddenWord = spec.hiddenWord;
    this.limit = spec.limit || 1;  // signed: the value drawn at full colour
    this.padWord = spec.padWord;
    this.mark = -1;            // the cell being read: outlined, its row and column lit
    this.unmeasured = false;
    this.values = null;
    this.visible = null;
    this.shown = new Int32Array(n * m).fill(-2147483648);  // each cell's label, in hundredths
    this.HIDDEN = 2147483647;
    this.cells = [];
    this.rowHeads = [];
    this.colHeads = [];
    this.padFrom = n;
    this.xs = null;            // the cells' edges (CSS px from the first cell): m + 1, n + 1
    this.ys = null;

    var table = el("table", {className: "cblab-map cblab-map--" + spec.kind
      + (spec.tokenCols ? " cblab-map--square" : "")
      + (spec.size ? " cblab-map--" + spec.size : "")});
    // A fixed layout (the columns' widths from the CSS, not from measuring every cell): quick.
    table.style.setProperty("--m", String(m));
    this.table = table;
    mapOfTable.set(table, this);
    this.hue = spec.hue || "";  // the detective's colour, by the caption and on the cells
    this.captionText = document.createTextNode(spec.caption);
    var swatch = el("span", {className: "cblab-swatch", "aria-hidden": "true", hidden: !spec.hue});
    swatch.style.backgroundColor = this.hue;
    table.append(el("caption", null, [swatch, this.captionText]));

    var corner = el("td", {className: "cblab-corner"});
    var headRow = el("tr", null, spec.groups ? [] : [corner]);
    var groupRow = spec.groups ? el("tr", null, [corner]) : null;
    if (groupRow) {
      corner.rowSpan = 2;
      spec.groups.forEach(function (group) {
        groupRow.append(el("th", {scope: "colgroup", colspan: String(spec.groupEvery),
                                  className: "cblab-group-head"},
          [el("span", {className: "cblab-sr", text: group.sr}), group.label]));
      });
    }
    // A token's header holds, in a box of fixed size (.cblab-label, contain: strict), the token
    // and the padding word in one place, one of them shown (markPadding: a class, no layout).
    function tokenLabel(label) {
      return el("span", {className: "cblab-label"}, [
        el("span", {className: "cblab-token", text: label}),
        el("span", {className: "cblab-padword", text: spec.padWord || ""})]);
    }
    spec.cols.forEach(function (label) {
      var th = el("th", {scope: "col", className: spec.tokenCols ? "cblab-col" : "cblab-dim"},
        [spec.tokenCols ? tokenLabel(label) : label]);
      self.colHeads.push(th);
    });
    headRow.append.apply(headRow, this.colHeads);
    var body = el("tbody");
    spec.rows.forEach(function (label, r) {
      var th = el("th", {scope: "row", className: "cblab-row"}, [tokenLabel(label)]);
      self.rowHeads.push(th);
      var tr = el("tr", null, [th]);
      for (var c = 0; c < m; c++) {
        var td = el("td", {className: "cblab-cell", tabindex: r === 0 && c === 0 ? "0" : "-1"});
        self.cells.push(td);
        tr.append(td);
      }
      body.append(tr);
    });
    // Under the cells, two canvases: the colours, one pixel per cell, stretched over the cells
    // by the CSS without smoothing (caseboard-lab.css: .cblab-colours); above them the grid,
    // the hatch of hidden cells and the lines between heads (.cblab-paint).
    this.colours = el("canvas", {className: "cblab-colours", width: String(m),
                                 height: String(n), "aria-hidden": "true"});
    this.canvas = el("canvas", {className: "cblab-paint", "aria-hidden": "true"});
    this.cells[0].classList.add("cblab-origin");
    this.cells[0].append(this.colours, this.canvas);
    table.append(el("colgroup", null, [el("col", {className: "cblab-col-head"}),
                                       el("col", {className: "cblab-col-cell", span: String(m)})]),
                 el("thead", null, [groupRow, headRow]), body);
    this.onScreen = !sightings;
    this.stale = false;
    liveMaps.push(this);
    if (resizes) resizes.observe(table);
    if (sightings) sightings.observe(table);
  }

  Heatmap.prototype.sighted = function (onScreen) {
    this.onScreen = onScreen;
    if (onScreen && this.stale) this.draw();
  };

  /**
   * Measures where the cells are (after layout: in the ResizeObserver's callback). Not while
   * folded away: that would lay out what content-visibility skips; the map is measured when it
   * is unfolded (fold).
   */
  Heatmap.prototype.measure = function () {
    var cells = this.cells, m = this.m, n = this.n;
    if (this.table.closest("[data-cblab-away]")) {
      if (!this.xs) this.unmeasured = true;  // else: as measured before it was folded
      return;
    }
    this.unmeasured = false;
    var origin = cells[0].getBoundingClientRect();
    if (origin.width === 0) {  // not shown
      this.xs = this.ys = null;
      return;
    }
    var xs = [], ys = [], c, r;
    for (c = 0; c < m; c++) xs.push(cells[c].getBoundingClientRect().left - origin.left);
    xs.push(cells[m - 1].getBoundingClientRect().right - origin.left);
    for (r = 0; r < n; r++) ys.push(cells[r * m].getBoundingClientRect().top - origin.top);
    ys.push(cells[(n - 1) * m].getBoundingClientRect().bottom - origin.top);
    this.xs = xs;
    this.ys = ys;
  };

  /** Sizes the canvases to the cells just measured and paints them. */
  Heatmap.prototype.place = function () {
    if (!this.xs || this.unmeasured) return;
    var width = this.xs[this.m], height = this.ys[this.n];
    this.colours.style.width = width + "px";
    this.colours.style.height = height + "px";
    // The grid's canvas: one pixel more on each side, for the grid's outer lines.
    this.canvas.style.width = (width + 2) + "px";
    this.canvas.style.height = (height + 2) + "px";
    this.gridDrawn = null;
    this.draw();
  };

  /**
   * Keeps ``values`` (n * m, row-major; ``visible``: n * m of 0/1, or null) and paints them.
   * The cells' labels (what a screen reader reads) follow in idle time, after the frame.
   */
  Heatmap.prototype.update = function (values, visible) {
    this.values = values;
    this.visible = visible;
    if (!this.labelsDue) {
      this.labelsDue = true;
      dueLabels.push(this);
      if (dueLabels.length === 1) later(writeLabels);
    }
    this.draw();
  };

  var dueLabels = [];
  function writeLabels() {
    dueLabels.splice(0).forEach(function (map) { map.writeLabels(); });
  }

  /** Each cell's label: its value with two decimals, or words.hidden. */
  Heatmap.prototype.writeLabels = function () {
    var values = this.values, visible = this.visible;
    this.labelsDue = false;
    for (var i = 0; i < values.length; i++) {
      var hidden = visible && !visible[i], hundredths = hidden ? this.HIDDEN
        : Math.round(values[i] * 100) || 0;  // no -0
      if (hundredths !== this.shown[i]) {
        this.shown[i] = hundredths;
        this.cells[i].setAttribute("aria-label",
          hidden ? this.hiddenWord : hundredthsText(hundredths));
      }
    }
  };

  /**
   * Paints the colours (every update: m x n pixels) and, if what it shows changed (the hidden
   * cells, the lines between heads, the size, the colour scheme), the grid.
   */
  Heatmap.prototype.draw = function () {
    if (!this.xs || !this.values) return;  // painted once measured
    this.stale = !this.onScreen;
    if (this.stale) return;                // painted when it comes near the screen
    if (!palette) readPalette();
    this.paintColours();
    var ratio = window.devicePixelRatio || 1, drawn = this.gridDrawn, visible = this.visible;
    if (!drawn || drawn.palette !== palette || drawn.ratio !== ratio
        || drawn.groupEvery !== this.groupEvery || drawn.padFrom !== this.padFrom
        || drawn.mark !== this.mark || !sameMask(drawn.visible, visible)) {
      this.gridDrawn = {palette: palette, ratio: ratio, groupEvery: this.groupEvery,
                        padFrom: this.padFrom, mark: this.mark,
                        visible: visible && visible.slice()};
      this.paintGrid(ratio);
    }
  };

  /** Are two masks (n * m of 0/1, or null: every cell visible) the same? */
  function sameMask(a, b) {
    if (!a || !b) return !a && !b;
    for (var i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
    return true;
  }

  /**
   * The cells' colours, one pixel each: the hue, its opacity the value ("weight": its square
   * root, so a spread-out row still shows; "signed": |value| / the map's fixed `limit`, at most
   * 1, in the hue of its sign). A hidden cell is transparent: the grid's hatch shows there.
   */
  Heatmap.prototype.paintColours = function () {
    var n = this.n, m = this.m, values = this.values, visible = this.visible, i;
    var scale = 1 / this.limit;
    var hue = rgb(this.hue || palette.weight), pos = rgb(palette.pos), neg = rgb(palette.neg);
    var ctx = this.coloursCtx || (this.coloursCtx = this.colours.getContext("2d"));
    var image = this.image || (this.image = ctx.createImageData(m, n));
    var pixels = image.data;
    for (i = 0; i < n * m; i++) {
      var value = values[i], colour = hue, alpha;
      if (visible && !visible[i]) {
        alpha = 0;
      } else if (this.kind === "weight") {
        alpha = Math.sqrt(Math.max(0, Math.min(1, value)));
      } else {
        colour = value < 0 ? neg : pos;
        alpha = Math.min(1, Math.abs(value) * scale);
      }
      pixels[4 * i] = colour[0];
      pixels[4 * i + 1] = colour[1];
      pixels[4 * i + 2] = colour[2];
      pixels[4 * i + 3] = Math.round(255 * alpha);
    }
    ctx.putImageData(image, 0, 0);
  };

  var hatchTile = null;  // {palette, ratio, pattern}: a 4 px square of the hatch's lines
  /** The hatch of hidden cells: lines rising at 45 degrees every 4 CSS px, as a pattern. */
  function hatching(ctx, ratio) {
    if (!hatchTile || hatchTile.palette !== palette || hatchTile.ratio !== ratio) {
      var size = Math.max(2, Math.round(4 * ratio));
      var tile = el("canvas", {width: String(size), height: String(size)});
      var tileCtx = tile.getContext("2d");
      tileCtx.strokeStyle = palette.hatch;
      tileCtx.lineWidth = ratio;
      tileCtx.beginPath();
      for (var k = -size; k <= size; k += size) {  // the line and its neighbours' ends
        tileCtx.moveTo(k, size);
        tileCtx.lineTo(k + size, 0);
      }
      tileCtx.stroke();
      var pattern = ctx.createPattern(tile, "repeat");
      // The tile is in device pixels; a heatmap draws in CSS pixels (its transform: ratio).
      if (pattern.setTransform) {
        pattern.setTransform(new DOMMatrix([1 / ratio, 0, 0, 1 / ratio, 0, 0]));
      }
      hatchTile = {palette: palette, ratio: ratio, pattern: pattern};
    }
    return hatchTile.pattern;
  }

  /** The grid, the hidden cells (hatched, with a dash) and the lines between heads' columns. */
  Heatmap.prototype.paintGrid = function (ratio) {
    var xs = this.xs, ys = this.ys, n = this.n, m = this.m, visible = this.visible;
    var canvas = this.canvas, r, c, i;
    var width = Math.round((xs[m] + 2) * ratio), height = Math.round((ys[n] + 2) * ratio);
    if (canvas.width !== width) canvas.width = width;
    if (canvas.height !== height) canvas.height = height;
    var ctx = this.ctx || (this.ctx = canvas.getContext("2d"));
    ctx.setTransform(ratio, 0, 0, ratio, ratio, ratio);  // (0, 0): the first cell's corner
    ctx.clearRect(-1, -1, xs[m] + 2, ys[n] + 2);
    var hidden = [];
    if (visible) for (i = 0; i < n * m; i++) if (!visible[i]) hidden.push(i);
    if (hidden.length) {  // hatched, with a dash
      ctx.fillStyle = hatching(ctx, ratio);
      hidden.forEach(function (index) {
        var r = Math.floor(index / m), c = index % m;
        ctx.fillRect(xs[c], ys[r], xs[c + 1] - xs[c], ys[r + 1] - ys[r]);
      });
      ctx.fillStyle = palette.dash;
      hidden.forEach(function (index) {
        var r = Math.floor(index / m), c = index % m, w = xs[c + 1] - xs[c];
        ctx.fillRect(xs[c] + w * 0.3, (ys[r] + ys[r + 1]) / 2 - 0.75, w * 0.4, 1.5);
      });
    }
    if (this.padFrom < n) {  // padding's query rows: computed, then ignored (washed out)
      ctx.fillStyle = palette.wash;
      ctx.fillRect(0, ys[this.padFrom], xs[m], ys[n] - ys[this.padFrom]);
    }
    var mark = this.mark;
    if (mark >= 0) {  // the cell being read: its row and column lit
      var mr = Math.floor(mark / m), mc = mark % m;
      ctx.fillStyle = palette.cross;
      ctx.fillRect(0, ys[mr], xs[m], ys[mr + 1] - ys[mr]);
      ctx.fillRect(xs[mc], 0, xs[mc + 1] - xs[mc], ys[n]);
    }
    ctx.fillStyle = palette.line;  // the grid
    for (c = 0; c <= m; c++) ctx.fillRect(xs[c] - 0.5, -0.5, 1, ys[n] + 1);
    for (r = 0; r <= n; r++) ctx.fillRect(-0.5, ys[r] - 0.5, xs[m] + 1, 1);
    if (this.groupEvery) {
      ctx.fillStyle = palette.cut;
      for (c = this.groupEvery; c < m; c += this.groupEvery) {
        ctx.fillRect(xs[c] - 1, -1, 2, ys[n] + 2);
      }
    }
    if (mark >= 0) {  // and itself outlined, 2 px, inside the cell
      ctx.strokeStyle = palette.mark;
      ctx.lineWidth = 2;
      ctx.strokeRect(xs[mc] + 1, ys[mr] + 1, xs[mc + 1] - xs[mc] - 2, ys[mr + 1] - ys[mr] - 2);
    }
  };

  /** Outlines cell ``index`` (-1: none), with a light crosshair on its row and column. */
  Heatmap.prototype.setMark = function (index) {
    if (index === this.mark) return;
    this.mark = index;
    this.draw();
  };

  /**
   * Marks the tokens at and after the position given as padding (n: none): their headers say
   * the padding word (words.lab_pad_token: real padding is filler, not the sentence's last
   * words), dimmed and dotted; the padded query rows are washed out (paintGrid).
   */
  Heatmap.prototype.markPadding = function (from) {
    if (from === this.padFrom) return;
    this.padFrom = from;
    function mark(th, position) {
      var padded = position >= from;
      if (th.classList.contains("cblab-pad") !== padded) th.classList.toggle("cblab-pad", padded);
    }
    this.rowHeads.forEach(mark);
    if (this.tokenCols) this.colHeads.forEach(mark);
  };

  /** Row ``r``'s label as shown (the padding word on a padded position). */
  Heatmap.prototype.rowLabel = function (r) {
    return r >= this.padFrom ? this.padWord : this.rowLabels[r];
  };

  /** Column ``c``'s label as shown. */
  Heatmap.prototype.colLabel = function (c) {
    return this.tokenCols && c >= this.padFrom ? this.padWord : this.colLabels[c];
  };

  /** What the readout says of cell ``index``. */
  Heatmap.prototype.describe = function (index) {
    var r = Math.floor(index / this.m), c = index % this.m;
    var row = this.rowLabel(r), col = this.colLabel(c);
    var where = row + (this.tokenCols ? " → " + col : " · " + col);
    var what = this.values === null ? ""
      : this.visible && !this.visible[index] ? " · " + this.hiddenWord
        : " = " + fixed(this.values[index], 3);
    return capital(this.captionText.nodeValue) + " · " + where + what;
  };

  /**
   * The heatmaps inside ``root`` that are shown (not folded away), in the page's order; only
   * those like ``like`` (the same kind and shape), if given.
   */
  function shownMaps(root, like) {
    var out = [];
    root.querySelectorAll("table.cblab-map").forEach(function (table) {
      var map = mapOfTable.get(table);
      if (!map || table.closest("[data-cblab-away]")) return;
      if (like && (map.kind !== like.kind || map.n !== like.n || map.m !== like.m)) return;
      out.push(map);
    });
    return out;
  }

  /**
   * Readout and keyboard for every heatmap inside ``root``: pointing at a cell, tapping it (or
   * dragging a finger over the cells) or focusing it writes its value into ``readout`` and
   * outlines it on its map; the arrow keys (Home, End) move between cells. When its map is
   * folded away or replaced (another number of heads, another stage), the readout moves to the
   * same cell of the map of the same kind and shape in the same place (the first head's to the
   * first head's), if there is one, or goes back to the hint (review finding 1).
   * Returns {refresh(), current(): [map, index] or null}.
   */
  function wireHeatmaps(root, readout, hint) {
    var current = null;  // {map, index, place: the map's place among those shown}
    function select(cell) {
      var cellNode = cell && cell.closest ? cell.closest("td.cblab-cell") : null;
      if (!cellNode || !root.contains(cellNode)) return;
      var map = mapOfTable.get(cellNode.closest("table"));
      if (!map) return;
      var index = map.cells.indexOf(cellNode);
      if (current && current.map === map && current.index === index) return;
      if (current && current.map !== map) current.map.setMark(-1);
      current = {map: map, index: index, place: shownMaps(root, map).indexOf(map)};
      map.setMark(index);
      refresh();
    }
    function gone(map) {
      return !map.table.isConnected || map.table.closest("[data-cblab-away]") !== null;
    }
    function refresh() {
      if (!current) return;
      if (gone(current.map)) {
        current.map.setMark(-1);
        var next = shownMaps(root, current.map)[current.place];
        if (next) {
          current = {map: next, index: current.index, place: current.place};
          next.setMark(current.index);
        } else {
          current = null;
          setText(readout, hint);
          return;
        }
      }
      setText(readout, current.map.describe(current.index));
    }
    root.addEventListener("pointerover", function (event) { select(event.target); });
    root.addEventListener("focusin", function (event) { select(event.target); });
    // A finger pressed on a cell and dragged sideways reads the cells it passes (a drag up or
    // down scrolls the page: caseboard-lab.css, touch-action on the cells).
    var dragging = null;
    root.addEventListener("pointerdown", function (event) {
      if (event.pointerType === "mouse") return;
      dragging = event.pointerId;
      select(event.target);
    });
    root.addEventListener("pointermove", function (event) {
      if (event.pointerId !== dragging) return;
      select(document.elementFromPoint(event.clientX, event.clientY));
    });
    ["pointerup", "pointercancel"].forEach(function (type) {
      root.addEventListener(type, function (event) {
        if (event.pointerId === dragging) dragging = null;
      });
    });
    root.addEventListener("keydown", function (event) {
      var cell = event.target;
      if (!cell.classList || !cell.classList.contains("cblab-cell")) return;
      var map = mapOfTable.get(cell.closest("table"));
      var index = map.cells.indexOf(cell), r = Math.floor(index / map.m), c = index % map.m;
      var moves = {ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0]};
      if (moves[event.key]) {
        r = Math.min(map.n - 1, Math.max(0, r + moves[event.key][0]));
        c = Math.min(map.m - 1, Math.max(0, c + moves[event.key][1]));
      } else if (event.key === "Home") {
        c = 0;
      } else if (event.key === "End") {
        c = map.m - 1;
      } else {
        return;
      }
      event.preventDefault();
      event.stopPropagation();  // the arrow keys move in the table, not the forward pass's stage
      var next = map.cells[r * map.m + c];
      if (next === cell) return;
      cell.tabIndex = -1;
      next.tabIndex = 0;
      next.focus();
    });
    return {refresh: refresh, current: function () {
      return current && !gone(current.map) ? [current.map, current.index] : null;
    }};
  }

  // --- The board ------------------------------------------------------------------------------

  /**
   * The widest of ``labels`` (CSS px) in the row headers' font (caseboard-lab.css: 0.6rem): the
   * tokens and the padding word, so that no header changes size when a token is relabelled.
   */
  function widestToken(labels, box) {
    var rem = parseFloat(getComputedStyle(document.documentElement).fontSize) || 16;
    var ctx = document.createElement("canvas").getContext("2d");
    ctx.font = (0.6 * rem) + "px " + getComputedStyle(box).fontFamily;
    return Math.ceil(Math.max.apply(null, labels.map(function (token) {
      return ctx.measureText(token).width;
    })));
  }

  /** A number for the legend: three significant digits, with a real minus sign. */
  function tick(value) {
    return (value < 0 ? "\u2212" : "") + short(Math.abs(value));
  }

  /**
   * The colour legend of a board (review finding 5), as text a screen reader reads: for each
   * of ``kinds`` ("weight", "signed", "scores") a bar and its numbers (data.scales: the same
   * scale for every stage and setting), the swatches of a hidden cell and of padding, then one
   * line on how to read them.
   */
  function buildLegend(context, kinds) {
    var words = context.words, scales = context.data.scales;
    var items = kinds.map(function (kind) {
      var scale = scales[kind];
      var ticks = kind === "weight" ? scale.ticks.map(function (t) { return [t, Math.sqrt(t)]; })
        : [[scale.range[0], 0], [0, 0.5], [scale.range[1], 1]];
      var name = kind === "weight" ? words.lab_legend_weight
        : kind === "signed" ? words.lab_legend_signed
          : kind === "difference" ? words.lab_legend_difference : words.lab_legend_scores;
      // The difference's scale is shown while "compare with the default" is on (LabView).
      return el("div", {className: "cblab-key cblab-key--" + kind, "data-kind": kind,
                        hidden: kind === "difference"}, [
        el("span", {className: "cblab-key-name", text: name}),
        el("span", {className: "cblab-key-scale"}, [
          el("span", {className: "cblab-bar cblab-bar--" + (kind === "weight" ? "weight"
            : "signed"), "aria-hidden": "true"}),
          el("span", {className: "cblab-ticks"}, ticks.map(function (t) {
            var node = el("span", {className: "cblab-tick", "data-value": String(t[0]),
                                   text: tick(t[0])});
            node.style.left = (100 * t[1]) + "%";
            return node;
          }))])]);
    });
    items.push(el("div", {className: "cblab-key cblab-key--swatches"}, [
      el("span", {className: "cblab-key-swatch"}, [
        el("span", {className: "cblab-sample cblab-sample--hidden", "aria-hidden": "true"}),
        words.hidden]),
      el("span", {className: "cblab-key-swatch"}, [
        el("span", {className: "cblab-sample cblab-sample--pad", "aria-hidden": "true"}),
        words.lab_legend_pad])]));
    items.push(el("p", {className: "cblab-key-note", text: [words.lab_legend_weight_note,
      words.lab_legend_sign, words.lab_legend_clip].join(lang === "zh" ? "" : " ")}));
    return el("div", {className: "cblab-legend", role: "group", "aria-label": words.lab_legend},
      items);
  }

  /** The tokens that occur more than once, as words.lab_repeated says it ("" if none). */
  function repeatedNote(words, tokens) {
    var counts = {}, order = [];
    tokens.forEach(function (token) {
      if (!(token in counts)) {
        counts[token] = 0;
        order.push(token);
      }
      counts[token] += 1;
    });
    return order.filter(function (token) { return counts[token] > 1; }).map(function (token) {
      return fill(words.lab_repeated, {token: token, count: counts[token]});
    }).join(" ");
  }

  function start(data) {
    var words = data.words, terms = words.terms;
    var tokens = data.tokens, n = tokens.length, d = data.x[0].length;
    var x = flat(data.x);
    var layers = data.layers.map(function (layer) {
      return {W_Q: flat(layer.W_Q), W_K: flat(layer.W_K), W_V: flat(layer.W_V),
              W_O: flat(layer.W_O)};
    });
    var dims = [];
    for (var c = 1; c <= d; c++) dims.push(String(c));
    var state = {heads: DEFAULTS.heads, temperature: DEFAULTS.temperature, mask: DEFAULTS.mask,
                 window: DEFAULTS.window, padding: DEFAULTS.padding};
    var trace = null;
    var padWord = words.lab_pad_token;
    var limits = {signed: data.scales.signed.range[1], scores: data.scales.scores.range[1],
                  difference: data.scales.difference.range[1]};

    function maskValue(s) {
      return s.mask === "window" ? s.window : s.mask === "padding" ? s.padding : null;
    }

    /** Both layers for the controls ``s`` (state's shape). */
    function compute(s) {
      var visible = visibility(s.mask, maskValue(s), n);
      var temperature = data.temperatures[s.temperature];
      var input = x, out = [];
      layers.forEach(function (layer) {
        out.push(layerTrace(input, layer, s.heads, temperature, visible, n, d));
        input = out[out.length - 1].output;
      });
      return {layers: out, visible: visible, padFrom: s.mask === "padding" ? s.padding : n};
    }

    // Layer 1's output at the default (τ = 1, no mask) for each number of heads: what the lab's
    // "compare with the default" subtracts.
    var defaults = {};
    data.heads.forEach(function (h) {
      defaults[h] = compute({heads: h, temperature: DEFAULTS.temperature, mask: "none",
                             window: DEFAULTS.window, padding: DEFAULTS.padding})
        .layers[0].output;
    });

    function headTitle(j, h) {
      return h === data.cast.length ? capital(data.cast[j].name)
        : capital(terms.head) + " " + (j + 1);
    }
    function headHue(j, h) {
      return h === data.cast.length ? data.cast[j].color : null;
    }

    var context = {
      data: data, words: words, terms: terms, tokens: tokens, n: n, d: d, dims: dims,
      headTitle: headTitle, headHue: headHue, rehearse: rehearseSoon, defaults: defaults,
      limits: limits,
      repeated: repeatedNote(words, tokens), forwardBox: forwardBox, labBox: labBox,
      layerTitle: function (layer, what) {
        return fill(words.layer_n, {layer: layer}) + " · " + what;
      },
      map: function (spec) {
        var cols = spec.tokenCols ? tokens : dims.slice(0, spec.width || d);
        if (spec.groups) {
          cols = [].concat.apply([], spec.groups.map(function () { return cols; }));
        }
        return new Heatmap({
          rows: tokens, cols: cols,
          tokenCols: !!spec.tokenCols, kind: spec.kind, caption: spec.caption, hue: spec.hue,
          groupEvery: spec.groupEvery, groups: spec.groups, size: spec.size,
          limit: spec.scores ? limits.scores : limits.signed, padWord: padWord,
          hiddenWord: words.hidden});
      }
    };

    trace = compute(state);
    var lab = null, forward = null, rowHead = null;
    function built(view) {
      if (!rowHead) {
        rowHead = widestToken(tokens.concat([padWord]), view.view) + "px";
        watchScheme(view.view);
      }
      view.view.style.setProperty("--cblab-rowhead", rowHead);
      view.update(trace, state);
      rehearseSoon();
      return view;
    }

    /** Both parts (those built) show ``result``, the layers computed for the controls ``s``. */
    function updateViews(result, s) {
      if (lab) lab.update(result, s);
      if (forward) forward.update(result, s);
    }

    function onChange() {
      changes += 1;
      trace = compute(state);
      updateViews(trace, state);
    }

    /**
     * A reader's first change should be as quick as the next ones, but the browser compiles a
     * function to fast code only once it has run a few times. So, in idle time once a part is
     * built (and once the forward pass shows another stage), the board rehearses: it goes
     * through other settings (each mask in turn, another temperature; the number of heads
     * kept), one in each idle time, and back to the reader's in the same task: nothing of it
     * is ever painted, and the board is left as it was. A change of the controls drops what
     * is still waiting of it.
     */
    var changes = 0;        // the reader's changes of the controls so far
    var rehearsal = null;   // the last rehearsal asked for: {since: changes, left: its steps}
    function rehearseSoon() {
      if (rehearsal && rehearsal.left && rehearsal.since === changes) return;  // it will do
      var mine = rehearsal = {since: changes, left: 0};
      var kinds = Object.keys(data.masks), count = data.temperatures.length;
      for (var round = 0; round < REHEARSALS; round++) {
        kinds.forEach(function (kind, i) {
          var shift = 5 * round + 3 * i + 1;
          mine.left += 1;
          later(function () {
            mine.left -= 1;
            // Once the reader moves a control, their own changes compile the code: the steps
            // still waiting are dropped, and never come between a change and what follows it
            // in idle time (the cells' labels).
            if (mine.since !== changes) return;
            var s = {heads: state.heads, mask: kind, window: state.window, padding: state.padding,
                     temperature: (state.temperature + shift) % count};
            updateViews(compute(s), s);
            updateViews(trace, state);
          });
        });
      }
    }

    function nested(values, rows, cols) {
      var out = [];
      for (var i = 0; i < rows; i++) {
        out.push(Array.from(values.subarray(i * cols, (i + 1) * cols)));
      }
      return out;
    }

    window.caseBoardLab = Object.freeze({
      /** The controls as the page holds them, and the forward pass's stage (0-based). */
      state: function () {
        return {heads: state.heads, temperatureIndex: state.temperature,
                temperature: data.temperatures[state.temperature], mask: state.mask,
                value: maskValue(state), stage: forward ? forward.stage : 0,
                compare: lab ? lab.compare : false};
      },
      /** Both layers' weights (h, n, n) and outputs (n, d_model), as plain arrays; and what the
       * lab's output map shows (n, d_model): the output, or its difference from the default. */
      result: function () {
        return {layers: trace.layers.map(function (layer) {
          return {weights: layer.weights.map(function (w) { return nested(w, n, n); }),
                  output: nested(layer.output, n, d)};
        }), shown: lab && lab.outputMap.values ? nested(lab.outputMap.values, n, d) : null,
        shownLimit: lab ? lab.outputMap.limit : null};
      }
    });

    return {
      /** Builds the part in ``box`` (#caseboard-lab or #caseboard-forward), once. */
      show: function (box) {
        if (box === labBox && !lab) lab = built(new LabView(labBox, context, state, onChange));
        if (box === forwardBox && !forward) forward = built(new ForwardView(forwardBox, context));
      }
    };
  }

  // --- Part 2: the lab ------------------------------------------------------------------------

  function LabView(box, context, state, onChange) {
    var data = context.data, words = context.words, terms = context.terms;
    var self = this;
    this.context = context;
    this.state = state;
    this.compare = false;

    // The controls.
    var headsName = nextId("heads");
    this.headInputs = data.heads.map(function (h) {
      return el("input", {type: "radio", name: headsName, value: String(h), id: nextId("h"),
                          checked: h === state.heads});
    });
    var headsField = el("fieldset", {className: "cblab-field cblab-heads"},
      [el("legend", {text: capital(terms.number_of_heads)})].concat(
        this.headInputs.map(function (input) {
          return el("label", {className: "cblab-choice", "for": input.id}, [input, input.value]);
        })));

    var tId = nextId("temperature");
    this.temperature = el("input", {type: "range", id: tId, min: "0",
      max: String(data.temperatures.length - 1), step: "1", value: String(state.temperature)});
    var temperatureValue = el("span", {className: "cblab-value"});
    var scaleValue = el("span", {className: "cblab-scale"});
    this.temperatureValue = textBox(temperatureValue);
    this.scaleValue = textBox(scaleValue);
    var ends = [0, data.temperatures.length - 1].map(function (i) {
      return el("span", {className: "cblab-end", "aria-hidden": "true",
                         text: short(data.temperatures[i])});
    });
    var temperatureField = el("div", {className: "cblab-field cblab-temperature"}, [
      el("label", {"for": tId, text: words.temperature}),
      el("span", {className: "cblab-range cblab-range--ends"}, [ends[0], this.temperature,
                                                               ends[1]]),
      temperatureValue, scaleValue]);

    var maskId = nextId("mask");
    this.mask = el("select", {id: maskId}, Object.keys(data.masks).map(function (kind) {
      return el("option", {value: kind, text: words["mask_" + kind],
                           selected: kind === state.mask});
    }));
    var maskField = el("div", {className: "cblab-field"}, [
      el("label", {"for": maskId, text: capital(terms.mask)}),
      el("span", {className: "cblab-range"}, [this.mask])]);

    var paramId = nextId("mask-value");
    this.param = el("input", {type: "range", id: paramId, step: "1"});
    var paramLabel = el("label", {"for": paramId, className: "cblab-param-label"});
    this.paramLabel = textBox(paramLabel);
    var paramValue = el("span", {className: "cblab-value"});
    this.paramValue = textBox(paramValue);
    this.paramField = el("div", {className: "cblab-field cblab-param"},
      [paramLabel, el("span", {className: "cblab-range"}, [this.param]), paramValue]);

    var toolbar = el("div", {className: "cblab-toolbar"},
      [headsField, temperatureField, maskField, this.paramField]);
    this.toolbar = toolbar;

    function said(target) {  // what the live region says changed
      if (target.name === headsName) return capital(terms.number_of_heads) + " = " + state.heads;
      if (target === self.temperature) {
        return "τ = " + short(data.temperatures[state.temperature]);
      }
      if (target === self.mask) return capital(terms.mask) + " = " + words["mask_" + state.mask];
      return capital(state.mask === "window" ? words.lab_look_back : words.length) + " = "
        + state[state.mask];
    }
    function read(event) {
      var target = event.target;
      if (target.name === headsName) {
        state.heads = Number(target.value);
      } else if (target === self.temperature) {
        state.temperature = Number(target.value);
      } else if (target === self.mask) {
        state.mask = target.value;
      } else if (target === self.param) {
        state[state.mask] = Number(target.value);
      } else {
        return;
      }
      var key = [state.heads, state.temperature, state.mask, state.window, state.padding].join();
      if (key === self.key) return;  // `input` and `change` of one move: compute once
      self.key = key;
      onChange();
      self.sayLater(said(target));
    }
    toolbar.addEventListener("input", read);
    toolbar.addEventListener("change", read);
    this.key = [state.heads, state.temperature, state.mask, state.window, state.padding].join();

    // Layer 1's weights: one heatmap per head, a set of them for each number of heads (built
    // when first needed, or in idle time), all but one folded away: a change of heads swaps
    // them without laying out or retitling a table. Beside them (on a wide screen) or below,
    // layer 1's output, or its difference from the default's (review finding 32).
    this.weightsTitle = el("h3", {className: "cblab-title",
      text: context.layerTitle(1, words.stages[3])});
    this.sets = {};
    this.maps = el("div", {className: "cblab-sets"});
    this.readout = el("p", {className: "cblab-readout", text: words.cell_hint});
    this.outputCaption = context.layerTitle(1, words.output);
    this.outputMap = context.map({kind: "signed", caption: this.outputCaption});
    this.compareInput = el("input", {type: "checkbox", id: nextId("compare")});
    var compareField = el("label", {className: "cblab-compare", "for": this.compareInput.id},
      [this.compareInput, words.lab_compare]);
    this.compareInput.addEventListener("change", function () {
      self.compare = self.compareInput.checked;
      self.outputMap.captionText.nodeValue = self.compare
        ? context.layerTitle(1, words.lab_compare_caption) : self.outputCaption;
      // A difference has a scale of its own (data.scales.difference), printed in the legend
      // while it is shown: on the values' scale a typical change would look faint.
      self.outputMap.limit = self.compare ? context.limits.difference : context.limits.signed;
      self.differenceKey.hidden = !self.compare;
      if (self.trace) self.draw();
    });
    var outputBox = el("div", {className: "cblab-scroll"}, [this.outputMap.table]);
    this.board = el("div", {className: "cblab-board"}, [
      el("div", {className: "cblab-lab-weights"}, [this.weightsTitle, this.maps]),
      el("div", {className: "cblab-lab-output"}, [compareField, outputBox])]);
    this.say = el("p", {className: "cblab-sr", "aria-live": "polite"});
    this.slot = el("div", {className: "cblab-bar-slot"}, [toolbar]);
    // The legend under the controls, above what it explains: the same place whatever is shown.
    var legend = buildLegend(context, ["weight", "signed", "difference"]);
    this.differenceKey = legend.querySelector(".cblab-key--difference");
    this.view = el("div", {className: "cblab-live"}, [this.slot, legend, this.board,
      this.readout, this.say]);
    this.wire = wireHeatmaps(this.view, this.readout, words.cell_hint);
    this.shownHeads = 0;
    this.pending = false;
    this.seen = sight(this.board, function () {
      if (self.pending) self.draw();
    });
    box.append(this.view);
    box.classList.add("caseboard--live");
    this.stick();
  }

  /**
   * The controls stay in reach (review finding 4): while the lab or the forward pass is on the
   * screen and the controls' own place has gone up under the header, the one set of controls
   * sticks under the header ([data-cblab-stuck], caseboard-lab.css), its place kept at its
   * height so that nothing moves. Observers only: nothing is measured on an update.
   */
  LabView.prototype.stick = function () {
    if (typeof IntersectionObserver !== "function") return;
    var self = this, slot = this.slot, toolbar = this.toolbar;
    var header = document.querySelector(".md-header");
    var top = header ? header.offsetHeight : 0;
    var mark = slot.insertBefore(el("span", {className: "cblab-bar-mark"}), toolbar);
    var seen = {mark: false, parts: new Map()};
    function place() {
      var box = slot.getBoundingClientRect();
      toolbar.style.left = box.left + "px";
      toolbar.style.width = box.width + "px";
    }
    function apply() {
      var on = false;
      seen.parts.forEach(function (visible) { on = on || visible; });
      var stuck = seen.mark && on;
      if (stuck === toolbar.hasAttribute("data-cblab-stuck")) return;
      if (stuck) {
        slot.style.height = toolbar.offsetHeight + "px";
        place();
        toolbar.setAttribute("data-cblab-stuck", "");
      } else {
        toolbar.removeAttribute("data-cblab-stuck");
        toolbar.style.left = toolbar.style.width = slot.style.height = "";
      }
    }
    toolbar.style.setProperty("--cblab-top", top + "px");
    var observer = new IntersectionObserver(function (entries) {
      entries.forEach(function (entry) {
        if (entry.target === mark) {  // its place has gone up, under the header
          seen.mark = !entry.isIntersecting && entry.rootBounds !== null
            && entry.boundingClientRect.top < entry.rootBounds.top;
        } else {
          seen.parts.set(entry.target, entry.isIntersecting);
        }
      });
      apply();
    }, {rootMargin: (-top) + "px 0px 0px 0px"});
    [mark, this.context.labBox, this.context.forwardBox].forEach(function (node) {
      if (node) observer.observe(node);
    });
    window.addEventListener("resize", function () {
      if (toolbar.hasAttribute("data-cblab-stuck")) place();
    });
    this.isStuck = function () { return toolbar.hasAttribute("data-cblab-stuck"); };
    void self;
  };

  /**
   * Says in the live region, once the controls have rested (SAY_AFTER_MS), what changed and what
   * it did (review finding 20): the mean of each row's largest weight, the cells the mask
   * hides, and the strongest key of the row being read.
   */
  LabView.prototype.sayLater = function (changed) {
    var self = this;
    this.changed = changed;
    if (this.sayTimer) window.clearTimeout(this.sayTimer);
    this.sayTimer = window.setTimeout(function () {
      self.sayTimer = null;
      setText(self.say, self.summary(self.changed));
    }, SAY_AFTER_MS);
  };

  /** The live region's sentence after a change (``changed``: the control and its value). */
  LabView.prototype.summary = function (changed) {
    var words = this.context.words, n = this.context.n, layer = this.trace.layers[0];
    var total = 0, rows = 0, hidden = 0, i, k;
    layer.weights.forEach(function (w) {
      for (i = 0; i < n; i++) {
        var top = 0;
        for (k = 0; k < n; k++) top = Math.max(top, w[i * n + k]);
        total += top;
        rows += 1;
      }
    });
    var parts = [changed + ".", fill(words.lab_said_summary,
      {mean: fixed(total / rows, 2), even: short(1 / n)})];
    var visible = this.trace.visible;
    for (i = 0; i < visible.length; i++) if (!visible[i]) hidden += 1;
    if (hidden) parts.push(fill(words.lab_said_hidden, {count: hidden}));
    var current = this.wire.current();
    if (current && current[0].kind === "weight" && current[0].values) {
      var map = current[0], r = Math.floor(current[1] / map.m), best = 0;
      for (k = 1; k < map.m; k++) {
        if (map.values[r * map.m + k] > map.values[r * map.m + best]) best = k;
      }
      parts.push(fill(words.lab_said_row, {head: map.captionText.nodeValue,
        row: map.rowLabel(r), key: map.colLabel(best),
        value: fixed(map.values[r * map.m + best], 2)}));
    }
    return parts.join(" ");
  };

  /** The heatmaps of layer 1's weights with ``h`` heads, built (folded away) if need be. */
  LabView.prototype.set = function (h) {
    var context = this.context, set = this.sets[h];
    if (set) return set;
    var maps = [];
    for (var j = 0; j < h; j++) {
      maps.push(context.map({kind: "weight", tokenCols: true, caption: context.headTitle(j, h),
                             hue: context.headHue(j, h)}));
    }
    set = this.sets[h] = {maps: maps, drawn: null, node: el("div", {className: "cblab-maps"},
      maps.map(function (map) { return map.table; }))};
    addFolded(this.maps, set.node);
    return set;
  };

  /** The controls' texts at once; the heatmaps now if they are near the screen, else later. */
  LabView.prototype.update = function (trace, state) {
    var context = this.context, words = context.words, data = context.data;
    var layer = trace.layers[0];
    var temperature = "τ = " + short(data.temperatures[state.temperature]);
    setText(this.temperatureValue, temperature);
    this.temperature.setAttribute("aria-valuetext", temperature);
    setText(this.scaleValue, fill(words.lab_scale_dk, {dk: layer.dk, value: short(layer.scale)}));
    var span = data.masks[state.mask];
    if (this.paramField.hidden !== !span) this.paramField.hidden = !span;  // unchanged: untouched
    if (span) {
      setText(this.paramLabel, capital(state.mask === "window" ? words.lab_look_back
        : words.length));
      if (this.param.min !== String(span[0])) this.param.min = String(span[0]);
      if (this.param.max !== String(span[1])) this.param.max = String(span[1]);
      var value = String(state[state.mask]);
      if (this.param.value !== value) this.param.value = value;
      setText(this.paramValue, value);
    }
    this.trace = trace;
    this.heads = state.heads;
    // What changes the layout (which maps are shown, the padding's row names) changes now,
    // even off screen (from the stuck toolbar): done when the lab came into view, it moved
    // what the reader was reaching for by the height of the maps. Only the painting waits.
    this.layOut();
    this.pending = !this.seen.onScreen;
    if (!this.pending) this.draw();
  };

  /** The set of maps for the number of heads chosen, shown (the others folded away), with the
   *  padding marked. Returns the set. */
  LabView.prototype.layOut = function () {
    var data = this.context.data, self = this, h = this.heads, trace = this.trace;
    var set = this.set(h);
    if (h !== this.shownHeads) {
      this.shownHeads = h;
      Object.keys(this.sets).forEach(function (key) {
        fold(self.sets[key].node, self.sets[key] !== set);
      });
      if (!this.prebuilt) {  // the other numbers of heads, one in each idle time
        this.prebuilt = true;
        data.heads.forEach(function (heads) { later(function () { self.set(heads); }); });
      }
    }
    set.maps.forEach(function (map) { map.markPadding(trace.padFrom); });
    this.outputMap.markPadding(trace.padFrom);
    return set;
  };

  LabView.prototype.draw = function () {
    var h = this.heads, trace = this.trace, layer = trace.layers[0];
    this.pending = false;
    var set = this.layOut();
    set.maps.forEach(function (map, j) {
      map.update(layer.weights[j], trace.visible);
    });
    var output = layer.output;
    if (this.compare) {  // the output minus the default's (τ = 1, no mask), same heads
      var base = this.context.defaults[h];
      output = this.difference || (this.difference = new Float64Array(output.length));
      for (var i = 0; i < output.length; i++) output[i] = layer.output[i] - base[i];
    }
    this.outputMap.update(output, null);
    this.wire.refresh();
  };

  // --- Part 3: the forward pass, live ---------------------------------------------------------

  /** The stages whose heatmaps depend on the number of heads (one view per number). */
  var PER_HEAD = [1, 2, 3, 4, 7];

  /**
   * A stage of the forward pass (words.stages[index]) with ``h`` heads: its heatmaps, each with
   * the function that picks its values from the trace.
   */
  function buildStage(context, index, h) {
    var terms = context.terms, words = context.words, dk = context.d / h;
    var parts = [];  // {map, values(trace), masked}
    var node = el("div", {className: "cblab-stage-maps"});
    function add(parent, map, values, masked) {
      parts.push({map: map, values: values, masked: !!masked});
      parent.append(map.table);
      return map;
    }
    function perHead(make) {
      for (var j = 0; j < h; j++) make(j);
    }
    function wide(map, values) {
      var box = el("div", {className: "cblab-scroll cblab-scroll--wide"});
      node.append(box);
      add(box, map, values);
    }
    var title = function (j, what) {
      return context.headTitle(j, h) + (what ? " · " + what : "");
    };
    if (index === 0) {
      // Captioned with what X is, not the stage's title again (review finding 8).
      wide(context.map({kind: "signed", caption: context.layerTitle(1, "X")}),
           function (t) { return t.layers[0].x; });
    } else if (index === 1) {
      // One table per head: its queries, keys and values side by side, (n, 3 d_k).
      var groups = [["Q", terms.query], ["K", terms.key], ["V", terms.value]].map(function (g) {
        return {label: g[0], sr: capital(g[1]) + " "};
      });
      perHead(function (j) {
        var box = el("div", {className: "cblab-scroll"});
        node.append(box);
        add(box, context.map({kind: "signed", width: dk, groups: groups, groupEvery: dk,
                              size: "dense", caption: title(j), hue: context.headHue(j, h)}),
            function (t) {
              var layer = t.layers[0], n = context.n, out = new Float64Array(n * 3 * dk);
              [layer.q[j], layer.k[j], layer.v[j]].forEach(function (part, g) {
                for (var i = 0; i < n; i++) {
                  for (var c = 0; c < dk; c++) out[i * 3 * dk + g * dk + c] = part[i * dk + c];
                }
              });
              return out;
            });
      });
    } else if (index === 2 || index === 3) {
      var key = index === 2 ? "scores" : "weights";
      perHead(function (j) {
        add(node, context.map({kind: index === 2 ? "signed" : "weight", tokenCols: true,
                               scores: index === 2, caption: title(j),
                               hue: context.headHue(j, h)}),
            function (t) { return t.layers[0][key][j]; }, true);
      });
    } else if (index === 4) {
      perHead(function (j) {
        add(node, context.map({kind: "signed", width: dk, caption: title(j), size: "narrow",
                               hue: context.headHue(j, h)}),
            function (t) { return t.layers[0].heads[j]; });
      });
    } else if (index === 5) {  // one view for every h: the lines between heads move
      wide(context.map({kind: "signed", caption: capital(terms.concatenation)}),
           function (t) { return t.layers[0].concat; });
      parts[0].cuts = function (heads) { return heads > 1 ? context.d / heads : 0; };
    } else if (index === 6) {
      wide(context.map({kind: "signed", caption: words.output}),
           function (t) { return t.layers[0].output; });
    } else {
      perHead(function (j) {
        add(node, context.map({kind: "weight", tokenCols: true,
                               caption: context.layerTitle(2, title(j)),
                               hue: context.headHue(j, h)}),
            function (t) { return t.layers[1].weights[j]; }, true);
      });
      wide(context.map({kind: "signed", caption: context.layerTitle(2, words.output)}),
           function (t) { return t.layers[1].output; });
    }
    return {node: node, parts: parts, drawn: null, stage: index};
  }

  function ForwardView(box, context) {
    var words = context.words, self = this;
    var count = words.stages.length;
    this.context = context;
    this.stage = 0;
    this.count = count;
    this.views = {};
    this.timer = null;
    this.trace = null;
    this.reduced = window.matchMedia("(prefers-reduced-motion: reduce)");

    this.previous = el("button", {type: "button", className: "cblab-button",
                                  text: words.previous});
    this.play = el("button", {type: "button", className: "cblab-button cblab-play",
                              text: words.play});
    this.next = el("button", {type: "button", className: "cblab-button", text: words.next});
    this.indicator = el("p", {className: "cblab-step", "aria-live": "polite"});
    this.stageButtons = words.stages.map(function (name, index) {
      return el("button", {type: "button", className: "cblab-stage-button"}, [
        el("span", {className: "cblab-stage-number", "aria-hidden": "true",
                    text: String(index + 1)}),
        " " + name]);
    });
    var list = el("ol", {className: "cblab-stages"}, this.stageButtons.map(function (button) {
      return el("li", null, [button]);
    }));
    this.stepper = el("div", {className: "cblab-stepper"}, [
      el("div", {className: "cblab-stepper-bar"},
        [this.previous, this.play, this.next, this.indicator]), list]);
    this.summary = el("a", {className: "cblab-summary cblab-text", href: "#lab"});
    this.title = el("h3", {className: "cblab-title"});
    this.note = el("p", {className: "cblab-note cblab-text", "data-cblab-off": ""});
    // What each stage computes (words.stage_notes), with a link to the chapter that teaches
    // it; the repeated tokens' note on stages 1 and 4. All stacked in one place, only the
    // current stage's shown: the place is as tall as the tallest, so nothing below jumps.
    var notes = words.stage_notes || [];
    this.notes = words.stages.map(function (name, index) {
      var note = notes[index], children = [];
      if (note) {
        var link = el("a", {href: new URL("../" + note.href, location.href).href,
                            text: note.link});
        children.push(el("span", {className: "cblab-explain-text"}), " ", link);
      }
      if (context.repeated && (index === 0 || index === 3)) {
        children.push(el("span", {className: "cblab-repeat", text: " " + context.repeated}));
      }
      return el("p", {className: "cblab-explain-note", "data-stage": String(index)}, children);
    });
    this.explain = el("div", {className: "cblab-explain"}, this.notes);
    this.holder = el("div", {className: "cblab-stage"});
    this.readout = el("p", {className: "cblab-readout",
      text: words.cell_hint});
    // Focusable (not in the tab order): a click on the board puts the keyboard there, for the
    // arrow keys.
    // The legend above the stage: the stage area keeps the tallest stage's height, so below
    // it the legend would sit under an empty band on the short stages, off a phone's screen.
    this.view = el("div", {className: "cblab-live cblab-forward", tabindex: "-1"}, [
      this.stepper, this.summary, buildLegend(context, ["weight", "signed", "scores"]),
      el("div", {className: "cblab-stage-head"}, [this.title, this.note]), this.explain,
      this.holder, this.readout]);
    this.wire = wireHeatmaps(this.holder, this.readout, words.cell_hint);

    this.previous.addEventListener("click", function () { self.stop(); self.go(self.stage - 1); });
    this.next.addEventListener("click", function () { self.stop(); self.go(self.stage + 1); });
    this.play.addEventListener("click", function () {
      if (self.timer !== null) self.stop();
      else self.start();
    });
    this.stageButtons.forEach(function (button, index) {
      button.addEventListener("click", function () { self.stop(); self.go(index); });
    });
    // The arrow keys step anywhere on the board but in a table (its cells) or a control that
    // has arrow keys of its own (review finding 19).
    this.view.addEventListener("keydown", function (event) {
      var step = event.key === "ArrowLeft" ? -1 : event.key === "ArrowRight" ? 1 : 0;
      if (!step || event.altKey || event.ctrlKey || event.metaKey) return;
      if (event.target.closest && event.target.closest("table, input, select, textarea")) return;
      event.preventDefault();
      self.stop();
      var inList = self.stageButtons.indexOf(event.target) >= 0;
      self.go(self.stage + step);
      if (inList) self.stageButtons[self.stage].focus();
    });
    box.append(this.view);
    box.classList.add("caseboard--live");

    // Off screen, a lab change waits until the forward pass comes near.
    this.pending = false;
    this.seen = sight(this.view, function () {
      if (self.pending) {
        self.pending = false;
        self.render();
      }
    });
    var width = window.innerWidth;
    window.addEventListener("resize", function () {
      if (window.innerWidth === width) return;
      width = window.innerWidth;
      self.sized = null;
      self.holder.style.minHeight = "";
      self.sizeSoon();
    });
  }

  ForwardView.prototype.start = function () {
    var self = this;
    if (this.stage === this.count - 1) this.go(0);
    this.play.textContent = this.context.words.pause;
    this.timer = window.setInterval(function () {
      // Held while the pointer rests on the stage or its note: the reader is reading it
      // (review finding 17); the next tick looks again.
      if (self.holder.matches(":hover") || self.explain.matches(":hover")) return;
      self.go(self.stage + 1);
      if (self.stage === self.count - 1) self.stop();
    }, PLAY_EVERY_MS);
  };

  ForwardView.prototype.stop = function () {
    if (this.timer === null) return;
    window.clearInterval(this.timer);
    this.timer = null;
    this.play.textContent = this.context.words.play;
  };

  ForwardView.prototype.go = function (index) {
    index = Math.max(0, Math.min(this.count - 1, index));
    if (index === this.stage && this.shownStage === index) return;
    var changed = index !== this.stage;
    // The keyboard's focus on a cell of the stage that goes (Play): kept on the same cell of
    // the next stage's map in the same place, or on Play (review finding 17).
    var active = document.activeElement, focus = null;
    if (active && this.holder.contains(active) && active.classList.contains("cblab-cell")) {
      var map = mapOfTable.get(active.closest("table"));
      focus = [shownMaps(this.holder).indexOf(map), map.cells.indexOf(active)];  // any kind
    }
    this.stage = index;
    this.show();
    if (focus) {
      var next = shownMaps(this.holder)[focus[0]];
      var cell = next && next.cells[focus[1]];
      if (cell) {
        next.cells.forEach(function (c) { c.tabIndex = c === cell ? 0 : -1; });
        cell.focus();
      } else {
        this.play.focus();
      }
    }
    if (changed && !this.reduced.matches && this.holder.animate) {
      this.holder.animate([{opacity: 0.25}, {opacity: 1}], {duration: 200, easing: "ease-out"});
    }
  };

  /**
   * Puts the current stage's view, for the current number of heads, on the page, drawn. The
   * current stage keeps a view for each number of heads in the page (built when the stage is
   * first shown with it, or in idle time after the stage is shown), all but one folded away
   * (`fold`): a change of heads swaps them without laying out a table.
   */
  ForwardView.prototype.show = function () {
    var context = this.context, words = context.words, trace = this.trace;
    var heads = this.state.heads, stage = this.stage;
    var view = this.view_(stage, heads);
    var holder = this.holder;
    if (this.shownStage !== stage) {  // another stage: its views replace the last one's
      this.shownStage = stage;
      holder.replaceChildren();
      this.prebuild();
      context.rehearse();  // the new stage's code, compiled before the reader's next change
    }
    if (view.node.parentNode !== holder) holder.append(view.node);
    for (var child = holder.firstElementChild; child; child = child.nextElementSibling) {
      fold(child, child !== view.node);
    }
    if (view.drawn !== trace || view.heads !== heads) {
      view.parts.forEach(function (part) {
        if (part.cuts) part.map.groupEvery = part.cuts(heads);
        part.map.markPadding(trace.padFrom);
        part.map.update(part.values(trace), part.masked ? trace.visible : null);
      });
      view.drawn = trace;
      view.heads = heads;
    }
    if (this.labelled !== stage) {
      this.labelled = stage;
      setText(this.title, words.stages[stage]);
      setText(this.indicator, fill(words.lab_stage_step,
        {index: stage + 1, count: this.count, name: words.stages[stage]}));
      // aria-disabled, not disabled: a disabled button would drop the keyboard's focus.
      this.previous.setAttribute("aria-disabled", String(stage === 0));
      this.next.setAttribute("aria-disabled", String(stage === this.count - 1));
      this.stageButtons.forEach(function (button, index) {
        if (index === stage) button.setAttribute("aria-current", "step");
        else button.removeAttribute("aria-current");
      });
      this.notes.forEach(function (note, index) {
        if (index === stage) note.removeAttribute("data-cblab-off");
        else note.setAttribute("data-cblab-off", "");
      });
    }
    this.writeNote(stage, heads);
    var scaled = stage === 2 || stage === 3;
    setText(this.note, scaled ? fill(words.lab_scale_dk,
      {dk: trace.layers[0].dk, value: short(trace.layers[0].scale)}) : "");
    if (this.note.hasAttribute("data-cblab-off") === scaled) {
      if (scaled) this.note.removeAttribute("data-cblab-off");
      else this.note.setAttribute("data-cblab-off", "");
    }
    this.wire.refresh();
    this.sizeSoon();
  };

  /** The stage's note (words.stage_notes), its placeholders filled for ``heads`` heads. */
  ForwardView.prototype.writeNote = function (stage, heads) {
    var context = this.context, note = (context.words.stage_notes || [])[stage];
    if (!note) return;
    var text = this.notes[stage].querySelector(".cblab-explain-text");
    setText(text, fill(note.text, {n: context.n, d: context.d, h: heads, dk: context.d / heads}));
  };

  /**
   * The stage's place keeps the height of the tallest stage, whatever the number of heads, at
   * this width, so that neither a step nor a change of heads moves what lies below (review
   * finding 15), and a change lays out nothing after the stage: each view is built and
   * measured in idle time, one at a time (`sized`: the tallest, per number of heads).
   */
  ForwardView.prototype.sizeSoon = function () {
    if (this.sized || this.sizing) {
      this.fitHeight();
      return;
    }
    var self = this, heads = this.context.data.heads, todo = [], tallest = {};
    heads.forEach(function (h) {
      tallest[h] = 0;
      for (var stage = 0; stage < self.count; stage++) todo.push([stage, h]);
    });
    this.sizing = true;
    function step() {
      if (!todo.length) {
        self.sizing = false;
        self.sized = tallest;
        self.fitHeight();
        return;
      }
      var next = todo.shift(), view = self.view_(next[0], next[1]), node = view.node;
      var inHolder = node.parentNode === self.holder;
      var away = node.hasAttribute("data-cblab-away");
      var height;
      if (inHolder && !away) {
        height = node.offsetHeight;
      } else {
        // Laid out apart, at the holder's width, never painted (height 0, overflow hidden).
        if (away) node.removeAttribute("data-cblab-away");
        node.setAttribute("data-cblab-warm", "");
        if (!inHolder) self.holder.append(node);
        height = node.scrollHeight;
        node.removeAttribute("data-cblab-warm");
        if (!inHolder) node.remove();
        else node.setAttribute("data-cblab-away", "");
      }
      tallest[next[1]] = Math.max(tallest[next[1]], height);
      later(step);
    }
    later(step);
  };

  /** The stage's place as tall as the tallest stage. */
  ForwardView.prototype.fitHeight = function () {
    if (!this.sized) return;
    var sized = this.sized;
    var height = Math.max.apply(null, Object.keys(sized).map(function (h) {
      return sized[h];
    })) + "px";
    if (this.holder.style.minHeight !== height) this.holder.style.minHeight = height;
  };

  /** The view of ``stage`` with ``heads`` heads, built if need be (not yet on the page). */
  ForwardView.prototype.view_ = function (stage, heads) {
    var key = stage + ":" + (PER_HEAD.indexOf(stage) >= 0 ? heads : "");
    return this.views[key] || (this.views[key] = buildStage(this.context, stage, heads));
  };

  /** In idle time, the current stage's views for the other numbers of heads, folded away. */
  ForwardView.prototype.prebuild = function () {
    var self = this, stage = this.stage;
    if (PER_HEAD.indexOf(stage) < 0) return;
    this.context.data.heads.forEach(function (heads) {
      later(function () {
        if (self.shownStage !== stage) return;
        var view = self.view_(stage, heads);
        if (view.node.parentNode !== self.holder) addFolded(self.holder, view.node);
      });
    });
  };

  /** Takes the lab's new state; draws it now if the forward pass is near the screen. */
  ForwardView.prototype.update = function (trace, state) {
    this.trace = trace;
    this.state = {heads: state.heads, temperature: state.temperature, mask: state.mask,
                  window: state.window, padding: state.padding};
    this.pending = !this.seen.onScreen;
    if (!this.pending) this.render();
  };

  ForwardView.prototype.render = function () {
    var context = this.context, words = context.words, terms = context.terms;
    var state = this.state;
    var parts = [capital(terms.number_of_heads) + " = " + state.heads,
                 "τ = " + short(context.data.temperatures[state.temperature]),
                 capital(terms.mask) + " = " + words["mask_" + state.mask]];
    if (state.mask === "window") parts.push(words.lab_look_back + " = " + state.window);
    if (state.mask === "padding") parts.push(words.length + " = " + state.padding);
    setText(this.summary, "↑ " + parts.join(" · "));
    this.show();
  };
})();
