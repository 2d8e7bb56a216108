// The landing highlight (www/highlight.js) copies the extractor's four rule constants from
// src/doc/extract.rs. A copy that drifts makes the browser's canonical text differ from the index's
// on the pages the difference touches (their content hash no longer matches, so the highlight
// falls back to finding the quote by text). canonical.test.mjs catches drift only on the pages
// of the fixture site; this compares the constants themselves, read from the Rust source.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const RUST = readFileSync(join(ROOT, "src", "doc", "extract.rs"), "utf8");

/** The string literals of `pub const NAME: &[&str] = &[ … ];` in src/doc/extract.rs, comments removed. */
function rustList(name) {
  const start = RUST.indexOf(`pub const ${name}: &[&str] = &[`);
  assert.ok(start >= 0, `src/doc/extract.rs has no ${name}`);
  const body = RUST.slice(RUST.indexOf("&[", RUST.indexOf("=", start)) + 2, RUST.indexOf("];", start));
  const code = body
    .split("\n")
    .map((line) => line.replace(/\/\/.*$/, ""))
    .join("\n");
  return [...code.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]);
}

describe("highlight.js mirrors the extractor's rule constants", async () => {
  const hl = await import(join(ROOT, "www", "highlight.js"));
  it("CONTENT_ROOT_SELECTORS and DROP_SELECTORS: the same selectors in the same order", () => {
    assert.deepEqual(hl.CONTENT_ROOT_SELECTORS, rustList("CONTENT_ROOT_SELECTORS"));
    assert.deepEqual(hl.DROP_SELECTORS, rustList("DROP_SELECTORS"));
  });
  it("BLOCK_ELEMENTS and VERBATIM_ELEMENTS: the same tag names", () => {
    assert.deepEqual([...hl.BLOCK_ELEMENTS].sort(), rustList("BLOCK_ELEMENTS").sort());
    assert.deepEqual([...hl.VERBATIM_ELEMENTS].sort(), rustList("VERBATIM_ELEMENTS").sort());
  });
});
