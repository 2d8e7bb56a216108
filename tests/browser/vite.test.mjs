// The npm package under a real bundler: `npm pack` of pkg/, installed into a fresh Vite app
// that imports the API and the widget, `vite build`, the built app served next to the fixture
// site's bundle (under the strict CSP), answering in Chromium through the worker and
// WebAssembly exactly like native `needle search`.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, fixtureSite, launch, nativeSearch, qrels, serve } from "./helpers.mjs";

const APP = "vite-app";

function files(dir, prefix = "") {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name), `${prefix}${e.name}/`) : [`${prefix}${e.name}`]));
}

describe("the npm package in a Vite app", () => {
  let tmp, site, bundle, server, browser, dist, packed;
  before(async () => {
    const pkg = join(ROOT, "pkg");
    assert.ok(existsSync(join(pkg, "needle_core_bg.wasm")), "pkg/ missing: run ./build.sh wasm");
    ({ site, bundle } = fixtureSite());
    tmp = mkdtempSync(join(tmpdir(), "needle-vite-"));
    [packed] = JSON.parse(execFileSync("npm", ["pack", pkg, "--pack-destination", tmp, "--json"], { encoding: "utf8" }));
    const tgz = packed.filename;
    const app = join(tmp, "app");
    mkdirSync(app);
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
    // The version the repository pins; --prefer-offline takes it from npm's cache (npm ci put it
    // there) and fetches only what the cache lacks, such as the platform's native bundler binding.
    const vite = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).devDependencies.vite;
    execFileSync("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", join(tmp, tgz), `vite@${vite}`], { cwd: app, stdio: "ignore" });
    writeFileSync(
      join(app, "index.html"),
      `<!doctype html>
<html><head><meta charset="utf-8"><title>A Vite app</title><link rel="icon" href="data:,"></head>
<body>
  <needle-search base="/needle/"></needle-search>
  <script type="module" src="./main.js"></script>
</body></html>
`,
    );
    writeFileSync(
      join(app, "main.js"),
      `import { open } from "needle-search";
import "needle-search/widget.js";
window.needleOpen = open;
`,
    );
    execFileSync(join(app, "node_modules", ".bin", "vite"), ["build", "--base", `/${APP}/`, "--logLevel", "warn"], { cwd: app, stdio: ["ignore", "inherit", "inherit"] });
    dist = join(app, "dist");
    rmSync(join(site, APP), { recursive: true, force: true });
    cpSync(dist, join(site, APP), { recursive: true });
    server = await serve(site, { csp: true });
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    server?.close();
    if (site) rmSync(join(site, APP), { recursive: true, force: true });
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it("packs the API, the widget, the engine and their types, nothing else", () => {
    const meta = JSON.parse(readFileSync(join(ROOT, "pkg", "package.json"), "utf8"));
    const paths = packed.files.map((f) => f.path).sort();
    const allowed = new Set([...meta.files, "package.json", "README.md"]);
    assert.deepEqual(paths.filter((p) => !allowed.has(p)), []);
    for (const f of ["needle.js", "needle.d.ts", "needle-worker.js", "widget.js", "widget.css", "highlight.js", "needle_core.js", "needle_core_bg.wasm"]) assert.ok(paths.includes(f), f);
    // Every export names a packed file.
    for (const [k, v] of Object.entries(meta.exports)) for (const f of typeof v === "string" ? [v] : Object.values(v)) assert.ok(paths.includes(f.replace(/^\.\//, "")), `${k}: ${f}`);
  });

  it("builds an app of one page and one script: no package file copied beside it", () => {
    // In a browser the engine, its worker and the model come from the site's bundle
    // (manifest.json): the .wasm and glue the package ships for Node must not be emitted, nor
    // anything else a `new URL("…", import.meta.url)` would make the bundler copy.
    const built = files(dist).sort();
    assert.equal(built.length, 2, built.join(", "));
    assert.equal(built[1], "index.html");
    assert.match(built[0], /^assets\/index-[\w-]+\.js$/);
  });

  it("answers a query through the worker and WebAssembly like native needle search, from the API and the widget", async () => {
    const ctx = await browser.newContext({ serviceWorkers: "block" });
    const page = await ctx.newPage();
    const errors = [];
    page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
    page.on("pageerror", (e) => errors.push(e.message));
    await page.goto(`${server.url}${APP}/index.html`);
    await page.waitForFunction(() => typeof window.needleOpen === "function");
    const q = qrels()[4].q_doc;
    const { r, wasm } = await page.evaluate(async (q) => {
      let wasm = null;
      const engine = await window.needleOpen("/needle/", { onProgress: (p) => (wasm = p.wasm ?? wasm) });
      await engine.ready;
      return { r: await engine.search(q, { k: 20, mode: "hybrid" }), wasm };
    }, q);
    assert.ok(page.workers().some((w) => /needle-worker\.[0-9a-f]{16}\.js$/.test(w.url())), "the engine runs in the bundle's worker");
    assert.equal(wasm, "relaxed-simd");
    assert.equal(r.mode, "hybrid");
    const nat = nativeSearch(bundle, q, { k: 20 });
    assert.deepEqual(r.hits.map((h) => [h.page, h.from, h.to]), nat.hits.map((h) => [h.page, h.from, h.to]));
    r.hits.forEach((h, i) => assert.ok(Math.abs(h.distance - nat.hits[i].distance) < 1e-3, `hit ${i}: ${h.distance} vs ${nat.hits[i].distance}`));
    assert.deepEqual(r.answer, nat.answer);
    assert.equal(new URL(r.hits[0].url).pathname, `/${r.hits[0].page}`, "result links point into the site, not the app");

    // The widget, bundled into the app, with its base pointing at the site's bundle.
    await page.focus("needle-search input");
    await page.evaluate(async () => (await document.querySelector("needle-search").engine).ready);
    await page.fill("needle-search input", q);
    await page.waitForFunction((q) => document.querySelector("needle-search").lastResult?.query === q, q);
    const shown = await page.evaluate(() => document.querySelector("needle-search").lastResult);
    assert.equal(shown.mode, "hybrid");
    const nat10 = nativeSearch(bundle, q, { k: 10 }); // what the widget asks for
    assert.deepEqual(shown.hits.map((h) => [h.page, h.from, h.to]), nat10.hits.map((h) => [h.page, h.from, h.to]));
    assert.equal(await page.locator("needle-search .panel").getAttribute("data-state"), nat10.answer.length ? "answer" : "no-answer");
    assert.ok((await page.locator("needle-search [role=option]").count()) > 0);
    assert.deepEqual(errors, []);
    await ctx.close();
  });
});
