// A search box's keystrokes in Chromium (BENCHMARKS.md, "The search box"): the lexical core
// answering every prefix of a query as a reader types it, timed from the page (worker round
// trip included), on a bundle built by `needle build SITE --out BUNDLE`.
//
//   node tests/browser/bench-keys.mjs BUNDLE
//
// Three kinds of keystroke, over the same queries: each prefix as typed (the last word matched
// as a prefix of the site's terms), each prefix with a typo in its first word of 5+ letters
// (corrected against the site's terms), and each prefix closed by "?" (no word read as a
// prefix; a word cut short is then a typo to correct). Medians and p90 per kind, over RUNS
// (default 3) passes, after one warm-up pass. To compare with another lexical core, copy the
// bundle and put that core's `needle_lexical_bg.wasm` and glue under the manifest's names.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { launch, median, serve } from "./helpers.mjs";

const [bundle] = process.argv.slice(2);
if (!bundle) throw new Error("usage: node tests/browser/bench-keys.mjs BUNDLE");
const RUNS = Number(process.env.RUNS ?? 3);
const TITLES = [
  "ownership and borrowing",
  "defining an enum",
  "refutability",
  "smart pointers",
  "fearless concurrency",
  "advanced traits",
  "generic data types",
  "writing automated tests",
  "closures capture environment",
  "unsafe rust superpowers",
];
/** One letter of the first long word swapped with the next. */
const typo = (q) => q.replace(/[a-z]{5,}/, (w) => w.slice(0, 2) + w[3] + w[2] + w.slice(4));
const keystrokes = (q) => [...q].map((_, i) => q.slice(0, i + 1)).filter((p) => p.trim().length >= 2);
const kinds = {
  prefix: TITLES.flatMap(keystrokes),
  typo: TITLES.map(typo).flatMap(keystrokes),
  whole: TITLES.flatMap(keystrokes).map((p) => `${p}?`),
};

writeFileSync(join(bundle, "bench-keys.html"), "<!doctype html><title>keys</title><link rel=icon href='data:,'>");
const server = await serve(bundle);
const browser = await launch();
try {
  const page = await (await browser.newContext({ serviceWorkers: "block" })).newPage();
  await page.goto(server.url + "bench-keys.html");
  await page.evaluate(async () => {
    const { open } = await import("/needle.js");
    window.engine = await open(new URL("/", location.href), { model: false });
    await window.engine.lexical;
  });
  const times = Object.fromEntries(Object.keys(kinds).map((k) => [k, []]));
  for (let run = 0; run <= RUNS; run++) {
    for (const [kind, queries] of Object.entries(kinds)) {
      const ms = await page.evaluate(async (qs) => {
        const out = [];
        for (const q of qs) {
          const t = performance.now();
          await window.engine.search(q, { k: 10, mode: "bm25" });
          out.push(performance.now() - t);
        }
        return out;
      }, queries);
      if (run > 0) times[kind].push(...ms);
    }
  }
  const p90 = (a) => [...a].sort((x, y) => x - y)[Math.floor(0.9 * (a.length - 1))];
  console.log(`keystrokes per pass: ${kinds.prefix.length}; ${RUNS} passes`);
  for (const [kind, t] of Object.entries(times)) console.log(`${kind.padEnd(7)} median ${median(t).toFixed(2)} ms  p90 ${p90(t).toFixed(2)} ms`);
} finally {
  await browser.close();
  server.close();
}
