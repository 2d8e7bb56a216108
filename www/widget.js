// widget.js: <needle-search>, the search box of a needle site, and the landing highlight.
//
//   <script type="module" src="/needle/widget.js"></script>
//   <needle-search></needle-search>
//
// From the npm package under a bundler (`import "needle-search/widget.js"`), this script lives
// among the app's assets, so `base` must name the site's bundle (`needle build` writes it):
//   <needle-search base="/needle/"></needle-search>
//
// Attributes: base (the bundle URL; default: this script's folder), placeholder, k (answers
// shown, default 4), preload (start loading the engine at once instead of on first focus),
// selector (the content root, if the index was built with --selector), offline (register
// needle-sw.js so that a second visit works with the network off), semantic (when the engine
// and model that make search semantic download, after the lexical core that answers first:
// "auto", the default, as soon as the box is used; "on-demand" at the first query; "off" never,
// keyword search only).
// The UI lives in an open shadow root: the page's CSS cannot reach it (widget.css resets what
// would be inherited), only the custom properties documented in widget.css and ::part(input,
// panel, results, crumbs, snippet, …) theme it. Indexed text is always inserted as text
// (textContent), never parsed as HTML.

import { loadLexicalCore, loadManifest, open } from "./needle.js";

// This script's folder. (Not written `new URL(".", import.meta.url)`: bundlers take that
// pattern for an asset to copy, and "." for the package's main file.)
const SCRIPT_URL = import.meta.url;
const HERE = new URL(".", SCRIPT_URL);

let manifestPromise = null;
function manifestOf(base) {
  manifestPromise ??= loadManifest(new URL(base, location.href));
  return manifestPromise;
}

let pageStyle = false;
async function addPageStyle(base) {
  if (pageStyle) return;
  pageStyle = true;
  const m = await manifestOf(base);
  const link = document.createElement("link");
  link.rel = "stylesheet";
  link.href = new URL(m.files.css, base).href;
  document.head.append(link);
}

/**
 * A fragment the landing highlight acts on: `#char=from,to` (a cited range of this page) or
 * `#media=FILE&t=start,end` (a cited time range of a video or audio file this page plays).
 */
const LANDING = /^#(char=\d+,\d+|media=[^&]+&t=[^&]+)$/;

/** The landing highlight: on `#char=` or `#media=` (now or after a hash change), load highlight.js and run it. */
let landed = false;
async function landing(base, selector) {
  if (landed) return;
  landed = true;
  const start = async () => {
    const m = await manifestOf(base);
    // The comments keep an app's bundler from resolving the bundle's own file.
    const hl = await import(/* @vite-ignore */ /* webpackIgnore: true */ new URL(m.files.highlight, base).href);
    await addPageStyle(base);
    return hl.install(base, { loadCore: loadLexicalCore, openEngine: open, selector, manifest: m });
  };
  let started = null;
  const maybe = () => {
    if (!started && LANDING.test(location.hash)) started = start().catch((e) => console.warn("needle: highlight failed:", e));
  };
  addEventListener("hashchange", maybe);
  maybe();
}

/**
 * `<needle-search offline>`: registers needle-sw.js with the site root as its scope, so pages
 * and the bundle are served from the cache when the network is off. Resolves when this page
 * and what it loaded are cached.
 */
let offlineStarted = null;
function registerOffline(base) {
  offlineStarted ??= (async () => {
    if (!("serviceWorker" in navigator)) return false;
    const m = await manifestOf(base);
    const scope = new URL(m.siteRoot ?? "../", base).href;
    try {
      await navigator.serviceWorker.register(new URL("needle-sw.js", base).href, { scope });
    } catch (e) {
      console.info(`needle: offline visits need needle-sw.js to be allowed the scope ${scope} (header Service-Worker-Allowed): ${e.message}`);
      return false;
    }
    const reg = await navigator.serviceWorker.ready;
    const urls = [location.href, ...performance.getEntriesByType("resource").map((r) => r.name)];
    await new Promise((resolve) => {
      const done = (e) => {
        if (e.data?.type !== "needle:cached") return;
        navigator.serviceWorker.removeEventListener("message", done);
        resolve();
      };
      navigator.serviceWorker.addEventListener("message", done);
      reg.active.postMessage({ type: "needle:cache", urls });
      setTimeout(resolve, 10000);
    });
    return true;
  })();
  return offlineStarted;
}

