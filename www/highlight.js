// highlight.js: the landing highlight. On a page opened at `page#char=from,to`, it rebuilds the
// page's canonical text from the rendered DOM by the extractor's rule (src/doc/extract.rs, module
// doc: "The canonical text rule (HTML)"), wraps exactly that UTF-16 range in <mark> (across
// elements if need be) and scrolls to it.
// Invariant: never a wrong highlight. The range is used only when the page's canonical text
// still has the content hash the index recorded; otherwise the quote is looked up in the index
// and found by text, and if that fails nothing is marked (and the console says why).

// ---- Mirror of src/doc/extract.rs (keep in sync; tests/browser/canonical.test.mjs compares) ----
export const CONTENT_ROOT_SELECTORS = ["article.md-content__inner", "main", "[role=main]", "article", "body"];
export const DROP_SELECTORS = [
  "script", "style", "noscript", "template", "svg", "canvas", "iframe", "object", "embed", "audio", "video",
  "button", "nav", "form", "select", "textarea", "dialog:not([open])",
  "[hidden]", "[aria-hidden=true]", ".sr-only", ".visually-hidden", ".screen-reader-text",
  ".headerlink", ".hash-link", ".anchor-link", ".anchorjs-link", ".header-anchor", ".heading-anchor", ".td-heading-self-link",
  "a.anchor[href^='#']",
  ".toc", ".table-of-contents", ".contents.topic", "#markdown-toc", ".no_toc.text-delta",
  ".taxonomy-terms-article", ".section-index",
  ".breadcrumbs", ".breadcrumb", ".pagination-nav", ".theme-doc-footer", ".theme-doc-toc-mobile",
  ".theme-doc-version-badge", ".theme-doc-version-banner", ".md-source-file", ".md-footer", ".md-content__button",
  ".td-page-meta__lastmod", "footer.sl-flex", "span.lang", ".d-print-none", ".boring", ".linenos", ".viewcode-link", ".viewcode-back",
];
export const BLOCK_ELEMENTS = new Set([
  "address", "article", "aside", "blockquote", "body", "caption", "center", "dd", "details", "dialog", "dir", "div",
  "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header",
  "hgroup", "hr", "html", "label", "legend", "li", "listing", "main", "menu", "nav", "ol", "p", "plaintext", "pre", "search",
  "section", "summary", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul", "xmp",
]);
export const VERBATIM_ELEMENTS = new Set(["pre", "listing", "xmp", "plaintext"]);
const DROP = DROP_SELECTORS.join(", ");
const WS = /[ \t\n\f\r]/; // the browser's collapsing set, ASCII only (not \s: it has U+00A0)
const isWs = (c) => c === " " || c === "\t" || c === "\n" || c === "\f" || c === "\r";

/** Rule step 1: the content root (a user selector, else the automatic choice). */
export function contentRoot(doc = document, selector = null) {
  if (selector) return doc.querySelector(selector);
  let root = null;
  for (const s of CONTENT_ROOT_SELECTORS) {
    root = doc.querySelector(s);
    if (root) break;
  }
  if (!root) return null;
  const articles = root.querySelectorAll("article");
  return articles.length === 1 ? articles[0] : root;
}

/**
 * The canonical text of `root`'s subtree (rule steps 2–7), with, for every UTF-16 unit of it,
 * the text node and offset it came from (`nodes[i] === null` for separators).
 */
export function canonical(root) {
  const b = new Builder();
  if (!root) return b.result();
  // Explicit stack: no recursion limit on deep markup.
  const stack = [{ node: root, open: true }];
  while (stack.length) {
    const { node, open } = stack.pop();
    if (node.nodeType === 3) {
      b.pushText(node);
      continue;
    }
    if (node.nodeType !== 1) continue;
    const name = node.localName;
    if (!open) {
      b.close(node, name);
      continue;
    }
    if (node !== root && node.matches(DROP)) continue;
    b.open(node, name);
    stack.push({ node, open: false });
    for (let c = node.lastChild; c; c = c.previousSibling) stack.push({ node: c, open: true });
  }
  b.flush();
  return b.result();
}

