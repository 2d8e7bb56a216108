// Types of needle.js, the API of the npm package `needle-search`.

export interface NeedleHit {
  /** Chunk number in the index. */
  chunk: number;
  /** Page path relative to the site root (as `needle search` prints it). */
  page: string;
  /** The document's kind, which decides how it is cited. */
  kind: "text" | "pdf" | "media" | "csv";
  /** Absolute URL of the cited range, by the document's own standard: `…/page#char=from,to`,
   * `…/file.pdf#page=N`, `…/clip.webm#t=start,end`, `…/table.csv#row=a-b`. */
  url: string;
  /** Absolute URL a reader following the hit lands on: `url`, except for a media file played
   * on a page, where it is that page at `#media=<file>&t=start,end` (the highlight seeks the player). */
  link: string;
  title: string;
  section: string;
  /** The page, time range or rows (`page 4`, `0:12–0:18`, `rows 5–9`); absent for text. */
  locator?: string;
  /** UTF-16 offsets into the page's canonical text. */
  from: number;
  to: number;
  /** The quoted text. */
  content: string;
  /** Cosine distance to the query; null while the model is not loaded. */
  distance: number | null;
  /** 1-based rank in the mode's ranking. */
  rank: number;
  /** Where `terms` occur in `content`: [from, to] in UTF-16 units, found by BM25's own tokenizer. */
  marks: [number, number][];
}

export interface NeedleResult {
  query: string;
  /** Top k of the ungated ranking, more when the gate kept a hit below k: the gate walks the
   * index's own depth, so every front end answers a question the same whatever k it shows. */
  hits: NeedleHit[];
  /** Indices into `hits` kept by the gate; [] means NO ANSWER. */
  answer: number[];
  /**
   * The engine's decision: "answer" (the gate kept chunks, `answer` is not empty); "results" (no
   * stated answer, but nothing refused: a keyword query whose words the site knows, or the model
   * is not loaded yet); "no-answer" (a question no passage answers, or words the site does not
   * know, listed in `unknown`). Absent from older engines: there it is "answer" when `answer` is
   * not empty, else "no-answer".
   */
  verdict?: "answer" | "results" | "no-answer";
  /** The query's words that the site holds in no form and no typo correction reached. */
  unknown?: string[];
  /** The query with each corrected word replaced by the site's word it matched; absent or null when nothing was corrected. */
  corrected?: string | null;
  /** The mode actually used ("bm25" while the model is still loading). */
  mode: "bm25" | "dense" | "hybrid";
  /** The cosine cut this query met: the index's gate lowers it for foreign words. */
  cut: number;
  /** The query's words that neither the site nor the model's vocabulary knows (they make the index's own gate stricter). */
  foreign: string[];
  /** The query's words worth marking in a snippet (BM25's tokenizer, no stop words); each hit's `marks` says where they are. */
  terms: string[];
  /** Milliseconds, measured inside the engine. */
  timings: { embed: number; bm25: number; dense: number; fuse: number };
}

export interface NeedleProgress {
  /** "lexical" | "index" (first), then "wasm" | "wasmRelaxed" | "vectors" | "model" | "tokenizer", while downloading. */
  file?: string;
  /**
   * "download" when the semantic files start downloading (`files`: each one's size), "lexical"
   * once lexical search works (the lexical core), "ready" once hybrid does (the engine).
   */
  phase?: "download" | "lexical" | "ready";
  /** With phase "download": the bytes of each file that download brings, by role, from the manifest. */
  files?: Record<string, number>;
  /** With phase "ready": the engine build running, relaxed SIMD where the browser has it. */
  wasm?: "simd128" | "relaxed-simd";
  loaded?: number;
  total?: number;
  done: boolean;
}

