// Turns wasm-pack's output folder into the npm package `needle-search`: adds the JS API, the
// worker, the widget and the landing highlight next to the wasm-bindgen glue, and rewrites
// package.json so that `import { open } from "needle-search"` is the entry point.
import { copyFileSync, existsSync, readFileSync, writeFileSync, rmSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = process.argv[2] ?? "pkg";
const www = dirname(fileURLToPath(import.meta.url));
const sources = ["needle.js", "needle.d.ts", "needle-worker.js", "widget.js", "widget.css", "highlight.js", "needle-sw.js"];
for (const f of sources) copyFileSync(join(www, f), join(pkg, f));
rmSync(join(pkg, ".gitignore"), { force: true });

// Drop the .wasm's custom sections (function names: 2.3 MB raw, ~0.4 MB brotli; producers):
// nothing at run time reads them. NEEDLE_WASM_KEEP_NAMES=1 keeps them for profiling.
const WASMS = ["needle_core_bg.wasm", "needle_core_relaxed_bg.wasm", "needle_lexical_bg.wasm"].filter((f) => existsSync(join(pkg, f)));
// The lexical core with the stemmers is for the CLI to embed (a bundle of a site in a stemmed
// language ships it), not part of the npm package: stripped, not listed.
const STEM = ["needle_lexical_stem_bg.wasm"].filter((f) => existsSync(join(pkg, f)));
for (const f of process.env.NEEDLE_WASM_KEEP_NAMES === "1" ? [] : [...WASMS, ...STEM]) {
  const file = join(pkg, f);
  const b = readFileSync(file);
  const parts = [b.subarray(0, 8)];
  let pos = 8;
  const leb = () => {
    let r = 0, s = 0, x;
    do {
      x = b[pos++];
      r += (x & 0x7f) * 2 ** s;
      s += 7;
    } while (x & 0x80);
    return r;
  };
  while (pos < b.length) {
    const start = pos;
    const id = b[pos++];
    const end = leb() + pos;
    if (id !== 0) parts.push(b.subarray(start, end));
    pos = end;
  }
  writeFileSync(file, Buffer.concat(parts));
}

const generated = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8"));
const meta = {
  name: "needle-search",
  version: generated.version,
  description: "Offline hybrid (BM25 + dense) search with exact citations for static documentation sites, in WebAssembly",
  license: generated.license,
  type: "module",
  main: "needle.js",
  module: "needle.js",
  types: "needle.d.ts",
  exports: {
    ".": { types: "./needle.d.ts", default: "./needle.js" },
    "./core": { types: "./needle_core.d.ts", default: "./needle_core.js" },
    "./widget.js": "./widget.js",
    "./widget.css": "./widget.css",
    "./highlight.js": "./highlight.js",
    "./needle_core_bg.wasm": "./needle_core_bg.wasm",
    "./needle_core_relaxed_bg.wasm": "./needle_core_relaxed_bg.wasm",
    "./lexical": "./needle_lexical.js",
    "./needle_lexical_bg.wasm": "./needle_lexical_bg.wasm",
  },
  files: [...new Set([...(generated.files ?? []), ...sources, ...WASMS, "needle_lexical.js"])],
  sideEffects: ["./widget.js", "./highlight.js"],
  keywords: ["search", "wasm", "documentation", "semantic-search", "bm25"],
};
writeFileSync(join(pkg, "package.json"), JSON.stringify(meta, null, 2) + "\n");
