// The demo site (docs/) on a phone: 390×844, every page readable without sideways scrolling,
// the widget's results too.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { ROOT, artifact, docsSite, launch, serve } from "./helpers.mjs";

const WIDTH = 390;
const box = "needle-search input";

/** How far the page and the widget's parts reach past the viewport's right edge (0: none). */
function overflow(page) {
  return page.evaluate(() => {
    const host = document.querySelector("needle-search");
    const root = host?.shadowRoot;
    const parts = root ? [host, ...root.querySelectorAll(".panel:not([hidden]), [role=option]")] : [];
    return {
      scrollWidth: document.documentElement.scrollWidth,
      clientWidth: document.documentElement.clientWidth,
      widest: Math.max(0, ...parts.map((e) => e.getBoundingClientRect().right)),
      clipped: parts.filter((e) => e.scrollWidth > e.clientWidth + 1).map((e) => e.className || e.localName),
    };
  });
}

describe("the demo site at 390 px", () => {
  let server, browser, ctx;
  before(async () => {
    const { site } = docsSite();
    server = await serve(site, { csp: true });
    browser = await launch();
    ctx = await browser.newContext({ viewport: { width: WIDTH, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true, serviceWorkers: "block" });
  });
  after(async () => {
    await browser?.close();
    server?.close();
  });

  const pages = readdirSync(join(ROOT, "docs")).filter((f) => f.endsWith(".html")).sort();

  it("lays out every page without horizontal overflow", async () => {
    assert.ok(pages.length >= 5);
    const page = await ctx.newPage();
    const failures = [];
    for (const name of pages) {
      await page.goto(server.url + name);
      const o = await overflow(page);
      if (o.clientWidth !== WIDTH) failures.push(`${name}: the viewport is ${o.clientWidth} px wide, not ${WIDTH} (meta viewport?)`);
      if (o.scrollWidth > WIDTH) failures.push(`${name}: scrollWidth ${o.scrollWidth}`);
      if (o.widest > WIDTH) failures.push(`${name}: the search box reaches ${o.widest}`);
      await page.screenshot({ path: artifact(`mobile-${name.replace(".html", "")}.png`), fullPage: true });
    }
    assert.deepEqual(failures, []);
    await page.close();
  });

  it("fits the widget's results in the viewport", async () => {
    const page = await ctx.newPage();
    await page.goto(server.url + "citations.html");
    await page.focus(box);
    await page.evaluate(async () => (await document.querySelector("needle-search").engine).ready);
    const q = "How does a citation link to the exact text it quotes?";
    await page.fill(box, q);
    await page.waitForFunction((q) => document.querySelector("needle-search").lastResult?.query === q, q);
    await page.waitForFunction(() => document.querySelector("needle-search").shadowRoot.querySelector("link[rel=stylesheet]")?.sheet);
    assert.ok((await page.locator("needle-search [role=option]").count()) > 0, "results are shown");
    assert.equal(await page.locator("needle-search .panel").isVisible(), true);
    const o = await overflow(page);
    assert.ok(o.scrollWidth <= WIDTH, `scrollWidth ${o.scrollWidth}`);
    assert.ok(o.widest <= WIDTH, `the results reach ${o.widest} px`);
    assert.deepEqual(o.clipped, [], "no result is cut off sideways");
    await page.screenshot({ path: artifact("mobile-results.png") });
    await page.close();
  });
});
