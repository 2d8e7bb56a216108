// highlight.js: the landing highlight. On a page opened at `page#char=from,to`, it rebuilds the
// page's canonical text from the rendered DOM, wraps exactly that UTF-16 range in <mark> (across
// elements if need be) and scrolls to it. On a page opened at `page#media=FILE&t=start,end` (a
// cited caption of a video or audio file this page plays), it finds the page's player of FILE,
// shows its captions and plays the cited time range; no canonical text is involved there.
// The canonical text rule is not written here: it is Rust (src/doc/canonical.rs), run by the
// lexical core (WebAssembly with no model code). This file only walks the DOM: it finds the
// content root and skips dropped subtrees with the selector lists the core gives it, and sends
// every element's open and close and every text node to the core, which answers with the text
// and, for each of its units, the text node and offset it came from.
// Invariant: never a wrong highlight. The range is used only when the page's canonical text
// still has the content hash the index recorded; otherwise the quote is looked up in the index
// and found by text, and if that fails nothing is marked (and the console says why).

const rules = new WeakMap();
/** The rule's selector lists ({ roots: string[], drop: string }), from the core. */
function rule(core) {
  if (!rules.has(core)) rules.set(core, JSON.parse(core.canonicalRule()));
  return rules.get(core);
}

/** Rule step 1: the content root (a user selector, else the automatic choice). */
export function contentRoot(core, doc = document, selector = null) {
  if (selector) return doc.querySelector(selector);
  let root = null;
  for (const s of rule(core).roots) {
    root = doc.querySelector(s);
    if (root) break;
  }
  if (!root) return null;
  const articles = root.querySelectorAll("article");
  return articles.length === 1 ? articles[0] : root;
}

const OPEN = 0, TEXT = 1, CLOSE = 2;
const SEPARATOR = 0xffffffff;

/**
 * The canonical text of `root`'s subtree (rule steps 2–8): `{ text, nodes, sources }`, where
 * unit `i` of `text` came from unit `sources[2i + 1]` of text node `nodes[sources[2i]]` (no
 * node: a separator the rule added).
 */
