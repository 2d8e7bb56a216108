// Pagefind against needle on the Debian Administrator's Handbook question sets (README.md here):
// en-US, de-DE and zh-CN, 40 questions each asked twice (q_doc, q_ticket) plus 30 out-of-domain
// (OOD) queries.
//
// Why page level: Pagefind returns pages, needle returns chunks of pages. To compare them on the
// same footing, every system's answer to a query is reduced to its distinct result pages in rank
// order, and a question counts as found at rank r when the r-th page is the question's `page` and
// that page's text holds the question's `needle` (both normalised: lowercase, whitespace
// collapsed). For Pagefind the text is the page's `content` as its `data()` returns it, so a
// needle lost by Pagefind's own text extraction is a miss. For needle the named page holds the
// needle by construction (check.py verifies it on the source), so its rank is the page's rank.
// hit@k is then "found at a rank ≤ k", for k = 1, 4, 20.
//
// What runs:
//  - Pagefind 1.6.0 (npm, installed into target/pagefind-i18n, not the repo's package.json) over
//    a copy of each language folder, with `--force-language`: the pages carry no `<html lang>`,
//    so without it Pagefind files every page under the language "unknown" (no stemming).
//    Queries go through Pagefind's JS API in headless Chromium, from two host pages, because the
//    API reads the host page's `<html lang>` at search time (Chinese queries are only split into
//    words by Intl.Segmenter when that language is zh/ja/th):
//      "pagefind"         a page with `<html lang="de|zh|en">`, as a site setting it would ship;
//      "pagefind no-lang" the handbook's own index.html (no `lang`), as this site ships.
//  - needle, native `needle search` over the prebuilt indexes /tmp/dh-<LANG>, `--mode bm25` (what
//    needle uses for de and zh) and for en also `--mode hybrid` (the default). Besides the page
//    numbers: needle's own chunk-level R@4 (the needle inside one of the first 4 chunks), and its
//    verdicts on OOD queries (needle keeps listing hits when it refuses, so "≥1 result" says
//    nothing for it; the verdict is what a reader sees).
//
// Writes pagefind.json next to this file and prints one Markdown table per language.
// Run from anywhere: node eval/i18n/debian-handbook/pagefind.mjs

import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { NEEDLE, ROOT, jsonl, launch, serve } from "../../../tests/browser/helpers.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const SRC = "/usr/share/doc/debian-handbook/html";
const WORK = join(ROOT, "target", "pagefind-i18n");
const PAGEFIND_VERSION = "1.6.0";
const MODELS = join(ROOT, "models");
const K = 20;
const KS = [1, 4, K];
const LANGS = [
  { dir: "en-US", code: "en", modes: ["bm25", "hybrid"] },
  { dir: "de-DE", code: "de", modes: ["bm25"] },
  { dir: "zh-CN", code: "zh", modes: ["bm25"] },
];
const needleIndex = (lang) => `/tmp/dh-${lang.dir}`;

/** The comparison form of a text: lowercase, every whitespace run one space. */
const norm = (s) => s.toLowerCase().replace(/\s+/g, " ").trim();

