// A translated manual in the browser (tests/fixtures/i18n/handbook: English, German and Chinese
// chapters of the Debian Administrator's Handbook): the browser answers each language's
// questions exactly as native `needle search` with that "lang", and a reader in a language the
// model does not read never downloads the model; the widget on a German page searches German,
// and German and Chinese citations land on their exact range.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { NEEDLE, ROOT, launch, serve, squash, widgetSite } from "./helpers.mjs";

const sets = { de: "de-DE", zh: "zh-CN", en: "en-US" };
const ids = ["dh-07", "dh-12", "dh-20"];

function questions() {
  const out = [];
  for (const [lang, folder] of Object.entries(sets)) {
    const lines = readFileSync(join(ROOT, `eval/i18n/debian-handbook/${folder}.qrels.jsonl`), "utf8").split("\n").filter((l) => l.trim());
    for (const q of lines.map((l) => JSON.parse(l)).filter((q) => ids.includes(q.id))) {
      out.push({ id: `${lang}/${q.id}/doc`, lang, query: q.q_doc }, { id: `${lang}/${q.id}/ticket`, lang, query: q.q_ticket });
    }
  }
  return out;
}

describe("in Chromium, a translated manual", () => {
  let server, browser, site, bundle;
  before(async () => {
    ({ site, bundle } = widgetSite(join(ROOT, "tests/fixtures/i18n/handbook"), "i18n-site"));
    server = await serve(site);
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    server?.close();
  });

  it("answers every language's questions as native `needle search` with that language does", async () => {
    const qs = questions();
    const input = qs.map((q, i) => JSON.stringify({ id: i, query: q.query, lang: q.lang })).join("\n") + "\n";
    const r = spawnSync(NEEDLE, ["search", bundle, "--k", "20"], { input, encoding: "utf8", maxBuffer: 64 << 20 });
    assert.equal(r.status, 0, r.stderr);
    const native = r.stdout.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
    const page = await (await browser.newContext({ serviceWorkers: "block" })).newPage();
    await page.goto(server.url + "en-US/apt.html");
    const web = await page.evaluate(async (qs) => {
      const { open } = await import("/needle/needle.js");
      // An English reader loads the model; each search names its own language.
      const engine = await open("/needle/", { lang: "en" });
      await engine.ready;
      const out = [];
      for (const q of qs) out.push(await engine.search(q.query, { k: 20, lang: q.lang }));
      return { out, langs: await engine.languages() };
    }, qs);
    assert.deepEqual([...web.langs].sort(), ["de", "en", "zh"]);
    const show = (x) => `${x.verdict} ${x.mode} [${x.answer}] [${x.terms}] [${x.unknown}] ${x.hits.map((h) => `${h.page}#${h.from},${h.to}`).join(" ")}`;
    const mismatches = [];
    qs.forEach((q, i) => {
      const w = web.out[i];
      const n = native[i];
      if (show(w) !== show(n)) mismatches.push(`${q.id}:\n  browser ${show(w).slice(0, 300)}\n  native  ${show(n).slice(0, 300)}`);
      const folder = sets[q.lang];
      assert.ok(w.hits.every((h) => h.page.startsWith(folder)), `${q.id}: only ${folder} pages`);
      if (q.lang !== "en") assert.equal(w.mode, "bm25", `${q.id}: the model does not rank ${q.lang}`);
    });
    assert.deepEqual(mismatches, [], "browser and native differ");
    await page.context().close();
  });

  it("lands a German and a Chinese citation on a <mark> equal to the quote", async () => {
    const context = await browser.newContext({ serviceWorkers: "block" });
    const page = await context.newPage();
    const failures = [];
    for (const [lang, folder] of [["de", "de-DE"], ["zh", "zh-CN"]]) {
      for (const id of ids) {
        await page.goto(`${server.url}${folder}/apt.html`);
        const q = questions().find((x) => x.id === `${lang}/${id}/doc`);
        const first = await page.evaluate(
          async ({ query, lang }) => {
            const { open } = await import("/needle/needle.js");
            const r = await (await open("/needle/", { lang, model: false })).search(query, { k: 4 });
            return r.answer.length ? r.hits[r.answer[0]] : r.hits[0];
          },
          { query: q.query, lang },
        );
        await page.goto(first.url);
        const landed = await page.waitForFunction(() => document.querySelectorAll("mark.needle-mark").length > 0, null, { timeout: 15000 }).then(
          () => true,
          () => false,
        );
        if (!landed) {
          failures.push(`${q.id}: no <mark> on ${first.url}`);
          continue;
        }
        const got = await page.evaluate(() => [...document.querySelectorAll("mark.needle-mark")].map((m) => m.textContent).join(""));
        if (squash(got) !== squash(first.content)) failures.push(`${q.id}: mark ${JSON.stringify(got.slice(0, 60))} ≠ quote ${JSON.stringify(first.content.slice(0, 60))}`);
      }
    }
    assert.deepEqual(failures, []);
    await context.close();
  });

  it("does not download the model for a German reader, and says why", async () => {
    const context = await browser.newContext({ serviceWorkers: "block" });
    const page = await context.newPage();
    const fetched = [];
    page.on("request", (r) => fetched.push(r.url()));
    await page.goto(server.url + "de-DE/apt.html");
    const r = await page.evaluate(async () => {
      const { open } = await import("/needle/needle.js");
      const engine = await open("/needle/", { lang: "de-DE" });
      const ready = await engine.ready.then(
        () => "ready",
        (e) => String(e.message),
      );
      const hit = (await engine.search("Paketquellen")).hits[0];
      return { ready, page: hit?.page, marks: hit?.marks?.length };
    });
    assert.match(r.ready, /reads English/);
    assert.ok(r.page?.startsWith("de-DE/"), r.page);
    assert.ok(r.marks > 0, "the German word is marked");
    const manifest = JSON.parse(readFileSync(join(bundle, "manifest.json"), "utf8"));
    for (const role of ["model", "vectors", "tokenizer"]) {
      assert.ok(!fetched.some((u) => u.endsWith(manifest.files[role])), `${role} was not fetched: ${fetched.join(" ")}`);
    }
    await context.close();
  });

  it("the widget on a page in de-DE/ searches the German pages by words and says so", async () => {
    const context = await browser.newContext({ serviceWorkers: "block" });
    const page = await context.newPage();
    const fetched = [];
    page.on("request", (r) => fetched.push(r.url()));
    await page.goto(server.url + "de-DE/sect.network-config.html");
    const q = JSON.parse(readFileSync(join(ROOT, "eval/i18n/debian-handbook/de-DE.qrels.jsonl"), "utf8").split("\n").find((l) => l.includes('"dh-20"')));
    await page.fill("needle-search input", q.q_doc);
    await page.waitForFunction((text) => document.querySelector("needle-search").lastResult?.query === text, q.q_doc);
    // The model's refusal arrives after the lexical core: wait until the widget has heard it.
    await page.evaluate(async () => (await document.querySelector("needle-search").engine).ready.catch(() => {}));
    await page.waitForFunction(() => !/still loading/.test(document.querySelector("needle-search").shadowRoot.querySelector(".notice").textContent));
    const r = await page.evaluate(() => document.querySelector("needle-search").lastResult);
    assert.ok(r.hits.length && r.hits.every((h) => new URL(h.url).pathname.startsWith("/de-DE/")), "German pages only");
    assert.ok(r.hits.slice(0, 4).some((h) => new URL(h.url).pathname === `/de-DE/${q.page}`), `${q.page} in the top 4`);
    const notice = await page.locator("needle-search .notice").textContent();
    assert.match(notice, r.verdict === "answer" ? /^Answered in / : r.verdict === "no-answer" ? /^No passage answers/ : /^Keyword matches$/);
    assert.doesNotMatch(await page.locator("needle-search .status").textContent(), /unavailable/, "not reported as a failure");
    const manifest = JSON.parse(readFileSync(join(bundle, "manifest.json"), "utf8"));
    assert.ok(!fetched.some((u) => u.endsWith(manifest.files.model)), "the model was not fetched");
    await context.close();
  });
});