export function canonical(core, root) {
  const kinds = [], lens = [], data = [], nodes = [];
  if (root) {
    const drop = rule(core).drop;
    // Explicit stack: no recursion limit on deep markup.
    const stack = [{ node: root, open: true }];
    while (stack.length) {
      const { node, open } = stack.pop();
      if (node.nodeType === 3) {
        kinds.push(TEXT), lens.push(node.data.length), data.push(node.data), nodes.push(node);
        continue;
      }
      if (node.nodeType !== 1) continue;
      const name = node.localName;
      if (!open) {
        kinds.push(CLOSE), lens.push(name.length), data.push(name);
        continue;
      }
      if (node !== root && node.matches(drop)) continue;
      kinds.push(OPEN), lens.push(name.length), data.push(name);
      stack.push({ node, open: false });
      for (let c = node.lastChild; c; c = c.previousSibling) stack.push({ node: c, open: true });
    }
  }
  const out = core.canonicalText(Uint8Array.from(kinds), Uint32Array.from(lens), data.join(""));
  try {
    return { text: out.text, nodes, sources: out.sources };
  } finally {
    out.free();
  }
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
    const n = canon.sources[2 * i];
    if (n === SEPARATOR || n === undefined) continue;
    const node = canon.nodes[n];
    const off = canon.sources[2 * i + 1];
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
 * Highlights `#char=from,to` on this page with the lexical core `core` (see `install`). `info` is the index's record of the page
 * ({ hash, len }); `getQuote()` resolves to the chunk's quote (only called when the page changed).
 * Returns { marks, how } with how = "range" | "text" | "none".
 */
export async function highlightRange(core, { from, to }, info, getQuote, { doc = document, selector = null, log = console } = {}) {
  clearMarks(doc);
  const canon = canonical(core, contentRoot(core, doc, selector));
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

// ---- Media: `#media=FILE&t=start,end` -------------------------------------------------------

/**
 * `#media=FILE&t=start,end` → { media, start, end } (FILE percent-decoded, relative to the site
 * root; seconds, `end` null when open), or null. `t` is a W3C Media Fragments temporal range in
 * seconds (`t=10`, `t=10,20`, `t=,20`, an optional `npt:` prefix).
 */
export function parseMediaFragment(hash) {
  const params = new Map();
  for (const part of (hash ?? "").replace(/^#/, "").split("&")) {
    const eq = part.indexOf("=");
    if (eq > 0) params.set(part.slice(0, eq), part.slice(eq + 1));
  }
  const t = /^(?:npt:)?(\d+(?:\.\d+)?)?(?:,(\d+(?:\.\d+)?))?$/.exec(params.get("t") ?? "");
  if (!params.get("media") || !t || (t[1] === undefined && t[2] === undefined)) return null;
  let media;
  try {
    media = decodeURIComponent(params.get("media"));
  } catch {
    return null;
  }
  const start = t[1] === undefined ? 0 : Number(t[1]);
  const end = t[2] === undefined ? null : Number(t[2]);
  return end !== null && end <= start ? null : { media, start, end };
}

const withoutHash = (u) => u.href.replace(/#.*$/, "");

/**
 * The <video> or <audio> of `doc` that plays `url` (its `src`, or one of its <source>s,
 * resolved like the browser resolves them), or null.
 */
export function findPlayer(url, doc = document) {
  const want = withoutHash(url);
  for (const player of doc.querySelectorAll("video, audio")) {
    const srcs = [player.getAttribute("src"), ...[...player.querySelectorAll("source")].map((s) => s.getAttribute("src"))];
    for (const src of srcs) {
      if (!src) continue;
      try {
        if (withoutHash(new URL(src, doc.baseURI)) === want) return player;
      } catch {
        // an unparsable src plays nothing
      }
    }
  }
  return null;
}

/** The cited player and how to stop following it: one at a time per page. */
let cited = null;

/** Removes the cited mark (and the stop at the range's end) from the last cited player. */
export function clearCited(doc = document) {
  cited?.release();
  cited = null;
  for (const e of doc.querySelectorAll("[data-needle-cited]")) e.removeAttribute("data-needle-cited");
}

/**
 * Plays `start..end` (seconds) of `player`: marks it (`data-needle-cited`, styled in
 * widget.css), scrolls it into view, shows its captions, seeks to `start` (once its metadata is
 * in), pauses at `end` unless the reader seeks elsewhere first, and asks to play (a browser's
 * autoplay policy may refuse: the player then waits at `start`).
 */
export function playRange(player, { start, end }, doc = document) {
  clearCited(doc);
  player.setAttribute("data-needle-cited", `${start},${end ?? ""}`);
  player.scrollIntoView({ block: "center", behavior: "instant" });
  showCaptions(player);
  const listeners = [];
  const on = (type, f, opts) => {
    player.addEventListener(type, f, opts);
    listeners.push([type, f]);
  };
  const release = () => listeners.forEach(([type, f]) => player.removeEventListener(type, f));
  cited = { player, release };
  const seek = () => {
    player.currentTime = start;
    if (end === null) return;
    // Our own seek ends in one `seeked`; a later `seeking` is the reader's: stop following.
    on("seeked", () => on("seeking", release, { once: true }), { once: true });
    on("timeupdate", () => {
      if (player.currentTime >= end) {
        player.pause();
        release();
      }
    });
  };
  if (player.readyState >= 1) seek();
  else {
    on("loadedmetadata", seek, { once: true });
    if (player.preload === "none") player.preload = "metadata";
  }
  player.play()?.catch?.(() => {});
  return player;
}

/** Shows one captions or subtitles track: one already showing, else the default one, else the first. */
function showCaptions(player) {
  const texts = [...player.textTracks].filter((t) => t.kind === "captions" || t.kind === "subtitles");
  if (!texts.length || texts.some((t) => t.mode === "showing")) return;
  const dflt = [...player.querySelectorAll("track[default]")].map((e) => e.track).find((t) => texts.includes(t));
  (dflt ?? texts[0]).mode = "showing";
}

/**
 * Lands `#media=FILE&t=start,end` on this page: FILE is relative to `siteRoot`. Returns
 * { player, how } with how = "media" | "none".
 */
export function landMedia({ media, start, end }, siteRoot, { doc = document, log = console } = {}) {
  const url = new URL(media, siteRoot);
  const player = findPlayer(url, doc);
  if (!player) {
    clearCited(doc);
    log.warn?.(`needle: no <video> or <audio> on this page plays ${url.href}; nothing to play`);
    return { player: null, how: "none" };
  }
  return { player: playRange(player, { start, end }, doc), how: "media" };
}

/**
 * Wires the highlight into this page: reads `#char=` and `#media=` now and on every hash
 * change (`#media=` needs neither the lexical core nor the page list). `base` is
 * the bundle's URL; `manifest` its manifest.json, as needle.js's `loadManifest` read it;
 * `loadCore` resolves to the initialised lexical core (needle.js's `loadLexicalCore`) and
 * `openEngine` is needle.js's `open` (used only to look a quote up).
 */
export async function install(base, { loadCore, openEngine, selector = null, manifest }) {
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
  const siteRoot = new URL(manifest.siteRoot ?? "../", baseUrl);
  const pagePath = () => {
    const p = decodeURIComponent(location.pathname.startsWith(siteRoot.pathname) ? location.pathname.slice(siteRoot.pathname.length) : location.pathname);
    return p === "" || p.endsWith("/") ? p + "index.html" : p;
  };
  const announce = (detail) => document.dispatchEvent(new CustomEvent("needle:highlight", { detail }));
  const run = async () => {
    const media = parseMediaFragment(location.hash);
    if (media) {
      clearMarks();
      const { how } = landMedia(media, siteRoot);
      announce({ ...media, path: pagePath(), how, count: how === "media" ? 1 : 0 });
      return { marks: [], how };
    }
    const range = parseCharFragment(location.hash);
    if (!range) return null;
    clearCited();
    const [core] = await Promise.all([loadCore(baseUrl, manifest), load()]);
    const path = pagePath();
    const getQuote = async () => {
      engine ??= await openEngine(baseUrl, { model: false });
      return engine.quote(path, range.from, range.to);
    };
    const result = await highlightRange(core, range, pages[path], getQuote, { selector });
    announce({ ...range, path, how: result.how, count: result.marks.length });
    return result;
  };
  addEventListener("hashchange", () => run().catch((e) => console.warn("needle: highlight failed:", e)));
  return run();
}
