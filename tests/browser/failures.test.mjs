// Issue 6.3 in the browser: a model that cannot be used leaves keyword search with a visible
// notice; an index that cannot be read makes the widget say why and show nothing. The faults
// are injected with playwright's routing on the fixture site served by `needle serve --csp`.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fixtureSite, launch, qrels, serve } from "./helpers.mjs";

const box = "needle-search input";
const MODEL = /\/needle\/model\.[0-9a-f]{16}\.pack$/;
const TOKENIZER = /\/needle\/tokenizer\.[0-9a-f]{16}\.json$/;
const INDEX = /\/needle\/index\.[0-9a-f]{16}\.needle$/;
const VECTORS = /\/needle\/vectors\.[0-9a-f]{16}\.bin$/;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Bytes that are no ONNX model: a fixed pseudo-random megabyte. */
function garbage(n) {
  const b = Buffer.alloc(n);
  let x = 0x2545f491;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b[i] = x & 0xff;
  }
  return b;
}

async function ask(page, q) {
  await page.fill(box, q);
  await page.waitForFunction((q) => document.querySelector("needle-search").lastResult?.query === q, q);
  return page.evaluate(() => document.querySelector("needle-search").lastResult);
}

/** How a promise of the widget's engine settles: "resolved", "rejected: …", or "hung" after 60 s. */
function settled(page, which) {
  return page.evaluate(async (which) => {
    const engine = await document.querySelector("needle-search").engine;
    return Promise.race([
      engine[which].then(() => "resolved", (e) => `rejected: ${e.message}`),
      new Promise((r) => setTimeout(() => r("hung"), 60000)),
    ]);
  }, which);
}

async function widgetState(page) {
  const status = page.locator("needle-search .status");
  const notice = page.locator("needle-search .notice");
  return {
    status: await status.textContent(),
    statusVisible: await status.isVisible(),
    state: await page.locator("needle-search .panel").getAttribute("data-state"),
    notice: await notice.textContent(),
    noticeVisible: await notice.isVisible(),
    options: await page.locator("needle-search [role=option]").count(),
  };
}

