// PDFs, CSV tables and captioned media in Chromium, on the `kinds` fixture site
// (tests/fixtures/kinds: a page that plays a captioned video, a standalone podcast with its
// captions, two manuals as PDFs and a table of text MIME types) with the widget added, indexed by
// the real `needle build` and served by `needle serve --csp`. The in-browser engine cites every
// kind like native `needle search`; the widget links each hit where its document's standard
// says (`#page=`, `#row=`, `#t=`) and a cited caption of a video played on a page lands on that
// page's player, seeked to the cue, captions showing.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { ROOT, artifact, collapse, launch, nativeSearch, primeNative, serve, widgetSite } from "./helpers.mjs";

const KINDS_SITE = join(ROOT, "tests", "fixtures", "kinds", "site");
const box = "needle-search input";

// Questions written from the fixture's content, with the kind of document each is about.
const QUERIES = [
  { q: "Which reference manuals can be downloaded from this page?", kind: "text" },
  { q: "What does eviction remove when the cache size limit is reached?", kind: "media" },
  { q: "How are negative answers cached by a DNS resolver?", kind: "media" },
  { q: "What does asn1Parser do with a file of ASN.1 definitions?", kind: "pdf" },
  { q: "What does each line of the globs2 file contain?", kind: "pdf" },
  { q: "Which MIME type and file extensions does a Python script have?", kind: "csv" },
  { q: "What glob patterns does the VHDL source code type use?", kind: "csv" },
];
const MODES = ["bm25", "hybrid"];

async function ask(page, q) {
  await page.fill(box, q);
  await page.waitForFunction((q) => document.querySelector("needle-search").lastResult?.query === q, q);
  return page.evaluate(() => document.querySelector("needle-search").lastResult);
}

async function engineReady(page) {
  await page.evaluate(async () => (await document.querySelector("needle-search").engine).ready);
}

/** The widget's results as shown: the link, the label after the section path, the snippet. */
function options(page) {
  return page.evaluate(() =>
    [...document.querySelector("needle-search").shadowRoot.querySelectorAll("[role=option].hit")].map((o) => ({
      href: o.querySelector("a").getAttribute("href"),
      locator: o.querySelector(".crumbs .locator")?.textContent ?? null,
      snippet: o.querySelector(".snippet")?.textContent ?? null,
    })),
  );
}

/** The hits of `r` the widget shows as `opts`, one for one. */
const shownHits = (r, opts) => opts.map((o) => r.hits.find((h) => h.link === o.href));

/**
 * Waits until the tour video is at `start` (±0.25 s), then checks that nothing outside the cited
 * range was played: a player that started at 0 and merely passed `start` fails.
 */
async function seekedTo(page, start, end) {
  await page.waitForFunction((s) => Math.abs(document.querySelector("video").currentTime - s) < 0.25, start, { timeout: 15000, polling: "raf" });
  const got = await player(page);
  for (const [a, z] of got.played) assert.ok(a >= start - 0.25 && z <= end + 0.6, `played ${a}..${z} lies in the cited ${start}..${end}`);
  return got;
}

/** The tour video's state on the page. */
function player(page) {
  return page.evaluate(() => {
    const v = document.querySelector("video");
    const box = v.getBoundingClientRect();
    return {
      currentTime: v.currentTime,
      paused: v.paused,
      cited: v.getAttribute("data-needle-cited"),
      outline: getComputedStyle(v).outlineStyle,
      tracks: [...v.textTracks].map((t) => `${t.kind}:${t.mode}`),
      played: Array.from({ length: v.played.length }, (_, i) => [v.played.start(i), v.played.end(i)]),
      inView: box.bottom > 0 && box.top < innerHeight,
    };
  });
}

