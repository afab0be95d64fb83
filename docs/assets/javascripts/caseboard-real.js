/*
 * The case board's real heads (docs/<lang>/caseboard.md, #caseboard-real): every attention head
 * of two real models on a few sentences, computed by `mha` at build time
 * (mha/site/caseboard.py: real_index, real_heads) into assets/caseboard/.
 *
 * Two views of one layer of one model on one sentence:
 * - one head, drawn as in bertviz's head view: the tokens twice, queries (the tokens reading) on
 *   the left and keys (the tokens read) on the right, a line from query q to key k whose opacity
 *   is weight[q][k]. Pointing at, tapping or focusing a query shows its lines only, and a polite
 *   live region says which keys it reads most;
 * - all heads of the layer (the model view): one small heatmap per head, a button that opens it.
 *
 * Progressive enhancement: the container's static figure (.caseboard__fallback) stays until the
 * index and the first sentence have loaded; then the board is added and the container gets
 * .caseboard--live (caseboard.css hides the figure). Each sentence's file is fetched when it is
 * first chosen and kept. Every reader-facing word comes from the index's `words`.
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
  var TOP = 3;  // keys named in the live region

  var index = null;       // real-<lang>.json
  var words = null;       // index.words
  var files = {};         // path -> Promise of a decoded sentence file
  var data = null;        // the decoded file shown
  var state = {sentence: null, model: null, layer: 0, head: 0, view: "one"};
  var hover = null;       // the query under the mouse, or null
  var pinned = null;      // the query last focused, clicked or tapped, or null
  var pending = 0;        // id of the latest load, so a slow older one cannot win
  var drawn = "";         // what the thumbnails show (sentence|model|layer|colours)
  var ui = {};

  // --- Data -------------------------------------------------------------------------------------

  function fetchJSON(path) {
    return fetch(new URL(path, DATA).href).then(function (response) {
      if (!response.ok) throw new Error(response.status + " " + response.url);
      return response.json();
    });
  }

  /* A sentence file's weights, base64 of bytes (layers, heads, n, n) in C order, as bytes. */
  function decode(file) {
    var text = atob(file.weights);
    var bytes = new Uint8Array(text.length);
    for (var i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    if (bytes.length !== file.layers * file.heads * file.n * file.n) {
      throw new Error("weights of " + file.sentence + ": " + bytes.length + " bytes, expected " +
                      file.layers + " x " + file.heads + " x " + file.n + " x " + file.n);
    }
    return {tokens: file.tokens, layers: file.layers, heads: file.heads, n: file.n, bytes: bytes};
  }

  function load(path) {
    if (!files[path]) {
      files[path] = fetchJSON(path).then(decode);
      files[path].catch(function () { delete files[path]; });  // a later choice tries again
    }
    return files[path];
  }

  function sentenceOf(id) {
    return index.sentences.find(function (s) { return s.id === id; });
  }

  /* weight[q][k] of the head shown, from its byte. */
  function weight(q, k) {
    var n = data.n;
    return data.bytes[((state.layer * data.heads + state.head) * n + q) * n + k] / 255;
  }

  function format(template, values) {
    return template.replace(/\{(\w+)\}/g, function (all, key) {
      return key in values ? values[key] : all;
    });
  }

  function capital(text) {  // "head" -> "Head"; Chinese is left as it is
    return text.charAt(0).toUpperCase() + text.slice(1);
  }

  // --- Building the board -----------------------------------------------------------------------

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function field(id, label, control) {
    var box = el("div", "caseboard-real__field");
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
    var sentenceField = field("sentence", words.sentence, ui.sentence);
    sentenceField.classList.add("caseboard-real__field--wide");

    var view = el("div", "caseboard-real__field");
    var viewLabel = el("span", "caseboard-real__label", words.view);
    viewLabel.id = "caseboard-real-view";
    var switcher = el("div", "caseboard-real__switch");
    switcher.setAttribute("role", "group");
    switcher.setAttribute("aria-labelledby", viewLabel.id);
    ui.one = el("button", null, words.one_head);
    ui.all = el("button", null, words.all_heads);
    [ui.one, ui.all].forEach(function (button) {
      button.type = "button";
      switcher.append(button);
    });
    view.append(viewLabel, switcher);

    bar.append(sentenceField, field("model", words.model, ui.model),
               field("layer", words.layer, ui.layer),
               field("head", capital(words.terms.head), ui.head), view);

    // One head: queries | lines | keys, one row per token.
    ui.onePanel = el("div", "caseboard-real__one");
    ui.caption = el("p", "caseboard-real__caption");
    ui.hint = el("p", "caseboard-real__hint", words.token_hint);
    ui.readout = el("p", "caseboard-real__readout");
    ui.readout.setAttribute("aria-live", "polite");
    ui.diagram = el("div", "caseboard-real__diagram");
    [words.terms.query, "", words.terms.key].forEach(function (text) {
      var heading = el("span", "caseboard-real__heading", capital(text));
      heading.setAttribute("aria-hidden", "true");
      ui.diagram.append(heading);
    });
    ui.queries = el("div", "caseboard-real__queries");
    ui.keys = el("div", "caseboard-real__keys");
    ui.keys.setAttribute("aria-hidden", "true");
    var lineBox = el("div", "caseboard-real__linebox");
    ui.svg = document.createElementNS(SVG, "svg");
    ui.svg.setAttribute("class", "caseboard-real__lines");
    ui.svg.setAttribute("aria-hidden", "true");
    ui.svg.setAttribute("focusable", "false");
    ui.svg.setAttribute("preserveAspectRatio", "none");
    lineBox.append(ui.svg);
    ui.diagram.append(ui.queries, lineBox, ui.keys);
    ui.onePanel.append(ui.caption, ui.hint, ui.readout, ui.diagram);
    ui.rows = [];   // per token: {query, key, bar, group, lines}

    // All heads of the layer: one thumbnail button per head.
    ui.allPanel = el("div", "caseboard-real__all");
    ui.allPanel.hidden = true;
    ui.thumbs = [];

    board.append(bar, ui.onePanel, ui.allPanel);  // the status line joins them once shown

    ui.sentence.addEventListener("change", function () { choose(ui.sentence.value); });
    ui.model.addEventListener("change", function () { show(state.sentence, ui.model.value); });
    ui.layer.addEventListener("change", function () {
      state.layer = Number(ui.layer.value) - 1;
      render();
    });
    ui.head.addEventListener("change", function () {
      state.head = Number(ui.head.value) - 1;
      render();
    });
    ui.one.addEventListener("click", function () { setView("one"); });
    ui.all.addEventListener("click", function () { setView("all"); });
    ui.allPanel.addEventListener("click", function (event) {
      var thumb = event.target.closest(".caseboard-real__thumb");
      if (!thumb) return;
      state.head = Number(thumb.dataset.head);
      setView("one");
      ui.head.focus();  // the thumbnail is hidden now: focus goes where the head is chosen
    });

    ui.queries.addEventListener("pointerover", function (event) {
      var button = event.target.closest("button");
      if (event.pointerType !== "mouse" || !button) return;
      hover = Number(button.dataset.q);
      highlight();
    });
    ui.queries.addEventListener("pointerleave", function (event) {
      if (event.pointerType !== "mouse") return;
      hover = null;
      highlight();
    });
    ui.queries.addEventListener("focusin", function (event) {
      pinned = Number(event.target.dataset.q);
      highlight();
    });
    ui.queries.addEventListener("click", function (event) {
      var button = event.target.closest("button");
      if (!button) return;
      pinned = Number(button.dataset.q);
      highlight();
    });
    ui.queries.addEventListener("keydown", function (event) {
      var q = Number(event.target.dataset.q), n = data.n, to = null;
      if (event.key === "ArrowDown") to = Math.min(q + 1, n - 1);
      else if (event.key === "ArrowUp") to = Math.max(q - 1, 0);
      else if (event.key === "Home") to = 0;
      else if (event.key === "End") to = n - 1;
      else if (event.key === "Escape") {
        pinned = null;
        highlight();
        return;
      } else return;
      event.preventDefault();  // arrows would scroll the page
      ui.rows[to].query.focus();
    });

    // The thumbnails' colours follow the palette (Material sets it on <body>).
    new MutationObserver(function () { if (state.view === "all") drawThumbs(); })
      .observe(document.body, {attributes: true, attributeFilter: ["data-md-color-scheme"]});
    return board;
  }

  function line(parent, q, k) {
    var node = document.createElementNS(SVG, "line");
    node.setAttribute("x1", "0");
    node.setAttribute("y1", q + 0.5);
    node.setAttribute("x2", "100");
    node.setAttribute("y2", k + 0.5);
    node.setAttribute("vector-effect", "non-scaling-stroke");  // 2 px however wide the box
    parent.append(node);
    return node;
  }

  /* n rows of tokens and the lines: all n x n (shown faintly, one group per query) and, over
     them, the n lines of the chosen query. Made when n changes, otherwise reused. */
  function rows(n) {
    if (ui.rows.length === n) return;
    ui.queries.textContent = ui.keys.textContent = ui.svg.textContent = "";
    ui.svg.setAttribute("viewBox", "0 0 100 " + n);
    ui.every = document.createElementNS(SVG, "g");
    ui.every.setAttribute("class", "caseboard-real__every");
    ui.chosen = document.createElementNS(SVG, "g");
    ui.chosen.setAttribute("class", "caseboard-real__chosen");
    ui.svg.append(ui.every, ui.chosen);
    ui.rows = [];
    ui.shown = null;
    for (var q = 0; q < n; q++) {
      var query = el("button", "caseboard-real__token");
      query.type = "button";
      query.dataset.q = q;
      var key = el("span", "caseboard-real__token");
      var label = el("span", "caseboard-real__text");
      var bar = el("span", "caseboard-real__bar");
      key.append(label, bar);
      var group = document.createElementNS(SVG, "g");
      group.dataset.q = q;
      var lines = [];
      for (var k = 0; k < n; k++) lines.push(line(group, q, k));
      ui.every.append(group);
      ui.queries.append(query);
      ui.keys.append(key);
      ui.rows.push({query: query, key: label, bar: bar, lines: lines,
                    chosen: line(ui.chosen, 0, q)});  // the chosen query's line to key q
    }
  }

  // --- Showing ----------------------------------------------------------------------------------

  function status(text) {
    ui.status.textContent = text || "";
  }

  /* The reader picked a sentence: keep the model if the sentence has it. */
  function choose(id) {
    var models = Object.keys(sentenceOf(id).files);
    show(id, models.indexOf(state.model) >= 0 ? state.model : models[0]);
  }

  /* Load (once) and show one sentence through one model. Resolves to whether it is shown: on a
     failure the board keeps what it shows and says that the data did not load. */
  function show(id, model) {
    var mine = ++pending;
    var sentence = sentenceOf(id);
    if (root.classList.contains("caseboard--live")) status(words.loading);  // else: see start
    return load(sentence.files[model]).then(function (file) {
      if (mine !== pending) return;
      var changed = id !== state.sentence;
      data = file;
      state.sentence = id;
      state.model = model;
      state.layer = Math.min(state.layer, file.layers - 1);
      state.head = Math.min(state.head, file.heads - 1);
      if (changed) hover = pinned = null;
      ui.model.textContent = "";
      Object.keys(sentence.files).forEach(function (key) {
        ui.model.add(new Option(index.models[key].name, key));
      });
      numbers(ui.layer, file.layers);
      numbers(ui.head, file.heads);
      rows(file.n);
      file.tokens.forEach(function (token, q) {
        ui.rows[q].query.textContent = ui.rows[q].key.textContent = token;
      });
      status("");
      render();
      return true;
    }, function (error) {
      if (mine !== pending) return false;
      status(LOAD_FAILED);
      console.warn("case board (real heads):", error);
      if (state.sentence) {  // the controls show what the board still shows
        ui.sentence.value = state.sentence;
        ui.model.value = state.model;
      }
      return false;
    });
  }

  function setView(view) {
    state.view = view;
    render();
  }

  /* Everything that depends on the layer, the head and the view. */
  function render() {
    ui.sentence.value = state.sentence;
    ui.model.value = state.model;
    ui.layer.value = String(state.layer + 1);
    ui.head.value = String(state.head + 1);
    ui.one.setAttribute("aria-pressed", String(state.view === "one"));
    ui.all.setAttribute("aria-pressed", String(state.view === "all"));
    ui.onePanel.hidden = state.view !== "one";
    ui.allPanel.hidden = state.view !== "all";
    if (state.view === "one") drawHead();
    else drawThumbs();
  }

  function drawHead() {
    ui.caption.textContent = format(words.thumbnail, {layer: state.layer + 1,
                                                      head: state.head + 1});
    ui.stale = true;  // the faint lines of every query: drawn when they show
    highlight(true);
  }

  /* Show the lines of the query pointed at (or last chosen), or all of them faintly. Only what
     shows is drawn: the n lines of one query, or the n x n faint ones. */
  function highlight(redraw) {
    var q = hover !== null ? hover : pinned;
    if (q !== null && (!data || q >= data.n)) q = null;
    if (q === ui.shown && !redraw) return;
    var n = data.n, k;
    ui.diagram.classList.toggle("caseboard-real__diagram--token", q !== null);
    if (ui.shown !== null) ui.rows[ui.shown].query.classList.remove("caseboard-real__token--on");
    ui.shown = q;
    if (q === null) {
      if (ui.stale) {
        for (var i = 0; i < n; i++) {
          for (k = 0; k < n; k++) ui.rows[i].lines[k].setAttribute("stroke-opacity", weight(i, k));
        }
        ui.stale = false;
      }
      ui.rows.forEach(function (row) { row.bar.style.transform = ""; });
      ui.readout.textContent = "";
      return;
    }
    ui.rows[q].query.classList.add("caseboard-real__token--on");
    ui.chosen.dataset.q = q;
    for (k = 0; k < n; k++) {
      var row = ui.rows[k];
      row.chosen.setAttribute("y1", q + 0.5);
      row.chosen.setAttribute("stroke-opacity", weight(q, k));
      row.bar.style.transform = "scaleX(" + weight(q, k) + ")";
    }
    var order = data.tokens.map(function (token, key) { return key; });
    order.sort(function (a, b) { return weight(q, b) - weight(q, a) || a - b; });
    ui.readout.textContent = format(words.looks_at, {token: data.tokens[q]}) + " " +
      order.slice(0, TOP).map(function (key) {
        return data.tokens[key] + " " + weight(q, key).toFixed(2);
      }).join(" · ");
  }

  /* Colour of a CSS value (a variable of Material's palette) as [r, g, b]. */
  function rgb(value) {
    var probe = el("span");
    probe.style.color = value;
    probe.hidden = true;
    root.append(probe);
    var parts = getComputedStyle(probe).color.match(/[\d.]+/g).map(Number);
    probe.remove();
    return parts.slice(0, 3);
  }

  /* The layer's heads as heatmaps: one canvas pixel per weight, from the page's background
     (weight 0) to the accent (weight 1). Drawn again only when what they show changes. */
  function drawThumbs() {
    var heads = data.heads, n = data.n;
    while (ui.thumbs.length < heads) {
      var thumb = el("button", "caseboard-real__thumb");
      thumb.type = "button";
      thumb.dataset.head = ui.thumbs.length;
      var picture = el("canvas");
      picture.setAttribute("aria-hidden", "true");
      var number = el("span", "caseboard-real__number", String(ui.thumbs.length + 1));
      number.setAttribute("aria-hidden", "true");
      thumb.append(picture, number);
      ui.allPanel.append(thumb);
      ui.thumbs.push(thumb);
    }
    ui.thumbs.forEach(function (thumb, j) {
      thumb.hidden = j >= heads;
      thumb.setAttribute("aria-label", format(words.thumbnail, {layer: state.layer + 1,
                                                                 head: j + 1}));
      if (j === state.head) thumb.setAttribute("aria-current", "true");
      else thumb.removeAttribute("aria-current");
    });
    var style = getComputedStyle(root);
    var paper = rgb(style.getPropertyValue("--md-default-bg-color"));
    var ink = rgb(style.getPropertyValue("--md-accent-fg-color"));
    var key = [state.sentence, state.model, state.layer, paper, ink].join("|");
    if (key === drawn) return;
    drawn = key;
    for (var j = 0; j < heads; j++) {
      var canvas = ui.thumbs[j].firstChild;
      canvas.width = canvas.height = n;
      var context = canvas.getContext("2d");
      var image = context.createImageData(n, n);
      var pixels = image.data, offset = (state.layer * heads + j) * n * n;
      for (var i = 0; i < n * n; i++) {
        var w = data.bytes[offset + i] / 255;
        pixels[4 * i] = paper[0] + (ink[0] - paper[0]) * w;
        pixels[4 * i + 1] = paper[1] + (ink[1] - paper[1]) * w;
        pixels[4 * i + 2] = paper[2] + (ink[2] - paper[2]) * w;
        pixels[4 * i + 3] = 255;
      }
      context.putImageData(image, 0, 0);
    }
  }

  // --- Start ------------------------------------------------------------------------------------

  ui.status = el("div", "caseboard__status");
  ui.status.setAttribute("role", "status");
  root.append(ui.status);
  // Say "loading" only if it takes a while: a quick load then changes nothing on the page twice.
  var slow = setTimeout(function () { if (words) status(words.loading); }, 500);

  fetchJSON("real-" + LANG + ".json").then(function (json) {
    index = json;
    words = json.words;
    var board = build();
    var first = sentenceOf(DEFAULTS.sentence) || index.sentences[0];
    state.layer = DEFAULTS.layer;
    state.head = DEFAULTS.head;
    return show(first.id, first.files[DEFAULTS.model] ? DEFAULTS.model
                                                      : Object.keys(first.files)[0])
      .then(function (shown) {
        if (!shown) return;
        board.firstChild.after(ui.status);
        root.append(board);
        root.classList.add("caseboard--live");
      });
  }).catch(function (error) {
    clearTimeout(slow);
    status(LOAD_FAILED);
    console.warn("case board (real heads):", error);
  }).then(function () { clearTimeout(slow); });

  window.caseBoardReal = Object.freeze({
    /* The controls' state: layer and head counted from 1 as the page shows them; token is the
       index of the query whose lines show, or null. */
    state: function () {
      var q = hover !== null ? hover : pinned;
      return {sentence: state.sentence, model: state.model, layer: state.layer + 1,
              head: state.head + 1, view: state.view, token: q};
    },
    /* The head shown: its sentence's tokens and weights (n x n, weight[q][k] = byte / 255). */
    current: function () {
      if (!data) return null;
      return {tokens: data.tokens.slice(), weights: data.tokens.map(function (t, q) {
        return data.tokens.map(function (u, k) { return weight(q, k); });
      })};
    },
  });
})();
