// Issue 6.7, the browser half: 10,000 queries in a row in one tab leave memory flat and never
// panic; a huge, punctuation-only, emoji-only, empty or blank query gets hits or NO ANSWER,
// never an error. The engine runs as a site ships it (needle.js, its Web Worker, the wasm) on
// the fixture index; memory is read from the worker (`engine.memory()`: the wasm memory, which
// never shrinks, so growth is what the queries kept) and from the page (CDP, after a forced GC).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { CHROMIUM_ARGS, fixtureSite, launch, ood, qrels, serve } from "./helpers.mjs";

// Lexical queries run on an engine opened with { model: false } (how every query is answered
// before the model is in): with the model loaded, even mode "bm25" embeds the query (its hits
// get distances and pass the gate), ~50 ms each on 2 shared cores. Hybrid ones run on a second
// engine with the model, in the same tab.
const BM25_QUERIES = 10_000;
const HYBRID_QUERIES = 300;
const WARM_UP = 100;
const WASM_MARGIN = 2 << 20; // bytes the allocator may still take after the warm-up (fragmentation)
const JS_MARGIN = 8 << 20;

const words = () => qrels().map((q) => q.q_doc).join(" ");
const ODD = [
  ["10,000 characters of fixture words", () => words().repeat(Math.ceil(10_000 / words().length)).slice(0, 10_000)],
  ["one 10,000-character word", () => "a".repeat(10_000)],
  ["punctuation only", () => "?!.,;:"],
  ["emoji only", () => "🦀🔥"],
  ["empty", () => ""],
  ["whitespace only", () => " \t\n  "],
  ["a lone surrogate", () => "\ud800 mutex"],
  ["NUL and control characters", () => "\u0000\u0001\u001b[0m lifetimes"],
];

const mib = (n) => (n == null ? "n/a" : `${(n / (1 << 20)).toFixed(2)} MiB`);

