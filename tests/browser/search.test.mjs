// The browser engine answers exactly like the native CLI on the fixture corpus: its questions,
// and its page and section titles typed as keywords, as prefixes and with typos.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT, fixtureSite, launch, nativePrompt, nativeSearch, ood, primeNative, qrels, serve } from "./helpers.mjs";

const keywords = () =>
  readFileSync(join(ROOT, "tests/fixtures/keywords/nomicon.jsonl"), "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));

describe("in Chromium, needle answers like native `needle search`", () => {
  let server, browser, page, bundle;
  const queries = [];

  before(async () => {
    ({ bundle } = fixtureSite());
    for (const q of qrels()) queries.push({ id: `${q.id}/doc`, q: q.q_doc, ood: false }, { id: `${q.id}/ticket`, q: q.q_ticket, ood: false });
    for (const q of ood()) queries.push({ id: q.id, q: q.query, ood: true });
    for (const q of keywords()) queries.push({ id: q.id, q: q.query, ood: false });
    primeNative(bundle, queries.map((q) => q.q), { k: 20 });
    server = await serve(fixtureSite().site, { csp: true });
    browser = await launch();
    page = await (await browser.newContext({ serviceWorkers: "block" })).newPage();
    page.on("console", (m) => m.type() === "error" && /needle/i.test(m.text()) && console.error("[page]", m.text()));
    await page.goto(server.url + "index.html");
    await page.evaluate(async () => {
      const { open } = await import("/needle/needle.js");
      window.engineBuild = null;
      window.engine = await open("/needle/", { onProgress: (p) => (window.engineBuild = p.wasm ?? window.engineBuild) });
      await window.engine.ready;
    });
  });
  after(async () => {
    await browser?.close();
    server?.close();
  });

  it("returns the same top-20 pages, offsets, quotes and distances (1e-3) for every fixture query", async () => {
    const results = await page.evaluate(async (qs) => {
      const out = [];
      for (const q of qs) out.push(await window.engine.search(q, { k: 20, mode: "hybrid" }));
      return out;
    }, queries.map((q) => q.q));
    let mismatches = [];
    queries.forEach((q, i) => {
      const web = results[i];
      const nat = nativeSearch(bundle, q.q, { k: 20 });
      assert.equal(web.mode, "hybrid", q.id);
      const w = web.hits.map((h) => `${h.page}#${h.from},${h.to}`);
      const n = nat.hits.map((h) => `${h.page}#${h.from},${h.to}`);
      if (JSON.stringify(w) !== JSON.stringify(n)) mismatches.push(`${q.id}: browser ${w.slice(0, 5)} … native ${n.slice(0, 5)} …`);
      web.hits.forEach((h, j) => {
        const m = nat.hits[j];
        if (!m || m.page !== h.page) return;
        assert.equal(h.content, m.content, `${q.id} hit ${j}: quote`);
        assert.ok(Math.abs(h.distance - m.distance) < 1e-3, `${q.id} hit ${j}: distance ${h.distance} vs ${m.distance}`);
      });
    });
    assert.deepEqual(mismatches, [], "rankings differ");
  });

  it("makes the same NO ANSWER decisions, keeps the same chunks and reads the words the same as native", async () => {
    const results = await page.evaluate(async (qs) => {
      const out = [];
      for (const q of qs) out.push(await window.engine.search(q, { k: 20, mode: "hybrid" }));
      return out;
    }, queries.map((q) => q.q));
    const decisions = { web: [], native: [] };
    const decision = (r) =>
      `${r.answer.length ? r.answer.join(",") : "NO ANSWER"} ${r.verdict} ${r.corrected ?? ""} [${r.unknown}] [${r.foreign}] [${r.terms}]`;
    queries.forEach((q, i) => {
      const nat = nativeSearch(bundle, q.q, { k: 20 });
      decisions.web.push(`${q.id}: ${decision(results[i])}`);
      decisions.native.push(`${q.id}: ${decision(nat)}`);
    });
    assert.deepEqual(decisions.web, decisions.native);
  });

  it("answers every question the same whatever k a front end shows (the gate walks the index's depth)", async () => {
    const results = await page.evaluate(async (qs) => {
      const out = [];
      for (const q of qs) out.push([await window.engine.search(q, { k: 1 }), await window.engine.search(q, { k: 4 })]);
      return out;
    }, queries.map((q) => q.q));
    const kept = (r) => r.answer.map((i) => `${r.hits[i].page}#${r.hits[i].from},${r.hits[i].to}`).join(" ");
    let deeper = 0;
    queries.forEach((q, i) => {
      const nat = nativeSearch(bundle, q.q, { k: 20 });
      for (const r of results[i]) assert.equal(kept(r), kept(nat), `${q.id}: k = ${r.hits.length} vs native k = 20`);
      if (nat.answer.some((j) => j >= 1)) deeper++;
    });
    assert.ok(deeper > 0, "some answer lies below rank 1, so k = 1 really is put to the test");
  });

  it("answers lexically, and nothing passes the gate, when asked before the model (bm25 mode)", async () => {
    const r = await page.evaluate(async () => {
      const { open } = await import("/needle/needle.js");
      const lexical = await open("/needle/", { model: false });
      await lexical.lexical;
      const r = await lexical.search("mutex poisoning", { k: 5 });
      lexical.close();
      return r;
    });
    assert.equal(r.mode, "bm25");
    assert.ok(r.hits.length > 0);
    assert.deepEqual(r.answer, []);
    assert.ok(r.hits.every((h) => h.distance === null));
  });

  it("runs the relaxed-SIMD engine build in Chromium; the plain SIMD build answers the same", async () => {
    assert.equal(await page.evaluate(() => window.engineBuild), "relaxed-simd", "Chromium validates relaxed SIMD: the faster build");
    // Every fixture query through both builds (the plain one in a second worker), hybrid, top 20.
    const both = await page.evaluate(async (qs) => {
      const { open } = await import("/needle/needle.js");
      let build = null;
      const plain = await open("/needle/", { relaxedSimd: false, onProgress: (p) => (build = p.wasm ?? build) });
      await plain.ready;
      const out = [];
      for (const q of qs) out.push([await window.engine.search(q, { k: 20 }), await plain.search(q, { k: 20 })]);
      plain.close?.();
      return { build, out };
    }, queries.map((q) => q.q));
    assert.equal(both.build, "simd128");
    both.out.forEach(([relaxed, plain], i) => {
      const id = queries[i].id;
      assert.deepEqual(relaxed.answer, plain.answer, `${id}: the gate`);
      assert.deepEqual(relaxed.hits.map((h) => `${h.page}#${h.from},${h.to}`), plain.hits.map((h) => `${h.page}#${h.from},${h.to}`), `${id}: ranking`);
      relaxed.hits.forEach((h, j) => assert.ok(Math.abs(h.distance - plain.hits[j].distance) < 1e-4, `${id} hit ${j}: ${h.distance} vs ${plain.hits[j].distance}`));
    });
  });

  it("builds the same prompt as the CLI's --prompt", async () => {
    const q = qrels()[0].q_doc;
    const prompt = await page.evaluate(async (q) => window.engine.prompt(q, await window.engine.search(q, { k: 20 })), q);
    assert.equal(prompt, nativePrompt(bundle, q));
    assert.match(prompt, /^Answer using ONLY the numbered sources below/);
    assert.match(prompt, /\[1\] /);
  });
});
