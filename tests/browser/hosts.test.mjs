// <needle-search> on real generator pages that run their own scripts (tests/fixtures/hosts): the
// Cargo Book with mdBook's (`s`, `/`, `?`, ← → bound on the page) and uv's docs with Material for
// MkDocs' (`f`, `s`, `/` open its search). What is typed in the widget stays in the widget; Ctrl-K
// reaches the widget from anywhere unless the page takes it; the results keep the reader's place;
// the panel takes the page's own theme.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { ROOT, artifact, launch, serve, widgetSite } from "./helpers.mjs";

const HOSTS = join(ROOT, "tests", "fixtures", "hosts");
const box = "needle-search input";
const WHITE = "rgb(255, 255, 255)";
const DARK = "rgb(29, 31, 35)"; // widget.css: the dark scheme's --bg

/** Starts counting the key and input events that reach the page's window and document, where mdBook and Material listen. */
function countEscapes(page) {
  return page.evaluate(() => {
    window.__escaped = [];
    for (const target of [window, document]) {
      for (const type of ["keydown", "keypress", "keyup", "beforeinput", "input"]) target.addEventListener(type, (e) => window.__escaped.push(`${type} ${e.key ?? ""}`));
    }
  });
}
const escaped = (page) => page.evaluate(() => window.__escaped);

/** Whether the widget's input has the focus. */
const widgetFocused = (page) => page.evaluate(() => document.querySelector("needle-search").shadowRoot.activeElement?.localName === "input");

/** Takes the focus out of the widget, as a click elsewhere does. */
const leave = (page) => page.evaluate(() => document.querySelector("needle-search").shadowRoot.activeElement?.blur());

/** The result the widget shows once it is the one for `q`. */
async function resultsFor(page, q, mode = null) {
  await page.waitForFunction(([q, mode]) => {
    const r = document.querySelector("needle-search").lastResult;
    return r?.query === q && (!mode || r.mode === mode);
  }, [q, mode]);
  return page.evaluate(() => document.querySelector("needle-search").lastResult);
}

/** The panel's computed background, once the widget's stylesheet is in. */
async function panelBackground(page) {
  await page.waitForFunction(() => document.querySelector("needle-search").shadowRoot.querySelector("link[rel=stylesheet]")?.sheet);
  return page.evaluate(() => getComputedStyle(document.querySelector("needle-search").shadowRoot.querySelector(".panel")).backgroundColor);
}

/** A host fixture indexed with its bundle, served, and a way to open its pages in Chromium. */
function hostSite(name) {
  const ctx = {};
  before(async () => {
    ({ site: ctx.site } = widgetSite(join(HOSTS, name), `host-${name}`, { addWidget: false }));
    ctx.server = await serve(ctx.site);
    ctx.browser = await launch();
  });
  after(async () => {
    await ctx.browser?.close();
    ctx.server?.close();
  });
  /** `path` in a fresh context (the OS's scheme `colorScheme`), nothing fetched off this machine. */
  ctx.open = async (path, { colorScheme = "light" } = {}) => {
    const context = await ctx.browser.newContext({ serviceWorkers: "block", colorScheme, viewport: { width: 1280, height: 900 } });
    await context.route(/^https?:\/\/(?!127\.0\.0\.1)/, (route) => route.abort());
    const page = await context.newPage();
    page.errors = [];
    page.on("pageerror", (e) => page.errors.push(e.message));
    await page.goto(ctx.server.url + path);
    await page.waitForFunction(() => customElements.get("needle-search"));
    return page;
  };
  return ctx;
}

