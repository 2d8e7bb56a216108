// Browser benchmarks (BENCHMARKS.md, section "Browser"): headless Chromium, medians over the
// fixture queries. Run: node tests/browser/bench.mjs  (after ./build.sh wasm and cli).
//  1. Cold start: fresh profile, time from navigation to the first lexical and the first hybrid
//     answer, through needle.js in its worker.
//  2. Warm query, split into embed / BM25 / dense / fusion (timed inside the engine).
//  3. The embed step against onnxruntime-web running the int8 ONNX graph of the same weights, in
//     one page, both on the page's thread, with the same token ids.
//  4. Bytes of every file the first query needs, raw and brotli.
import { brotliCompressSync, constants } from "node:zlib";
import { cpSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT, fixtureSite, launch, median, ood, qrels, serve } from "./helpers.mjs";

const fmt = (x, d = 1) => (x == null ? "–" : x.toFixed(d));
const COLD_RUNS = Number(process.env.COLD_RUNS ?? 3);
const ONLY = process.env.BENCH_ONLY; // "cold" | "warm" | "embed" | "bytes": one section

const { site, bundle } = fixtureSite();
const manifest = JSON.parse(readFileSync(join(bundle, "manifest.json"), "utf8"));
const queries = [...qrels().flatMap((q) => [q.q_doc, q.q_ticket]), ...ood().map((q) => q.query)];

// onnxruntime-web next to the site (not part of needle's bundle).
const ortSrc = join(ROOT, "node_modules", "onnxruntime-web", "dist");
const haveOrt = existsSync(ortSrc);
if (haveOrt) {
  mkdirSync(join(site, "ort"), { recursive: true });
  for (const f of ["ort.wasm.min.mjs", "ort-wasm-simd-threaded.wasm", "ort-wasm-simd-threaded.mjs"]) cpSync(join(ortSrc, f), join(site, "ort", f));
  // onnxruntime cannot read needle's packed form (4-bit codes two to a byte): it runs the int8
  // ONNX graph of the same weights, whose linear weights also fold into f32 constants at load.
  cpSync(join(process.env.NEEDLE_MODEL_DIR ?? join(ROOT, "models"), "minilm-int8.onnx"), join(site, "ort", "minilm-int8.onnx"));
}

