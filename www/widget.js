// widget.js: <needle-search>, the search box of a needle site, and the landing highlight.
//
//   <script type="module" src="/needle/widget.js"></script>
//   <needle-search></needle-search>
//
// From the npm package under a bundler (`import "needle-search/widget.js"`), this script lives
// among the app's assets, so `base` must name the site's bundle (`needle build` writes it):
//   <needle-search base="/needle/"></needle-search>
//
// Attributes: base (the bundle URL; default: this script's folder), placeholder, k (results
// listed, grouped by page; default 10), preload (start loading the engine at once instead of on
// first focus), selector (the content root, if the index was built with --selector), offline
// (register needle-sw.js so that a second visit works with the network off), semantic (when the
// engine and model that make search semantic download, after the lexical core that answers
// first: "auto", the default, when the box is focused; "on-demand" at the first query; "off"
// never, keyword search only), shortcut (the keys that focus the box from anywhere on the page,
// space-separated: "mod+k /" by default, mod being Ctrl or ⌘; "none" for none; a key the page
// itself handles first stays the page's).
// The UI lives in an open shadow root: the page's CSS cannot reach it (widget.css resets what
// would be inherited), only the custom properties documented in widget.css and ::part(input,
// panel, results, crumbs, snippet, …) theme it. Key events typed in it stop at the shadow root,
// so the page's own shortcuts (mdBook's `s`, `/`, `?`, arrows) never see them. Indexed text is
// always inserted as text (textContent), never parsed as HTML.

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

// ---------------------------------------------------------------------------------------------
// The page's colour scheme and language.

const DARK = "(prefers-color-scheme: dark)";
const THEME_ATTRIBUTES = ["class", "data-theme", "data-md-color-scheme"];

/**
 * The scheme the page's own theme switch has chosen, "dark" or "light", or null where it has
 * none (or follows the OS): Material for MkDocs' `data-md-color-scheme` (default / slate, or a
 * site's own scheme named for one, such as uv's astral-dark), `data-theme` (Docusaurus, Furo,
 * pydata: light / dark; Furo's "auto" is the OS's), mdBook's theme class on <html> (light, rust /
 * coal, navy, ayu) and a `dark` class (VitePress), on <html> or <body>.
 */
function pageScheme() {
  for (const e of [document.documentElement, document.body]) {
    if (!e) continue;
    const named = e.dataset.mdColorScheme ?? e.dataset.theme ?? "";
    if (/dark|slate/.test(named)) return "dark";
    if (/light|default/.test(named)) return "light";
    for (const c of e.classList) {
      if (c === "dark" || c === "coal" || c === "navy" || c === "ayu") return "dark";
      if (c === "light" || c === "rust") return "light";
    }
  }
  return null;
}

/** The shadow roots' wrappers to repaint when the page's scheme or the OS's changes. */
const painted = new Set();
let watching = false;

function paint(wrap) {
  wrap.classList.toggle("dark", (pageScheme() ?? (matchMedia(DARK).matches ? "dark" : "light")) === "dark");
}

/** Repaints `wrap` now and whenever the page's theme switch or the OS changes the scheme. */
function followScheme(wrap) {
  painted.add(wrap);
  paint(wrap);
  if (watching) return;
  watching = true;
  const all = () => painted.forEach(paint);
  const observer = new MutationObserver(all);
  for (const e of [document.documentElement, document.body]) if (e) observer.observe(e, { attributes: true, attributeFilter: THEME_ATTRIBUTES });
  matchMedia(DARK).addEventListener("change", all);
}

/**
 * The language of the page the box sits on, as the index was built: `<html lang>`, a
 * `content-language` meta, the file name `page.LANG.html`, or a folder named for a language
 * (`/de/`, `/zh-cn/`) among the first two; null when none says (the site's main language).
 */
