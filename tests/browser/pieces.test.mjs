// An index in pieces in the browser (issue 15): the fixture site built with
// `--pieces always --lists 16 --nprobe 16`, so a query probes every list and must answer exactly
// as the whole index does (native `needle search --fusion plain` on the same index.needle: an index
// in pieces has no page vectors, so its hybrid ranking fuses plainly). The reader fetches
// the head and then only the pieces each search names; once fetched they answer offline; a
// corrupt piece is refused by name and the rest keeps answering.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { launch, launchPersistent, nativeSearch, ood, piecedSite, primeNative, qrels, serve } from "./helpers.mjs";

const PIECE = /\/needle\/pieces\.[0-9a-f]{16}\/((?:terms|vectors|chunks)-\d+\.needle)$/;
const key = (h) => `${h.page}#${h.from},${h.to}`;

/** Opens needle.js's engine in `page`; `options` go to `open` as JSON. */
async function openEngine(page, options = {}) {
  await page.evaluate(async (options) => {
    const { open } = await import("/needle/needle.js");
    window.engine = await open("/needle/", options);
    await window.engine.lexical;
  }, options);
}

/** Runs `queries` through the page's engine in `mode`: results, or `{ error }` for a rejection. */
function searchAll(page, queries, mode = "hybrid") {
  return page.evaluate(
    async ({ queries, mode }) => {
      const out = [];
      for (const q of queries) out.push(await window.engine.search(q, { k: 20, mode }).catch((e) => ({ error: e.message })));
      return out;
    },
    { queries, mode },
  );
}

