// An index in pieces in Chromium (BENCHMARKS.md, "Sites of any size"): bytes of index data a
// reader fetches for a first and each further query, and warm query latency, on a site whose
// bundle was built with pieces (`needle build SITE --pieces always|auto`).
//
//   node tests/browser/bench-pieces.mjs SITE QRELS.jsonl [PREFIX]
//   (PREFIX is prepended to the set's page paths when the site nests them, e.g. "std/")
//
// The server sends every file brotli-compressed (quality 11, compressed once and kept, as a
// static host serves precompressed files) and counts the bytes it sends per file. A warm-up
// context first makes the server compress what the runs fetch; then RUNS (default 3) cold
// contexts each open needle.js (engine and model excluded from the counts: they are cached once
// per reader), wait for hybrid search, and ask every question of the set (doc and ticket
// phrasing) in an order rotated per run: the first question's bytes are the head plus its
// pieces, each further question's bytes are the pieces it adds. Then every question is asked
// again, warm (all its pieces in), timed from the page (worker round trip included): p50, p90.
// Recall@20 of the needle's page (found on the page with the chunk holding the needle) is
// reported too, so the run also says what the pieces retrieve.
import { existsSync, readFileSync, statSync } from "node:fs";
import { createServer } from "node:http";
import { extname, join, normalize } from "node:path";
import { brotliCompressSync, constants } from "node:zlib";
import { jsonl, launch, median } from "./helpers.mjs";

const [site, qrelsPath, prefix = ""] = process.argv.slice(2);
if (!site || !qrelsPath) throw new Error("usage: node tests/browser/bench-pieces.mjs SITE QRELS.jsonl [PREFIX]");
const RUNS = Number(process.env.RUNS ?? 3);
const MIME = { ".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".json": "application/json", ".wasm": "application/wasm" };
const set = jsonl(qrelsPath);
const questions = set.flatMap((q) => [
  { q: q.q_doc, page: prefix + q.page },
  { q: q.q_ticket, page: prefix + q.page },
]);
const manifest = JSON.parse(readFileSync(join(site, "needle", "manifest.json"), "utf8"));

const compressed = new Map();
const sent = new Map(); // path → bytes sent since the last reset
const server = createServer((req, res) => {
  let path = decodeURIComponent(new URL(req.url, "http://x").pathname);
  if (path.endsWith("/")) path += "index.html";
  const file = normalize(join(site, path));
  if (!file.startsWith(site) || !existsSync(file) || !statSync(file).isFile()) return res.writeHead(404).end();
  if (!compressed.has(file)) {
    const raw = readFileSync(file);
    const quality = raw.length > 4e6 ? 9 : 11;
    compressed.set(file, brotliCompressSync(raw, { params: { [constants.BROTLI_PARAM_QUALITY]: quality, [constants.BROTLI_PARAM_SIZE_HINT]: raw.length } }));
  }
  const body = compressed.get(file);
  sent.set(path, (sent.get(path) ?? 0) + body.length);
  res.writeHead(200, { "content-type": MIME[extname(file)] ?? "application/octet-stream", "content-encoding": "br", "content-length": body.length, "cache-control": "no-cache" });
  res.end(body);
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const url = `http://127.0.0.1:${server.address().port}/`;
const piecesDir = `/needle/${manifest.pieces}`;
const whole = [manifest.files.index, manifest.files.vectors].map((f) => `/needle/${f}`);
const isIndex = manifest.pieces ? (p) => p.startsWith(piecesDir) : (p) => whole.includes(p);
const indexBytes = () => [...sent].filter(([p]) => isIndex(p)).reduce((a, [, b]) => a + b, 0);

const browser = await launch();
async function run(order, { timed }) {
  const ctx = await browser.newContext({ serviceWorkers: "block" });
  const page = await ctx.newPage();
  await page.goto(url + "needle/manifest.json");
  await page.evaluate(async () => {
    const { open } = await import("/needle/needle.js");
    window.engine = await open("/needle/");
    await window.engine.ready;
  });
  const head = indexBytes();
  const perQuery = [];
  const results = [];
  for (const i of order) {
    const before = indexBytes();
    const t = performance.now();
    results[i] = await page.evaluate((q) => window.engine.search(q, { k: 20, mode: "hybrid" }), questions[i].q);
    perQuery.push({ bytes: indexBytes() - before, ms: performance.now() - t });
  }
  const warm = [];
  if (timed) {
    for (const i of order) warm.push(await page.evaluate(async (q) => {
      const t = performance.now();
      await window.engine.search(q, { k: 20, mode: "hybrid" });
      return performance.now() - t;
    }, questions[i].q));
  }
  const spent = await page.evaluate(() => window.engine.pieces());
  await ctx.close();
  return { head, perQuery, warm, results, spent };
}

const n = questions.length;
const rotate = (r) => Array.from({ length: n }, (_, i) => (i + Math.floor((r * n) / RUNS)) % n);
await run(rotate(0), { timed: false }); // the server compresses what the runs will fetch
const runs = [];
for (let r = 0; r < RUNS; r++) {
  sent.clear();
  runs.push(await run(rotate(r), { timed: true }));
}
await browser.close();
server.close();

const kb = (b) => (b / 1024).toFixed(0);
const pct = (a, p) => [...a].sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(p * a.length))];
const first = runs.map((r) => r.head + r.perQuery[0].bytes);
const further = runs.flatMap((r) => r.perQuery.slice(1).map((q) => q.bytes));
const furtherMean = further.reduce((a, b) => a + b, 0) / further.length;
const warm = runs.flatMap((r) => r.warm);
const cold = runs.flatMap((r) => r.perQuery.slice(1).map((q) => q.ms));
const hit = (r, q) => r.hits.some((h) => h.page === q.page);
const recall = runs[0].results.filter((r, i) => hit(r, questions[i])).length / n;
console.log(`site ${site}: ${manifest.chunks} chunks, ${manifest.pages} pages, ${manifest.pieces ? "index in pieces" : "index in one file"}; ${n} questions; ${RUNS} cold runs`);
console.log(`${manifest.pieces ? "head" : "index and vectors files"} ${kb(runs[0].head)} KB on the wire`);
console.log(`first query (head + its pieces), brotli on the wire: median ${kb(median(first))} KB (runs: ${first.map(kb).join(", ")})`);
console.log(`further query: mean ${kb(furtherMean)} KB, median ${kb(median(further))} KB, p90 ${kb(pct(further, 0.9))} KB`);
if (manifest.pieces) console.log(`pieces fetched per run (raw bytes as the engine got them): ${runs.map((r) => `${r.spent.pieces} / ${kb(r.spent.bytes)} KB`).join(", ")}`);
console.log(`query with its fetches (localhost), p50 ${median(cold).toFixed(1)} ms; warm hybrid query from the page: p50 ${median(warm).toFixed(1)} ms, p90 ${pct(warm, 0.9).toFixed(1)} ms`);
console.log(`page R@20 (the needle's page among the 20 hits): ${recall.toFixed(3)}`);
