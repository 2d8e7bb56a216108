// needle.js: the browser (and Node) API of needle.
//
//   import { open } from "/needle/needle.js";
//   const engine = await open("/needle/", { onProgress });
//   const r = await engine.search("how do I …", { k: 4, mode: "hybrid" });
//   await engine.ready;            // hybrid search available
//   await engine.prompt(question, r);
//
// The engine is needle's Rust code compiled to WebAssembly; it runs in a Web Worker (in Node,
// or with { worker: false }, in the calling thread). This file only moves bytes: it reads
// `manifest.json`, fetches the hashed files it names (through the Cache API, so a second visit
// needs no network), and hands them to the engine. Lexical search answers as soon as the lexical
// core (the engine without model code) and the index are in; hybrid once the engine, the
// index's vectors (a file of their own) and the model are. A large site's index comes in pieces
// (`manifest.pieces`): the head first, then each search fetches only the pieces the engine names
// (the lexical postings of the query's words, the inverted lists its vector probes, the entries
// of the hits it shows), each once, through the same cache.
//
// `lang` (a BCP 47 tag, as `<html lang>`) is the reader's language: queries are analyzed in it
// and, on a site written in several, only its pages are searched. The model reads English: a
// reader in another language searches by words, and the model is never fetched for them
// (`ready` rejects saying so).

const CACHE_NAME = "needle-v1";
const isNode = typeof process !== "undefined" && !!process.versions?.node && typeof window === "undefined";

/** Opens the bundle at `base` (a URL; in Node also a folder path). */
export async function open(base, options = {}) {
  const baseUrl = await resolveBase(base);
  const useWorker = options.worker ?? (typeof Worker !== "undefined" && !isNode);
  const manifest = await loadManifest(baseUrl, options);
  const siteRoot = new URL(manifest.siteRoot ?? "../", baseUrl);
  const backend = useWorker ? workerBackend(baseUrl, manifest, options) : localBackend(baseUrl, manifest, options);
  return new Engine(backend, siteRoot, manifest, options.lang ?? null);
}

class Engine {
  #backend;
  #siteRoot;
  constructor(backend, siteRoot, manifest, lang) {
    this.#backend = backend;
    this.#siteRoot = siteRoot;
    this.manifest = manifest;
    /** The reader's language given to `open` (null: the site's main language). */
    this.lang = lang;
    /**
     * Resolves once hybrid search is available (the model is loaded). Rejects, never hangs, if
     * the model or tokenizer cannot be fetched or is refused (corrupt, or not the one the index
     * was built with): search then stays lexical. Also rejects when `lexical` does.
     */
    this.ready = backend.ready;
    /**
     * Resolves once lexical search is available (the index is loaded). Rejects if the index
     * cannot be fetched or read (truncated, corrupt, another format); the error names the file
     * and the reason, and every search then rejects with it: no results rather than wrong ones.
     */
    this.lexical = backend.lexical;
    // A failed model is reported through `ready` and onProgress; search stays lexical.
    this.ready.catch(() => {});
  }

