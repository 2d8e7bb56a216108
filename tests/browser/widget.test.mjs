// <needle-search> and the landing highlight, in Chromium, on the fixture site served by
// `needle serve --csp` (so the widget must live with a strict Content-Security-Policy).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { extname, join } from "node:path";
import { WIDGET_ELEMENT, WIDGET_SNIPPET, artifact, fixtureSite, launch, launchPersistent, ood, qrels, serve, squash } from "./helpers.mjs";

const box = "needle-search input";

async function ask(page, q) {
  await page.fill(box, q);
  await page.waitForFunction(
    (q) => {
      const r = document.querySelector("needle-search").lastResult;
      return r && r.query === q;
    },
    q,
  );
  return page.evaluate(() => document.querySelector("needle-search").lastResult);
}

async function engineReady(page) {
  await page.evaluate(async () => {
    const engine = await document.querySelector("needle-search").engine;
    await engine.ready;
  });
}

describe("the widget", () => {
  let server, browser, site;
  before(async () => {
    ({ site } = fixtureSite());
    server = await serve(site, { csp: true });
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    server?.close();
  });

  async function newPage() {
    // Service workers would take requests out of playwright's routing; the offline test below has its own.
    const ctx = await browser.newContext({ serviceWorkers: "block" });
    return ctx.newPage();
  }

  it("shows lexical results while the engine and model downloads are held back, and hybrid ones after they complete", async () => {
    const page = await newPage();
    let release;
    const held = new Promise((r) => (release = r));
    // The first answer comes from the lexical core and the index alone.
    await page.route(/\/needle\/(model\.[0-9a-f]{16}\.pack|needle_core(_relaxed)?_bg\.[0-9a-f]{16}\.wasm)$/, async (route) => {
      await held;
      await route.continue();
    });
    await page.goto(server.url + "index.html");
    const q = qrels()[2].q_doc;
    const lexical = await ask(page, q);
    assert.equal(lexical.mode, "bm25");
    assert.ok(lexical.hits.length > 0, "keyword hits while the model is held");
    assert.equal(await page.locator("needle-search .panel").getAttribute("data-state"), "lexical");
    assert.ok(await page.locator("needle-search [role=option]").count() > 0);
    // The bar shows at the first progress event of a semantic file (the vectors and tokenizer run
    // while the engine and model are held), which may come a moment after the lexical answer.
    const bar = page.locator("needle-search [role=progressbar]");
    await bar.waitFor({ state: "visible", timeout: 10_000 }).catch(() => {});
    assert.equal(await bar.isVisible(), true, "model progress is shown while the model is held");
    release();
    await engineReady(page);
    await page.waitForFunction(() => document.querySelector("needle-search").lastResult?.mode === "hybrid");
    const hybrid = await page.evaluate(() => document.querySelector("needle-search").lastResult);
    assert.equal(hybrid.query, q);
    assert.ok(hybrid.answer.length > 0, "the fixture question is answered once hybrid");
    assert.equal(await page.locator("needle-search .panel").getAttribute("data-state"), "answer");
    await page.close();
  });

  it("paints nothing unstyled while widget.css loads: the UI waits transparent, in place, and takes the focus", async () => {
    const page = await newPage();
    let release;
    const held = new Promise((r) => (release = r));
    await page.route(/\/needle\/widget\.[0-9a-f]{16}\.css$/, async (route) => {
      await held;
      await route.continue();
    });
    await page.goto(server.url + "index.html");
    await page.waitForFunction(() => document.querySelector("needle-search").shadowRoot?.querySelector("link[rel=stylesheet]"));
    const looks = () =>
      page.evaluate(() => {
        const root = document.querySelector("needle-search").shadowRoot;
        return { opacity: getComputedStyle(root.querySelector(".needle")).opacity, label: getComputedStyle(root.querySelector("label")).position, host: getComputedStyle(document.querySelector("needle-search")).display };
      });
    assert.deepEqual(await looks(), { opacity: "0", label: "absolute", host: "block" });
    await page.focus(box);
    assert.equal(await page.evaluate(() => document.querySelector("needle-search").shadowRoot.activeElement?.localName), "input");
    release();
    await page.waitForFunction(() => getComputedStyle(document.querySelector("needle-search").shadowRoot.querySelector(".needle")).opacity === "1");
    assert.deepEqual(await looks(), { opacity: "1", label: "absolute", host: "block" });
    await page.close();
  });

  it("downloads nothing on hover; the progress counts the whole semantic download from its first byte, by the manifest's sizes", async () => {
    const page = await newPage();
    const fetched = [];
    page.on("request", (r) => fetched.push(new URL(r.url()).pathname));
    let release;
    const held = new Promise((r) => (release = r));
    await page.route(/\/needle\/model\.[0-9a-f]{16}\.pack$/, async (route) => {
      await held;
      await route.continue();
    });
    await page.goto(server.url + "index.html");
    await page.hover(box);
    await page.waitForTimeout(500);
    assert.deepEqual(fetched.filter((p) => /\/needle\/(needle_lexical|index|needle_core|model|tokenizer|vectors)[._]/.test(p)), [], "hovering fetches nothing");
    // Every status line while loading, as the reader sees them.
    await page.evaluate(() => {
      window.__said = [];
      const status = document.querySelector("needle-search").shadowRoot.querySelector(".status");
      new MutationObserver(() => window.__said.push(status.textContent)).observe(status, { childList: true, characterData: true, subtree: true });
    });
    await page.focus(box);
    await page.waitForFunction(() => window.__said.some((s) => /MB$/.test(s)));
    const m = await page.evaluate(async () => (await document.querySelector("needle-search").engine).manifest);
    const engine = m.sizes.wasmRelaxed ?? m.sizes.wasm; // Chromium validates relaxed SIMD
    const total = ((engine + m.sizes.vectors + m.sizes.model + m.sizes.tokenizer) / 1e6).toFixed(1);
    release();
    await engineReady(page);
    const said = (await page.evaluate(() => window.__said)).filter((s) => /MB$/.test(s));
    assert.ok(said.length > 0);
    for (const s of said) assert.match(s, new RegExp(`of ${total.replace(".", "\\.")} MB$`), `the total is the whole download from the start: ${s}`);
    await page.close();
  });

  it("shows the engine's decision: a stated answer, plain results, or no answer with the words the site does not know; and a corrected query", async () => {
    const page = await newPage();
    await page.goto(server.url + "index.html");
    await page.focus(box);
    await engineReady(page);
    // The engine's fields, on real results of this index (as the engine will give them).
    await page.evaluate(async () => {
      const engine = await document.querySelector("needle-search").engine;
      const search = engine.search.bind(engine);
      window.__fields = {};
      engine.search = async (q, o) => ({ ...(await search(q, o)), ...window.__fields });
    });
    const shown = () =>
      page.evaluate(() => {
        const root = document.querySelector("needle-search").shadowRoot;
        const text = (sel) => (root.querySelector(sel).hidden ? null : root.querySelector(sel).textContent);
        return { state: root.querySelector(".panel").dataset.state, notice: text(".notice"), why: text(".why"), corrected: text(".corrected"), hits: root.querySelectorAll("li.hit").length };
      });
    const q = qrels()[2].q_doc; // answered (the first test)
    const answered = await ask(page, q);
    assert.ok(answered.answer.length > 0);
    const titles = [...new Set(answered.answer.map((i) => answered.hits[i].title))];
    const a = await shown();
    assert.equal(a.state, "answer");
    assert.ok(a.notice.startsWith("Answered in ") && titles.every((t) => a.notice.includes(t)), a.notice);
    assert.equal(await page.locator("needle-search li.cited").count() > 0, true, "the cited chunks are marked");

    await page.evaluate(() => (window.__fields = { verdict: "results", answer: [], corrected: "transmute lifetimes" }));
    await ask(page, "transmut lifetimes");
    const plain = await shown();
    assert.deepEqual({ ...plain, hits: plain.hits > 0 }, { state: "results", notice: "", why: null, corrected: "Showing results for transmute lifetimes", hits: true });

    await page.evaluate(() => (window.__fields = { verdict: "no-answer", answer: [], unknown: ["tokio", "zephyr"] }));
    await ask(page, "tokio zephyr runtime");
    const refused = await shown();
    assert.equal(refused.state, "no-answer");
    assert.equal(refused.notice, "No passage answers this question — closest pages:");
    assert.equal(refused.why, "The docs never mention: tokio, zephyr.");
    assert.equal(refused.corrected, null);
    await page.close();
  });

  it("semantic=off searches by keyword and never fetches the engine or the model; on-demand fetches them at the first query", async () => {
    for (const mode of ["off", "on-demand"]) {
      const page = await newPage();
      const fetched = [];
      page.on("request", (r) => fetched.push(new URL(r.url()).pathname));
      await page.goto(server.url + "index.html");
      await page.evaluate((m) => document.querySelector("needle-search").setAttribute("semantic", m), mode);
      await page.focus(box);
      await page.evaluate(async () => (await document.querySelector("needle-search").engine).lexical);
      const semantic = () => fetched.filter((p) => /\/needle\/(needle_core|model|tokenizer)[._]/.test(p));
      assert.deepEqual(semantic(), [], `${mode}: nothing semantic is fetched before a query`);
      assert.ok(fetched.some((p) => /\/needle\/needle_lexical_bg\.[0-9a-f]{16}\.wasm$/.test(p)), `${mode}: the lexical core is fetched`);
      const r = await ask(page, qrels()[2].q_doc);
      assert.equal(r.mode, "bm25");
      assert.ok(r.hits.length > 0, `${mode}: keyword hits`);
      if (mode === "off") {
        assert.match(await page.locator("needle-search .notice").textContent(), /keyword only/);
        assert.deepEqual(semantic(), [], "off: the engine and model are never fetched");
      } else {
        await engineReady(page);
        for (const f of ["model", "tokenizer", "needle_core"]) assert.ok(semantic().some((p) => p.includes(`/needle/${f}`)), `on-demand: ${f} fetched after the query`);
      }
      await page.close();
    }
  });

  it("says no passage answers an out-of-domain question, why, and lists the closest pages", async () => {
    const page = await newPage();
    await page.goto(server.url + "index.html");
    await page.focus(box);
    await engineReady(page);
    const offTopic = ood().find((q) => q.kind !== "adjacent") ?? ood()[0];
    const r = await ask(page, offTopic.query);
    assert.deepEqual(r.answer, []);
    assert.equal(await page.locator("needle-search .panel").getAttribute("data-state"), "no-answer");
    assert.equal(await page.locator("needle-search .notice").textContent(), "No passage answers this question — closest pages:");
    const unknown = r.unknown ?? r.foreign;
    const why = unknown.length ? `The docs never mention: ${unknown.join(", ")}.` : "No passage is close enough to the question to answer it.";
    assert.equal(await page.locator("needle-search .why").textContent(), why);
    assert.ok(await page.locator("needle-search .why").isVisible());
    assert.ok(await page.locator("needle-search li.hit a").count() > 0, "the closest pages are listed");
    await page.screenshot({ path: artifact("widget-no-answer.png") });
    await page.close();
  });

  it("marks the engine's terms in snippets: never a stop word, never a word the tokenizer splits differently", async () => {
    const page = await browser.newPage();
    await page.goto(server.url + "index.html");
    await engineReady(page);
    const r = await ask(page, "Is the destructor not called when a value is leaked with mem::forget?");
    assert.ok(r.terms.includes("destructor") && r.terms.includes("forget"), JSON.stringify(r.terms));
    for (const stop of ["is", "the", "not", "when", "a", "with"]) assert.ok(!r.terms.includes(stop), `${stop} is not a term to mark`);
    const marked = await page.evaluate(() =>
      [...document.querySelector("needle-search").shadowRoot.querySelectorAll("mark")].map((m) => m.textContent.toLowerCase()),
    );
    assert.ok(marked.length > 0, "some term is marked");
    for (const m of marked) assert.ok(r.terms.includes(m), `marked ${JSON.stringify(m)} is one of the engine's terms ${JSON.stringify(r.terms)}`);
    await page.close();
  });

  it("is a combobox with a listbox, navigable by keyboard", async () => {
    const page = await newPage();
    await page.goto(server.url + "index.html");
    await page.focus(box);
    await engineReady(page);
    await ask(page, qrels()[5].q_doc);
    const input = page.locator(box);
    assert.equal(await input.getAttribute("role"), "combobox");
    assert.equal(await input.getAttribute("aria-expanded"), "true");
    const listId = await input.getAttribute("aria-controls");
    assert.equal(await page.locator(`needle-search #${listId}`).getAttribute("role"), "listbox");
    await page.keyboard.press("ArrowDown");
    const active = await input.getAttribute("aria-activedescendant");
    assert.ok(active);
    assert.equal(await page.locator(`needle-search #${active}`).getAttribute("aria-selected"), "true");
    await page.keyboard.press("ArrowDown");
    assert.notEqual(await input.getAttribute("aria-activedescendant"), active);
    await page.keyboard.press("ArrowUp");
    assert.equal(await input.getAttribute("aria-activedescendant"), active);
    const href = await page.locator(`needle-search #${active} a`).getAttribute("href");
    await Promise.all([page.waitForURL(href), page.keyboard.press("Enter")]);
    await page.keyboard.press("Escape");
    await page.close();
  });

  it("lands every fixture question's first result on a <mark> equal to the quote, scrolled into view", async () => {
    const page = await newPage();
    await page.setViewportSize({ width: 1100, height: 800 });
    await page.goto(server.url + "index.html");
    await page.focus(box);
    await engineReady(page);
    const failures = [];
    for (const q of qrels()) {
      if (!page.url().endsWith("index.html")) await page.goto(server.url + "index.html");
      await page.focus(box);
      await engineReady(page);
      const r = await ask(page, q.q_doc);
      const first = r.answer.length ? r.hits[r.answer[0]] : r.hits[0];
      const option = page.locator("needle-search [role=option] a").first();
      assert.equal(await option.getAttribute("href"), first.url);
      await Promise.all([page.waitForURL(first.url), option.click()]);
      const landed = await page
        .waitForFunction(() => document.querySelectorAll("mark.needle-mark").length > 0, null, { timeout: 15000 })
        .then(() => true, () => false);
      if (!landed) {
        failures.push(`${q.id}: no <mark> on ${first.url}`);
        continue;
      }
      const got = await page.evaluate(() => {
        const marks = [...document.querySelectorAll("mark.needle-mark")];
        const r = marks[0].getBoundingClientRect();
        return { text: marks.map((m) => m.textContent).join(""), inView: r.bottom > 0 && r.top < innerHeight };
      });
      if (squash(got.text) !== squash(first.content)) failures.push(`${q.id}: mark ${JSON.stringify(got.text.slice(0, 80))} ≠ quote ${JSON.stringify(first.content.slice(0, 80))}`);
      if (!got.inView) failures.push(`${q.id}: the mark is not scrolled into view`);
      await page.screenshot({ path: artifact(`highlight-${q.id}.png`) });
    }
    assert.deepEqual(failures, []);
    await page.close();
  });

  it("finds the quote by text, and says so, when the page changed since indexing; never marks a wrong range", async () => {
    const page = await newPage();
    const logs = [];
    page.on("console", (m) => logs.push(m.text()));
    // The same page with a sentence inserted before the content: offsets shift, the hash differs.
    await page.route(/\/working-with-unsafe\.html$/, async (route) => {
      const res = await route.fetch();
      const body = (await res.text()).replace(/<main>/i, "<main><p>An edit made after indexing shifts every offset.</p>");
      await route.fulfill({ response: res, body });
    });
    const q = qrels().find((x) => x.page === "working-with-unsafe.html");
    await page.goto(server.url + "index.html");
    await page.focus(box);
    await engineReady(page);
    const r = await ask(page, q.q_doc);
    const hit = r.hits.find((h) => h.page === q.page);
    assert.ok(hit, "the question finds its page");
    await page.goto(hit.url);
    await page.waitForFunction(() => document.querySelectorAll("mark.needle-mark").length > 0, null, { timeout: 15000 });
    const text = await page.evaluate(() => [...document.querySelectorAll("mark.needle-mark")].map((m) => m.textContent).join(""));
    assert.equal(squash(text), squash(hit.content));
    assert.ok(logs.some((l) => /changed since it was indexed/.test(l) && /found by its text/.test(l)), logs.join("\n"));

    // A range whose quote is gone: nothing is marked.
    await page.route(/\/working-with-unsafe\.html$/, async (route) => {
      const res = await route.fetch();
      await route.fulfill({ response: res, body: "<html><body><main><p>Rewritten entirely.</p></main></body></html>".replace("<body>", '<body><script type="module" src="/needle/widget.js"></script>') });
    });
    await page.goto(server.url + "index.html");
    await page.goto(hit.url);
    await page.waitForFunction(() => window.__needleHighlight !== undefined || document.readyState === "complete");
    await page.waitForTimeout(1500);
    assert.equal(await page.locator("mark.needle-mark").count(), 0);
    await page.close();
  });

  it("is styled apart from the page: hostile global CSS does not reach the results", async () => {
    // `*` matches the host element itself, and its !important values would flow into the
    // widget by inheritance; the other rules would restyle the results if they could reach them.
    writeFileSync(
      join(site, "hostile-css.css"),
      `* { font-weight: 600 !important; color: red; font-style: italic; letter-spacing: 3px; text-transform: uppercase; line-height: 3; }
       a { text-decoration: line-through; color: green; }
       mark { background: black; color: white; }
       li { list-style: square; margin: 40px; padding: 20px; }
       ul { padding: 30px; margin: 30px; }
       q::before { content: "<<"; }
       input { font-weight: 900; border: 5px solid red; }`,
    );
    const bare = (css) =>
      `<!doctype html><html><head><title>CSS</title><link rel="icon" href="data:,">${css}${WIDGET_SNIPPET}</head><body><main>${WIDGET_ELEMENT.replace(" offline", "")}<p>Nothing else.</p></main></body></html>`;
    writeFileSync(join(site, "plain-css.html"), bare(""));
    writeFileSync(join(site, "hostile-css.html"), bare(`<link rel="stylesheet" href="hostile-css.css">`));
    const q = qrels()[3].q_doc;
    const styles = async (name) => {
      const page = await newPage();
      await page.goto(server.url + name);
      await page.focus(box);
      await engineReady(page);
      await ask(page, q);
      await page.waitForFunction(() => document.querySelector("needle-search").shadowRoot.querySelector("link[rel=stylesheet]")?.sheet);
      const got = await page.evaluate(() => {
        const root = document.querySelector("needle-search").shadowRoot;
        const pick = (sel, props) => {
          const e = root.querySelector(sel);
          if (!e) return null;
          const cs = getComputedStyle(e);
          return Object.fromEntries(props.map((p) => [p, cs.getPropertyValue(p)]));
        };
        const text = ["font-weight", "font-style", "color", "letter-spacing", "text-transform", "line-height", "text-decoration-line"];
        return {
          input: pick("input", [...text, "border-top-width"]),
          list: pick("[role=listbox]", ["padding-left", "margin-top"]),
          option: pick("[role=option]", ["list-style-type", "margin-top", "margin-left", "padding-left"]),
          link: pick("[role=option] a", text),
          title: pick("[role=option] .title", text),
          snippet: pick("[role=option] .snippet", text),
          quoteMark: getComputedStyle(root.querySelector("[role=option] .snippet"), "::before").content,
          mark: pick("[role=option] .snippet mark", ["background-color", "color", "font-weight"]),
        };
      });
      await page.screenshot({ path: artifact(`widget-${name.replace(".html", "")}.png`) });
      await page.close();
      return got;
    };
    const plain = await styles("plain-css.html");
    const hostile = await styles("hostile-css.html");
    assert.ok(plain.mark, "the snippet marks a query term");
    assert.equal(hostile.snippet["font-weight"], "400");
    assert.equal(hostile.title["font-weight"], "600");
    assert.equal(hostile.option["list-style-type"], "none");
    assert.equal(hostile.link["text-decoration-line"], "none");
    assert.notEqual(hostile.snippet.color, "rgb(255, 0, 0)");
    assert.notEqual(hostile.mark["background-color"], "rgb(0, 0, 0)");
    assert.deepEqual(hostile, plain);
  });

  it("takes its theme from the custom properties documented in widget.css, through the shadow boundary", async () => {
    writeFileSync(join(site, "themed-css.css"), `:root { --needle-mark-bg: rgb(1, 2, 3); } needle-search { --needle-accent: rgb(180, 0, 78); --needle-font: italic 20px Georgia, serif; }`);
    writeFileSync(
      join(site, "themed-css.html"),
      `<!doctype html><html><head><title>Theme</title><link rel="icon" href="data:,"><link rel="stylesheet" href="themed-css.css">${WIDGET_SNIPPET}</head><body><main>${WIDGET_ELEMENT.replace(" offline", "")}</main></body></html>`,
    );
    const page = await newPage();
    await page.goto(server.url + "themed-css.html");
    await page.focus(box);
    await engineReady(page);
    await ask(page, qrels()[3].q_doc);
    await page.waitForFunction(() => document.querySelector("needle-search").shadowRoot.querySelector("link[rel=stylesheet]")?.sheet);
    const got = await page.evaluate(() => {
      const root = document.querySelector("needle-search").shadowRoot;
      const cs = (sel) => getComputedStyle(root.querySelector(sel));
      return {
        accent: cs("[role=option] .title").color,
        mark: cs("[role=option] .snippet mark").backgroundColor,
        style: cs("[role=option] .snippet").fontStyle,
        family: cs("input").fontFamily,
        size: cs("input").fontSize,
      };
    });
    assert.deepEqual(got, { accent: "rgb(180, 0, 78)", mark: "rgb(1, 2, 3)", style: "italic", family: "Georgia, serif", size: "20px" });
    await page.close();
  });

  it("shows each result's section on a line of its own, never run into the quote", async () => {
    const page = await newPage();
    await page.goto(server.url + "index.html");
    await page.focus(box);
    await engineReady(page);
    const collapse = (t) => t.replace(/[ \t\n\f\r]+/g, " ").trim();
    let headed = 0;
    const failures = [];
    for (const q of qrels().slice(0, 12)) {
      const r = await ask(page, q.q_doc);
      const options = await page.evaluate(() =>
        [...document.querySelector("needle-search").shadowRoot.querySelectorAll("[role=option].hit")].map((o) => {
          const crumbs = o.querySelector(".crumbs");
          const snippet = o.querySelector(".snippet");
          return {
            href: o.querySelector("a").href,
            sub: o.classList.contains("sub"),
            title: crumbs?.querySelector(".title")?.textContent ?? null,
            sections: [...(crumbs?.querySelectorAll(".section") ?? [])].map((e) => e.textContent),
            crumbsBlock: crumbs ? getComputedStyle(crumbs).display === "block" : false,
            above: crumbs && snippet ? crumbs.getBoundingClientRect().bottom <= snippet.getBoundingClientRect().top + 0.5 : false,
            snippetHoldsCrumbs: !!snippet?.querySelector(".crumbs, .title, .section"),
            snippet: snippet?.textContent ?? null,
          };
        }),
      );
      assert.ok(options.length > 0, q.id);
      options.forEach((o, i) => {
        const h = r.hits.find((h) => h.link === o.href);
        const heading = collapse(h.section.split(" > ").pop() ?? "");
        if (!o.crumbsBlock || !o.above || o.snippetHoldsCrumbs) failures.push(`${q.id}#${i}: the breadcrumb is not a line of its own above the quote`);
        // A page's first result names it; the ones under it name their sections only.
        const title = o.sub && o.sections.length ? null : h.title || h.page;
        if (o.title !== title) failures.push(`${q.id}#${i}: title ${o.title}, not ${title}`);
        if (heading && heading !== collapse(h.title) && o.sections.at(-1) !== heading) failures.push(`${q.id}#${i}: sections ${JSON.stringify(o.sections)} for ${JSON.stringify(h.section)}`);
        if (heading && collapse(h.content).startsWith(heading + " ")) {
          headed++;
          if (o.snippet.startsWith(heading)) failures.push(`${q.id}#${i}: the snippet starts with its heading: ${JSON.stringify(o.snippet.slice(0, 80))}`);
        }
      });
    }
    assert.deepEqual(failures, []);
    assert.ok(headed > 0, "some shown chunk starts with its section heading (else this test checks nothing)");
    await page.screenshot({ path: artifact("widget-sections.png") });
    await page.close();
  });

  it("works under needle serve --csp with no console error (a bare page: the widget, the worker, the wasm)", async () => {
    // The fixture's own pages carry inline scripts that the strict policy refuses; this page
    // has nothing but needle's two lines.
    writeFileSync(join(site, "csp-check.html"), `<!doctype html><html><head><title>CSP</title><link rel="icon" href="data:,">${WIDGET_SNIPPET}</head><body><main>${WIDGET_ELEMENT.replace(" offline", "")}<p>Nothing else.</p></main></body></html>`);
    const ctx = await browser.newContext({ serviceWorkers: "block" });
    const page = await ctx.newPage();
    const errors = [];
    page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
    page.on("pageerror", (e) => errors.push(e.message));
    await page.goto(server.url + "csp-check.html");
    await page.focus(box);
    await engineReady(page);
    const r = await ask(page, qrels()[1].q_doc);
    assert.equal(r.mode, "hybrid");
    const headers = (await page.request.get(server.url + "csp-check.html")).headers();
    assert.match(headers["content-security-policy"], /script-src 'self' 'wasm-unsafe-eval'/);
    assert.deepEqual(errors, []);
    await ctx.close();
  });
});