function pageLang() {
  const declared = document.documentElement.lang || document.querySelector('meta[http-equiv="content-language" i]')?.content;
  if (declared) return declared.split(",")[0].trim();
  const tag = /^[a-z]{2}([-_][a-z0-9]{2,4})?$/i;
  const parts = location.pathname.split("/").filter(Boolean);
  const name = parts.at(-1)?.split(".") ?? [];
  if (name.length >= 3 && tag.test(name.at(-2))) return name.at(-2);
  return parts.slice(0, -1).slice(0, 2).find((p) => tag.test(p)) ?? null;
}

// ---------------------------------------------------------------------------------------------
// Results as shown.

/** The engine's decision: "answer", "results" or "no-answer" (derived where the engine does not say). */
function verdictOf(r) {
  return r.verdict ?? (r.answer.length ? "answer" : r.mode === "bm25" ? "results" : "no-answer");
}

/**
 * What ranks, grouped by page, each page where its best hit comes: the answer's hits first (in
 * the gate's order), then the rest by rank.
 */
function pagesOf(r) {
  const answered = new Set(r.answer);
  const hits = [...r.answer.map((i) => r.hits[i]), ...r.hits.filter((_, i) => !answered.has(i))];
  const pages = new Map();
  for (const h of hits) {
    if (!pages.has(h.page)) pages.set(h.page, []);
    pages.get(h.page).push(h);
  }
  return [...pages.values()];
}

/** Results a page shows before its "more from this page" control. */
const PER_PAGE = 2;

const isSpace = (c) => c === " " || c === "\t" || c === "\n" || c === "\f" || c === "\r";

/**
 * A result's text as the widget shows it: `text` with the query's terms at `marks` (UTF-16
 * `[from, to]` pairs in `text`). The engine finds the terms (`bm25::marks`, the tokenizer that
 * ranked the hit), so marking and ranking never disagree on what a word is; this file only
 * moves the marks along with the display's cuts. A run of whitespace becomes one space, or with
 * `lines` (a web page's canonical text, where a line break is a code line, a `<br>` or a block's
 * end) a line break followed by the next line's indentation.
 */
function view(content, marks, lines) {
  // `at[i]`: the content unit of text[i].
  let text = "";
  const at = [];
  for (let i = 0; i < content.length; ) {
    if (!isSpace(content[i])) {
      text += content[i];
      at.push(i++);
      continue;
    }
    let j = i;
    while (j < content.length && isSpace(content[j])) j++;
    if (text.length && j < content.length) {
      const nl = lines ? content.lastIndexOf("\n", j - 1) : -1;
      if (nl < i) (text += " "), at.push(i);
      else for (let u = nl; u < j; u++) (text += content[u]), at.push(u);
    }
    i = j;
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
    if (rest.startsWith(h) && (rest.length === h.length || isSpace(rest[h.length]))) a += h.length + 1;
  }
  return a < v.text.length ? cut(v, a, v.text.length) : v;
}

/** The index just past the first whitespace at or after `from` (or `from` itself if none). */
function afterSpace(text, from) {
  const m = /[ \n]/.exec(text.slice(from));
  return m ? from + m.index + 1 : from;
}