  /**
   * Searches. `mode` is "bm25", "dense" or "hybrid"; while the model is loading every mode is
   * answered lexically (`r.mode === "bm25"`, `r.answer` empty).
   */
  async search(query, { k = 20, mode = "hybrid", cut = null, maxChunks = null, lang = this.lang } = {}) {
    const json = await this.#backend.call("search", [String(query), k, mode, cut, maxChunks, lang]);
    const r = JSON.parse(json);
    if (r.missing) throw new Error(`needle: the engine still lacks ${r.missing.join(", ")}`);
    for (const h of r.hits) {
      h.url = new URL(h.url, this.#siteRoot).href;
      h.link = new URL(h.link ?? h.url, this.#siteRoot).href;
    }
    r.query = String(query);
    return r;
  }

  /** The prompt text with numbered sources for `r` (what `needle search --prompt` prints). */
  async prompt(question, r) {
    return this.#backend.call("prompt", [String(question), JSON.stringify(r)]);
  }

  /** The site's languages (primary subtags such as "en", "de", "zh"), its main language first. */
  async languages() {
    return this.#backend.call("languages", []);
  }

  /** Pages of the index: [{ path, title, contentHash, textLen, chunks }]. */
  async pages() {
    return JSON.parse(await this.#backend.call("pages", []));
  }

  /** The quote of the chunk of `page` spanning exactly `from..to`, or null. */
  async quote(page, from, to) {
    return (await this.#backend.call("quote", [page, from, to])) ?? null;
  }

  /** The chunks of `page`: [{ from, to, section, content }]. */
  async chunksOf(page) {
    return JSON.parse(await this.#backend.call("chunksOf", [page]));
  }

  /**
   * Starts loading the engine and the model when the engine was opened with
   * `{ model: "on-demand" }` (otherwise they load at once); resolves to `ready`.
   */
  async loadModel() {
    await this.#backend.call("loadModel", []);
    return this.ready;
  }

  /** The query embedding (for benchmarks and comparisons); needs the model. */
  async embed(text) {
    return Array.from(await this.#backend.call("embed", [String(text)]));
  }

  /** The model's token ids for `text` (BigInt64Array); needs the model. */
  async tokenize(text) {
    return this.#backend.call("tokenize", [String(text)]);
  }

  /** Times the engine's steps inside the engine thread (benchmarks): n runs per query. */
  async bench(queries, options = {}) {
    return this.#backend.call("bench", [queries, options]);
  }

  /** Embed-only timings per query (benchmarks). */
  async benchEmbed(queries, options = {}) {
    return this.#backend.call("benchEmbed", [queries, options]);
  }

  /**
   * Memory of the engine thread: `{ wasmBytes, jsHeapBytes }`, the WebAssembly memory's size
   * (it only grows, so growth over a run of queries is what they kept) and the thread's JS heap
   * in use where the browser reports it (`performance.memory`, Chromium), else null.
   */
  async memory() {
    return this.#backend.call("memory", []);
  }

  /**
   * What an index in pieces cost so far: `{ pieced, head, pieces, bytes }`, the head's bytes
   * and the pieces handed to the engine (count and bytes, from the network or the cache);
   * `{ pieced: false }` for an index in one file.
   */
  async pieces() {
    return this.#backend.call("pieces", []);
  }

  /** Stops the worker. */
  close() {
    this.#backend.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Backends: the same `core` either behind a worker or in this thread.

function workerBackend(baseUrl, manifest, options) {
  const worker = new Worker(new URL(manifest.files.worker, baseUrl), { type: "module", name: "needle" });
  const pending = new Map();
  let next = 0;
  let lexicalDone, lexicalFail, readyDone, readyFail;
  const lexical = new Promise((a, b) => ((lexicalDone = a), (lexicalFail = b)));
  const ready = new Promise((a, b) => ((readyDone = a), (readyFail = b)));
  worker.onmessage = ({ data }) => {
    if (data.type === "progress") options.onProgress?.(data.progress);
    else if (data.type === "lexical") lexicalDone();
    else if (data.type === "ready") readyDone();
    else if (data.type === "lexical-error") lexicalFail(new Error(data.error));
    else if (data.type === "ready-error") readyFail(Object.assign(new Error(data.error), { code: data.code }));
    else if (data.type === "reply") {
      const p = pending.get(data.id);
      pending.delete(data.id);
      if (data.ok) p.resolve(data.value);
      else p.reject(new Error(data.error));
    }
  };
  worker.onerror = (e) => {
    const err = new Error(`needle worker: ${e.message ?? "failed to start"}`);
    lexicalFail(err);
    readyFail(err);
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  };
  lexical.catch(() => {});
  worker.postMessage({ type: "init", base: baseUrl.href, manifest, options: plainOptions(options) });
  return {
    lexical,
    ready,
    call(op, args) {
      const id = next++;
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject });
        worker.postMessage({ type: "call", id, op, args });
      });
    },
    close() {
      worker.terminate();
    },
  };
}

function plainOptions(o) {
  return { cache: o.cache ?? true, model: o.model ?? true, relaxedSimd: o.relaxedSimd ?? true, lang: o.lang ?? null };
}

// A minimal module whose one function uses i8x16.relaxed_swizzle: it validates exactly where
// the engine has relaxed SIMD (Chromium 114+, Firefox 145+; not Safari as of this writing).
const RELAXED_SIMD_PROBE = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 15, 1, 13, 0, 65, 1, 253, 15, 65, 2, 253, 15, 253, 128, 2, 11,
]);
function hasRelaxedSimd() {
  try {
    return WebAssembly.validate(RELAXED_SIMD_PROBE);
  } catch {
    return false;
  }
}

/**
 * Which engine build to run: the relaxed-SIMD one (fused multiply-add in the model's matrix
 * kernels, about 10 % faster embedding) where the bundle has it and the engine validates it, else
 * the plain SIMD one. Both come from the same Rust code and share one wasm-bindgen glue.
 */
function engineRole(manifest, options) {
  return options.relaxedSimd !== false && manifest.files.wasmRelaxed && hasRelaxedSimd() ? "wasmRelaxed" : "wasm";
}

function localBackend(baseUrl, manifest, options) {
  const core = createCore(baseUrl, manifest, { ...plainOptions(options), onProgress: options.onProgress });
  return { lexical: core.lexical, ready: core.ready, call: (op, args) => core.call(op, args), close() {} };
}

/** Runs inside the worker: answers the main thread's messages with one core. */
export function serveWorker(scope) {
  let core = null;
  scope.onmessage = async ({ data }) => {
    if (data.type === "init") {
      core = createCore(new URL(data.base), data.manifest, {
        ...data.options,
        onProgress: (progress) => scope.postMessage({ type: "progress", progress }),
      });
      core.lexical.then(
        () => scope.postMessage({ type: "lexical" }),
        (e) => scope.postMessage({ type: "lexical-error", error: String(e?.message ?? e) }),
      );
      core.ready.then(
        () => scope.postMessage({ type: "ready" }),
        (e) => scope.postMessage({ type: "ready-error", error: String(e?.message ?? e), code: e?.code }),
      );
    } else if (data.type === "call") {
      try {
        const value = await core.call(data.op, data.args);
        scope.postMessage({ type: "reply", id: data.id, ok: true, value });
      } catch (e) {
        scope.postMessage({ type: "reply", id: data.id, ok: false, error: String(e?.message ?? e) });
      }
    }
  };
}

/** The engine thread's state: loads the index (lexical), then the model (hybrid). */
function createCore(baseUrl, manifest, options) {
  const progress = (p) => options.onProgress?.(p);
  const url = (role) => new URL(manifest.files[role], baseUrl);
  const get = (role) =>
    getBytes(url(role), {
      cache: options.cache,
      total: manifest.sizes?.[role],
      onProgress: (loaded, total) => progress({ file: role, loaded, total, done: false }),
    }).then((bytes) => {
      progress({ file: role, loaded: bytes.byteLength, total: bytes.byteLength, done: true });
      return bytes;
    });

  // Lexical search runs in the lexical core (no model code, about a thirtieth of the engine's
  // bytes) as soon as it and the index are in; the engine and the model follow, and once the
  // model is loaded the engine answers everything. Nothing else is fetched before the first
  // lexical answer is possible, so it does not share the link with megabytes of model.
  let lexicalEngine = null;
  let engine = null;
  let exports = null;
  let indexBytes = null;
  // An index in pieces: the head opens the engine (`Engine.fromHead`), and each search fetches
  // the pieces it names. Their bytes are kept to hand to the full engine when the model is in.
  const pieced = !!manifest.pieces && !!manifest.files.head;
  const indexRole = pieced ? "head" : "index";
  const open = (glue, bytes) => (pieced ? glue.Engine.fromHead(bytes, manifest.files.head) : new glue.Engine(bytes, manifest.files.index));
  const pieces = new Map(); // file name → Promise of its bytes (one fetch per piece)
  const spent = { pieces: 0, bytes: 0 };
  const piece = (name) => {
    if (!pieces.has(name)) {
      const p = getBytes(new URL(manifest.pieces + name, baseUrl), { cache: options.cache });
      p.then(
        (bytes) => ((spent.pieces += 1), (spent.bytes += bytes.byteLength)),
        () => pieces.delete(name),
      );
      pieces.set(name, p);
    }
    return pieces.get(name);
  };
  // Bytes the engine refused are dropped from the cache: a corrupt download is not kept for
  // every later visit (the names are content hashes, so the cache is read first).
  /** Drops these URLs from the Cache API (a file found bad is fetched again next time). */
  const evict = async (...urls) => {
    if (!options.cache || typeof caches === "undefined") return;
    const cache = await openCache();
    for (const u of urls) await cache?.delete(u).catch(() => {});
  };
  const lexical = (async () => {
    if (options.cache && typeof caches !== "undefined") pruneCache(baseUrl, manifest).catch(() => {});
    const t0 = now();
    const [core, index] = await Promise.all([
      lexicalCore(baseUrl, manifest, { cache: options.cache, get: () => get("lexical") }).catch(async (e) => {
        await evict(url("lexical"));
        throw e;
      }),
      get(indexRole),
    ]);
    const t1 = now();
    try {
      lexicalEngine = open(core.glue, index);
    } catch (e) {
      await evict(url(indexRole));
      throw e;
    }
    indexBytes = index;
    exports = core.exports;
    progress({ phase: "lexical", loadMs: t1 - t0, indexMs: now() - t1, done: true });
  })();
  // "on-demand": the engine and model wait for the first `loadModel` call.
  let wantModel;
  const modelWanted = new Promise((r) => (wantModel = r));
  if (options.model !== "on-demand") wantModel();
  const ready = (async () => {
    if (options.model === false) return new Promise(() => {});
    await lexical;
    const lang = lexicalEngine.readerLang(options.lang || undefined);
    if (!lexicalEngine.modelReads(lang)) {
      // Nothing is fetched: the reader's searches stay lexical (`code` tells a widget why).
      throw Object.assign(new Error(`the semantic model reads English, and this search is in "${lang}": results match the words`), { code: "language" });
    }
    await modelWanted;
    const role = engineRole(manifest, options);
    const own = await loadGlue(baseUrl, manifest, role);
    // The whole download from the start, so that a progress bar's total never grows.
    const files = [...(own.wasm ? [] : [role]), ...(pieced ? [] : ["vectors"]), "model", "tokenizer"];
    progress({ phase: "download", files: Object.fromEntries(files.map((f) => [f, manifest.sizes?.[f] ?? 0])), done: false });
    const [wasm, vectors, model, tokenizer] = await Promise.all([
      own.wasm ? readFileUrl(own.wasm) : get(role),
      pieced ? null : get("vectors"),
      get("model"),
      get("tokenizer"),
    ]);
    // Let queries that are already waiting answer lexically before the engine's load blocks.
    await new Promise((r) => setTimeout(r, 0));
    const t0 = now();
    const fullExports = await own.module.default({ module_or_path: wasm }).catch(async (e) => {
      if (!own.wasm) await evict(url(role));
      throw e;
    });
    const t1 = now();
    const full = open(own.module, indexBytes);
    if (!pieced) indexBytes = null;
    try {
      if (pieced) {
        // What the lexical core's searches fetched; one it refused (or one still failing) is
        // left out here too, and fetched again when a search names it.
        for (const [name, bytes] of pieces) {
          try {
            full.addPiece(manifest.pieces + name, await bytes);
          } catch {
            pieces.delete(name);
          }
        }
      } else full.loadVectors(vectors, manifest.files.vectors);
    } catch (e) {
      full.free();
      if (!pieced) await evict(url("vectors"));
      throw e;
    }
    try {
      full.loadModel(model, tokenizer);
    } catch (e) {
      full.free();
      await evict(url("model"), url("tokenizer"));
      throw new Error(`the model ${manifest.files.model} and tokenizer ${manifest.files.tokenizer} were refused: ${e?.message ?? e}`);
    }
    engine = full;
    exports = fullExports;
    lexicalEngine.free();
    lexicalEngine = null;
    progress({ phase: "ready", wasm: role === "wasmRelaxed" ? "relaxed-simd" : "simd128", compileMs: t1 - t0, modelMs: now() - t1, done: true });
  })();
  ready.catch(() => {});
  lexical.catch(() => {});
  /** The engine that answers now: the full one once the model is in, else the lexical core. */
  const current = () => engine ?? lexicalEngine;
  const full = () => {
    if (!engine) throw new Error("the model is not loaded");
    return engine;
  };
  /**
   * A search over an index in pieces: the engine names the pieces it lacks (`{"missing"}`),
   * they are fetched together and handed over, and it searches again: at most five rounds
   * (terms and lists; the terms a misspelt word may have meant, once its own piece shows the
   * site lacks it; the lists of a corrected keyword query, which the model reads corrected;
   * the lexical candidates' content pieces, whose vectors the dense side scores too, with
   * those of the hits it would show; the hits the candidates moved in). A piece the engine refuses is
   * dropped from the cache and the search fails naming it; the pieces already in stay.
   */
  const searchPieces = async (args) => {
    for (let round = 0; ; round++) {
      const e = current();
      const json = e.search(...args);
      if (!json.startsWith('{"missing"') || round === 5) return json;
      const names = JSON.parse(json).missing;
      const got = await Promise.all(names.map((n) => piece(n).then((bytes) => [n, bytes])));
      if (current() !== e) continue; // the full engine took over meanwhile and has them all
      for (const [name, bytes] of got) {
        const file = manifest.pieces + name;
        try {
          e.addPiece(file, bytes);
        } catch (err) {
          pieces.delete(name);
          await evict(new URL(file, baseUrl));
          throw err;
        }
      }
    }
  };

  return {
    lexical,
    ready,
    async call(op, args) {
      if (op === "memory") return memory(exports);
      if (op === "loadModel") {
        if (options.model === false) throw new Error("this engine was opened with { model: false }");
        return void wantModel();
      }
      await lexical;
      switch (op) {
        case "search": {
          const [q, k, mode, cut, maxChunks, lang] = args;
          const a = [q, k, mode, cut ?? undefined, maxChunks ?? undefined, lang ?? undefined];
          return pieced ? searchPieces(a) : current().search(...a);
        }
        case "pieces":
          return pieced ? { pieced, head: indexBytes?.byteLength ?? 0, ...spent } : { pieced };
        case "prompt":
          return current().prompt(args[0], args[1]);
        case "languages":
          return current().languages;
        case "pages":
          return current().pages();
        case "quote":
          return current().quote(args[0], args[1], args[2]);
        case "chunksOf":
          return current().chunksOf(args[0]);
        case "embed":
          return full().embed(args[0]);
        case "tokenize":
          return full().tokenize(args[0]);
        case "bench": {
          const search = (q, k, mode) => (pieced ? searchPieces([q, k, mode]) : current().search(q, k, mode));
          return bench(search, args[0], { ...args[1], warmAll: pieced });
        }
        case "benchEmbed":
          return benchEmbed(full(), args[0], args[1] ?? {});
        default:
          throw new Error(`unknown operation ${op}`);
      }
    },
  };
}

/**
 * Medians of the engine's own timings over `queries`, `runs` times each, after a warm-up (of
 * every query with `warmAll`: an index in pieces then has each query's pieces, and what is timed
 * is a warm search).
 */
async function bench(search, queries, { runs = 5, k = 20, mode = "hybrid", warmAll = false } = {}) {
  for (const q of warmAll ? queries : queries.slice(0, 3)) await search(q, k, mode);
  const parts = { embed: [], bm25: [], dense: [], fuse: [], total: [] };
  for (let i = 0; i < runs; i++) {
    for (const q of queries) {
      const t = now();
      const r = JSON.parse(await search(q, k, mode));
      parts.total.push(now() - t);
      for (const p of ["embed", "bm25", "dense", "fuse"]) parts[p].push(r.timings[p]);
    }
  }
  const med = (a) => {
    const s = [...a].sort((x, y) => x - y);
    return s[Math.floor(s.length / 2)];
  };
  return Object.fromEntries(Object.entries(parts).map(([k, v]) => [k, { median: med(v), n: v.length }]));
}

/** Per-query embed time (median of `runs` after one warm-up), the query's token count too. */
function benchEmbed(engine, queries, { runs = 5 } = {}) {
  return queries.map((q) => {
    engine.embed(q);
    const t = [];
    for (let i = 0; i < runs; i++) {
      const a = now();
      engine.embed(q);
      t.push(now() - a);
    }
    t.sort((x, y) => x - y);
    return { tokens: engine.tokenCount(q), ms: t[Math.floor(t.length / 2)] };
  });
}

/** The engine thread's memory: the wasm linear memory and, where reported, the JS heap. */
function memory(exports) {
  globalThis.gc?.(); // only with --js-flags=--expose-gc (tests)
  return {
    wasmBytes: exports?.memory?.buffer?.byteLength ?? null,
    jsHeapBytes: globalThis.performance?.memory?.usedJSHeapSize ?? null,
  };
}

const now = () => (typeof performance !== "undefined" ? performance.now() : Date.now());

// ---------------------------------------------------------------------------------------------
// Bytes: fetch with progress, through the Cache API where there is one.

/**
 * A module found at run time: the bundle's hashed glue, or Node's own modules (only ever loaded
 * in Node). The comments keep bundlers (Vite, webpack) from resolving or stubbing these
 * imports when an app bundles this file for the browser.
 */
function runtimeImport(specifier) {
  return import(/* @vite-ignore */ /* webpackIgnore: true */ specifier);
}

async function resolveBase(base) {
  if (base instanceof URL) return ensureSlash(base);
  const s = String(base);
  if (/^[a-z][a-z0-9+.-]*:/i.test(s)) return ensureSlash(new URL(s));
  if (typeof location !== "undefined") return ensureSlash(new URL(s, location.href));
  const { pathToFileURL } = await runtimeImport("node:url");
  return ensureSlash(pathToFileURL(s));
}

function ensureSlash(u) {
  return u.href.endsWith("/") ? u : new URL(u.href + "/");
}

async function openCache() {
  try {
    return typeof caches !== "undefined" ? await caches.open(CACHE_NAME) : null;
  } catch {
    return null; // opaque origins and some privacy modes refuse storage
  }
}

/**
 * manifest.json: from the network when there is one (it is not hashed), else the cached copy.
 * The one loader of the bundle's manifest: the widget and the landing highlight use it too.
 */
export async function loadManifest(baseUrl, options = {}) {
  const u = new URL("manifest.json", baseUrl);
  if (u.protocol === "file:") return JSON.parse(new TextDecoder().decode(await readFileUrl(u)));
  const cache = options.cache === false ? null : await openCache();
  try {
    const res = await fetch(u, { cache: "no-cache" });
    if (!res.ok) throw new Error(`${u}: HTTP ${res.status}`);
    const text = await res.text();
    await cache?.put(u, new Response(text, { headers: { "content-type": "application/json" } })).catch(() => {});
    return JSON.parse(text);
  } catch (e) {
    const hit = await cache?.match(u);
    if (hit) return JSON.parse(await hit.text());
    throw new Error(`needle: cannot load ${u}: ${e.message}`);
  }
}

/**
 * The bundle's lexical core: the WebAssembly build with no model code (about 95 KB brotli). It
 * answers lexical queries before the engine and model are in, and runs the canonical text rule
 * for the landing highlight. Fetched through the cache like every hashed file, initialised
 * once per page or worker; resolves to its wasm-bindgen module.
 */
export async function loadLexicalCore(baseUrl, manifest, options = {}) {
  return (await lexicalCore(baseUrl, manifest, options)).glue;
}

const lexicalCores = new Map();
/** `{ glue, exports }` of the lexical core; `options.get` fetches its bytes (with progress). */
function lexicalCore(baseUrl, manifest, options = {}) {
  const { lexical, lexicalGlue } = manifest.files;
  if (!lexical || !lexicalGlue) return Promise.reject(new Error("needle: this bundle has no lexical core (rebuild it with a newer needle)"));
  const key = new URL(lexical, baseUrl).href;
  if (!lexicalCores.has(key)) {
    const core = (async () => {
      const [glue, wasm] = await Promise.all([
        runtimeImport(new URL(lexicalGlue, baseUrl).href),
        options.get ? options.get() : getBytes(new URL(lexical, baseUrl), { cache: options.cache !== false }),
      ]);
      return { glue, exports: await glue.default({ module_or_path: wasm }) };
    })();
    core.catch(() => lexicalCores.delete(key));
    lexicalCores.set(key, core);
  }
  return lexicalCores.get(key);
}

/** Drops cached files of this bundle that the current manifest no longer names. */
async function pruneCache(baseUrl, manifest) {
  const cache = await openCache();
  if (!cache) return;
  const keep = new Set(Object.values(manifest.files).map((f) => new URL(f, baseUrl).href));
  keep.add(new URL("manifest.json", baseUrl).href);
  const folder = manifest.pieces ? new URL(manifest.pieces, baseUrl).href : null;
  for (const req of await cache.keys()) {
    if (req.url.startsWith(baseUrl.href) && !keep.has(req.url) && !(folder && req.url.startsWith(folder))) await cache.delete(req);
  }
}

async function readFileUrl(u) {
  const { readFile } = await runtimeImport("node:fs/promises");
  const { fileURLToPath } = await runtimeImport("node:url");
  const buf = await readFile(fileURLToPath(u));
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
}

/** The bytes of a hashed (immutable) file: the cached copy, else the network (then cached). */
async function getBytes(u, { cache: useCache = true, total, onProgress } = {}) {
  if (u.protocol === "file:") return readFileUrl(u);
  const cache = useCache ? await openCache() : null;
  const hit = await cache?.match(u).catch(() => null);
  if (hit) return new Uint8Array(await hit.arrayBuffer());
  // A failed fetch (offline, refused) names the file: "Failed to fetch" alone says nothing.
  const res = await fetch(u).catch((e) => {
    throw new Error(`needle: ${u}: ${e?.message ?? e}`);
  });
  if (!res.ok) throw new Error(`needle: ${u}: HTTP ${res.status}`);
  const bytes = await readWithProgress(res, total, onProgress);
  await cache?.put(u, new Response(bytes, { headers: { "content-type": res.headers.get("content-type") ?? "application/octet-stream" } })).catch(() => {});
  return bytes;
}

async function readWithProgress(res, total, onProgress) {
  // The manifest's size first: it counts the bytes the body yields, where a compressing
  // server's content-length counts the bytes on the wire.
  const length = total || Number(res.headers.get("content-length")) || 0;
  if (!res.body || !onProgress) return new Uint8Array(await res.arrayBuffer());
  const reader = res.body.getReader();
  const parts = [];
  let loaded = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    loaded += value.byteLength;
    onProgress(loaded, length);
  }
  const out = new Uint8Array(loaded);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

/**
 * The wasm-bindgen glue: the bundle's hashed copy; in Node, the npm package's own glue and
 * .wasm (a glue and a .wasm must come from the same build).
 */
async function loadGlue(baseUrl, manifest, role) {
  if (isNode) {
    // The npm package ships both builds under fixed names. The names go through `own`: a bundler
    // copies every `new URL("./literal", import.meta.url)` it sees into a browser build, and
    // these files (megabytes) are only ever read in Node.
    const own = (name) => new URL(name, import.meta.url);
    const wasm = own(role === "wasmRelaxed" ? "./needle_core_relaxed_bg.wasm" : "./needle_core_bg.wasm");
    try {
      return { module: await runtimeImport(own("./needle_core.js").href), wasm };
    } catch {
      // needle.js inside a bundle folder: use the bundle's files
    }
  }
  return { module: await runtimeImport(new URL(manifest.files.glue, baseUrl).href), wasm: null };
}