class Builder {
  constructor() {
    this.text = [];
    this.srcNode = [];
    this.srcOff = [];
    this.lines = [[]]; // each line: array of { node, from, to } runs
    this.leaf = null; // { el, mode: "code" | "heading" }
  }
  pushText(node) {
    if (node.data.length) this.lines[this.lines.length - 1].push({ node, from: 0, to: node.data.length });
  }
  lineBreak() {
    if (this.leaf?.mode === "code") this.lines[this.lines.length - 1].push({ node: null, text: "\n" });
    else this.lines.push([]);
  }
  /** Inside a verbatim leaf, a block element's edge ends the line (src/doc/extract.rs, step 5). */
  codeLineEnd() {
    if (this.leaf?.mode !== "code") return;
    const line = this.lines[this.lines.length - 1];
    const run = line[line.length - 1];
    if (!run) return;
    const last = run.node === null ? run.text : run.node.data[run.to - 1];
    if (last !== "\n") line.push({ node: null, text: "\n" });
  }
  open(el, name) {
    if (this.leaf) {
      if (name === "br") this.lineBreak();
      else if (BLOCK_ELEMENTS.has(name)) this.codeLineEnd();
      return;
    }
    if (/^h[1-6]$/.test(name)) {
      this.flush();
      this.leaf = { el, mode: "heading" };
    } else if (VERBATIM_ELEMENTS.has(name)) {
      this.flush();
      this.leaf = { el, mode: "code" };
    } else if (BLOCK_ELEMENTS.has(name)) {
      this.flush();
    } else if (name === "br") {
      this.lineBreak();
    }
  }
  close(el, name) {
    if (this.leaf) {
      if (this.leaf.el === el) {
        this.flush();
        this.leaf = null;
      } else if (BLOCK_ELEMENTS.has(name)) this.codeLineEnd();
      return;
    }
    if (BLOCK_ELEMENTS.has(name)) this.flush();
  }
  /** A line's characters as [char, node, offset] (node null for a synthetic "\n"). */
  static chars(line) {
    const out = [];
    for (const run of line) {
      if (run.node === null) out.push([run.text, null, -1]);
      else for (let i = run.from; i < run.to; i++) out.push([run.node.data[i], run.node, i]);
    }
    return out;
  }
  flush() {
    const mode = this.leaf?.mode ?? "text";
    const lines = this.lines;
    this.lines = [[]];
    let piece; // array of [char, node, offset]
    if (mode === "code") {
      const all = lines.flatMap((l) => Builder.chars(l));
      let a = 0, z = all.length;
      while (a < z && isWs(all[a][0])) a++;
      while (z > a && isWs(all[z - 1][0])) z--;
      piece = all.slice(a, z);
    } else {
      const kept = [];
      for (const l of lines) {
        const c = collapseChars(Builder.chars(l));
        if (c.length) kept.push(c);
      }
      piece = [];
      kept.forEach((l, i) => {
        if (i) piece.push(["\n", null, -1]);
        piece.push(...l);
      });
    }
    if (!piece.length) return;
    if (this.text.length) for (const _ of "\n\n") this.emit("\n", null, -1);
    for (const [c, n, o] of piece) this.emit(c, n, o);
  }
  emit(c, node, off) {
    this.text.push(c);
    this.srcNode.push(node);
    this.srcOff.push(off);
  }
  result() {
    return { text: this.text.join(""), nodes: this.srcNode, offsets: this.srcOff };
  }
}

/** Step 6 on one line: runs of whitespace → one space (sourced at the run's first unit), trimmed. */
function collapseChars(chars) {
  const out = [];
  let pendingSpace = null;
  for (const ch of chars) {
    if (isWs(ch[0])) {
      if (out.length && !pendingSpace) pendingSpace = [" ", ch[1], ch[2]];
    } else {
      if (pendingSpace) out.push(pendingSpace);
      pendingSpace = null;
      out.push(ch);
    }
  }
  return out;
}

