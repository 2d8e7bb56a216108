// The landing highlight rebuilds every fixture page's canonical text from Chromium's DOM exactly
// as the indexer did from the HTML file: one rule (src/doc/canonical.rs, run in the browser by the
// lexical core), two parsers and two walkers (html5ever + scraper; Chromium + highlight.js), and
// the sha256 of the browser's text equals the content hash the index recorded.
// Two sites: the Rustonomicon (mdBook), and the one-page-per-generator fixtures
// (tests/fixtures/sites: Sphinx, MkDocs, Docusaurus, Hugo, VitePress, Starlight, just-the-docs,
// hand-written pages), where the extractor's generator-specific rules live.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT, WORK, fixtureSite, launch, serve, widgetSite } from "./helpers.mjs";

/**
 * Pages of random markup, the same every run (a fixed seed): elements of every kind the rule
 * treats differently (blocks, leaves, inline, `<br>`, dropped tags and classes, permalink
 * anchors, tables and lists that the HTML parser restructures), text with every kind of
 * whitespace, U+00A0, entities and astral characters. Both parsers follow the HTML standard's
 * tree construction, so whatever they restructure, they restructure alike.
 */
function randomPages(count, seed = 0x5eed) {
  let s = seed >>> 0;
  const rnd = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const pick = (xs) => xs[Math.floor(rnd() * xs.length)];
  const TAGS = ["div", "p", "span", "em", "b", "code", "a", "pre", "h1", "h2", "h3", "h4", "ul", "ol", "li", "blockquote", "section",
    "table", "tr", "td", "th", "dl", "dt", "dd", "details", "summary", "label", "figure", "figcaption", "my-widget", "nav", "button",
    "aside", "header", "footer", "small", "sup", "kbd", "svg", "script", "style", "dialog", "textarea", "select"];
  const ATTRS = ["", "", "", "", ' class="headerlink"', ' class="sr-only"', ' class="boring"', ' class="note"', " hidden", ' aria-hidden="true"',
    ' aria-hidden="false"', ' class="anchor" href="#x"', ' class="anchor"', ' class="toc"', " open", ' class="linenos"', ' title="t"'];
  const TEXT = ["word", "two words", " ", "  ", "\n", "\t", "\r\n", "\f", "\u00a0", "&nbsp;", "&amp;", "&lt;b&gt;", "&#x1F600;", "é", "日本",
    "x\u200by", " lead", "trail ", "\n\nindent\n  "];
  const VOID = ["br", "hr", "img", "wbr"];
  const node = (depth) => {
    const r = rnd();
    if (depth > 6 || r < 0.35) return Array.from({ length: 1 + Math.floor(rnd() * 3) }, () => pick(TEXT)).join("");
    if (r < 0.45) return `<${pick(VOID)}${pick(ATTRS)}>`;
    const tag = pick(TAGS);
    const kids = Array.from({ length: Math.floor(rnd() * 5) }, () => node(depth + 1)).join("");
    return `<${tag}${pick(ATTRS)}>${kids}</${tag}>`;
  };
  const pages = [];
  for (let i = 0; i < count; i++) {
    const body = Array.from({ length: 2 + Math.floor(rnd() * 6) }, () => node(0)).join("");
    const [open, close] = pick([["", ""], ["<main>", "</main>"], ["<article>", "</article>"], ['<div role="main">', "</div>"],
      ["<nav>menu</nav><main><article>", "</article><aside>toc</aside></main>"]]);
    // A heading first: a page whose random body had no text at all would be skipped, not compared.
    pages.push(`<!doctype html><html><head><meta charset="utf-8"><title>p${i}</title></head><body>${open}<h1>Page ${i}</h1>${body}${close}</body></html>`);
  }
  return pages;
}

/** Paths of the HTML pages whose JS canonical text differs from the index's, and how. */
async function differingPages(browser, { site, bundle }) {
  const manifest = JSON.parse(readFileSync(join(bundle, "manifest.json"), "utf8"));
  const pages = JSON.parse(readFileSync(join(bundle, manifest.files.pages), "utf8"));
  const hl = `/needle/${manifest.files.highlight}`;
  const server = await serve(site);
  const page = await (await browser.newContext({ serviceWorkers: "block" })).newPage();
  const bad = [];
  let html = 0;
  try {
    for (const [path, info] of Object.entries(pages)) {
      // Markdown and text sources have no rendered page for the script to run on.
      if (!/\.html?$/.test(path)) continue;
      html += 1;
      await page.goto(server.url + path, { waitUntil: "load" });
      const got = await page.evaluate(async (hl) => {
        const m = await import(hl);
        const { loadLexicalCore, loadManifest } = await import("/needle/needle.js");
        const base = new URL("/needle/", location.href);
        const core = await loadLexicalCore(base, await loadManifest(base));
        const c = m.canonical(core, m.contentRoot(core, document));
        return { text: c.text, hash: await m.sha256Hex(c.text) };
      }, hl);
      if (got.hash === info.hash && got.text.length === info.len) continue;
      // Say where: the first chunk whose quote is not at its offsets in the JS text.
      const chunks = await page.evaluate(async (p) => {
        const { open } = await import("/needle/needle.js");
        window.lex ??= await open("/needle/", { model: false });
        return window.lex.chunksOf(p);
      }, path);
      const first = chunks.find((c) => got.text.slice(c.from, c.to) !== c.content);
      bad.push(
        `${path}: JS length ${got.text.length}, index ${info.len}` +
          (first ? `; first differing chunk ${first.from}..${first.to}:\n  rust: ${JSON.stringify(first.content.slice(0, 160))}\n  js:   ${JSON.stringify(got.text.slice(first.from, first.from + 160))}` : ""),
      );
    }
  } finally {
    await page.context().close();
    server.close();
  }
  return { bad, html };
}

describe("the landing highlight's canonical text", () => {
  let browser;
  before(async () => {
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
  });

  it("equals the Rust extractor's for every fixture page (same sha256 and UTF-16 length)", async () => {
    const { bad, html } = await differingPages(browser, fixtureSite());
    assert.ok(html > 50, `${html} pages compared`);
    assert.deepEqual(bad, [], `${bad.length} of ${html} pages differ`);
  });

  it("equals the Rust extractor's on 150 pages of random markup", async () => {
    const src = join(WORK, "random-markup-src");
    mkdirSync(src, { recursive: true });
    // Rewritten only when the generator changed, so the site is rebuilt only then.
    randomPages(150).forEach((html, i) => {
      const f = join(src, `p${String(i).padStart(3, "0")}.html`);
      if (!existsSync(f) || readFileSync(f, "utf8") !== html) writeFileSync(f, html);
    });
    const { bad, html } = await differingPages(browser, widgetSite(src, "random-markup", { addWidget: false }));
    assert.equal(html, 150, `${html} pages compared`);
    assert.deepEqual(bad, [], `${bad.length} of ${html} pages differ`);
  });

  it("equals the Rust extractor's on every generator fixture page", async () => {
    const { bad, html } = await differingPages(browser, widgetSite(join(ROOT, "tests", "fixtures", "sites"), "generator-sites"));
    assert.ok(html >= 15, `${html} pages compared`);
    assert.deepEqual(bad, [], `${bad.length} of ${html} pages differ`);
  });
});
