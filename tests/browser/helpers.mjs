// Shared fixtures of the browser tests: the fixture site with the widget on every page, its
// index + browser bundle (built by the real `needle build`), `needle serve`, native
// `needle search` for comparison, and Debian's Chromium driven by playwright-core.

import { spawn, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const NEEDLE = process.env.NEEDLE_BIN ?? join(ROOT, "target", "release", "needle");
export const FIXTURE = join(ROOT, "tests", "fixtures", "nomicon");
export const WORK = process.env.NEEDLE_BROWSER_WORK ?? join(ROOT, "target", "browser-fixture");
export const ARTIFACTS = join(ROOT, "tests", "artifacts");
export const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** The median of numbers (the mean of the two middle ones for an even count): benchmarks report it. */
export function median(a) {
  const s = [...a].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** The snippet a site adds to its pages (the README's two lines). */
export const WIDGET_SNIPPET = `<script type="module" src="/needle/widget.js"></script>`;
export const WIDGET_ELEMENT = `<needle-search id="needle-box" offline></needle-search>`;

export function jsonl(path) {
  return readFileSync(path, "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
}
export const qrels = () => jsonl(join(FIXTURE, "qrels.jsonl"));
export const ood = () => jsonl(join(FIXTURE, "ood.jsonl"));

function* walk(dir) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) yield* walk(p);
    else yield p;
  }
}

function newest(paths) {
  let t = 0;
  for (const p of paths) {
    if (!existsSync(p)) continue;
    const s = statSync(p);
    if (s.isDirectory()) for (const f of walk(p)) t = Math.max(t, statSync(f).mtimeMs);
    else t = Math.max(t, s.mtimeMs);
  }
  return t;
}

/**
 * The fixture site as a site would ship it: every page carries the widget (outside its content
 * root, before `<main>`), indexed by `needle build SITE --out SITE/needle`. Rebuilt when the
 * binary, pkg/ or www/ is newer than the bundle.
 */
export function fixtureSite() {
  const site = join(WORK, "site");
  const bundle = join(site, "needle");
  const manifest = join(bundle, "manifest.json");
  const inputs = newest([NEEDLE, join(ROOT, "pkg"), join(ROOT, "www"), join(FIXTURE, "site")]);
  if (existsSync(manifest) && statSync(manifest).mtimeMs >= inputs) return { site, bundle };
  if (!existsSync(NEEDLE)) throw new Error(`${NEEDLE} missing: run ./build.sh cli`);
  rmSync(site, { recursive: true, force: true });
  mkdirSync(WORK, { recursive: true });
  cpSync(join(FIXTURE, "site"), site, { recursive: true });
  for (const f of walk(site)) {
    if (!f.endsWith(".html")) continue;
    const html = readFileSync(f, "utf8");
    const withWidget = html
      .replace(/<\/head>/i, `${WIDGET_SNIPPET}\n</head>`)
      .replace(/<body([^>]*)>/i, `<body$1>\n${WIDGET_ELEMENT}`);
    writeFileSync(f, withWidget);
  }
  const r = spawnSync(NEEDLE, ["build", site, "--out", bundle], { stdio: ["ignore", "inherit", "inherit"], env: process.env });
  if (r.status !== 0) throw new Error(`needle build failed (${r.status})`);
  if (!existsSync(manifest)) throw new Error(`needle build wrote no browser bundle (${manifest} missing)`);
  return { site, bundle };
}

/**
 * Any fixture site (a folder of pages with `<main>`) prepared like `fixtureSite`: copied under
 * WORK/`name`, the widget added to every page (unless `addWidget` is false: the pages have it),
 * indexed with its browser bundle (`args` go to `needle build`). Rebuilt when the binary, pkg/, www/ or the pages are newer
 * than the bundle.
 */
export function widgetSite(src, name, { addWidget = true, args = [] } = {}) {
  const site = join(WORK, name);
  const bundle = join(site, "needle");
  const manifest = join(bundle, "manifest.json");
  const inputs = newest([NEEDLE, join(ROOT, "pkg"), join(ROOT, "www"), src]);
  if (existsSync(manifest) && statSync(manifest).mtimeMs >= inputs) return { site, bundle };
  if (!existsSync(NEEDLE)) throw new Error(`${NEEDLE} missing: run ./build.sh cli`);
  rmSync(site, { recursive: true, force: true });
  mkdirSync(WORK, { recursive: true });
  // A bundle built into the source folder (docs/needle by ./build.sh demo) is not a page.
  cpSync(src, site, { recursive: true, filter: (p) => relative(src, p) !== "needle" });
  for (const f of walk(site)) {
    if (!addWidget || !f.endsWith(".html")) continue;
    // latin1 maps bytes to code units one to one: pages in legacy encodings keep their bytes
    // (the snippets are ASCII), so the extractor and the browser both decode them by their <meta>.
    const html = readFileSync(f, "latin1");
    writeFileSync(f, html.replace(/<\/head>/i, `${WIDGET_SNIPPET}\n</head>`).replace(/<body([^>]*)>/i, `<body$1>\n${WIDGET_ELEMENT}`), "latin1");
  }
  const r = spawnSync(NEEDLE, ["build", site, "--out", bundle, ...args], { stdio: ["ignore", "inherit", "inherit"], env: process.env });
  if (r.status !== 0) throw new Error(`needle build failed (${r.status})`);
  if (!existsSync(manifest)) throw new Error(`needle build wrote no browser bundle (${manifest} missing)`);
  return { site, bundle };
}

/**
 * The fixture site with its index shipped in pieces (`needle build --pieces always`), in 16
 * inverted lists all probed: its answers must be the whole index's, exactly.
 */
export const piecedSite = () => widgetSite(join(FIXTURE, "site"), "pieces-site", { args: ["--pieces", "always", "--lists", "16", "--nprobe", "16"] });

/** needle's own documentation (docs/, the demo site), whose pages already carry the widget. */
export const docsSite = () => widgetSite(join(ROOT, "docs"), "docs-site", { addWidget: false });

/**
 * Native `needle search` (batch: JSON lines {"id","query"} on stdin, one result line each):
 * { hits: [{ page, from, to, content, distance, rank }], answer, mode }. Memoised; pass every
 * query of a test to `primeNative` first so the model is loaded once.
 */
const nativeMemo = new Map();
const memoKey = (bundle, query, k, mode, fusion) => JSON.stringify([bundle, query, k, mode, fusion]);
export function primeNative(bundle, queries, { k = 20, mode = "hybrid", fusion = "pages" } = {}) {
  const todo = [...new Set(queries)].filter((q) => !nativeMemo.has(memoKey(bundle, q, k, mode, fusion)));
  if (!todo.length) return;
  const input = todo.map((query, id) => JSON.stringify({ id, query })).join("\n") + "\n";
  const args = ["search", bundle, "--k", String(k), "--mode", mode, "--fusion", fusion];
  const r = spawnSync(NEEDLE, args, { input, encoding: "utf8", maxBuffer: 256 << 20 });
  if (r.status !== 0) throw new Error(`needle search failed: ${r.stderr}`);
  for (const line of r.stdout.split("\n").filter((l) => l.trim())) {
    const res = JSON.parse(line);
    nativeMemo.set(memoKey(bundle, todo[res.id], k, mode, fusion), res);
  }
}
export function nativeSearch(bundle, query, { k = 20, mode = "hybrid", fusion = "pages" } = {}) {
  primeNative(bundle, [query], { k, mode, fusion });
  return nativeMemo.get(memoKey(bundle, query, k, mode, fusion));
}

/** Native `needle query INDEX Q --prompt`: the prompt text. */
export function nativePrompt(bundle, question) {
  const r = spawnSync(NEEDLE, ["query", bundle, question, "--prompt"], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`needle query failed: ${r.stderr}`);
  return r.stdout;
}

/** Starts `needle serve ROOT --port 0`; resolves to { url, close }. */
export function serve(root, { csp = false } = {}) {
  return new Promise((resolve, reject) => {
    const args = ["serve", root, "--port", "0", ...(csp ? ["--csp"] : [])];
    const child = spawn(NEEDLE, args, { stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (d) => {
      err += d;
      const m = /http:\/\/127\.0\.0\.1:(\d+)\//.exec(err);
      if (m) resolve({ url: `http://127.0.0.1:${m[1]}/`, close: () => child.kill() });
    });
    child.on("exit", (code) => reject(new Error(`needle serve exited (${code}): ${err}`)));
  });
}

export async function launch(options = {}) {
  const { chromium } = await import("playwright-core");
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, ...options });
}

export async function launchPersistent(userDataDir, options = {}) {
  const { chromium } = await import("playwright-core");
  return chromium.launchPersistentContext(userDataDir, { executablePath: CHROMIUM, args: CHROMIUM_ARGS, ...options });
}

export function artifact(name) {
  mkdirSync(ARTIFACTS, { recursive: true });
  return join(ARTIFACTS, name);
}

/** Whitespace-insensitive form used to compare a highlight with its quote. */
export const squash = (s) => s.replace(/[ \t\n\f\r]+/g, "");
export const collapse = (s) => s.replace(/[ \t\n\f\r]+/g, " ").trim();

export function relativeTo(root, p) {
  return relative(root, p).split("\\").join("/");
}