/**
 * A result's text as the widget shows it: `text` with the query's terms at `marks` (UTF-16
 * `[from, to]` pairs in `text`). The engine finds the terms (`bm25::marks`, the tokenizer that
 * ranked the hit), so marking and ranking never disagree on what a word is; this file only
 * moves the marks along with the display's cuts.
 */
function view(content, marks) {
  // Whitespace runs → one space, trimmed (display only); `at[i]`: the content unit of text[i].
  let text = "";
  const at = [];
  let space = -1;
  for (let i = 0; i < content.length; i++) {
    const c = content[i];
    if (c === " " || c === "\t" || c === "\n" || c === "\f" || c === "\r") {
      if (text.length && space < 0) space = i;
      continue;
    }
    if (space >= 0) (text += " "), at.push(space), (space = -1);
    text += c;
    at.push(i);
  }
  const index = (unit) => {
    let lo = 0, hi = at.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (at[mid] < unit) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  // A term holds no whitespace, so its units are all kept, one for one.
  return { text, marks: (marks ?? []).map(([a, z]) => [index(a), index(a) + (z - a)]) };
}

/** `v` from unit `a` to `z`, its marks moved along (those cut are dropped). */
function cut(v, a, z) {
  return { text: v.text.slice(a, z), marks: v.marks.filter(([m, n]) => m >= a && n <= z).map(([m, n]) => [m - a, n - a]) };
}

/**
 * A chunk that starts at a heading has the heading's text first (the canonical text holds
 * it); the breadcrumb already shows it, so the snippet leaves it out. Display only: the quote
 * that is cited and highlighted is always the whole chunk.
 */
function withoutHeading(v, headings) {
  let a = 0;
  for (const h of headings.map(collapseWs).filter(Boolean)) {
    const rest = v.text.slice(a);
    if (rest.startsWith(h) && (rest.length === h.length || rest[h.length] === " ")) a += h.length + 1;
  }
  return a < v.text.length ? cut(v, a, v.text.length) : v;
}

/** About `max` characters of `v`, around its first marked term. */
function snippet(v, max = 280) {
  const { text } = v;
  if (text.length <= max) return v;
  const first = v.marks.length ? v.marks[0][0] : 0;
  let a = Math.max(0, first - 60);
  if (a > 0) a = text.indexOf(" ", a) + 1 || a;
  let z = Math.min(text.length, a + max);
  if (z < text.length) z = text.lastIndexOf(" ", z) > a ? text.lastIndexOf(" ", z) : z;
  const s = cut(v, a, z);
  const lead = a > 0 ? "… " : "";
  return { text: lead + s.text + (z < text.length ? " …" : ""), marks: s.marks.map(([m, n]) => [m + lead.length, n + lead.length]) };
}

/** Appends `v.text` to `parent` with its marks wrapped in <mark>: text nodes only. */
function appendMarked(parent, v) {
  let last = 0;
  for (const [a, z] of v.marks) {
    if (a < last) continue;
    parent.append(v.text.slice(last, a));
    const mark = document.createElement("mark");
    mark.textContent = v.text.slice(a, z);
    parent.append(mark);
    last = z;
  }
  parent.append(v.text.slice(last));
}

const collapseWs = (s) => s.replace(/[ \t\n\f\r]+/g, " ").trim();

/**
 * The headings of a hit's section path ("Title > Part > Section") to show after its page
 * title: the title, which usually opens the path as the page's h1, is said once.
 */
function sectionPath(section, title) {
  const parts = collapseWs(section ?? "").split(" > ").filter(Boolean);
  if (parts[0] === collapseWs(title)) parts.shift();
  return parts;
}

/** The bundle files that make search semantic (they download after the lexical core). */
const SEMANTIC_FILES = new Set(["wasm", "wasmRelaxed", "vectors", "model", "tokenizer"]);
const mb = (bytes) => (bytes / 1e6).toFixed(1);

let counter = 0;

class NeedleSearch extends HTMLElement {
  #engine = null;
  #opening = null;
  #ready = false;
  /** Why the model is unusable (search stays lexical), or null. */
  #failed = null;
  /** Why search is unavailable (the index or the engine failed), or null. */
  #broken = null;
  /** Bytes of each semantic file so far: { [role]: { loaded, total } }. */
  #progress = {};
  #seq = 0;
  #active = -1;
  #options = [];
  #last = null;
  #timer = 0;

  connectedCallback() {
    if (this.shadowRoot) return;
    const id = `needle-${++counter}`;
    this.base = new URL(this.getAttribute("base") ?? HERE.href, location.href);
    const root = this.attachShadow({ mode: "open" });
    manifestOf(this.base)
      .then((m) => {
        const link = document.createElement("link");
        link.rel = "stylesheet";
        link.href = new URL(m.files.css, this.base).href;
        root.prepend(link);
      })
      .catch(() => {});

    const wrap = el("div", { class: "needle", part: "container" });
    const label = el("label", { class: "visually-hidden", for: `${id}-input` }, "Search the documentation");
    this.input = el("input", {
      id: `${id}-input`,
      type: "search",
      part: "input",
      role: "combobox",
      autocomplete: "off",
      spellcheck: "false",
      "aria-autocomplete": "list",
      "aria-expanded": "false",
      "aria-controls": `${id}-list`,
      placeholder: this.getAttribute("placeholder") ?? "Ask the docs…",
    });
    this.status = el("div", { class: "status", role: "status", "aria-live": "polite", part: "status" });
    this.bar = el("div", { class: "progress", role: "progressbar", "aria-label": "Loading the semantic model", "aria-valuemin": "0", "aria-valuemax": "100", hidden: "" });
    this.bar.append(el("div", { class: "progress-fill" }));
    this.panel = el("div", { class: "panel", part: "panel", hidden: "" });
    this.notice = el("p", { class: "notice", part: "notice" });
    this.list = el("ul", { id: `${id}-list`, role: "listbox", "aria-label": "Search results", part: "results" });
    this.panel.append(this.notice, this.list);
    wrap.append(label, this.input, this.bar, this.status, this.panel);
    root.append(wrap);

    this.input.addEventListener("focus", () => this.#open());
    this.input.addEventListener("pointerenter", () => this.#open(), { once: true });
    this.input.addEventListener("input", () => {
      clearTimeout(this.#timer);
      this.#timer = setTimeout(() => this.search(this.input.value), 120);
    });
    this.input.addEventListener("keydown", (e) => this.#key(e));
    this.addEventListener("focusout", (e) => {
      if (!this.contains(e.relatedTarget) && !root.contains(e.relatedTarget)) this.#expand(false);
    });
    if (this.hasAttribute("preload")) this.#open();
    if (this.hasAttribute("offline")) this.offline = registerOffline(this.base).catch(() => false);
    landing(this.base, this.getAttribute("selector"));
  }

  /**
   * The engine (opened once, on first use). An index that cannot be loaded makes the box say
   * so and answer nothing; a model that cannot be loaded leaves keyword search, with a notice.
   */
  #open() {
    const model = { off: false, "on-demand": "on-demand" }[this.getAttribute("semantic")] ?? true;
    this.#opening ??= open(this.base, { model, onProgress: (p) => this.#onProgress(p) }).then((engine) => {
      this.#engine = engine;
      engine.lexical.catch((e) => this.#fail(e));
      engine.ready.then(
        () => {
          this.#ready = true;
          this.bar.hidden = true;
          this.#say("");
          this.dispatchEvent(new CustomEvent("needle:ready"));
          if (this.input.value.trim()) this.search(this.input.value); // upgrade to hybrid
        },
        // `ready` also rejects when the index failed: that is #fail's to report.
        (e) => engine.lexical.then(() => this.#modelFailed(e), () => {}),
      );
      return engine;
    });
    this.#opening.catch((e) => this.#fail(e));
    return this.#opening;
  }

  #modelFailed(e) {
    this.#failed = e?.message ?? String(e);
    this.bar.hidden = true;
    this.#say(`Semantic search unavailable: ${this.#failed}; showing keyword results.`);
    this.dispatchEvent(new CustomEvent("needle:degraded", { detail: { error: this.#failed } }));
    if (this.#last) this.#render(this.#last); // the panel's notice too
  }

  #fail(e) {
    if (this.#broken) return;
    this.#broken = e?.message ?? String(e);
    this.bar.hidden = true;
    this.#say(`Search unavailable: ${this.#broken}`);
    this.dispatchEvent(new CustomEvent("needle:error", { detail: { error: this.#broken } }));
  }

  /**
   * The semantic part's download (the engine, the model and the tokenizer, which follow the
   * lexical core), as bytes done of the total: lexical results are already showing meanwhile.
   */
  #onProgress(p) {
    if (this.#broken || this.#failed) return; // a late download's progress must not hide the notice
    if (!SEMANTIC_FILES.has(p.file)) return;
    this.#progress[p.file] = { loaded: p.loaded, total: p.total || p.loaded };
    const parts = Object.values(this.#progress);
    const loaded = parts.reduce((a, f) => a + f.loaded, 0);
    const total = parts.reduce((a, f) => a + f.total, 0);
    const pct = total ? Math.min(100, Math.round((100 * loaded) / total)) : 0;
    this.bar.hidden = this.#ready;
    this.bar.setAttribute("aria-valuenow", String(pct));
    this.bar.firstChild.style.width = `${pct}%`;
    this.#say(`Keyword results now; loading semantic search… ${mb(loaded)} of ${mb(total)} MB`);
  }

  #say(text) {
    this.status.textContent = text;
  }

  /** Runs a query and shows its results. */
  async search(query) {
    const seq = ++this.#seq;
    const q = query.trim();
    if (!q) {
      this.#render(null);
      return null;
    }
    let r;
    try {
      const engine = await this.#open();
      if (this.getAttribute("semantic") === "on-demand") engine.loadModel().catch(() => {}); // reported through `ready`
      r = await engine.search(q, { k: 10, mode: "hybrid" });
    } catch (e) {
      // No index (or no engine): say why and show nothing, never stale or partial results.
      this.#fail(e);
      if (seq === this.#seq) this.#renderError();
      return null;
    }
    if (seq !== this.#seq) return r; // a newer query is under way
    this.#last = r;
    this.#render(r);
    this.dispatchEvent(new CustomEvent("needle:results", { detail: r }));
    return r;
  }

  #renderError() {
    this.#last = null;
    this.#render(null);
    this.panel.dataset.state = "error";
    this.notice.textContent = `Search unavailable: ${this.#broken}`;
    this.#expand(true);
  }

  #render(r) {
    this.list.replaceChildren();
    this.#options = [];
    this.#active = -1;
    this.input.removeAttribute("aria-activedescendant");
    if (!r) {
      this.#expand(false);
      return;
    }
    const shown = Number(this.getAttribute("k") ?? 4);
    let hits;
    this.panel.dataset.state = "";
    if (r.mode === "bm25") {
      this.panel.dataset.state = "lexical";
      this.notice.textContent = this.#failed
        ? "Keyword matches (semantic search unavailable)"
        : this.#ready
          ? "Keyword matches"
          : this.getAttribute("semantic") === "off"
            ? "Keyword matches (this site searches by keyword only)"
            : "Keyword matches (semantic search is still loading)";
      hits = r.hits.slice(0, shown);
    } else if (r.answer.length) {
      this.panel.dataset.state = "answer";
      this.notice.textContent = "";
      hits = r.answer.map((i) => r.hits[i]).slice(0, shown);
    } else {
      this.panel.dataset.state = "no-answer";
      this.notice.textContent = "The docs don't answer this.";
      const seen = new Set();
      hits = r.hits.filter((h) => !seen.has(h.page) && seen.add(h.page)).slice(0, 3);
      if (hits.length) {
        const li = el("li", { class: "suggest-label", role: "presentation" }, "Nearest pages:");
        this.list.append(li);
      }
    }
    hits.forEach((h, i) => this.list.append(this.#option(h, i, this.panel.dataset.state === "no-answer")));
    if (!hits.length && r.mode === "bm25") {
      this.notice.textContent = this.#ready || this.#failed || this.getAttribute("semantic") === "off" ? "No keyword matches." : "No keyword matches yet.";
    }
    this.#expand(true);
  }

  #option(h, i, suggestion) {
    const li = el("li", { role: "option", id: `${this.input.id}-opt-${i}`, "aria-selected": "false", class: suggestion ? "suggestion" : "hit" });
    // `link`: where the citation lands (a media file's player page); `url` names the cited range.
    const a = el("a", { href: h.link ?? h.url, tabindex: "-1" });
    const title = h.title || h.page;
    const sections = sectionPath(h.section, title);
    const crumbs = el("span", { class: "crumbs", part: "crumbs" });
    crumbs.append(el("span", { class: "title" }, title));
    for (const s of sections) crumbs.append(el("span", { class: "sep", "aria-hidden": "true" }, "›"), el("span", { class: "section" }, s));
    // The page of a PDF, the time range of a caption, the rows of a table: `page 20`, `0:00–0:08.4`.
    if (h.locator) crumbs.append(el("span", { class: "sep", "aria-hidden": "true" }, "·"), el("span", { class: "locator", part: "locator" }, h.locator));
    a.append(crumbs);
    if (!suggestion) {
      const q = el("q", { class: "snippet", part: "snippet" });
      appendMarked(q, snippet(withoutHeading(view(h.content, h.marks), [title, ...sections])));
      a.append(q);
    }
    li.append(a);
    li.addEventListener("pointerdown", (e) => e.preventDefault()); // keep focus in the box
    li.addEventListener("click", (e) => {
      if (e.target.closest("a")) return;
      a.click();
    });
    this.#options.push(li);
    return li;
  }

  #expand(on) {
    this.panel.hidden = !on;
    this.input.setAttribute("aria-expanded", String(on));
  }

  #key(e) {
    const n = this.#options.length;
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      if (!n) return;
      e.preventDefault();
      this.#expand(true);
      const d = e.key === "ArrowDown" ? 1 : -1;
      this.#select(this.#active < 0 ? (d > 0 ? 0 : n - 1) : (this.#active + d + n) % n);
    } else if (e.key === "Enter") {
      if (this.#active >= 0) {
        e.preventDefault();
        this.#options[this.#active].querySelector("a").click();
      } else {
        clearTimeout(this.#timer);
        this.search(this.input.value);
      }
    } else if (e.key === "Escape") {
      if (!this.panel.hidden) this.#expand(false);
      else this.input.value = "";
    } else if (e.key === "Home" || e.key === "End") {
      if (this.#active >= 0 && n) {
        e.preventDefault();
        this.#select(e.key === "Home" ? 0 : n - 1);
      }
    }
  }

  #select(i) {
    this.#options.forEach((o, j) => o.setAttribute("aria-selected", String(i === j)));
    this.#active = i;
    const o = this.#options[i];
    this.input.setAttribute("aria-activedescendant", o.id);
    o.scrollIntoView({ block: "nearest" });
  }

  /** The engine behind the box (opens it if need be). */
  get engine() {
    return this.#open();
  }
  get lastResult() {
    return this.#last;
  }
  /** Why search is unavailable (the index failed), or null. */
  get error() {
    return this.#broken;
  }
  /** Why semantic search is unavailable (the model failed; keyword search works), or null. */
  get degraded() {
    return this.#failed;
  }
}

function el(tag, attrs = {}, text = null) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== null) e.textContent = text;
  return e;
}

if (!customElements.get("needle-search")) customElements.define("needle-search", NeedleSearch);

// Pages without a search box still get the landing highlight.
if (!document.querySelector("needle-search")) landing(HERE, document.currentScript?.dataset?.selector ?? null);