describe("PDFs, CSV tables and captioned media in the browser", () => {
  let server, browser, site, bundle, origin;

  before(async () => {
    ({ site, bundle } = widgetSite(KINDS_SITE, "kinds-site"));
    for (const mode of MODES) primeNative(bundle, QUERIES.map((x) => x.q), { k: 20, mode });
    server = await serve(site, { csp: true });
    origin = server.url; // the site root: http://127.0.0.1:PORT/
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    server?.close();
  });

  async function newPage() {
    const ctx = await browser.newContext({ serviceWorkers: "block", viewport: { width: 1000, height: 700 } });
    const page = await ctx.newPage();
    page.on("pageerror", (e) => console.error("[page]", e.message));
    return page;
  }

  /** Asks `q` in the widget on index.html (hybrid: the engine is ready first). */
  async function widgetResults(page, q) {
    if (!page.url().startsWith(origin + "index.html")) await page.goto(origin + "index.html");
    await page.focus(box);
    await engineReady(page);
    const r = await ask(page, q);
    assert.equal(r.mode, "hybrid", q);
    const opts = await options(page);
    return { r, shown: shownHits(r, opts), options: opts };
  }

  it("cites every kind exactly like native `needle search`: same chunks, kinds, urls and links (bm25 and hybrid)", async () => {
    const page = await newPage();
    await page.goto(origin + "index.html");
    const web = await page.evaluate(
      async ({ qs, modes }) => {
        const { open } = await import("/needle/needle.js");
        const engine = await open("/needle/");
        await engine.ready;
        const out = {};
        for (const mode of modes) out[mode] = await Promise.all(qs.map((q) => engine.search(q, { k: 20, mode })));
        engine.close();
        return out;
      },
      { qs: QUERIES.map((x) => x.q), modes: MODES },
    );
    const rel = (u) => {
      assert.ok(u.startsWith(origin), `${u} is resolved against the site root ${origin}`);
      return u.slice(origin.length);
    };
    const kinds = new Set();
    for (const mode of MODES) {
      QUERIES.forEach(({ q, kind }, i) => {
        const w = web[mode][i];
        const n = nativeSearch(bundle, q, { k: 20, mode });
        assert.equal(w.mode, mode, q);
        const key = (h) => `${h.page}#${h.from},${h.to} ${h.kind} ${h.url} ${h.link}`;
        assert.deepEqual(
          w.hits.map((h) => key({ ...h, url: rel(h.url), link: rel(h.link) })),
          n.hits.map(key),
          `${mode}: ${q}`,
        );
        assert.deepEqual(w.answer, n.answer, `${mode}: ${q}: the gate`);
        w.hits.forEach((h, j) => assert.equal(h.content, n.hits[j].content, `${mode}: ${q}: quote ${j}`));
        // Each question finds its kind of document near the top.
        assert.ok(n.hits.slice(0, 3).some((h) => h.kind === kind), `${mode}: ${q}: a ${kind} hit in the top 3: ${n.hits.slice(0, 3).map((h) => h.url)}`);
        for (const h of w.hits.slice(0, 3)) kinds.add(h.kind);
        // The locator label is there exactly for the kinds that have one.
        for (const h of w.hits) assert.equal(h.locator === undefined, h.kind === "text", `${h.url}: locator ${h.locator}`);
      });
    }
    assert.deepEqual([...kinds].sort(), ["csv", "media", "pdf", "text"]);
    await page.context().close();
  });

  it("links a caption of the page's video to the page's player, which seeks to the cue with captions showing", async () => {
    const page = await newPage();
    const media = [];
    page.on("response", (res) => {
      if (new URL(res.url()).pathname === "/media/tour.webm") media.push({ status: res.status(), range: res.headers()["content-range"] ?? null });
    });
    const q = QUERIES[1].q;
    const { shown, options: opts } = await widgetResults(page, q);
    const i = shown.findIndex((h) => h.kind === "media" && h.page === "media/tour.webm");
    assert.ok(i >= 0, `a tour caption is shown for ${JSON.stringify(q)}: ${shown.map((h) => h.url)}`);
    const hit = shown[i];
    const nat = nativeSearch(bundle, q, { k: 20, mode: "hybrid" }).hits.find((h) => h.url === hit.url.slice(origin.length));
    assert.ok(nat, "native cites the same caption");
    const m = /^index\.html#media=media\/tour\.webm&t=(\d+(?:\.\d+)?),(\d+(?:\.\d+)?)$/.exec(nat.link);
    assert.ok(m, `native link ${nat.link}`);
    const [start, end] = [Number(m[1]), Number(m[2])];
    assert.ok(end > start && end <= 12, `${start}..${end} lies in the 12 s video`);
    assert.equal(nat.url, `media/tour.webm#t=${m[1]},${m[2]}`);
    assert.equal(opts[i].href, `${origin}index.html#media=media/tour.webm&t=${m[1]},${m[2]}`);
    // The snippet is the cue text (no timings, no WebVTT syntax), the label its time range.
    assert.ok(collapse(hit.content).startsWith("Absolute paths are rewritten"), hit.content);
    assert.ok(opts[i].snippet.includes("Eviction removes the least recently used entries"), opts[i].snippet);
    assert.doesNotMatch(opts[i].snippet, /-->|WEBVTT|align:/);
    assert.equal(opts[i].locator, hit.locator);
    assert.match(opts[i].locator, /^\d+:\d\d(\.\d+)?–\d+:\d\d(\.\d+)?$/);

    // Following it from the page itself: a hash change on index.html.
    await page.locator("needle-search [role=option] a").nth(i).click();
    await page.waitForURL(opts[i].href);
    await seekedTo(page, start, end);
    await page.waitForFunction(() => document.querySelector("video").hasAttribute("data-needle-cited"));
    let got = await player(page);
    assert.deepEqual(got.tracks, ["captions:showing"]);
    assert.equal(got.outline, "solid", "the cited player is framed like a <mark>");
    assert.ok(got.inView, "the player is scrolled into view");
    await page.screenshot({ path: artifact("kinds-media-cited.png") });
    // The range ends where the cue ends: playback (when the browser lets it start) pauses there.
    if (!got.paused) {
      await page.waitForFunction(() => document.querySelector("video").paused, null, { timeout: (end - start + 5) * 1000 });
      got = await player(page);
      assert.deepEqual(got.played.length, 1, "one stretch played");
      assert.ok(got.currentTime >= end - 0.05 && got.currentTime < end + 0.6, `paused at ${got.currentTime}, the range ends at ${end}`);
    }
    // Chromium fetched (and seeked in) the video with range requests, which `needle serve` answers.
    assert.ok(media.some((r) => r.status === 206 && /^bytes \d+-\d+\/45569$/.test(r.range)), JSON.stringify(media));

    // Opening the link in a new page: the same landing, from the page's first load. Here the
    // page's <track> is not `default` (so the browser would not show it by itself).
    const fresh = await newPage();
    await fresh.route(/\/index\.html$/, async (route) => {
      const res = await route.fetch();
      const body = await res.text();
      assert.match(body, / default><\/video>/);
      await route.fulfill({ response: res, body: body.replace(" default></video>", "></video>") });
    });
    await fresh.goto(opts[i].href);
    await seekedTo(fresh, start, end);
    await fresh.waitForFunction(() => document.querySelector("video").hasAttribute("data-needle-cited"));
    assert.equal(await fresh.evaluate(() => document.querySelector("track").default), false);
    assert.deepEqual((await player(fresh)).tracks, ["captions:showing"]);
    await fresh.context().close();
    await page.context().close();
  });

  it("links a standalone recording's caption to the file at its time range (#t=)", async () => {
    const page = await newPage();
    const q = QUERIES[2].q;
    const { shown, options: opts } = await widgetResults(page, q);
    const i = shown.findIndex((h) => h.kind === "media" && h.page === "media/podcast.ogg");
    assert.ok(i >= 0, `a podcast caption is shown: ${shown.map((h) => h.url)}`);
    const nat = nativeSearch(bundle, q, { k: 20, mode: "hybrid" }).hits.find((h) => h.url === shown[i].url.slice(origin.length));
    assert.ok(nat);
    assert.match(nat.url, /^media\/podcast\.ogg#t=\d+(\.\d+)?,\d+(\.\d+)?$/);
    assert.equal(nat.link, nat.url, "nothing on the site plays it: the link is the file itself");
    assert.equal(opts[i].href, origin + nat.url);
    assert.ok(opts[i].snippet.includes("Negative answers, such as a name that does not exist, are cached as well."), opts[i].snippet);
    assert.match(opts[i].locator, /^\d+:\d\d(\.\d+)?–\d+:\d\d(\.\d+)?$/);
    await page.context().close();
  });

  it("links a PDF hit to its page (#page=N) and labels it with the page", async () => {
    const page = await newPage();
    const q = QUERIES[3].q;
    const { shown, options: opts } = await widgetResults(page, q);
    const i = shown.findIndex((h) => h.kind === "pdf");
    assert.ok(i >= 0, `a PDF hit is shown: ${shown.map((h) => h.url)}`);
    const nat = nativeSearch(bundle, q, { k: 20, mode: "hybrid" }).hits.find((h) => h.url === shown[i].url.slice(origin.length));
    assert.ok(nat);
    const m = /^manuals\/libtasn1\.pdf#page=(\d+)$/.exec(nat.url);
    assert.ok(m, nat.url);
    assert.equal(nat.link, nat.url);
    assert.ok(opts[i].href.endsWith(nat.url), `${opts[i].href} ends with ${nat.url}`);
    assert.equal(opts[i].href, origin + nat.url);
    assert.equal(opts[i].locator, `page ${m[1]}`);
    assert.ok(opts[i].snippet.includes("asn1Parser"), opts[i].snippet);
    // The label is part of the link's accessible name, after the document and section.
    const name = await page.locator("needle-search [role=option] a").nth(i).evaluate((a) => a.textContent);
    assert.ok(name.includes(`page ${m[1]}`), name);
    await page.screenshot({ path: artifact("kinds-pdf-hit.png") });
    await page.context().close();
  });

  it("links a CSV hit to its rows (#row=A-B, RFC 7111) and labels it with the rows", async () => {
    const page = await newPage();
    const q = QUERIES[5].q;
    const { shown, options: opts } = await widgetResults(page, q);
    const i = shown.findIndex((h) => h.kind === "csv");
    assert.ok(i >= 0, `a CSV hit is shown: ${shown.map((h) => h.url)}`);
    const nat = nativeSearch(bundle, q, { k: 20, mode: "hybrid" }).hits.find((h) => h.url === shown[i].url.slice(origin.length));
    assert.ok(nat);
    const m = /^data\/text-mime-types\.csv#row=(\d+)-(\d+)$/.exec(nat.url);
    assert.ok(m, nat.url);
    assert.equal(nat.link, nat.url);
    assert.ok(opts[i].href.endsWith(nat.url), `${opts[i].href} ends with ${nat.url}`);
    assert.equal(opts[i].href, origin + nat.url);
    assert.equal(opts[i].locator, `rows ${m[1]}–${m[2]}`);
    assert.ok(opts[i].snippet.includes("text/x-python"), opts[i].snippet);
    await page.context().close();
  });
});