describe("an index in pieces, in Chromium", () => {
  let server, browser, bundle, manifest, total;
  const queries = [...qrels().flatMap((q) => [q.q_doc, q.q_ticket]), ...ood().map((q) => q.query)];

  before(async () => {
    let site;
    ({ site, bundle } = piecedSite());
    manifest = JSON.parse(readFileSync(join(bundle, "manifest.json"), "utf8"));
    total = readdirSync(join(bundle, manifest.pieces)).filter((f) => f !== "head.needle").length;
    primeNative(bundle, queries, { k: 20, fusion: "plain" });
    primeNative(bundle, queries, { k: 20, mode: "bm25" });
    server = await serve(site, { csp: true });
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    server?.close();
  });

  it("is what the build wrote for --pieces always: a head and pieces, no index or vectors file", () => {
    assert.match(manifest.files.head, /^pieces\.[0-9a-f]{16}\/head\.needle$/);
    assert.equal(manifest.files.index, undefined);
    assert.equal(manifest.files.vectors, undefined);
    assert.ok(total > 16, `${total} pieces`);
  });

  it("answers lexically from the head and the pieces its words name, exactly as the whole index", async () => {
    const ctx = await browser.newContext({ serviceWorkers: "block" });
    const page = await ctx.newPage();
    const fetched = [];
    page.on("request", (r) => PIECE.test(r.url()) && fetched.push(PIECE.exec(r.url())[1]));
    await page.goto(server.url + "index.html");
    await openEngine(page, { model: false });
    assert.deepEqual(fetched, [], "opening fetches the head only");
    const [first] = await searchAll(page, [queries[0]], "bm25");
    assert.ok(!first.error, first.error);
    assert.ok(fetched.length > 0 && fetched.every((f) => !f.startsWith("vectors-")), `a lexical search fetches no list: ${fetched}`);
    assert.ok(fetched.length < total / 4, `the first query fetched ${fetched.length} of ${total} pieces`);
    assert.equal(new Set(fetched).size, fetched.length, "each piece once");
    const results = await searchAll(page, queries, "bm25");
    const differ = [];
    queries.forEach((q, i) => {
      const nat = nativeSearch(bundle, q, { k: 20, mode: "bm25" });
      if (JSON.stringify(results[i].hits?.map(key)) !== JSON.stringify(nat.hits.map(key))) differ.push(q);
      else results[i].hits.forEach((h, j) => assert.equal(h.content, nat.hits[j].content, `${q}: quote ${j}`));
    });
    assert.deepEqual(differ, [], "BM25 rankings over pieces differ from the whole index");
    assert.equal(new Set(fetched).size, fetched.length, "no piece was fetched twice");
    const spent = await page.evaluate(() => window.engine.pieces());
    assert.equal(spent.pieced, true);
    assert.equal(spent.pieces, fetched.length);
    await ctx.close();
  });

  it("answers hybrid queries with the same hits, distances and NO ANSWER decisions as the whole index", async () => {
    const ctx = await browser.newContext({ serviceWorkers: "block" });
    const page = await ctx.newPage();
    await page.goto(server.url + "index.html");
    await openEngine(page);
    // A lexical answer before the model is in: its pieces are handed to the full engine later.
    await searchAll(page, [queries[1]], "hybrid");
    await page.evaluate(() => window.engine.ready);
    const results = await searchAll(page, queries, "hybrid");
    const differ = [];
    queries.forEach((q, i) => {
      const web = results[i];
      assert.ok(!web.error, `${q}: ${web.error}`);
      assert.equal(web.mode, "hybrid", q);
      const nat = nativeSearch(bundle, q, { k: 20, fusion: "plain" });
      if (JSON.stringify(web.hits.map(key)) !== JSON.stringify(nat.hits.map(key))) differ.push(`${q}: ${web.hits.slice(0, 3).map(key)} vs ${nat.hits.slice(0, 3).map(key)}`);
      web.hits.forEach((h, j) => {
        if (nat.hits[j] && key(nat.hits[j]) === key(h)) assert.ok(Math.abs(h.distance - nat.hits[j].distance) < 1e-3, `${q} hit ${j}: ${h.distance} vs ${nat.hits[j].distance}`);
      });
      assert.deepEqual(web.answer, nat.answer, `${q}: the gate's answer`);
    });
    assert.deepEqual(differ, [], "hybrid rankings over pieces differ from the whole index");
    await ctx.close();
  });

  it("answers offline, after a reload, from the pieces it fetched (service worker + Cache API)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "needle-pieces-offline-"));
    const ctx = await launchPersistent(dir);
    try {
      const page = await ctx.newPage();
      await page.goto(server.url + "index.html");
      // The widget on the page registers the service worker that keeps the pages and needle.js.
      await page.waitForFunction(() => navigator.serviceWorker?.controller || document.querySelector("needle-search")?.offline);
      const asked = queries.slice(0, 6);
      await openEngine(page);
      await page.evaluate(() => window.engine.ready);
      const online = await searchAll(page, asked);
      await page.reload();
      await page.waitForFunction(() => navigator.serviceWorker?.controller);
      await ctx.setOffline(true);
      await page.reload();
      await openEngine(page);
      await page.evaluate(() => window.engine.ready);
      const offline = await searchAll(page, asked);
      offline.forEach((r, i) => {
        assert.ok(!r.error, `${asked[i]} offline: ${r.error}`);
        assert.equal(r.mode, "hybrid");
        assert.deepEqual(r.hits.map(key), online[i].hits.map(key), asked[i]);
      });
      // Questions whose pieces were never fetched: each answers as the whole index (its pieces
      // happen to be cached) or fails naming the piece it could not fetch; some fail.
      const unseen = queries.slice(40, 70);
      const later = await searchAll(page, unseen);
      const failed = later.filter((r) => r.error);
      assert.ok(failed.length > 0, "some question needs a piece that was never fetched");
      later.forEach((r, i) => {
        if (r.error) assert.match(r.error, /pieces\.[0-9a-f]{16}\/(terms|vectors|chunks)-\d+\.needle/, unseen[i]);
        else assert.deepEqual(r.hits.map(key), nativeSearch(bundle, unseen[i], { k: 20, fusion: "plain" }).hits.map(key), unseen[i]);
      });
    } finally {
      await ctx.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses a corrupt piece by name, and every search that does not need it still answers", async () => {
    // Which pieces does a query need? Ask once on a clean page.
    const needs = async (q) => {
      const ctx = await browser.newContext({ serviceWorkers: "block" });
      const page = await ctx.newPage();
      const got = [];
      page.on("request", (r) => PIECE.test(r.url()) && got.push(PIECE.exec(r.url())[1]));
      await page.goto(server.url + "index.html");
      await openEngine(page, { model: false });
      await searchAll(page, [q], "bm25");
      await ctx.close();
      return got;
    };
    const a = queries[0];
    const aNeeds = await needs(a);
    const bad = aNeeds.find((n) => n.startsWith("terms-"));
    let b = null;
    for (const q of queries.slice(1, 30)) {
      if (!(await needs(q)).includes(bad)) {
        b = q;
        break;
      }
    }
    assert.ok(bad && b, "a query whose pieces do not include the corrupt one");

    const ctx = await browser.newContext({ serviceWorkers: "block" });
    const page = await ctx.newPage();
    await ctx.route(PIECE, async (route) => {
      if (PIECE.exec(route.request().url())[1] !== bad) return route.continue();
      const res = await route.fetch();
      const body = Buffer.from(await res.body());
      body[body.length >> 1] ^= 0xff; // one flipped byte: its sha256 no longer matches
      return route.fulfill({ response: res, body });
    });
    await page.goto(server.url + "index.html");
    await openEngine(page, { model: false });
    const [ra, rb, ra2] = await searchAll(page, [a, b, a], "bm25");
    assert.ok(ra.error, "the search that needs the corrupt piece fails");
    assert.ok(ra.error.includes(`${manifest.pieces}${bad}`), `the error names the piece: ${ra.error}`);
    assert.match(ra.error, /checksum/i);
    assert.ok(!rb.error, `another search still answers: ${rb.error}`);
    assert.deepEqual(rb.hits.map(key), nativeSearch(bundle, b, { k: 20, mode: "bm25" }).hits.map(key));
    assert.ok(ra2.error?.includes(bad), "asked again, it is fetched again and refused again (not kept)");
    // Once the server sends the right bytes, the same search answers.
    await ctx.unroute(PIECE);
    const [ra3] = await searchAll(page, [a], "bm25");
    assert.ok(!ra3.error, ra3.error);
    assert.deepEqual(ra3.hits.map(key), nativeSearch(bundle, a, { k: 20, mode: "bm25" }).hits.map(key));
    await ctx.close();
  });
});
