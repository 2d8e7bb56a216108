// What Pagefind and MiniSearch ship for the same site (BENCHMARKS.md, "Browser" → bytes).
// Run after bench.mjs has built the fixture: node tests/browser/bench-compare.mjs
// Installs pagefind@1 and minisearch@7 from npm into target/bench-compare (not the repo's
// package.json: they are only measured here).
//  - Pagefind: `pagefind --site` over a copy of the fixture site; the bytes Chromium fetches for
//    one query through its JS API, with the data of the top 5 results.
//  - MiniSearch: the 749 chunks of needle's index (same text, same offsets as stored fields),
//    serialised with JSON.stringify; plus the library.
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { brotliCompressSync, constants } from "node:zlib";
import { ROOT, fixtureSite, launch, serve } from "./helpers.mjs";

const dir = join(ROOT, "target", "bench-compare");
mkdirSync(dir, { recursive: true });
if (!existsSync(join(dir, "node_modules", "minisearch"))) {
  execFileSync("npm", ["init", "-y"], { cwd: dir, stdio: "ignore" });
  execFileSync("npm", ["install", "--no-audit", "--no-fund", "pagefind@1.6.0", "minisearch@7"], { cwd: dir, stdio: "inherit" });
}
const br = (b) => brotliCompressSync(b, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }).length;
const { bundle } = fixtureSite();
const query = "How can the scope of unsafe code be limited?";

// Pagefind.
const site = join(dir, "site");
rmSync(site, { recursive: true, force: true });
cpSync(join(ROOT, "tests", "fixtures", "nomicon", "site"), site, { recursive: true });
execFileSync(join(dir, "node_modules", ".bin", "pagefind"), ["--site", site, "--output-subdir", "pagefind"], { stdio: "ignore" });
const server = await serve(site);
const browser = await launch();
const pf = { raw: 0, brotli: 0, files: 0 };
try {
  const page = await browser.newPage();
  await page.goto(server.url + "index.html").catch(() => {});
  const pending = [];
  page.on("response", (r) => {
    if (r.url().includes("/pagefind/")) pending.push(r.body().then((b) => ((pf.raw += b.length), (pf.brotli += br(b)), pf.files++)).catch(() => {}));
  });
  await page.evaluate(async (q) => {
    const p = await import("/pagefind/pagefind.js");
    const s = await p.search(q);
    await Promise.all(s.results.slice(0, 5).map((r) => r.data()));
  }, query);
  await page.waitForTimeout(500);
  await Promise.all(pending);
} finally {
  await browser.close();
  server.close();
}

// MiniSearch over needle's own chunks.
const { default: MiniSearch } = await import(join(dir, "node_modules", "minisearch", "dist", "es", "index.js"));
const { open } = await import(join(ROOT, "pkg", "needle.js"));
const engine = await open(bundle, { model: false });
const docs = [];
for (const p of await engine.pages()) for (const c of await engine.chunksOf(p.path)) docs.push({ id: docs.length, page: p.path, title: p.title, section: c.section, from: c.from, to: c.to, content: c.content });
const ms = new MiniSearch({ fields: ["title", "section", "content"], storeFields: ["page", "title", "section", "from", "to", "content"] });
ms.addAll(docs);
const json = Buffer.from(JSON.stringify(ms));
const lib = readFileSync(join(dir, "node_modules", "minisearch", "dist", "umd", "index.js"));

console.log(`| Pagefind 1.6.0 (one query + data of its top 5 results, ${pf.files} files) | ${pf.raw.toLocaleString("en")} | ${pf.brotli.toLocaleString("en")} |`);
console.log(`| MiniSearch 7 index of the same ${docs.length} chunks (JSON) + library | ${(json.length + lib.length).toLocaleString("en")} | ${(br(json) + br(lib)).toLocaleString("en")} |`);