/** About `max` characters and at most `maxLines` lines of `v`, around its first marked term. */
function snippet(v, max = 280, maxLines = 6) {
  const { text } = v;
  if (text.length <= max && text.split("\n").length <= maxLines) return v;
  const first = v.marks.length ? v.marks[0][0] : 0;
  const a = first > 60 ? afterSpace(text, first - 60) : 0;
  let z = Math.min(text.length, a + max);
  if (z < text.length) {
    const end = Math.max(text.lastIndexOf(" ", z), text.lastIndexOf("\n", z));
    if (end > a) z = end;
  }
  let lines = 0;
  for (let i = text.indexOf("\n", a); i >= 0 && i < z; i = text.indexOf("\n", i + 1)) if (++lines === maxLines) z = i;
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

/** Titles joined for a sentence: "A", "A and B", "A, B and C". */
const listed = (titles) => (titles.length < 2 ? titles.join("") : `${titles.slice(0, -1).join(", ")} and ${titles.at(-1)}`);

// ---------------------------------------------------------------------------------------------
// Keys.

/** Key events typed in the widget: they stop at its shadow root, so the page's own key handlers never see them. */
const TYPED = ["keydown", "keypress", "keyup", "beforeinput", "input"];

/**
 * The `shortcut` attribute as key specs: "mod+k /" → [{ key: "k", mod: true, … }, { key: "/", … }].
 * `mod` is Ctrl or ⌘; `ctrl`, `meta`, `alt` and `shift` name one modifier each.
 */
function shortcuts(spec) {
  if (spec.trim() === "none") return [];
  return spec
    .split(/\s+/)
    .filter(Boolean)
    .map((s) => {
      const parts = s.toLowerCase().split("+");
      const key = parts.pop();
      const has = (m) => parts.includes(m);
      return { key, mod: has("mod"), ctrl: has("ctrl"), meta: has("meta"), alt: has("alt"), shift: has("shift") };
    });
}

/** Whether `e` is the key `s` names. Shift is not compared for a symbol (`/` needs it on some layouts). */
function pressed(s, e) {
  if (e.key.toLowerCase() !== s.key || e.altKey !== s.alt) return false;
  if (/^[a-z0-9]$/.test(s.key) && e.shiftKey !== s.shift) return false;
  return s.mod ? e.ctrlKey !== e.metaKey : e.ctrlKey === s.ctrl && e.metaKey === s.meta;
}

/** aria-keyshortcuts for the specs: "mod+k /" → "Control+K Meta+K /". */
function ariaShortcuts(specs) {
  return specs
    .flatMap((s) => {
      const key = s.key.length === 1 ? s.key.toUpperCase() : s.key;
      const rest = [s.alt && "Alt", s.shift && "Shift"].filter(Boolean);
      const mods = s.mod ? [["Control"], ["Meta"]] : [[s.ctrl && "Control", s.meta && "Meta"].filter(Boolean)];
      return mods.map((m) => [...m, ...rest, key].join("+"));
    })
    .join(" ");
}

/** Whether a key event was typed into one of the page's own fields. */
function typedInField(e) {
  const t = e.composedPath()[0];
  return t instanceof HTMLElement && (t.isContentEditable || /^(input|textarea|select)$/i.test(t.localName));
}

/**
 * The widget's own rules that must hold before widget.css arrives (its first paint is otherwise
 * an unstyled label and input): the UI stays transparent, in place and focusable, until the
 * sheet has loaded.
 */
let criticalSheet = null;
function critical() {
  if (!criticalSheet) {
    criticalSheet = new CSSStyleSheet();
    criticalSheet.replaceSync(
      ":host{display:block;position:relative}.needle.loading{opacity:0}[hidden]{display:none!important}" +
        ".visually-hidden{position:absolute;width:1px;height:1px;margin:-1px;padding:0;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap;border:0}",
    );
  }
  return criticalSheet;
}

let counter = 0;

class NeedleSearch extends HTMLElement {
  #opening = null;
  #ready = false;
  /** Why the model is unusable (search stays lexical), or null. */
  #failed = null;
  /** The reader's language is one the model does not read: search is by words, by design. */
  #wordsOnly = false;
  /** Why search is unavailable (the index or the engine failed), or null. */
  #broken = null;
  /** Bytes of each semantic file of the download: { [role]: { loaded, total } }, from the manifest's sizes. */
  #progress = {};
  #seq = 0;
  #active = -1;
  #last = null;
  /** Results that came while the reader was on the list: shown when asked for. */
  #pending = null;
  /** Query → result, the newest last. */
  #cache = new Map();
  #timer = 0;
  #options = 0;

  connectedCallback() {
    if (this.shadowRoot) return this.#listen();
    const id = `needle-${++counter}`;
    this.base = new URL(this.getAttribute("base") ?? HERE.href, location.href);
    const root = this.attachShadow({ mode: "open" });
    root.adoptedStyleSheets = [critical()];
    const wrap = el("div", { class: "needle loading", part: "container" });
    this.wrap = wrap;
    manifestOf(this.base)
      .then((m) => {
        const link = document.createElement("link");
        link.rel = "stylesheet";
        link.href = new URL(m.files.css, this.base).href;
        link.addEventListener("load", () => wrap.classList.remove("loading"));
        link.addEventListener("error", () => wrap.classList.remove("loading"));
        root.prepend(link);
      })
      .catch(() => wrap.classList.remove("loading"));

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
    const keys = ariaShortcuts(this.#shortcuts());
    if (keys) this.input.setAttribute("aria-keyshortcuts", keys);
    this.status = el("div", { class: "status", role: "status", "aria-live": "polite", part: "status" });
    this.bar = el("div", { class: "progress", role: "progressbar", "aria-label": "Loading the semantic model", "aria-valuemin": "0", "aria-valuemax": "100", hidden: "" });
    this.bar.append(el("div", { class: "progress-fill" }));
    this.panel = el("div", { class: "panel", part: "panel", hidden: "" });
    this.corrected = el("p", { class: "corrected", part: "corrected", hidden: "" });
    this.why = el("p", { class: "why", part: "why", hidden: "" });
    this.notice = el("p", { class: "notice", part: "notice" });
    this.upgrade = el("button", { type: "button", class: "upgrade", part: "upgrade", hidden: "" }, "Semantic results are ready: show them");
    this.list = el("ul", { id: `${id}-list`, role: "listbox", "aria-label": "Search results", part: "results" });
    this.panel.append(this.corrected, this.why, this.notice, this.list, this.upgrade);
    wrap.append(label, this.input, this.bar, this.status, this.panel);
    root.append(wrap);
    followScheme(wrap);

    for (const type of TYPED) root.addEventListener(type, (e) => e.stopPropagation());
    this.input.addEventListener("focus", () => this.#reopen());
    this.input.addEventListener("click", () => this.#reopen());
    this.input.addEventListener("input", () => this.#typed());
    this.input.addEventListener("keydown", (e) => this.#key(e));
    // The button goes once pressed: the focus stays in (or comes back to) the box.
    this.upgrade.addEventListener("pointerdown", (e) => e.preventDefault());
    this.upgrade.addEventListener("click", () => {
      this.input.focus();
      this.#present(this.#pending);
    });
    this.addEventListener("focusout", (e) => {
      if (!this.contains(e.relatedTarget) && !root.contains(e.relatedTarget)) this.#expand(false);
    });
    this.#listen();
    if (this.hasAttribute("preload")) this.#open();
    if (this.hasAttribute("offline")) this.offline = registerOffline(this.base).catch(() => false);
    landing(this.base, this.getAttribute("selector"));
  }

  disconnectedCallback() {
    removeEventListener("keydown", this.#onShortcut);
    painted.delete(this.wrap);
  }

  #listen() {
    // On the window, in the bubbling phase: the page's own handlers run first, and a key one of
    // them took (preventDefault) stays the page's.
    addEventListener("keydown", this.#onShortcut);
    painted.add(this.wrap);
  }

  #shortcuts() {
    return shortcuts(this.getAttribute("shortcut") ?? "mod+k /");
  }

  #onShortcut = (e) => {
    if (e.defaultPrevented || e.isComposing) return;
    const s = this.#shortcuts().find((s) => pressed(s, e));
    if (!s || (!s.mod && !s.ctrl && !s.meta && !s.alt && typedInField(e))) return;
    e.preventDefault();
    this.input.focus();
    this.input.select();
  };

  /**
   * The engine (opened once, on first use). An index that cannot be loaded makes the box say
   * so and answer nothing; a model that cannot be loaded leaves keyword search, with a notice.
   */
  #open() {
    const model = { off: false, "on-demand": "on-demand" }[this.getAttribute("semantic")] ?? true;
    const lang = this.getAttribute("lang") ?? pageLang();
    this.#opening ??= open(this.base, { model, lang: lang === "all" ? null : lang, onProgress: (p) => this.#onProgress(p) }).then((engine) => {
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
    this.bar.hidden = true;
    if (e?.code === "language") {
      // Not a failure: the model reads English, this reader's language is searched by words.
      this.#wordsOnly = true;
      if (this.#last) this.#render(this.#last);
      return;
    }
    this.#failed = e?.message ?? String(e);
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
   * The semantic part's download (the engine, the vectors, the model and the tokenizer, which
   * follow the lexical core), as bytes done of the whole download: the manifest's sizes from
   * the start, so the total never grows. Lexical results are already showing meanwhile.
   */
  #onProgress(p) {
    if (this.#broken || this.#failed) return; // a late download's progress must not hide the notice
    if (p.phase === "download") {
      this.#progress = Object.fromEntries(Object.entries(p.files).map(([file, total]) => [file, { loaded: 0, total }]));
      return;
    }
    const file = this.#progress[p.file];
    if (!file) return;
    file.loaded = p.loaded;
    file.total ||= p.total || p.loaded;
    const parts = Object.values(this.#progress);
    const loaded = parts.reduce((a, f) => a + f.loaded, 0);
    const total = parts.reduce((a, f) => a + f.total, 0);
    const pct = total ? Math.min(100, Math.round((100 * loaded) / total)) : 0;
    this.bar.hidden = this.#ready;
    this.bar.setAttribute("aria-valuenow", String(pct));
    this.bar.firstChild.style.width = `${pct}%`;
    this.#say(`Loading semantic search: ${mb(loaded)} of ${mb(total)} MB`);
  }

  #say(text) {
    this.status.textContent = text;
  }

  /** A keystroke in the box: a query answered before is shown at once, a new one after a pause. */
  #typed() {
    clearTimeout(this.#timer);
    const known = this.#cached(this.input.value.trim());
    if (known) this.search(this.input.value);
    else this.#timer = setTimeout(() => this.search(this.input.value), 120);
  }

  /** The result kept for `q`, while it is as good as a new search would give. */
  #cached(q) {
    const r = this.#cache.get(q);
    return r && (r.mode !== "bm25" || !this.#ready) ? r : null;
  }

  #remember(r) {
    this.#cache.delete(r.query);
    this.#cache.set(r.query, r);
    if (this.#cache.size > 50) this.#cache.delete(this.#cache.keys().next().value);
  }

  /** Runs a query and shows its results; the list shown stays until they are in. */
  async search(query) {
    const seq = ++this.#seq;
    const q = query.trim();
    if (!q) {
      this.#present(null);
      return null;
    }
    let r = this.#cached(q);
    if (!r) {
      try {
        const engine = await this.#open();
        if (this.getAttribute("semantic") === "on-demand") engine.loadModel().catch(() => {}); // reported through `ready`
        r = await engine.search(q, { k: Number(this.getAttribute("k") ?? 10), mode: "hybrid" });
      } catch (e) {
        // No index (or no engine): say why and show nothing, never stale or partial results.
        this.#fail(e);
        if (seq === this.#seq) this.#renderError();
        return null;
      }
      this.#remember(r);
    }
    if (seq === this.#seq) this.#show(r); // else a newer query is under way
    return r;
  }

  /**
   * Shows `r`, unless it is the semantic upgrade of the list the reader is on (an option
   * selected, or the list scrolled): that list stays as it is, and a button offers the new one.
   */
  #show(r) {
    if (r === this.#last) return this.#expand(true);
    const upgrade = r && this.#last && r.query === this.#last.query && r.mode !== this.#last.mode;
    if (upgrade && !this.panel.hidden && (this.#active >= 0 || this.panel.scrollTop > 0)) {
      this.#pending = r;
      this.upgrade.hidden = false;
      return;
    }
    this.#present(r);
  }

  #present(r) {
    this.#pending = null;
    this.upgrade.hidden = true;
    this.#last = r;
    this.#render(r);
    if (r) this.dispatchEvent(new CustomEvent("needle:results", { detail: r }));
  }

  /** Focus or a click on the box brings back the results of what it holds. */
  #reopen() {
    this.#open();
    if (this.#last && this.#last.query === this.input.value.trim()) this.#expand(true);
  }

  #renderError() {
    this.#present(null);
    this.panel.dataset.state = "error";
    this.notice.textContent = `Search unavailable: ${this.#broken}`;
    this.#expand(true);
  }

  #render(r) {
    this.list.replaceChildren();
    this.panel.scrollTop = 0;
    this.#select(-1);
    this.corrected.hidden = this.why.hidden = true;
    if (!r) {
      this.#expand(false);
      return;
    }
    const verdict = verdictOf(r);
    const pages = pagesOf(r);
    this.panel.dataset.state = r.mode === "bm25" && verdict === "results" ? "lexical" : verdict;
    this.notice.textContent = this.#headline(r, verdict, pages);
    if (r.corrected && r.corrected !== r.query) {
      this.corrected.replaceChildren("Showing results for ", el("em", {}, r.corrected));
      this.corrected.hidden = false;
    }
    if (verdict === "no-answer") {
      const unknown = r.unknown ?? r.foreign ?? [];
      this.why.textContent = unknown.length ? `The docs never mention: ${unknown.join(", ")}.` : "No passage is close enough to the question to answer it.";
      this.why.hidden = false;
    }
    const cited = new Set(r.answer.map((i) => r.hits[i]));
    for (const hits of pages) {
      hits.slice(0, PER_PAGE).forEach((h, i) => this.list.append(this.#option(h, i > 0, cited.has(h))));
      if (hits.length > PER_PAGE) this.list.append(this.#more(hits.slice(PER_PAGE), cited));
    }
    // Results that come while the reader is elsewhere on the page wait for the box's focus.
    this.#expand(!this.panel.hidden || this.shadowRoot.activeElement === this.input);
  }

  /** The line above the list: what the engine decided, or what kind of results these are. */
  #headline(r, verdict, pages) {
    if (verdict === "no-answer") return "No passage answers this question — closest pages:";
    if (verdict === "answer" && this.#wordsOnly) return this.#answered(r, pages);
    if (r.mode === "bm25") {
      if (!r.hits.length) return this.#ready || this.#failed || this.#wordsOnly || this.getAttribute("semantic") === "off" ? "No keyword matches." : "No keyword matches yet.";
      if (this.#wordsOnly) return "Keyword matches";
      if (this.#failed) return "Keyword matches (semantic search unavailable)";
      if (this.#ready) return "Keyword matches";
      return this.getAttribute("semantic") === "off" ? "Keyword matches (this site searches by keyword only)" : "Keyword matches (semantic search is still loading)";
    }
    if (verdict === "answer") return this.#answered(r, pages);
    return r.hits.length ? "" : "No results.";
  }

  /** "Answered in …": the pages of the answer's chunks. */
  #answered(r, pages) {
    const answered = pages.filter((hits) => r.answer.some((i) => r.hits[i] === hits[0]));
    return `Answered in ${listed(answered.map((hits) => hits[0].title || hits[0].page))}`;
  }

  /**
   * One result: its page's title and section path, then the snippet. `sub`: a further result
   * of the page above it, under it without the title. `cited`: one of the answer's chunks.
   */
  #option(h, sub, cited) {
    const li = el("li", { role: "option", id: `${this.input.id}-opt-${++this.#options}`, "aria-selected": "false", class: `hit${sub ? " sub" : ""}${cited ? " cited" : ""}` });
    // `link`: where the citation lands (a media file's player page); `url` names the cited range.
    const a = el("a", { href: h.link ?? h.url, tabindex: "-1" });
    const title = h.title || h.page;
    const sections = sectionPath(h.section, title);
    const crumbs = el("span", { class: "crumbs", part: "crumbs" });
    if (!sub || !sections.length) crumbs.append(el("span", { class: "title" }, title));
    sections.forEach((s, i) => {
      if (i || !sub) crumbs.append(el("span", { class: "sep", "aria-hidden": "true" }, "›"));
      crumbs.append(el("span", { class: "section" }, s));
    });
    // The page of a PDF, the time range of a caption, the rows of a table: `page 20`, `0:00–0:08.4`.
    if (h.locator) crumbs.append(el("span", { class: "sep", "aria-hidden": "true" }, "·"), el("span", { class: "locator", part: "locator" }, h.locator));
    const q = el("q", { class: "snippet", part: "snippet" });
    appendMarked(q, snippet(withoutHeading(view(h.content, h.marks, h.kind === "text"), [title, ...sections])));
    a.append(crumbs, q);
    a.addEventListener("click", (e) => {
      // A result on this very page only scrolls it: the panel must not cover the highlight.
      if (!e.ctrlKey && !e.metaKey && !e.shiftKey && a.href.split("#")[0] === location.href.split("#")[0]) this.input.blur();
    });
    li.append(a);
    return this.#pickable(li, () => a.click());
  }

  /** "N more from this page": in its place, the page's further results. */
  #more(hits, cited) {
    const li = el("li", { role: "option", id: `${this.input.id}-opt-${++this.#options}`, "aria-selected": "false", class: "more", part: "more" }, `${hits.length} more from this page`);
    return this.#pickable(li, () => {
      const shown = hits.map((h) => this.#option(h, true, cited.has(h)));
      const at = this.#active === this.#all().indexOf(li) ? this.#active : -1;
      li.replaceWith(...shown);
      if (at >= 0) this.#select(at);
    });
  }

  /** An option the pointer and Enter activate; pressing it keeps the focus in the box. */
  #pickable(li, activate) {
    li.activate = activate;
    li.addEventListener("pointerdown", (e) => e.preventDefault());
    li.addEventListener("click", (e) => {
      if (!e.target.closest("a")) activate();
    });
    return li;
  }

  #all() {
    return [...this.list.querySelectorAll("[role=option]")];
  }

  #expand(on) {
    this.panel.hidden = !on;
    this.input.setAttribute("aria-expanded", String(on));
  }

  #key(e) {
    if (e.isComposing) return;
    const options = this.#all();
    const n = options.length;
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      if (!n) return;
      e.preventDefault();
      this.#expand(true);
      const d = e.key === "ArrowDown" ? 1 : -1;
      this.#select(this.#active < 0 ? (d > 0 ? 0 : n - 1) : (this.#active + d + n) % n);
    } else if (e.key === "Enter") {
      e.preventDefault();
      if (this.#active >= 0) options[this.#active].activate();
      else this.#openFirst();
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

  /** Enter with no option selected: the first result of what the box holds (searched now if need be). */
  async #openFirst() {
    clearTimeout(this.#timer);
    const r = await this.search(this.input.value);
    if (r && r === this.#last) this.list.querySelector("li.hit a")?.click();
  }

  #select(i) {
    const options = this.#all();
    options.forEach((o, j) => o.setAttribute("aria-selected", String(i === j)));
    this.#active = i;
    if (i < 0) return this.input.removeAttribute("aria-activedescendant");
    this.input.setAttribute("aria-activedescendant", options[i].id);
    options[i].scrollIntoView({ block: "nearest" });
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

const mb = (bytes) => (bytes / 1e6).toFixed(1);

function el(tag, attrs = {}, text = null) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== null) e.textContent = text;
  return e;
}

if (!customElements.get("needle-search")) customElements.define("needle-search", NeedleSearch);

// Pages without a search box still get the landing highlight.
if (!document.querySelector("needle-search")) landing(HERE, document.currentScript?.dataset?.selector ?? null);