describe("on mdBook's Cargo Book, with mdBook's own scripts", () => {
  const host = hostSite("mdbook-cargo");
  const PAGE = "guide/dependencies.html";
  const mdbook = (page) =>
    page.evaluate(() => ({
      searchOpen: !document.getElementById("mdbook-search-wrapper").classList.contains("hidden"),
      searchValue: document.getElementById("mdbook-searchbar").value,
      helpShown: getComputedStyle(document.getElementById("mdbook-help-container")).display !== "none",
      url: location.href,
    }));

  it("binds its keys on the page: `?` shows its help, `/` opens its search, → turns the page (what the widget must keep away from)", async () => {
    const page = await host.open(PAGE);
    await page.keyboard.press("?");
    assert.equal((await mdbook(page)).helpShown, true);
    await page.keyboard.press("Escape");
    await page.keyboard.press("/");
    assert.equal((await mdbook(page)).searchOpen, true);
    assert.equal(await page.evaluate(() => document.activeElement.id), "mdbook-searchbar");
    await page.goto(host.server.url + PAGE);
    await Promise.all([page.waitForURL((u) => !u.href.endsWith(PAGE)), page.keyboard.press("ArrowRight")]);
    await page.context().close();
  });

  it("keeps every key typed in the widget from mdBook: its search stays closed and empty, its help hidden, the page in place", async () => {
    const page = await host.open(PAGE);
    const before = await mdbook(page);
    await page.focus(box);
    await countEscapes(page);
    const typed = "how do I bake sourdough bread?/s";
    await page.keyboard.type(typed);
    await resultsFor(page, typed); // the arrows then move through the results, not the caret
    for (const key of ["ArrowLeft", "ArrowRight", "ArrowDown", "ArrowUp", "?", "/", "s"]) await page.keyboard.press(key);
    await page.waitForTimeout(500); // a page turn or a search would have begun
    assert.deepEqual(await mdbook(page), before);
    assert.deepEqual(await escaped(page), [], "no key or input event reached the page's window or document");
    assert.equal(await page.inputValue(box), typed + "?/s");
    assert.equal(await widgetFocused(page), true);
    assert.deepEqual(page.errors, []);
    await page.context().close();
  });

  it("Ctrl-K focuses the widget from anywhere; `/` stays mdBook's; a Ctrl-K the page handles stays the page's", async () => {
    const page = await host.open(PAGE);
    assert.equal(await page.locator(box).getAttribute("aria-keyshortcuts"), "Control+K Meta+K /");
    await page.keyboard.press("Control+k");
    assert.equal(await widgetFocused(page), true, "Ctrl-K focused the widget");
    await leave(page);
    await page.keyboard.press("/");
    assert.equal(await widgetFocused(page), false, "mdBook owns `/`");
    assert.equal(await page.evaluate(() => document.activeElement.id), "mdbook-searchbar");

    // A page whose own handler takes Ctrl-K (as Docusaurus' DocSearch does).
    await page.goto(host.server.url + PAGE);
    await page.evaluate(() => {
      window.__taken = 0;
      document.addEventListener("keydown", (e) => {
        if (e.ctrlKey && e.key === "k") (e.preventDefault(), window.__taken++);
      });
    });
    await page.keyboard.press("Control+k");
    assert.equal(await page.evaluate(() => window.__taken), 1);
    assert.equal(await widgetFocused(page), false, "the page's Ctrl-K stays the page's");
    // The attribute names the keys.
    await page.evaluate(() => document.querySelector("needle-search").setAttribute("shortcut", "alt+j"));
    await page.keyboard.press("Alt+j");
    assert.equal(await widgetFocused(page), true, "shortcut=alt+j");
    await page.context().close();
  });

  it("lists at most two results per page, the rest behind 'more from this page'; code keeps its line breaks", async () => {
    const page = await host.open(PAGE);
    await page.focus(box);
    await page.evaluate(async () => (await document.querySelector("needle-search").engine).ready);
    const q = "git repository dependency branch";
    await page.keyboard.type(q);
    const r = await resultsFor(page, q, "hybrid");
    const shown = () =>
      page.evaluate(() =>
        [...document.querySelector("needle-search").shadowRoot.querySelectorAll("[role=option]")].map((o) => ({
          more: o.classList.contains("more"),
          page: o.querySelector("a")?.href.split("#")[0] ?? null,
          snippet: o.querySelector(".snippet")?.textContent ?? null,
          lines: o.querySelector(".snippet") ? Math.round(o.querySelector(".snippet").getBoundingClientRect().height / parseFloat(getComputedStyle(o.querySelector(".snippet")).lineHeight)) : 0,
        })),
      );
    const options = await shown();
    const perPage = {};
    for (const o of options.filter((o) => !o.more)) perPage[o.page] = (perPage[o.page] ?? 0) + 1;
    assert.ok(Math.max(...Object.values(perPage)) <= 2, JSON.stringify(perPage));
    const hitsPerPage = {};
    for (const h of r.hits) hitsPerPage[h.link.split("#")[0]] = (hitsPerPage[h.link.split("#")[0]] ?? 0) + 1;
    const crowded = Object.entries(hitsPerPage).filter(([, n]) => n > 2);
    assert.ok(crowded.length > 0, "some page has more than two hits (else this checks nothing)");
    assert.equal(options.filter((o) => o.more).length, crowded.length, "one 'more' per crowded page");
    // Each page's hits are listed together: a page never comes back further down.
    const order = options.filter((o) => !o.more).map((o) => o.page);
    assert.deepEqual(order, [...new Set(order)].flatMap((p) => order.filter((x) => x === p)));

    // A code block's lines stay lines.
    const coded = options.filter((o) => o.snippet?.includes("\n"));
    assert.ok(coded.length > 0, `a snippet keeps line breaks: ${JSON.stringify(options.map((o) => o.snippet))}`);
    assert.ok(coded.every((o) => o.lines >= 2), "and shows them as lines");
    assert.ok(coded.some((o) => r.hits.some((h) => h.content.includes(o.snippet.replace(/^… /, "").split("\n")[0]) && /\n/.test(h.content))));
    await page.screenshot({ path: artifact("hosts-mdbook-results.png") });

    // "more from this page" shows that page's further results in its place.
    const more = page.locator("needle-search li.more").first();
    const morePage = await more.evaluate((li) => li.previousElementSibling.querySelector("a").href.split("#")[0]);
    const total = options.filter((o) => !o.more).length;
    await more.click();
    const after = await shown();
    assert.equal(after.filter((o) => !o.more).length, total + hitsPerPage[morePage] - 2);
    assert.equal(after.filter((o) => o.page === morePage).length, hitsPerPage[morePage]);
    await page.context().close();
  });

  it("Enter opens the first result; focus brings the results back; a result on this page closes the panel over its highlight", async () => {
    const here = "reference/specifying-dependencies.html";
    const page = await host.open(here);
    await page.focus(box);
    const q = "multiple locations";
    await page.keyboard.type(q);
    await resultsFor(page, q);
    const panel = page.locator("needle-search .panel");
    assert.equal(await panel.isVisible(), true);
    // Away and back: the same results, shown again.
    await leave(page);
    assert.equal(await panel.isVisible(), false);
    await page.focus(box);
    assert.equal(await panel.isVisible(), true, "focus brings the results back");

    // A result on this very page: the page scrolls to its highlight, and the panel is gone.
    const local = page.locator(`needle-search li.hit a[href^="${host.server.url + here}#"]`).first();
    await Promise.all([page.waitForURL(await local.getAttribute("href")), local.click()]);
    await page.waitForFunction(() => document.querySelectorAll("mark.needle-mark").length > 0, null, { timeout: 15000 });
    assert.equal(await panel.isVisible(), false, "the panel does not cover the highlight");

    // Enter, nothing selected: the first result.
    await page.focus(box);
    assert.equal(await panel.isVisible(), true);
    const first = await page.locator("needle-search li.hit a").first().getAttribute("href");
    await Promise.all([page.waitForURL(first), page.keyboard.press("Enter")]);
    await page.context().close();
  });

  it("keeps the reader's selection when the semantic results arrive: they are offered, not swapped in", async () => {
    const page = await host.open(PAGE);
    let release;
    const held = new Promise((r) => (release = r));
    await page.route(/\/needle\/model\.[0-9a-f]{16}\.pack$/, async (route) => {
      await held;
      await route.continue();
    });
    await page.focus(box);
    const q = "override a dependency with a local path";
    await page.keyboard.type(q);
    const lexical = await resultsFor(page, q, "bm25");
    assert.ok(lexical.hits.length >= 2);
    await page.keyboard.press("ArrowDown");
    await page.keyboard.press("ArrowDown");
    const picked = async () => {
      const id = await page.locator(box).getAttribute("aria-activedescendant");
      const option = page.locator(`needle-search #${id}`);
      return { id, selected: await option.getAttribute("aria-selected"), href: await option.locator("a").getAttribute("href"), top: (await option.boundingBox()).y };
    };
    const before = await picked();
    release();
    await page.evaluate(async () => (await document.querySelector("needle-search").engine).ready);
    await page.locator("needle-search .upgrade").waitFor({ state: "visible" });
    assert.deepEqual(await picked(), before, "the same option, still selected, in the same place");
    assert.equal(await page.evaluate(() => document.querySelector("needle-search").lastResult.mode), "bm25");
    await page.locator("needle-search .upgrade").click();
    const hybrid = await resultsFor(page, q, "hybrid");
    assert.ok(hybrid.hits.length > 0);
    assert.equal(await page.locator("needle-search .upgrade").isVisible(), false);
    assert.equal(await widgetFocused(page), true, "the box keeps the focus");
    await page.context().close();
  });

  it("takes the page's theme from mdBook's theme switch, over the OS's", async () => {
    const page = await host.open(PAGE, { colorScheme: "light" });
    await page.focus(box);
    await page.keyboard.type("cargo");
    await resultsFor(page, "cargo");
    assert.equal(await panelBackground(page), WHITE);
    // mdBook's own switch: the theme button, then Coal.
    const pick = async (theme) => {
      await page.locator("#mdbook-theme-toggle").click();
      await page.locator(`#mdbook-theme-${theme}`).click();
      await page.focus(box);
    };
    await pick("coal");
    assert.ok(await page.evaluate(() => document.documentElement.classList.contains("coal")));
    assert.equal(await panelBackground(page), DARK, "coal on a light OS: a dark panel");
    await page.screenshot({ path: artifact("hosts-mdbook-coal.png") });
    await pick("light");
    assert.equal(await panelBackground(page), WHITE);
    await page.context().close();

    const dark = await host.open(PAGE, { colorScheme: "dark" });
    await dark.evaluate(() => localStorage.setItem("mdbook-theme", "rust"));
    await dark.reload();
    await dark.focus(box);
    await dark.keyboard.type("cargo");
    await resultsFor(dark, "cargo");
    assert.ok(await dark.evaluate(() => document.documentElement.classList.contains("rust")));
    assert.equal(await panelBackground(dark), WHITE, "rust on a dark OS: a light panel");
    await dark.context().close();
  });
});