writeFileSync(join(site, "bench-blank.html"), "<!doctype html><title>bench</title><link rel=icon href='data:,'>");
const server = await serve(site);
const browser = await launch();
const out = { cold: [], warm: null, embed: null, bytes: [] };
try {
  // 1. Cold start.
  for (let i = 0; i < (!ONLY || ONLY === "cold" ? COLD_RUNS : 0); i++) {
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    await page.goto(server.url + "bench-blank.html");
    const t = await page.evaluate(
      async ({ url, q }) => {
        const t0 = performance.now();
        const { open } = await import(url + "needle/needle.js");
        const phases = {};
        const engine = await open(url + "needle/", { onProgress: (p) => p.phase && Object.assign(phases, p) });
        const r1 = await engine.search(q, { k: 10 });
        const lexical = performance.now() - t0;
        await engine.ready;
        const r2 = await engine.search(q, { k: 10 });
        const hybrid = performance.now() - t0;
        return { lexical, hybrid, m1: r1.mode, m2: r2.mode, loadMs: phases.loadMs, compileMs: phases.compileMs, indexMs: phases.indexMs, modelMs: phases.modelMs };
      },
      { url: server.url, q: queries[0] },
    ).catch(async (e) => {
      throw e;
    });
    out.cold.push(t);
    await ctx.close();
  }

  // 2. Warm queries inside the worker.
  if (!ONLY || ONLY === "warm") {
    const page = await browser.newPage();
    await page.goto(server.url + "index.html");
    out.warm = await page.evaluate(async (qs) => {
      const { open } = await import("/needle/needle.js");
      const engine = await open("/needle/");
      await engine.ready;
      const hybrid = await engine.bench(qs, { runs: 5, mode: "hybrid" });
      const bm25 = await engine.bench(qs, { runs: 5, mode: "bm25" });
      engine.close();
      return { hybrid, bm25 };
    }, queries);
    await page.close();
  }

  // 3. Embed: needle (tract, in-thread) vs onnxruntime-web (wasm, SIMD, 1 thread), same model.
  //    Once per engine build (relaxed SIMD where the bundle has it, then plain SIMD), each in
  //    its own page: the wasm-bindgen glue holds one instance per page.
  const builds = manifest.files.wasmRelaxed ? [["relaxed-simd", true], ["simd128", false]] : [["simd128", false]];
  for (const [build, relaxedSimd] of haveOrt && (!ONLY || ONLY === "embed") ? builds : []) {
    const page = await browser.newPage();
    await page.goto(server.url + "index.html");
    out.embed ??= {};
    out.embed[build] = await page.evaluate(
      async ({ qs, relaxedSimd }) => {
        const { open } = await import("/needle/needle.js");
        let wasm = null;
        const engine = await open("/needle/", { worker: false, relaxedSimd, onProgress: (p) => (wasm = p.wasm ?? wasm) });
        await engine.ready;
        const ort = await import("/ort/ort.wasm.min.mjs");
        ort.env.wasm.wasmPaths = "/ort/";
        ort.env.wasm.numThreads = 1;
        ort.env.wasm.simd = true;
        const t0 = performance.now();
        const session = await ort.InferenceSession.create("/ort/minilm-int8.onnx", { executionProviders: ["wasm"], graphOptimizationLevel: "all" });
        const ortLoad = performance.now() - t0;
        const inputName = session.inputNames[0];
        // Interleaved (needle, ort, needle, ort, …) so that a busy machine slows both alike.
        const needle = [], ortTimes = [];
        let maxDiff = 0;
        for (const q of qs) {
          const ids = await engine.tokenize(q);
          const feed = { [inputName]: new ort.Tensor("int64", BigInt64Array.from(ids), [1, ids.length]) };
          const ref = await engine.embed(q);
          const v = (await session.run(feed))[session.outputNames[0]].data;
          for (let i = 0; i < ref.length; i++) maxDiff = Math.max(maxDiff, Math.abs(ref[i] - v[i]));
          const tn = [], to = [];
          for (let i = 0; i < 5; i++) {
            let a = performance.now();
            await engine.embed(q);
            tn.push(performance.now() - a);
            a = performance.now();
            await session.run(feed);
            to.push(performance.now() - a);
          }
          tn.sort((x, y) => x - y);
          to.sort((x, y) => x - y);
          needle.push({ tokens: ids.length, ms: tn[2] });
          ortTimes.push(to[2]);
        }
        return { needle, ort: ortTimes, ortLoad, maxDiff, wasm };
      },
      { qs: queries, relaxedSimd },
    );
    if (out.embed[build].wasm !== build) throw new Error(`asked for the ${build} build, got ${out.embed[build].wasm}`);
    await page.close();
    await page.close();
  }
} finally {
  await browser.close();
  server.close();
}

// 4. Bytes. The first lexical answer needs the files up to the index (the lexical core answers
// it); the first hybrid one also the engine (the relaxed-SIMD build Chromium runs, when the
// bundle has it), the model and the tokenizer.
const firstLexical = ["api", "widget", "css", "worker", "lexicalGlue", "lexical", "index"];
const firstQuery = [...firstLexical, "glue", manifest.files.wasmRelaxed ? "wasmRelaxed" : "wasm", "vectors", "model", "tokenizer"];
const files = [["manifest", "manifest.json"], ...firstQuery.map((r) => [r, manifest.files[r]])];
for (const [role, name] of files) {
  const bytes = readFileSync(join(bundle, name));
  const t = Date.now();
  const br = brotliCompressSync(bytes, { params: { [constants.BROTLI_PARAM_QUALITY]: bytes.length > 4e6 ? 9 : 11, [constants.BROTLI_PARAM_SIZE_HINT]: bytes.length } }).length;
  out.bytes.push({ role, name, raw: statSync(join(bundle, name)).size, brotli: br, ms: Date.now() - t });
}