// ---- sha256 (hex) of the canonical text's UTF-8 bytes --------------------------------------

export async function sha256Hex(text) {
  const bytes = new TextEncoder().encode(text);
  if (globalThis.crypto?.subtle) {
    const d = await crypto.subtle.digest("SHA-256", bytes);
    return [...new Uint8Array(d)].map((b) => b.toString(16).padStart(2, "0")).join("");
  }
  return sha256Fallback(bytes); // crypto.subtle exists only in secure contexts
}

function sha256Fallback(bytes) {
  const K = new Uint32Array([
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01,
    0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc,
    0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08,
    0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
  ]);
  const H = new Uint32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
  const len = bytes.length;
  const padded = new Uint8Array(((len + 9 + 63) >> 6) << 6);
  padded.set(bytes);
  padded[len] = 0x80;
  const view = new DataView(padded.buffer);
  view.setUint32(padded.length - 8, Math.floor(len / 0x20000000));
  view.setUint32(padded.length - 4, (len << 3) >>> 0);
  const W = new Uint32Array(64);
  const rotr = (x, n) => (x >>> n) | (x << (32 - n));
  for (let o = 0; o < padded.length; o += 64) {
    for (let i = 0; i < 16; i++) W[i] = view.getUint32(o + i * 4);
    for (let i = 16; i < 64; i++) {
      const s0 = rotr(W[i - 15], 7) ^ rotr(W[i - 15], 18) ^ (W[i - 15] >>> 3);
      const s1 = rotr(W[i - 2], 17) ^ rotr(W[i - 2], 19) ^ (W[i - 2] >>> 10);
      W[i] = (W[i - 16] + s0 + W[i - 7] + s1) >>> 0;
    }
    let [a, b, c, d, e, f, g, h] = H;
    for (let i = 0; i < 64; i++) {
      const t1 = (h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + W[i]) >>> 0;
      const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) >>> 0;
      [h, g, f, e, d, c, b, a] = [g, f, e, (d + t1) >>> 0, c, b, a, (t1 + t2) >>> 0];
    }
    [a, b, c, d, e, f, g, h].forEach((v, i) => (H[i] = (H[i] + v) >>> 0));
  }
  return [...H].map((x) => x.toString(16).padStart(8, "0")).join("");
}

// ---- Marking -------------------------------------------------------------------------------

/** `#char=from,to` → { from, to }, or null. */
export function parseCharFragment(hash) {
  const m = /^#?char=(\d+),(\d+)$/.exec(hash ?? "");
  if (!m) return null;
  const from = Number(m[1]), to = Number(m[2]);
  return from < to ? { from, to } : null;
}

/** Removes earlier needle marks, restoring the text nodes. */
export function clearMarks(doc = document) {
  for (const m of doc.querySelectorAll("mark.needle-mark")) {
    const parent = m.parentNode;
    while (m.firstChild) parent.insertBefore(m.firstChild, m);
    parent.removeChild(m);
    parent.normalize();
  }
}

/** Wraps canonical units `from..to` of `canon` in <mark class="needle-mark">; returns the marks. */
export function markRange(canon, from, to, doc = document) {
  // One contiguous span per text node, in document order.
  const spans = new Map();
  for (let i = from; i < to; i++) {
    const node = canon.nodes[i];
    if (!node) continue;
    const off = canon.offsets[i];
    const s = spans.get(node);
    if (s) s.to = Math.max(s.to, off + 1);
    else spans.set(node, { from: off, to: off + 1 });
  }
  const marks = [];
  for (const [node, { from: a, to: z }] of spans) {
    const range = doc.createRange();
    range.setStart(node, a);
    range.setEnd(node, z);
    const mark = doc.createElement("mark");
    mark.className = "needle-mark";
    range.surroundContents(mark);
    marks.push(mark);
  }
  return marks;
}