describe("in the browser, an unusable model or a corrupt index", () => {
  let server, browser, bundle, manifest;
  before(async () => {
    let site;
    ({ site, bundle } = fixtureSite());
    manifest = JSON.parse(readFileSync(join(bundle, "manifest.json"), "utf8"));
    server = await serve(site, { csp: true });
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    server?.close();
  });

  const modelFaults = [
    { name: "is missing (HTTP 404)", fulfil: (route) => route.fulfill({ status: 404, contentType: "text/plain", body: "not found" }), reason: /model\.[0-9a-f]{16}\.pack: HTTP 404/ },
    {
      name: "is garbage bytes",
      fulfil: (route) => route.fulfill({ status: 200, contentType: "application/octet-stream", body: garbage(1 << 20) }),
      reason: /model\.[0-9a-f]{16}\.pack.*refused: .*built with model all-MiniLM-L6-v2/,
    },
    {
      // The index's vectors are a file of their own (fetched with the model): one that lost its
      // last bytes in transit is refused by name, and the lexical part keeps answering.
      file: "vectors",
      route: VECTORS,
      name: "is truncated",
      fulfil: async (route) => {
        const bytes = readFileSync(join(bundle, manifest.files.vectors));
        await route.fulfill({ status: 200, contentType: "application/octet-stream", body: bytes.subarray(0, bytes.length - 1000) });
      },
      reason: /vectors\.[0-9a-f]{16}\.bin: truncated index/,
    },
  ];
  for (const fault of modelFaults) {
    const ROUTE = fault.route ?? MODEL;
    it(`${fault.file ?? "model"} file ${fault.name}: a visible notice, engine.ready rejects, keyword search keeps answering; the bad bytes are not cached`, async () => {
      const ctx = await browser.newContext({ serviceWorkers: "block" });
      const page = await ctx.newPage();
      await page.route(ROUTE, fault.fulfil);
      // The tokenizer arrives after the model failed: its progress must not hide the notice.
      await page.route(TOKENIZER, async (route) => {
        await sleep(1500);
        await route.continue();
      });
      await page.goto(server.url + "index.html");
      await page.focus(box);
      const ready = await settled(page, "ready");
      assert.match(ready, /^rejected: /, "engine.ready rejects rather than hangs");
      assert.match(ready, fault.reason);
      assert.equal(await settled(page, "lexical"), "resolved");
      await sleep(2500); // the tokenizer's late download and its progress events

      const q = qrels()[2].q_doc;
      const r = await ask(page, q);
      assert.equal(r.mode, "bm25", "hybrid asked, keyword answered");
      assert.ok(r.hits.length > 0);
      assert.deepEqual(r.answer, [], "nothing passes the gate without the model");
      const w = await widgetState(page);
      assert.match(w.status, /^Semantic search unavailable: .+; showing keyword results\.$/);
      assert.match(w.status, fault.reason, "the notice gives the reason");
      assert.ok(w.statusVisible, "the notice is visible");
      assert.equal(w.state, "lexical");
      assert.equal(w.notice, "Keyword matches (semantic search unavailable)");
      assert.ok(w.noticeVisible);
      assert.ok(w.options > 0, "keyword results are shown");
      assert.equal(await page.locator("needle-search [role=progressbar]").isVisible(), false, "no progress bar left");
      assert.equal(await page.evaluate(() => document.querySelector("needle-search").degraded), ready.slice("rejected: ".length));

      // The JS API too: every mode answers lexically.
      const api = await page.evaluate(async (q) => {
        const engine = await document.querySelector("needle-search").engine;
        return Promise.all(["hybrid", "dense", "bm25"].map((mode) => engine.search(q, { k: 5, mode }).then((r) => ({ mode: r.mode, hits: r.hits.length, answer: r.answer.length }))));
      }, q);
      assert.deepEqual(api, Array(3).fill({ mode: "bm25", hits: 5, answer: 0 }));

      // The fault gone, a reload is hybrid again: refused bytes were not kept in the Cache API.
      await page.unroute(ROUTE);
      await page.unroute(TOKENIZER);
      await page.reload();
      await page.focus(box);
      assert.equal(await settled(page, "ready"), "resolved");
      const again = await ask(page, q);
      assert.equal(again.mode, "hybrid");
      assert.equal((await widgetState(page)).status, "");
      await ctx.close();
    });
  }

  const indexFaults = [
    { name: "truncated", corrupt: (b) => b.subarray(0, b.length - 4096), reason: /truncated index/ },
    {
      name: "with one byte flipped",
      corrupt: (b) => {
        const c = Buffer.from(b);
        c[c.length >> 1] ^= 0x5a;
        return c;
      },
      reason: /checksum mismatch .*the file is corrupt/,
    },
    { name: "missing (HTTP 404)", status: 404, reason: /index\.[0-9a-f]{16}\.needle: HTTP 404/ },
  ];
  for (const fault of indexFaults) {
    it(`index file ${fault.name}: the widget names the file and the reason and shows no results`, async () => {
      const bytes = readFileSync(join(bundle, manifest.files.index));
      const ctx = await browser.newContext({ serviceWorkers: "block" });
      const page = await ctx.newPage();
      await page.route(INDEX, (route) =>
        fault.status
          ? route.fulfill({ status: fault.status, contentType: "text/plain", body: "not found" })
          : route.fulfill({ status: 200, contentType: "application/octet-stream", body: fault.corrupt(bytes) }),
      );
      await page.goto(server.url + "index.html");
      await page.focus(box);
      const lexical = await settled(page, "lexical");
      assert.match(lexical, /^rejected: /);
      assert.match(lexical, fault.reason);
      assert.ok(lexical.includes(manifest.files.index), `the error names the file: ${lexical}`);
      assert.match(await settled(page, "ready"), /^rejected: /, "engine.ready rejects too, never hangs");

      await page.fill(box, qrels()[2].q_doc);
      await page.waitForFunction(() => document.querySelector("needle-search").shadowRoot.querySelector(".panel").dataset.state === "error");
      await sleep(2000); // the model's download goes on: its progress must not hide the error
      const w = await widgetState(page);
      assert.equal(w.state, "error");
      assert.equal(w.options, 0, "no results");
      assert.equal(await page.locator("needle-search li").count(), 0, "no suggestions either");
      assert.equal(w.notice, `Search unavailable: ${lexical.slice("rejected: ".length)}`);
      assert.ok(w.noticeVisible);
      assert.equal(w.status, w.notice, "the status line says it too");
      assert.ok(w.statusVisible);
      assert.equal(await page.evaluate(() => document.querySelector("needle-search").lastResult), null);
      assert.equal(await page.evaluate(() => document.querySelector("needle-search").error), lexical.slice("rejected: ".length));

      // The JS API: search rejects with the reader's error; no result at all.
      const api = await page.evaluate(async (q) => {
        const engine = await document.querySelector("needle-search").engine;
        return engine.search(q, { k: 5, mode: "bm25" }).then((r) => `resolved with ${r.hits.length} hits`, (e) => `rejected: ${e.message}`);
      }, qrels()[2].q_doc);
      assert.equal(api, lexical);
      await ctx.close();
    });
  }
});
