// highlight.js rebuilds every fixture page's canonical text from Chromium's DOM exactly as the
// Rust extractor did: the sha256 of the JS text equals the content hash the index recorded.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fixtureSite, launch, serve } from "./helpers.mjs";

describe("the landing highlight's canonical text", () => {
  let server, browser, page, pages, bundle;
  before(async () => {
    const f = fixtureSite();
    bundle = f.bundle;
    const manifest = JSON.parse(readFileSync(join(bundle, "manifest.json"), "utf8"));
    pages = JSON.parse(readFileSync(join(bundle, manifest.files.pages), "utf8"));
    server = await serve(f.site);
    browser = await launch();
    page = await (await browser.newContext({ serviceWorkers: "block" })).newPage();
  });
  after(async () => {
    await browser?.close();
    server?.close();
  });

  it("equals the Rust extractor's for every fixture page (same sha256 and UTF-16 length)", async () => {
    const manifest = JSON.parse(readFileSync(join(bundle, "manifest.json"), "utf8"));
    const hl = `/needle/${manifest.files.highlight}`;
    const bad = [];
    for (const [path, info] of Object.entries(pages)) {
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
    assert.deepEqual(bad, [], `${bad.length} of ${Object.keys(pages).length} pages differ`);
  });
});