/** Finds `quote` in `text`: exact first, else with whitespace runs matching any whitespace. */
export function findQuote(text, quote) {
  const at = text.indexOf(quote);
  if (at >= 0 && text.indexOf(quote, at + 1) < 0) return { from: at, to: at + quote.length };
  const words = quote.split(/[ \t\n\f\r]+/).filter(Boolean).map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  if (!words.length) return null;
  const re = new RegExp(words.join("[ \\t\\n\\f\\r]+"), "g");
  const found = [...text.matchAll(re)];
  if (found.length !== 1) return null; // absent or ambiguous: no highlight rather than a wrong one
  return { from: found[0].index, to: found[0].index + found[0][0].length };
}

/**
 * Highlights `#char=from,to` on this page. `info` is the index's record of the page
 * ({ hash, len }); `getQuote()` resolves to the chunk's quote (only called when the page changed).
 * Returns { marks, how } with how = "range" | "text" | "none".
 */
export async function highlightRange({ from, to }, info, getQuote, { doc = document, selector = null, log = console } = {}) {
  clearMarks(doc);
  const canon = canonical(contentRoot(doc, selector));
  const hash = await sha256Hex(canon.text);
  if (info && hash === info.hash && to <= canon.text.length) {
    return { marks: scrollTo(markRange(canon, from, to, doc)), how: "range" };
  }
  const quote = await getQuote().catch(() => null);
  const spot = quote ? findQuote(canon.text, quote) : null;
  if (!spot) {
    log.warn?.(`needle: this page changed since it was indexed and the cited quote ${quote ? "is no longer on it" : "is unknown"}; nothing highlighted`);
    return { marks: [], how: "none" };
  }
  log.info?.(`needle: this page changed since it was indexed (content hash ${hash.slice(0, 12)}… ≠ ${(info?.hash ?? "none").slice(0, 12)}…); the quote was found by its text instead`);
  return { marks: scrollTo(markRange(canon, spot.from, spot.to, doc)), how: "text" };
}

function scrollTo(marks) {
  marks[0]?.scrollIntoView({ block: "center", behavior: "instant" });
  return marks;
}

/**
 * Wires the highlight into this page: reads `#char=` now and on every hash change. `base` is
 * the bundle's URL; `openEngine` is needle.js's `open` (used only to look a quote up);
 * `manifest` the bundle's manifest.json, as needle.js's `loadManifest` read it.
 */
export async function install(base, openEngine, { selector = null, manifest } = {}) {
  const baseUrl = new URL(base, location.href);
  let pages = null, engine = null;
  const load = async () => {
    if (pages) return;
    const cache = await globalThis.caches?.open("needle-v1").catch(() => null);
    const pu = new URL(manifest.files.pages, baseUrl);
    let res = await cache?.match(pu.href);
    if (!res) {
      res = await fetch(pu);
      await cache?.put(pu.href, res.clone()).catch(() => {});
    }
    pages = await res.json();
  };
  const run = async () => {
    const range = parseCharFragment(location.hash);
    if (!range) return null;
    await load();
    const siteRoot = new URL(manifest.siteRoot ?? "../", baseUrl);
    let path = decodeURIComponent(location.pathname.startsWith(siteRoot.pathname) ? location.pathname.slice(siteRoot.pathname.length) : location.pathname);
    if (path === "" || path.endsWith("/")) path += "index.html";
    const getQuote = async () => {
      engine ??= await openEngine(baseUrl, { model: false });
      return engine.quote(path, range.from, range.to);
    };
    const result = await highlightRange(range, pages[path], getQuote, { selector });
    document.dispatchEvent(new CustomEvent("needle:highlight", { detail: { ...range, path, how: result.how, count: result.marks.length } }));
    return result;
  };
  addEventListener("hashchange", () => run().catch((e) => console.warn("needle: highlight failed:", e)));
  return run();
}
