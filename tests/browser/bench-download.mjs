// The reader's download (BENCHMARKS.md, "The reader's download"): bytes on the wire and time
// to the first lexical and the first hybrid answer, in cold Chromium contexts, needle and
// Pagefind on the same site, served as a static host serves them.
//
//   node tests/browser/bench-download.mjs [SITE_WITH_needle_BUNDLE ...]
//   (default: the fixture site; Pagefind is built over each site into SITE/pagefind once)
//
// The server: every file brotli-compressed (quality 11, 9 above 4 MB) as a static host does, and
// counted as the bytes it sends; "localhost" sends at once (so the engine and model, which start
// once the lexical core is in, may already be on the wire when the first answer shows: its bytes
// column counts them, the throttled one shows what the answer needs), "10 Mbit/s" paces every response
// through one shared 10 Mbit/s link after 40 ms of latency (server-side, so the worker's fetches
// are throttled and counted too). A run starts on a blank page of the site and times, from the
// first import, needle.js `open` + `search` (first lexical answer), then `engine.ready` + a
// second `search` (first hybrid answer); Pagefind: `pagefind.js` `search` + the data of its top
// 5 results. Medians of RUNS (default 3) cold contexts.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { extname, join, normalize } from "node:path";
import { brotliCompressSync, constants } from "node:zlib";
import { ROOT, fixtureSite, launch, median, qrels } from "./helpers.mjs";

const RUNS = Number(process.env.RUNS ?? 3);
const LINK = { rate: 10e6 / 8, latency: 40 }; // bytes per second, ms
const QUERY = process.env.QUERY ?? qrels()[0].q_doc;
const sites = process.argv.slice(2).length ? process.argv.slice(2) : [fixtureSite().site];
const pagefindBin = join(ROOT, "target", "bench-compare", "node_modules", ".bin", "pagefind");

const MIME = { ".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css", ".html": "text/html", ".json": "application/json", ".wasm": "application/wasm" };

/** A static server over `root`: brotli, byte counting, optional pacing on one shared link. */
function staticServer(root) {
  const cache = new Map();
  const state = { sent: 0, throttle: false, linkFree: 0 };
  const encoded = (file) => {
    if (!cache.has(file)) {
      const raw = readFileSync(file);
      const quality = raw.length > 4e6 ? 9 : 11;
      cache.set(file, brotliCompressSync(raw, { params: { [constants.BROTLI_PARAM_QUALITY]: quality, [constants.BROTLI_PARAM_SIZE_HINT]: raw.length } }));
    }
    return cache.get(file);
  };
  // Compressed before any run, as a static host serves precompressed files: no run pays for it.
  for (const dir of ["needle", "pagefind"].map((d) => join(root, d)).filter(existsSync)) {
    for (const f of readdirSync(dir, { recursive: true })) if (statSync(join(dir, f)).isFile()) encoded(join(dir, f));
  }
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const server = createServer(async (req, res) => {
    let path = decodeURIComponent(new URL(req.url, "http://x").pathname);
    if (path.endsWith("/")) path += "index.html";
    const file = normalize(join(root, path));
    if (!file.startsWith(root) || !existsSync(file) || !statSync(file).isFile()) {
      res.writeHead(404).end();
      return;
    }
    const body = encoded(file);
    res.writeHead(200, { "content-type": MIME[extname(file)] ?? "application/octet-stream", "content-encoding": "br", "content-length": body.length, "cache-control": "no-cache" });
    if (state.throttle) await sleep(LINK.latency);
    for (let at = 0; at < body.length; at += 16384) {
      const part = body.subarray(at, at + 16384);
      if (state.throttle) {
        const now = performance.now();
        state.linkFree = Math.max(state.linkFree, now) + (part.length / LINK.rate) * 1000;
        await sleep(state.linkFree - now);
      }
      state.sent += part.length;
      if (!res.write(part)) await new Promise((r) => res.once("drain", r));
    }
    res.end();
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({ url: `http://127.0.0.1:${server.address().port}/`, state, close: () => server.close() })));
}

