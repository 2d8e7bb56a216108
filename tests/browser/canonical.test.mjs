// highlight.js rebuilds every fixture page's canonical text from Chromium's DOM exactly as the
// Rust extractor did: the sha256 of the JS text equals the content hash the index recorded.
// Two sites: the Rustonomicon (mdBook), and the one-page-per-generator fixtures
// (tests/fixtures/sites: Sphinx, MkDocs, Docusaurus, Hugo, VitePress, Starlight, just-the-docs,
// hand-written pages), where the extractor's generator-specific rules live.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT, fixtureSite, launch, serve, widgetSite } from "./helpers.mjs";

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
        const c = m.canonical(m.contentRoot(document));
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

  it("equals the Rust extractor's on every generator fixture page", async () => {
    const { bad, html } = await differingPages(browser, widgetSite(join(ROOT, "tests", "fixtures", "sites"), "generator-sites"));
    assert.ok(html >= 15, `${html} pages compared`);
    assert.deepEqual(bad, [], `${bad.length} of ${html} pages differ`);
  });
});