describe("offline", () => {
  it("a reload with the network off still answers (service worker + Cache API)", async () => {
    const { site } = fixtureSite();
    const server = await serve(site);
    const dir = mkdtempSync(join(tmpdir(), "needle-offline-"));
    const ctx = await launchPersistent(dir);
    try {
      const page = await ctx.newPage();
      await page.goto(server.url + "index.html");
      await page.focus(box);
      await engineReady(page);
      const online = await ask(page, qrels()[0].q_doc);
      assert.equal(online.mode, "hybrid");
      assert.equal(await page.evaluate(() => document.querySelector("needle-search").offline), true, "service worker registered");
      await ctx.setOffline(true);
      await page.reload();
      await page.focus(box);
      await engineReady(page);
      const offline = await ask(page, qrels()[0].q_doc);
      assert.equal(offline.mode, "hybrid");
      assert.deepEqual(offline.hits.map((h) => h.url), online.hits.map((h) => h.url));
    } finally {
      await ctx.close();
      server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("the service worker answers with the network's bytes as they arrive while it caches them", async () => {
    const { site } = fixtureSite();
    const manifest = JSON.parse(readFileSync(join(site, "needle", "manifest.json"), "utf8"));
    const slow = `/needle/${manifest.files.tokenizer}`;
    // The site, with the tokenizer's second half sent 2 s after its first.
    const types = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".json": "application/json", ".wasm": "application/wasm" };
    const server = createServer(async (req, res) => {
      const path = new URL(req.url, "http://x").pathname;
      let body;
      try {
        body = readFileSync(join(site, decodeURIComponent(path)));
      } catch {
        return res.writeHead(404).end();
      }
      res.writeHead(200, { "content-type": types[extname(path)] ?? "application/octet-stream", "service-worker-allowed": "/", "content-length": body.length });
      if (path !== slow) return res.end(body);
      res.write(body.subarray(0, body.length >> 1));
      setTimeout(() => res.end(body.subarray(body.length >> 1)), 2000);
    });
    await new Promise((r) => server.listen(0, "127.0.0.1", r));
    const dir = mkdtempSync(join(tmpdir(), "needle-sw-"));
    const ctx = await launchPersistent(dir);
    try {
      const page = await ctx.newPage();
      await page.goto(`http://127.0.0.1:${server.address().port}/index.html`);
      await page.waitForFunction(() => navigator.serviceWorker.controller);
      const t = await page.evaluate(async (url) => {
        const t0 = performance.now();
        const reader = (await fetch(url)).body.getReader();
        await reader.read();
        const first = performance.now() - t0;
        while (!(await reader.read()).done);
        return { first, all: performance.now() - t0 };
      }, slow);
      assert.ok(t.all >= 1900, `the body took its 2 s: ${JSON.stringify(t)}`);
      assert.ok(t.first < 1500, `the first bytes came before the rest was sent: ${JSON.stringify(t)}`);
      await page.waitForFunction((url) => caches.open("needle-v1").then((c) => c.match(url)).then(Boolean), slow);
    } finally {
      await ctx.close();
      server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