async function coldRun(browser, srv, which) {
  const ctx = await browser.newContext({ serviceWorkers: "block" });
  const page = await ctx.newPage();
  await page.goto(srv.url + "bench-blank.html");
  srv.state.sent = 0;
  srv.state.linkFree = 0;
  const marks = {};
  const mark = (name) => (marks[name] = srv.state.sent);
  await page.exposeFunction("benchMark", mark);
  const t = await page.evaluate(
    async ({ which, q }) => {
      const t0 = performance.now();
      if (which === "pagefind") {
        const pf = await import("/pagefind/pagefind.js");
        const s = await pf.search(q);
        await Promise.all(s.results.slice(0, 5).map((r) => r.data()));
        await benchMark("lexical");
        return { lexical: performance.now() - t0, results: s.results.length };
      }
      const { open } = await import("/needle/needle.js");
      const engine = await open("/needle/");
      const r1 = await engine.search(q, { k: 10 });
      const lexical = performance.now() - t0;
      await benchMark("lexical");
      await engine.ready;
      const r2 = await engine.search(q, { k: 10 });
      const hybrid = performance.now() - t0;
      await benchMark("hybrid");
      return { lexical, hybrid, modes: [r1.mode, r2.mode], results: r1.hits.length };
    },
    { which, q: QUERY },
  );
  await ctx.close();
  return { ...t, lexicalBytes: marks.lexical, hybridBytes: marks.hybrid };
}

const lines = ["| site | engine | link | first lexical answer | bytes (brotli) | first hybrid answer | bytes (brotli) |", "| --- | --- | --- | --- | --- | --- | --- |"];
const browser = await launch();
try {
  for (const site of sites) {
    writeFileSync(join(site, "bench-blank.html"), "<!doctype html><title>bench</title><link rel=icon href='data:,'>");
    const manifest = JSON.parse(readFileSync(join(site, "needle", "manifest.json"), "utf8"));
    const engines = ["needle"];
    if (existsSync(pagefindBin)) {
      if (!existsSync(join(site, "pagefind", "pagefind.js"))) execFileSync(pagefindBin, ["--site", site, "--output-subdir", "pagefind"], { stdio: "ignore" });
      engines.push("pagefind");
    } else console.error(`(no Pagefind: run node tests/browser/bench-compare.mjs once to install it into target/bench-compare)`);
    const srv = await staticServer(normalize(site));
    try {
      for (const throttle of [false, true]) {
        srv.state.throttle = throttle;
        for (const which of engines) {
          const runs = [];
          for (let i = 0; i < RUNS; i++) runs.push(await coldRun(browser, srv, which));
          if (which === "needle" && runs.some((r) => r.modes[0] !== "bm25" || r.modes[1] !== "hybrid")) throw new Error(`unexpected modes ${JSON.stringify(runs.map((r) => r.modes))}`);
          const mid = (k) => {
            const xs = runs.map((r) => r[k]).filter((x) => x != null);
            return xs.length ? median(xs) : null;
          };
          const ms = (k) => (mid(k) == null ? "–" : `${Math.round(mid(k))} ms`);
          const kb = (k) => (mid(k) == null ? "–" : `${Math.round(mid(k) / 1000).toLocaleString("en")} KB`);
          const name = site.split("/").filter(Boolean).at(-1);
          lines.push(`| ${name} (${manifest.chunks} chunks) | ${which} | ${throttle ? "10 Mbit/s, 40 ms" : "localhost"} | ${ms("lexical")} | ${kb("lexicalBytes")} | ${ms("hybrid")} | ${kb("hybridBytes")} |`);
        }
      }
    } finally {
      srv.close();
    }
  }
} finally {
  await browser.close();
}
console.log(`Query: ${JSON.stringify(QUERY)}; ${RUNS} cold contexts each, medians.\n`);
console.log(lines.join("\n"));
