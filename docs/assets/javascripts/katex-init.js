/*
 * Typesets the maths that pymdownx.arithmatex (generic: true) leaves in the page:
 *   <span class="arithmatex">\( … \)</span>   inline
 *   <div class="arithmatex">\[ … \]</div>     display
 * with the KaTeX vendored in assets/katex/ (no CDN: every file comes from the site's origin).
 *
 * Material for MkDocs emits `document$` on the first load and again after every instant
 * navigation, once the new page's content is in place, so subscribing to it typesets each page.
 * Bad TeX is not hidden: KaTeX throws, and the error goes to console.error (tests watch for it),
 * while the source stays visible in the page.
 */
(function () {
  "use strict";

  var DELIMITERS = [
    { left: "\\(", right: "\\)", display: false },
    { left: "\\[", right: "\\]", display: true },
  ];

  function parse(source) {
    var text = source.trim();
    for (var i = 0; i < DELIMITERS.length; i++) {
      var d = DELIMITERS[i];
      if (text.length >= d.left.length + d.right.length &&
          text.slice(0, d.left.length) === d.left &&
          text.slice(-d.right.length) === d.right) {
        return { tex: text.slice(d.left.length, -d.right.length), display: d.display };
      }
    }
    return null;
  }

  function typeset(root) {
    var elements = root.querySelectorAll(".arithmatex");
    for (var i = 0; i < elements.length; i++) {
      var el = elements[i];
      if (el.getAttribute("data-katex") === "done") continue;
      var source = el.textContent;
      var maths = parse(source);
      if (maths === null) {
        console.error("katex-init: no \\( \\) or \\[ \\] delimiters in", source, el);
        el.setAttribute("data-katex", "error");
        continue;
      }
      try {
        katex.render(maths.tex, el, { displayMode: maths.display, throwOnError: true });
        el.setAttribute("data-katex", "done");
      } catch (error) {
        console.error("katex-init: cannot typeset", source, "-", error && error.message, el);
        el.textContent = source;
        el.setAttribute("data-katex", "error");
      }
    }
  }

  document$.subscribe(function (doc) {
    typeset((doc && doc.body) || document.body);
  });
})();