export interface OpenOptions {
  onProgress?: (p: NeedleProgress) => void;
  /** Run the engine in a Web Worker (default in browsers) or in this thread (default in Node). */
  worker?: boolean;
  /** Keep the bundle's files in the Cache API for offline visits (default true). */
  cache?: boolean;
  /**
   * Load the engine and the model after the lexical core (default true); false keeps search
   * lexical-only (nothing but the lexical core and the index is fetched); "on-demand" waits for
   * the first `engine.loadModel()`.
   */
  model?: boolean | "on-demand";
  /**
   * Run the relaxed-SIMD engine build where the browser validates it (default true; it embeds
   * queries about 10 % faster). false always runs the plain SIMD build.
   */
  relaxedSimd?: boolean;
  /**
   * The reader's language (a BCP 47 tag, as `<html lang>`): queries are analyzed in it and, on
   * a site written in several, only its pages are searched; null or absent: the site's main
   * language, every page. The model reads English: for another language search stays lexical,
   * the model is not fetched, and `ready` rejects saying so.
   */
  lang?: string | null;
}

export interface SearchOptions {
  k?: number;
  mode?: "bm25" | "dense" | "hybrid";
  /** Cosine-distance cut of the gate; default: the index's. */
  cut?: number | null;
  /** At most this many hits pass the gate; default: the index's. */
  maxChunks?: number | null;
  /** The reader's language for this search; default: the one given to `open`. */
  lang?: string | null;
}

export interface NeedlePage {
  path: string;
  title: string;
  contentHash: string;
  textLen: number;
  chunks: number;
}

export interface NeedleMemory {
  /** Size of the engine's WebAssembly memory in bytes (it never shrinks: growth is what was kept). */
  wasmBytes: number | null;
  /** JS heap in use in the engine's thread, where the browser reports it (Chromium), else null. */
  jsHeapBytes: number | null;
}

export interface Engine {
  /**
   * Resolves once hybrid search is available. Rejects (never hangs) when the model or the
   * tokenizer cannot be fetched or is refused (corrupt, or not the one the index was built
   * with); the error says which file and why. Search then keeps answering lexically
   * (`mode: "bm25"`, `answer: []`). Also rejects when `lexical` rejects.
   */
  readonly ready: Promise<void>;
  /**
   * Resolves once lexical search is available. Rejects when the index cannot be fetched or
   * read (truncated, corrupt, another format version); the error names the file and the
   * reason, and every `search` then rejects with it: no results, never wrong ones.
   */
  readonly lexical: Promise<void>;
  readonly manifest: Record<string, unknown>;
  /** The reader's language given to `open` (null: the site's main language). */
  readonly lang: string | null;
  /** The site's languages (primary subtags: "en", "de", "zh"), its main language first. */
  languages(): Promise<string[]>;
  search(query: string, options?: SearchOptions): Promise<NeedleResult>;
  /** The prompt text with numbered sources, as the CLI's `--prompt` prints it. */
  prompt(question: string, result: NeedleResult): Promise<string>;
  /** The pages of an index in one file (an index in pieces rejects: its pages are in pages.json). */
  pages(): Promise<NeedlePage[]>;
  /** The quote of a chunk by its range; null when none (and always over an index in pieces). */
  quote(page: string, from: number, to: number): Promise<string | null>;
  /** The chunks of `page` in index order (an index in one file; one in pieces rejects). */
  chunksOf(page: string): Promise<{ from: number; to: number; section: string; content: string }[]>;
  /** The model's token ids for `text` ([CLS] … [SEP]); needs the model. */
  tokenize(text: string): Promise<BigInt64Array>;
  embed(text: string): Promise<number[]>;
  /** Memory of the engine's thread (for load tests and diagnostics). */
  memory(): Promise<NeedleMemory>;
  /**
   * What an index in pieces has cost so far: the head's bytes and the pieces fetched (count,
   * bytes; from the network or the cache). `{ pieced: false }` for an index in one file.
   */
  pieces(): Promise<{ pieced: false } | { pieced: true; head: number; pieces: number; bytes: number }>;
  /** With `{ model: "on-demand" }`: starts loading the engine and the model; resolves to `ready`. */
  loadModel(): Promise<void>;
  close(): void;
}

/** Opens the bundle at `base` (its URL; in Node also a folder path). */
export function open(base: string | URL, options?: OpenOptions): Promise<Engine>;

/** The bundle's lexical core (WebAssembly, no model code), initialised once per page: what the landing highlight runs the canonical text rule with. */
export function loadLexicalCore(baseUrl: URL, manifest: { files: Record<string, string> }, options?: { cache?: boolean }): Promise<unknown>;