describe("load: 10,000 queries in one browser tab", () => {
  let server, browser, page, cdp;
  let closing = false;
  before(async () => {
    const { site } = fixtureSite();
    server = await serve(site, { csp: true });
    // --expose-gc: engine.memory() collects garbage in the worker before it reads the heap.
    browser = await launch({ args: [...CHROMIUM_ARGS, "--js-flags=--expose-gc"] });
    page = await (await browser.newContext({ serviceWorkers: "block" })).newPage();
    // One CI run saw "Target page, context or browser has been closed" mid-soak; if it happens
    // again, say which side went away.
    page.on("crash", () => console.log("load: the page's renderer crashed"));
    page.on("close", () => closing || console.log("load: the page closed before the tests ended"));
    browser.on("disconnected", () => closing || console.log("load: the browser went away before the tests ended"));
    await page.goto(server.url + "index.html");
    await page.evaluate(async () => {
      const { open } = await import("/needle/needle.js");
      window.engine = await open("/needle/");
      window.lexical = await open("/needle/", { model: false });
      await Promise.all([window.engine.ready, window.lexical.lexical]);
    });
    cdp = await page.context().newCDPSession(page);
  });
  after(async () => {
    closing = true;
    await browser?.close();
    server?.close();
  });

  /** The worker's wasm memory and JS heap, and the page's JS heap after a GC. */
  async function memory(name) {
    const worker = await page.evaluate((name) => window[name].memory(), name);
    await cdp.send("HeapProfiler.collectGarbage");
    const { usedSize } = await cdp.send("Runtime.getHeapUsage");
    return { wasm: worker.wasmBytes, workerHeap: worker.jsHeapBytes, pageHeap: usedSize };
  }

  /** Runs [query, mode] pairs one after another; returns failures (thrown or malformed). */
  function run(name, plan) {
    return page.evaluate(async ({ name, plan }) => {
      const failures = [];
      let hits = 0, answered = 0;
      const t = performance.now();
      for (const [q, mode] of plan) {
        try {
          const r = await window[name].search(q, { k: 10, mode });
          const ok = Array.isArray(r.hits) && Array.isArray(r.answer) && r.mode === mode && r.answer.every((i) => Number.isInteger(i) && i >= 0 && i < r.hits.length);
          if (!ok) failures.push(`${mode} ${JSON.stringify(q.slice(0, 40))}: malformed result ${JSON.stringify(r).slice(0, 200)}`);
          hits += r.hits.length;
          if (r.answer.length) answered++;
        } catch (e) {
          failures.push(`${mode} ${JSON.stringify(q.slice(0, 40))}: ${e.message}`);
        }
      }
      return { failures, hits, answered, ms: performance.now() - t };
    }, { name, plan });
  }

  /** Runs `plan` on engine `name` in slices; returns the memory at ready, after the warm-up, at the end. */
  async function soak(name, plan, slice) {
    const start = await memory(name);
    const w = await run(name, plan.slice(0, WARM_UP));
    assert.deepEqual(w.failures, []);
    const warmed = await memory(name);
    const series = [];
    let ms = w.ms, answered = w.answered;
    const failures = [];
    for (let i = WARM_UP; i < plan.length; i += slice) {
      const r = await run(name, plan.slice(i, i + slice));
      failures.push(...r.failures);
      ms += r.ms;
      answered += r.answered;
      series.push(mib((await memory(name)).wasm));
    }
    const end = await memory(name);
    return { start, warmed, end, series, ms, answered, failures };
  }

  it(`${BM25_QUERIES} lexical + ${HYBRID_QUERIES} hybrid queries in one tab: no error, memory flat after the first ${WARM_UP}`, async () => {
    const questions = [...qrels().flatMap((q) => [q.q_doc, q.q_ticket]), ...ood().map((q) => q.query)];
    const odd = ODD.map(([, f]) => f());
    // The warm-up holds the heaviest queries first, so that what grows later is a leak.
    const all = [...odd, ...questions];
    const lexPlan = Array.from({ length: BM25_QUERIES }, (_, i) => [all[i % all.length], "bm25"]);
    const hybPlan = Array.from({ length: HYBRID_QUERIES }, (_, i) => [all[(i * 7) % all.length], "hybrid"]);
    hybPlan.splice(0, odd.length, ...odd.map((q) => [q, "hybrid"]));

    const lex = await soak("lexical", lexPlan, 2500);
    const hyb = await soak("engine", hybPlan, 100);
    const report = (label, r, n) => {
      console.log(`load ${label}: ${n} queries in ${(r.ms / 1000).toFixed(1)} s (${(r.ms / n).toFixed(2)} ms each); ${r.answered} answered, ${r.failures.length} errors`);
      console.log(`load ${label}: wasm memory ${mib(r.start.wasm)} at ready, ${mib(r.warmed.wasm)} after ${WARM_UP} queries, ${mib(r.end.wasm)} after ${n} (per slice: ${r.series.join(", ")})`);
      console.log(`load ${label}: page JS heap ${mib(r.start.pageHeap)} at ready, ${mib(r.warmed.pageHeap)} after ${WARM_UP}, ${mib(r.end.pageHeap)} after ${n} (after gc); worker JS heap ${mib(r.end.workerHeap)}`);
    };
    report("lexical", lex, BM25_QUERIES);
    report("hybrid", hyb, HYBRID_QUERIES);
    for (const [label, r] of [["lexical", lex], ["hybrid", hyb]]) {
      assert.deepEqual(r.failures.slice(0, 20), [], `${label}: ${r.failures.length} failed queries`);
      assert.ok(r.end.wasm <= r.warmed.wasm + WASM_MARGIN, `${label}: wasm memory grew from ${mib(r.warmed.wasm)} to ${mib(r.end.wasm)}`);
      assert.ok(r.end.pageHeap <= r.warmed.pageHeap + JS_MARGIN, `${label}: page heap grew from ${mib(r.warmed.pageHeap)} to ${mib(r.end.pageHeap)}`);
      if (r.end.workerHeap != null) assert.ok(r.end.workerHeap <= r.warmed.workerHeap + JS_MARGIN, `${label}: worker heap grew`);
    }
  });

  for (const mode of ["bm25", "hybrid"]) {
    it(`${mode}: huge, punctuation-only, emoji-only, empty and blank queries give hits or NO ANSWER, never an error`, async () => {
      const got = await page.evaluate(
        async ({ queries, mode }) => {
          const out = [];
          for (const [name, q] of queries) {
            try {
              const r = await window.engine.search(q, { k: 10, mode });
              out.push({ name, mode: r.mode, hits: r.hits.length, answer: r.answer, valid: r.answer.every((i) => i < r.hits.length) });
            } catch (e) {
              out.push({ name, error: e.message });
            }
          }
          return out;
        },
        { queries: ODD.map(([name, f]) => [name, f()]), mode },
      );
      for (const r of got) {
        assert.equal(r.error, undefined, `${r.name}: ${r.error}`);
        assert.equal(r.mode, mode, r.name);
        assert.ok(r.valid, `${r.name}: answer indices inside hits`);
        console.log(`${mode} ${r.name}: ${r.answer.length ? `answer ${r.answer.join(",")}` : "NO ANSWER"} (${r.hits} hits)`);
      }
      // No word in them: keyword search matches nothing (as natively, tests/load.rs).
      if (mode === "bm25") for (const name of ["punctuation only", "emoji only", "empty", "whitespace only"]) assert.equal(got.find((r) => r.name === name).hits, 0, name);
    });
  }
});
