// Issue 6.6: indexed text is data, never markup. The fixture site tests/fixtures/sites/hostile
// has a code sample `<img src=x onerror=alert(1)>`, prose with `</script>` and `<b>urgent</b>`,
// and a title with `<` and `&`. Through the widget (keyword and hybrid results) and the landing
// highlight, they must show as those literal characters: no element created, no script run.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { ROOT, launch, serve, squash, widgetSite } from "./helpers.mjs";

const HOSTILE = join(ROOT, "tests", "fixtures", "sites", "hostile");
const IMG = "<img src=x onerror=alert(1)>";
const SCRIPT = "</script>";
const BOLD = "<b>urgent</b>";
const TITLE = "Escaping <tags> & entities";
const box = "needle-search input";
/** The only elements the widget builds inside its result list. */
const LIST_TAGS = new Set(["li", "a", "span", "q", "mark"]);

async function ask(page, q) {
  await page.fill(box, q);
  await page.waitForFunction((q) => document.querySelector("needle-search").lastResult?.query === q, q);
  return page.evaluate(() => document.querySelector("needle-search").lastResult);
}

/** What the widget shows: per option its title and snippet text, and every element it holds. */
function shown(page) {
  return page.evaluate(() => {
    const host = document.querySelector("needle-search");
    const root = host.shadowRoot;
    return {
      state: root.querySelector(".panel").dataset.state,
      options: [...root.querySelectorAll("[role=option]")].map((o) => ({
        title: o.querySelector(".title")?.textContent ?? null,
        snippet: o.querySelector(".snippet")?.textContent ?? null,
      })),
      listTags: [...root.querySelectorAll("ul *")].map((e) => e.localName),
      panelText: root.querySelector(".panel").textContent,
      // Anywhere on the page, in the light DOM or the widget's shadow root.
      imgs: document.querySelectorAll("img").length + root.querySelectorAll("img").length,
      bolds: document.querySelectorAll("b").length + root.querySelectorAll("b").length,
      scripts: document.querySelectorAll("script").length + root.querySelectorAll("script").length,
    };
  });
}

/** The elements inside <main>, needle's marks left out (to compare with the page as served). */
function mainElements(page) {
  return page.evaluate(() => [...document.querySelector("main").querySelectorAll("*")].filter((e) => !e.matches("mark.needle-mark")).map((e) => e.localName));
}