describe("on Material for MkDocs' uv docs, with Material's own scripts", () => {
  const host = hostSite("mkdocs-material-uv");
  const PAGE = "concepts/cache/index.html";
  const material = (page) =>
    page.evaluate(() => ({
      searchOpen: document.getElementById("__search").checked,
      searchValue: document.querySelector("[data-md-component=search-query]").value,
      url: location.href,
    }));

  it("opens its own search on `/` (what the widget must keep away from)", async () => {
    const page = await host.open(PAGE);
    await page.keyboard.press("/");
    await page.waitForFunction(() => document.getElementById("__search").checked);
    await page.context().close();
  });

  it("keeps every key typed in the widget from Material: its search stays closed and empty", async () => {
    const page = await host.open(PAGE);
    const before = await material(page);
    await page.focus(box);
    await countEscapes(page);
    const typed = "where does uv keep its cache? s/f/p/n";
    await page.keyboard.type(typed);
    for (const key of ["ArrowLeft", "ArrowRight", "ArrowDown", "ArrowUp", "/"]) await page.keyboard.press(key);
    await page.waitForTimeout(500);
    assert.deepEqual(await material(page), before);
    assert.deepEqual(await escaped(page), []);
    assert.equal(await widgetFocused(page), true);
    await leave(page);
    await page.keyboard.press("Control+k");
    assert.equal(await widgetFocused(page), true, "Ctrl-K focuses the widget (Material leaves Ctrl and ⌘ alone)");
    await page.context().close();
  });

  it("takes the page's theme from Material's palette: slate (or a scheme named dark) is dark on a light OS", async () => {
    const page = await host.open(PAGE, { colorScheme: "light" });
    await page.focus(box);
    await page.keyboard.type("cache");
    await resultsFor(page, "cache");
    assert.equal(await panelBackground(page), WHITE);
    // Material's own toggle, the visible palette button, to uv's dark scheme.
    const scheme = () => page.evaluate(() => document.body.dataset.mdColorScheme);
    for (let i = 0; i < 3 && (await scheme()) !== "astral-dark"; i++) await page.locator('label[for^="__palette"]:visible').first().click();
    assert.equal(await scheme(), "astral-dark");
    await page.focus(box);
    assert.equal(await panelBackground(page), DARK);
    await page.evaluate(() => document.body.setAttribute("data-md-color-scheme", "default"));
    assert.equal(await panelBackground(page), WHITE);
    await page.evaluate(() => document.body.setAttribute("data-md-color-scheme", "slate"));
    assert.equal(await panelBackground(page), DARK, "Material's stock dark scheme");
    await page.screenshot({ path: artifact("hosts-material-slate.png") });
    await page.context().close();
  });
});
