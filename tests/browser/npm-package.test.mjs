// `npm pack` of pkg/, installed into a fresh folder, imports and answers in Node.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, fixtureSite, nativeSearch, qrels } from "./helpers.mjs";

describe("the npm package needle-search", () => {
  it("packs, installs into a fresh folder, and answers a query in Node like native needle search", () => {
    const pkg = join(ROOT, "pkg");
    assert.ok(existsSync(join(pkg, "needle_core_bg.wasm")), "pkg/ missing: run ./build.sh wasm");
    const meta = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8"));
    assert.equal(meta.name, "needle-search");
    assert.ok(meta.types, "TypeScript types are declared");
    const { bundle } = fixtureSite();
    const tmp = mkdtempSync(join(tmpdir(), "needle-npm-"));
    try {
      const tgz = execFileSync("npm", ["pack", pkg, "--pack-destination", tmp, "--silent"], { encoding: "utf8" }).trim().split("\n").pop();
      const app = join(tmp, "app");
      execFileSync("mkdir", ["-p", app]);
      writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
      execFileSync("npm", ["install", "--no-audit", "--no-fund", "--offline", join(tmp, tgz)], { cwd: app, stdio: "ignore" });
      const q = qrels()[0].q_doc;
      writeFileSync(
        join(app, "main.mjs"),
        `import { open } from "needle-search";
         const engine = await open(process.argv[2]);
         const lexical = await engine.search(process.argv[3], { k: 20 });
         await engine.ready;
         const hybrid = await engine.search(process.argv[3], { k: 20 });
         const prompt = await engine.prompt(process.argv[3], hybrid);
         console.log(JSON.stringify({ lexical, hybrid, prompt }));`,
      );
      const out = JSON.parse(execFileSync("node", ["main.mjs", bundle, q], { cwd: app, encoding: "utf8", maxBuffer: 64 << 20 }));
      assert.ok(out.lexical.hits.length > 0);
      assert.equal(out.hybrid.mode, "hybrid");
      const nat = nativeSearch(bundle, q, { k: 20 });
      assert.deepEqual(
        out.hybrid.hits.map((h) => [h.page, h.from, h.to]),
        nat.hits.map((h) => [h.page, h.from, h.to]),
      );
      out.hybrid.hits.forEach((h, i) => assert.ok(Math.abs(h.distance - nat.hits[i].distance) < 1e-3));
      assert.deepEqual(out.hybrid.answer, nat.answer);
      assert.match(out.prompt, /Question: /);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});