describe("hostile content is shown as text, never run as markup", () => {
  let site, servers, browser;
  before(async () => {
    ({ site } = widgetSite(HOSTILE, "hostile-site"));
    servers = { csp: await serve(site, { csp: true }), plain: await serve(site) };
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    servers?.csp.close();
    servers?.plain.close();
  });

  async function newPage() {
    const ctx = await browser.newContext({ serviceWorkers: "block" });
    const page = await ctx.newPage();
    const dialogs = [];
    const errors = [];
    page.on("dialog", (d) => {
      dialogs.push(`${d.type()}: ${d.message()}`);
      d.dismiss().catch(() => {});
    });
    page.on("pageerror", (e) => errors.push(e.message));
    return { ctx, page, dialogs, errors };
  }

  // Without the CSP too: there an inline onerror would run, so a widget that parsed the text
  // as HTML would both create the <img> and fire the dialog.
  for (const csp of [true, false]) {
    it(`keyword results show ${IMG}, ${SCRIPT} and ${BOLD} literally (needle serve${csp ? " --csp" : ""})`, async () => {
      const { ctx, page, dialogs, errors } = await newPage();
      // Hold the model back: results stay lexical, with snippets of the matched text.
      let release;
      const held = new Promise((r) => (release = r));
      await page.route(/\/needle\/model\.[0-9a-f]{16}\.pack$/, async (route) => {
        await held;
        await route.abort().catch(() => {});
      });
      const server = csp ? servers.csp : servers.plain;
      await page.goto(server.url + "index.html");
      const before = await shown(page);

      for (const [q, literal, page_] of [
        [IMG, IMG, "code-sample.html"],
        [SCRIPT, SCRIPT, "prose.html"],
        [BOLD, BOLD, "prose.html"],
      ]) {
        const r = await ask(page, q);
        assert.equal(r.mode, "bm25", q);
        const hit = r.hits.find((h) => h.page === page_);
        assert.ok(hit, `${q}: ${page_} found`);
        assert.ok(hit.content.includes(literal), `${q}: the quote holds the literal text`);
        const s = await shown(page);
        assert.equal(s.state, "lexical");
        assert.ok(s.options.some((o) => o.snippet?.includes(literal)), `${q}: a snippet shows ${literal} literally: ${JSON.stringify(s.options)}`);
        if (page_ === "code-sample.html") assert.ok(s.options.some((o) => o.title === TITLE), `the title shows as ${TITLE}: ${JSON.stringify(s.options)}`);
        assert.deepEqual([...new Set(s.listTags)].filter((t) => !LIST_TAGS.has(t)), [], `${q}: only the widget's own elements in the list`);
        assert.equal(s.imgs, before.imgs, `${q}: no <img> created`);
        assert.equal(s.bolds, before.bolds, `${q}: no <b> created`);
        assert.equal(s.scripts, before.scripts, `${q}: no <script> created`);
      }
      await page.waitForTimeout(300); // an image's error event would have fired by now
      assert.deepEqual(dialogs, [], "no dialog");
      assert.deepEqual(errors, []);
      release();
      await ctx.close();
    });
  }

  it("hybrid answers show the literal text, and the landing highlight marks it as text, injecting nothing", async () => {
    const { ctx, page, dialogs, errors } = await newPage();
    const cases = [
      { q: "What is the classic cross-site scripting probe, an image whose error handler runs?", page: "code-sample.html", literals: [IMG, TITLE] },
      { q: "Why must an inline script never contain a closing script tag?", page: "prose.html", literals: [SCRIPT, BOLD, "AT&T"] },
    ];
    for (const c of cases) {
      // The page as served, before any highlight: what <main> holds.
      await page.goto(servers.csp.url + c.page);
      const served = await mainElements(page);
      const scriptsServed = await page.evaluate(() => document.scripts.length);

      await page.goto(servers.csp.url + "index.html");
      await page.focus(box);
      await page.evaluate(async () => (await document.querySelector("needle-search").engine).ready);
      const r = await ask(page, c.q);
      assert.equal(r.mode, "hybrid");
      assert.ok(r.answer.length > 0, `${c.q}: answered`);
      const first = r.hits[r.answer[0]];
      assert.equal(first.page, c.page);
      const s = await shown(page);
      assert.equal(s.state, "answer");
      const literalSnippet = c.literals.find((l) => l !== TITLE);
      assert.ok(s.options[0].snippet.includes(literalSnippet), `the answer's snippet shows ${literalSnippet}: ${s.options[0].snippet}`);
      assert.deepEqual([...new Set(s.listTags)].filter((t) => !LIST_TAGS.has(t)), []);
      assert.equal(s.imgs + s.bolds, 0);

      const option = page.locator("needle-search [role=option] a").first();
      assert.equal(await option.getAttribute("href"), first.url);
      await Promise.all([page.waitForURL(first.url), option.click()]);
      await page.waitForFunction(() => document.querySelectorAll("mark.needle-mark").length > 0, null, { timeout: 15000 });
      const marked = await page.evaluate(() => [...document.querySelectorAll("mark.needle-mark")].map((m) => m.textContent).join(""));
      assert.equal(squash(marked), squash(first.content), "the <mark>s hold the quote, character for character");
      for (const l of c.literals) assert.ok(marked.includes(l), `the highlight shows ${l} literally`);
      assert.deepEqual(await mainElements(page), served, "no element injected into <main>");
      assert.equal(await page.evaluate(() => document.querySelectorAll("img, b").length), 0, "no <img> or <b> anywhere");
      assert.equal(await page.evaluate(() => document.scripts.length), scriptsServed, "no <script> added");
    }
    await page.waitForTimeout(300);
    assert.deepEqual(dialogs, [], "no dialog");
    assert.deepEqual(errors, []);
    await ctx.close();
  });
});