/** A Pagefind result URL ("/apt.html", "/" for index.html) as a page path of the question sets. */
function pageOf(url) {
  const path = decodeURI(url.split(/[?#]/)[0]).replace(/^\//, "");
  return path === "" || path.endsWith("/") ? path + "index.html" : path;
}

/** Installs pagefind@PAGEFIND_VERSION into WORK (its own package.json) unless it is there. */
function installPagefind() {
  const pkg = join(WORK, "node_modules", "pagefind", "package.json");
  if (!existsSync(pkg) || JSON.parse(readFileSync(pkg, "utf8")).version !== PAGEFIND_VERSION) {
    mkdirSync(WORK, { recursive: true });
    if (!existsSync(join(WORK, "package.json"))) execFileSync("npm", ["init", "-y"], { cwd: WORK, stdio: "ignore" });
    execFileSync("npm", ["install", "--no-audit", "--no-fund", `pagefind@${PAGEFIND_VERSION}`], { cwd: WORK, stdio: "inherit" });
  }
  return join(WORK, "node_modules", ".bin", "pagefind");
}

/**
 * Copies the language folder to WORK/<LANG>/site and indexes it with Pagefind (bundle in
 * site/pagefind). Returns the site and what the build reported, with its wall-clock time (the
 * npm wrapper included) next to Pagefind's own "Finished in".
 */
function buildPagefind(bin, lang) {
  const site = join(WORK, lang.dir, "site");
  rmSync(site, { recursive: true, force: true });
  cpSync(join(SRC, lang.dir), site, { recursive: true });
  const args = ["--site", site, "--force-language", lang.code];
  const t0 = performance.now();
  const out = execFileSync(bin, args, { encoding: "utf8" });
  const wallSeconds = (performance.now() - t0) / 1000;
  const num = (re) => Number(re.exec(out)?.[1]);
  return {
    site,
    build: {
      command: ["pagefind", ...args].join(" "),
      wallSeconds: Number(wallSeconds.toFixed(3)),
      pagefindSeconds: num(/Finished in ([\d.]+) seconds/),
      filesFound: num(/Found (\d+) files?/),
      pagesIndexed: num(/Indexed (\d+) pages?/),
      wordsIndexed: num(/Indexed (\d+) words?/),
      languages: /Discovered \d+ languages?: (.*)/.exec(out)?.[1].trim(),
      // No data-pagefind-body anywhere: Pagefind indexes each page's whole <body>.
      wholeBody: out.includes("Did not find a data-pagefind-body element"),
    },
  };
}

/**
 * Runs every query through Pagefind's JS API on `hostUrl`: for each, the result count and the
 * URLs of the first K results, whose data() is loaded. Returns those and the content of every page
 * a data() returned (url -> text).
 */
async function searchPagefind(page, hostUrl, queries) {
  await page.goto(hostUrl);
  return page.evaluate(
    async ({ texts, k }) => {
      const pagefind = await import("/pagefind/pagefind.js");
      const contents = {};
      const results = [];
      for (const q of texts) {
        const r = await pagefind.search(q);
        const top = await Promise.all(r.results.slice(0, k).map((x) => x.data()));
        for (const d of top) contents[d.url] ??= d.content;
        results.push({ count: r.results.length, urls: top.map((d) => d.url) });
      }
      return { results, contents, hostLang: document.documentElement.lang };
    },
    { texts: queries.map((q) => q.text), k: K },
  );
}

/**
 * Which needles survive Pagefind's text extraction at all: the text of every indexed page (a
 * filter-only search, `search(null)`, lists them all), searched for each question's needle on
 * its page.
 */
async function needleCoverage(page, questions) {
  const all = await page.evaluate(async () => {
    const pagefind = await import("/pagefind/pagefind.js");
    const pages = await Promise.all((await pagefind.search(null)).results.map((x) => x.data()));
    return pages.map((d) => [d.url, d.content]);
  });
  const texts = new Map(all.map(([url, text]) => [pageOf(url), norm(text)]));
  const missing = questions.filter((q) => !texts.get(q.page)?.includes(norm(q.needle))).map((q) => q.id);
  return { pages: texts.size, n: questions.length, onPage: questions.length - missing.length, missing };
}

/** Native `needle search` over the language's index: one result line per query, in query order. */
function searchNeedle(lang, mode, queries) {
  const args = ["search", needleIndex(lang), "--k", String(K), "--mode", mode, "--lang", lang.code];
  const input = queries.map((q, i) => JSON.stringify({ id: String(i), query: q.text, lang: lang.code })).join("\n") + "\n";
  const r = spawnSync(NEEDLE, args, { input, encoding: "utf8", maxBuffer: 1 << 28, env: { ...process.env, NEEDLE_MODEL_DIR: MODELS } });
  if (r.status !== 0) throw new Error(`needle ${args.join(" ")} failed (${r.status}): ${r.stderr}`);
  const byId = new Map(r.stdout.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l)).map((o) => [o.id, o]));
  return { command: `NEEDLE_MODEL_DIR=${MODELS} needle ${args.join(" ")}`, lines: queries.map((_, i) => byId.get(String(i))) };
}

/** Per-query records of a Pagefind run (OOD queries keep their result count only). */
function pagefindRecords(queries, run) {
  return queries.map((q, i) => {
    const { count, urls } = run.results[i];
    const pages = urls.map(pageOf);
    const rec = { key: q.key, kind: q.kind, count, pages };
    if (q.kind === "ood") return rec;
    // Pagefind lists a page once: the question's page counts where it stands if its text holds the needle.
    const at = pages.indexOf(q.page);
    const found = at >= 0 && norm(run.contents[urls[at]]).includes(norm(q.needle));
    return { ...rec, rank: found ? at + 1 : null };
  });
}

/** Per-query records of a needle run: distinct pages in rank order, chunk-level R@4, verdict. */
function needleRecords(queries, lines) {
  return queries.map((q, i) => {
    const { hits, verdict } = lines[i];
    const pages = [...new Set(hits.map((h) => h.page))];
    const rec = { key: q.key, kind: q.kind, count: hits.length, verdict, pages };
    if (q.kind === "ood") return rec;
    const chunkHit4 = hits.slice(0, 4).some((h) => norm(h.content).includes(norm(q.needle)));
    const at = pages.indexOf(q.page);
    return { ...rec, rank: at >= 0 ? at + 1 : null, chunkHit4 };
  });
}

/** hit@k per phrasing, queries without any result, and the OOD counts. */
function summarise(records) {
  const summary = {};
  for (const kind of ["doc", "ticket"]) {
    const rs = records.filter((r) => r.kind === kind);
    const s = { n: rs.length, noResults: rs.filter((r) => r.count === 0).length };
    for (const k of KS) s[`hit@${k}`] = rs.filter((r) => r.rank !== null && r.rank <= k).length;
    if ("chunkHit4" in rs[0]) s["chunkR@4"] = rs.filter((r) => r.chunkHit4).length;
    if ("verdict" in rs[0]) s.answerVerdicts = rs.filter((r) => r.verdict === "answer").length;
    summary[kind] = s;
  }
  const ood = records.filter((r) => r.kind === "ood");
  summary.ood = { n: ood.length, withResults: ood.filter((r) => r.count > 0).length };
  if ("verdict" in ood[0]) {
    for (const v of ["answer", "results", "no-answer"]) summary.ood[v] = ood.filter((r) => r.verdict === v).length;
  }
  return summary;
}

/** The language's queries: each question's q_doc and q_ticket, then the OOD set. */
function loadQueries(lang) {
  const qrels = jsonl(join(HERE, `${lang.dir}.qrels.jsonl`));
  const ood = jsonl(join(HERE, `${lang.dir}.ood.jsonl`));
  return [
    ...qrels.map((q) => ({ key: `${q.id}/doc`, id: q.id, kind: "doc", text: q.q_doc, page: q.page, needle: q.needle })),
    ...qrels.map((q) => ({ key: `${q.id}/ticket`, id: q.id, kind: "ticket", text: q.q_ticket, page: q.page, needle: q.needle })),
    ...ood.map((q) => ({ key: q.id, kind: "ood", text: q.query })),
  ];
}

/** The language's Markdown table: one row per system, then what the Pagefind build reported. */
function table(lang, result) {
  const frac = (x, n) => `${x}/${n} (${(x / n).toFixed(2)})`;
  const head = ["system", "doc hit@1", "doc hit@4", "doc hit@20", "ticket hit@1", "ticket hit@4", "ticket hit@20",
    "chunk R@4 doc / ticket", "in-domain with 0 results", "OOD with ≥1 result", "OOD verdicts answer / results / no-answer"];
  const rows = Object.entries(result.systems).map(([name, { summary: s }]) => [
    name,
    ...["doc", "ticket"].flatMap((kind) => KS.map((k) => frac(s[kind][`hit@${k}`], s[kind].n))),
    "chunkR@4" in s.doc ? `${s.doc["chunkR@4"]} / ${s.ticket["chunkR@4"]}` : "–",
    String(s.doc.noResults + s.ticket.noResults),
    `${s.ood.withResults}/${s.ood.n}`,
    "answer" in s.ood ? `${s.ood.answer} / ${s.ood.results} / ${s.ood["no-answer"]}` : "–",
  ]);
  const line = (cells) => `| ${cells.join(" | ")} |`;
  const b = result.pagefindBuild;
  const { doc, ood } = Object.values(result.systems)[0].summary;
  return [
    `### ${lang.dir} (${doc.n} questions × 2 phrasings, ${ood.n} OOD)`,
    "",
    line(head),
    line(head.map(() => "---")),
    ...rows.map(line),
    "",
    `Pagefind build: ${b.filesFound} files found, ${b.pagesIndexed} pages, ${b.wordsIndexed} words, language(s) ${b.languages}, ` +
      `${b.pagefindSeconds} s (${b.wallSeconds} s wall). Needles found in Pagefind's text of their page: ` +
      `${result.needleCoverage.onPage}/${result.needleCoverage.n}.`,
  ].join("\n");
}

const pagefindBin = installPagefind();
const browser = await launch();
const output = {
  pagefind: PAGEFIND_VERSION,
  chromium: browser.version(),
  needle: execFileSync(NEEDLE, ["--version"], { encoding: "utf8" }).trim(),
  node: process.version,
  k: K,
  languages: {},
};
try {
  for (const lang of LANGS) {
    const queries = loadQueries(lang);
    const questions = queries.filter((q) => q.kind === "doc");
    const { site, build } = buildPagefind(pagefindBin, lang);
    const result = { pagefindBuild: build, systems: {} };
    const server = await serve(site);
    try {
      const page = await browser.newPage();
      // A host page that declares the language, served next to the bundle (same origin).
      await page.route("**/pagefind-host.html", (route) =>
        route.fulfill({ contentType: "text/html; charset=utf-8", body: `<!DOCTYPE html><html lang="${lang.code}"><head><meta charset="utf-8"><title>search</title></head><body></body></html>` }),
      );
      for (const [name, host] of [["pagefind", "pagefind-host.html"], ["pagefind no-lang", "index.html"]]) {
        const run = await searchPagefind(page, server.url + host, queries);
        const records = pagefindRecords(queries, run);
        result.systems[name] = { host, hostLang: run.hostLang, summary: summarise(records), queries: records };
      }
      result.needleCoverage = await needleCoverage(page, questions);
      await page.close();
    } finally {
      server.close();
    }
    for (const mode of lang.modes) {
      const { command, lines } = searchNeedle(lang, mode, queries);
      const records = needleRecords(queries, lines);
      result.systems[`needle ${mode}`] = { command, summary: summarise(records), queries: records };
    }
    output.languages[lang.dir] = result;
    console.log(table(lang, result) + "\n");
  }
} finally {
  await browser.close();
}
writeFileSync(join(HERE, "pagefind.json"), JSON.stringify(output, null, 1) + "\n");
console.log(`wrote ${join(HERE, "pagefind.json")}`);