// Report (Markdown).
const lines = [];
if (out.cold.length) {
const cl = out.cold.map((c) => c.lexical), ch = out.cold.map((c) => c.hybrid);
lines.push(`Cold start (${COLD_RUNS} fresh browser contexts, empty caches, \`needle serve\` on 127.0.0.1; from \`import("needle.js")\` to the answer; median):`, "");
const cm = (k) => fmt(median(out.cold.map((c) => c[k]).filter((x) => x != null)), 0);
lines.push("| first lexical answer | first hybrid answer | of which: lexical core fetch + instantiate | index parse | engine instantiate | model load (sha256 + ONNX → optimised plan) |", "| --- | --- | --- | --- | --- | --- |");
lines.push(`| ${fmt(median(cl), 0)} ms | ${fmt(median(ch), 0)} ms | ${cm("loadMs")} ms | ${cm("indexMs")} ms | ${cm("compileMs")} ms | ${cm("modelMs")} ms |`, "");
}
for (const mode of out.warm ? ["hybrid", "bm25"] : []) {
  const w = out.warm[mode];
  lines.push(`Warm ${mode} query inside the worker (${queries.length} queries × 5, median ms):`, "");
  lines.push("| embed | bm25 | dense | fuse | total (search call) |", "| --- | --- | --- | --- | --- |");
  lines.push(`| ${fmt(w.embed.median, 2)} | ${fmt(w.bm25.median, 2)} | ${fmt(w.dense.median, 2)} | ${fmt(w.fuse.median, 2)} | ${fmt(w.total.median, 2)} |`, "");
}
if (out.embed) {
  lines.push(`Query embedding (needle: the shipped packed form; onnxruntime-web: the int8 ONNX graph of the same weights), page thread, ${queries.length} queries, median of 5 runs each, needle and onnxruntime-web interleaved:`, "");
  lines.push("| needle build | needle (tract) | onnxruntime-web 1.31.1 (wasm SIMD, 1 thread) | median per-query ratio needle / ort | median tokens | max abs diff of the vectors | ort session create |", "| --- | --- | --- | --- | --- | --- | --- |");
  for (const [build, e] of Object.entries(out.embed)) {
    const n = median(e.needle.map((x) => x.ms)), o = median(e.ort);
    const paired = median(e.needle.map((x, i) => x.ms / e.ort[i]));
    lines.push(`| ${build} | ${fmt(n, 2)} ms | ${fmt(o, 2)} ms | ${fmt(paired, 2)} | ${median(e.needle.map((x) => x.tokens))} | ${e.maxDiff.toExponential(1)} | ${fmt(e.ortLoad, 0)} ms |`);
  }
  lines.push("");
}
lines.push("Bytes the first query needs (brotli: quality 11, 9 above 4 MB):", "", "| file | raw | brotli |", "| --- | --- | --- |");
let raw = 0, br = 0;
for (const b of out.bytes) {
  lines.push(`| ${b.role} (\`${b.name}\`) | ${b.raw.toLocaleString("en")} | ${b.brotli.toLocaleString("en")} |`);
  raw += b.raw;
  br += b.brotli;
  if (b.role === firstLexical.at(-1)) lines.push(`| **first lexical answer: total** | ${raw.toLocaleString("en")} | ${br.toLocaleString("en")} |`);
}
lines.push(`| **first hybrid answer: total** | ${raw.toLocaleString("en")} | ${br.toLocaleString("en")} |`, "");
lines.push(`Index: ${manifest.chunks} chunks, ${manifest.pages} pages; ${Math.round(out.bytes.find((b) => b.role === "index").raw / manifest.chunks)} B raw per chunk.`);
const load = (await import("node:os")).loadavg();
lines.push("", `Load average during the run: ${load.map((x) => x.toFixed(1)).join(", ")} (2 cores).`);
console.log(lines.join("\n"));
if (process.env.BENCH_JSON) console.log(JSON.stringify(out, null, 1));
