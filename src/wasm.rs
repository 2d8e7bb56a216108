//! The browser's entry point: a thin wasm-bindgen layer over the same `index`, `search`,
//! `embed` and `cite` functions the CLI calls. Built without the `embed` feature it is the
//! lexical core: the same `Engine` with no `loadModel` (and no tract or tokenizer in the binary). It does no I/O: JavaScript fetches the index,
//! model and tokenizer bytes and hands them over (lexical search works as soon as the index
//! is in; hybrid once the model is). An index in pieces (`query::pieces`) opens from its head
//! (`Engine.fromHead`); a search then answers `{"missing": [files]}` until JavaScript has
//! handed over (`addPiece`) the pieces it names, and the query's embedding is kept meanwhile so
//! the model runs once per query.
//! Invariants: a model whose sha256 differs from the index's stamp is refused; results cross
//! into JavaScript as JSON text (one `JSON.parse`, no second serialiser in the binary, and an
//! unknown distance becomes `null`). The shape of that JSON is typed once, for the API users
//! call, in `www/needle.d.ts` (`NeedleResult`, `NeedlePage`); `needle.js` parses it.

use crate::doc::canonical::{Canonicalizer, Source, CONTENT_ROOT_SELECTORS, DROP_SELECTORS};
#[cfg(feature = "embed")]
use crate::embed::Embedder;
use crate::query::analyze::Analyzer;
use crate::query::bm25::marks;
use crate::query::cite::{build_prompt, citations};
use crate::query::index::{Index, Settings, Stamp};
use crate::query::lexicon::Plan;
use crate::query::pieces::{PieceId, Pieced};
use crate::query::search::{search_planned, Entries, Mode, QueryVector, SearchOptions, SearchResult, Timings, Verdict};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use wasm_bindgen::prelude::*;

#[wasm_bindgen(start)]
fn start() {
    console_error_panic_hook::set_once();
}

/// What an engine searches: a whole index, or the pieces of one fetched so far.
enum Store {
    Whole(Index),
    Pieces(Pieced),
}

impl Store {
    /// The analyzer a query in `lang` is read with (`None`: the site's main language).
    fn analyzer(&self, lang: Option<&str>) -> Analyzer {
        match self {
            Store::Whole(i) => i.header.analyzer(lang),
            Store::Pieces(p) => p.analyzer(),
        }
    }

    /// The site's languages, its main language first.
    fn langs(&self) -> Vec<String> {
        match self {
            Store::Whole(i) => {
                let a = &i.header.analysis;
                let main = a.main_lang().to_string();
                std::iter::once(main.clone()).chain(a.langs.iter().filter(|l| **l != main).cloned()).collect()
            }
            Store::Pieces(p) => vec![p.head.lang.clone()],
        }
    }

    fn settings(&self) -> &Settings {
        match self {
            Store::Whole(i) => &i.header.settings,
            Store::Pieces(p) => &p.head.settings,
        }
    }

    #[cfg_attr(not(feature = "embed"), allow(dead_code))]
    fn stamp(&self) -> &Stamp {
        match self {
            Store::Whole(i) => &i.header.stamp,
            Store::Pieces(p) => &p.head.stamp,
        }
    }

    fn entries(&self) -> &dyn Entries {
        match self {
            Store::Whole(i) => i,
            Store::Pieces(p) => p,
        }
    }

    /// The whole index, for what only it can answer (a page's chunks, the page list).
    fn whole(&self, what: &str) -> Result<&Index, JsError> {
        match self {
            Store::Whole(i) => Ok(i),
            Store::Pieces(_) => Err(err(format!("{what}: an index in pieces does not hold every page (see pages.json)"))),
        }
    }
}

/// A loaded index, and later the model that embeds queries for it.
#[wasm_bindgen]
pub struct Engine {
    store: Store,
    /// An index in pieces: the text the model last embedded, its embedding and its time, kept
    /// while a query's pieces are fetched (the searches that name them and the one that answers
    /// embed once, twice for a corrected keyword query).
    last: RefCell<Option<(String, Option<QueryVector>, f64)>>,
    #[cfg_attr(not(feature = "embed"), allow(dead_code))]
    file: String,
    /// The index file's checksum: what its vectors file must name (`loadVectors`).
    #[cfg(feature = "embed")]
    checksum: Vec<u8>,
    #[cfg(feature = "embed")]
    embedder: Option<Embedder>,
}

#[derive(Serialize)]
struct JsHit {
    chunk: usize,
    page: String,
    /// `text`, `pdf`, `media` or `csv`.
    kind: String,
    /// The URL that cites the hit (`cite::chunk_url`).
    url: String,
    /// Where following it lands (`cite::chunk_link`): a media file's player page.
    link: String,
    title: String,
    section: String,
    /// The page, time range or rows (`page 4`, `0:12–0:18`, `rows 5–9`); absent for text.
    #[serde(skip_serializing_if = "Option::is_none")]
    locator: Option<String>,
    from: usize,
    to: usize,
    content: String,
    distance: Option<f32>,
    rank: usize,
    /// The query's terms in `content`: `[from, to]` in UTF-16 units (`bm25::marks`).
    marks: Vec<(u32, u32)>,
}

#[derive(Serialize)]
struct JsResult<'a> {
    hits: Vec<JsHit>,
    answer: &'a [usize],
    verdict: Verdict,
    mode: Mode,
    cut: f32,
    foreign: &'a [String],
    unknown: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    corrected: Option<&'a str>,
    terms: &'a [String],
    timings: &'a Timings,
}

/// What `prompt` needs back from a result: which chunks, at what distance, which kept.
#[derive(Deserialize)]
struct JsResultIn {
    hits: Vec<JsHitIn>,
    answer: Vec<usize>,
    mode: Mode,
    cut: f32,
}

#[derive(Deserialize)]
struct JsHitIn {
    chunk: usize,
    distance: Option<f32>,
    rank: usize,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsPage<'a> {
    path: &'a str,
    title: &'a str,
    content_hash: &'a str,
    text_len: u32,
    chunks: u32,
}

fn err(e: impl std::fmt::Display) -> JsError {
    JsError::new(&e.to_string())
}

#[wasm_bindgen]
impl Engine {
    /// Opens an index from its bytes (`index.needle`); `file` names it in error messages.
    #[wasm_bindgen(constructor)]
    pub fn new(index_bytes: &[u8], file: Option<String>) -> Result<Engine, JsError> {
        let file = file.unwrap_or_else(|| crate::query::index::INDEX_FILE.to_string());
        let index = Index::from_bytes(index_bytes, &file).map_err(err)?;
        Ok(Engine {
            store: Store::Whole(index),
            last: RefCell::new(None),
            file,
            #[cfg(feature = "embed")]
            checksum: crate::query::index::stored_checksum(index_bytes).unwrap_or_default().to_vec(),
            #[cfg(feature = "embed")]
            embedder: None,
        })
    }

    /// Opens an index in pieces from its head (`head.needle`); `file` names it in error messages.
    /// Searches then name the pieces they need (`{"missing": [...]}`) until `addPiece` has them.
    #[wasm_bindgen(js_name = fromHead)]
    pub fn from_head(head_bytes: &[u8], file: Option<String>) -> Result<Engine, JsError> {
        let file = file.unwrap_or_else(|| crate::query::pieces::HEAD_FILE.to_string());
        let pieced = Pieced::from_head(head_bytes, &file).map_err(err)?;
        Ok(Engine {
            store: Store::Pieces(pieced),
            last: RefCell::new(None),
            file,
            #[cfg(feature = "embed")]
            checksum: Vec::new(),
            #[cfg(feature = "embed")]
            embedder: None,
        })
    }

    /// Hands over a piece of an index in pieces: `file` is its name in the bundle
    /// (`pieces.<id>/terms-3.needle`), which says which piece it is and names it in errors. A
    /// piece that fails its checks (checksum, frame, another build) is refused and the pieces
    /// already in stay usable.
    #[wasm_bindgen(js_name = addPiece)]
    pub fn add_piece(&mut self, file: &str, bytes: &[u8]) -> Result<(), JsError> {
        let Store::Pieces(p) = &mut self.store else { return Err(err("addPiece: this index is one file, not pieces")) };
        let id = PieceId::from_file_name(file).ok_or_else(|| err(format!("{file}: not the name of a piece")))?;
        p.add(id, bytes, file).map_err(err)
    }

    /// True when this engine reads an index in pieces.
    #[wasm_bindgen(getter)]
    pub fn pieced(&self) -> bool {
        matches!(self.store, Store::Pieces(_))
    }

    /// The site's languages (BCP 47 primary subtags), its main language first.
    #[wasm_bindgen(getter)]
    pub fn languages(&self) -> Vec<String> {
        self.store.langs()
    }

    /// The language a reader asking in `lang` searches (a primary subtag): `lang` when the site
    /// has pages in it, else the site's main language.
    #[wasm_bindgen(js_name = readerLang)]
    pub fn reader_lang(&self, lang: Option<String>) -> String {
        match &self.store {
            Store::Whole(i) => i.header.analysis.reader_lang(lang.as_deref()).to_string(),
            Store::Pieces(p) => p.head.lang.clone(),
        }
    }

    /// Whether the model reads `lang` (a reader in a language it does not read searches
    /// lexically, and needs neither the model nor the vectors).
    #[wasm_bindgen(js_name = modelReads)]
    pub fn model_reads(&self, lang: &str) -> bool {
        crate::query::search::model_reads(&crate::query::analyze::primary(lang))
    }

    #[cfg(feature = "embed")]
    /// Hands over the vectors file of a split index (the bundle's `vectors`); refuses one made
    /// for another index. `file` names it in error messages.
    #[wasm_bindgen(js_name = loadVectors)]
    pub fn load_vectors(&mut self, bytes: &[u8], file: &str) -> Result<(), JsError> {
        match &mut self.store {
            Store::Whole(index) => index.load_vectors(bytes, &self.checksum, file).map_err(err),
            Store::Pieces(_) => Err(err("loadVectors: an index in pieces keeps its vectors in its pieces")),
        }
    }

    #[cfg(feature = "embed")]
    /// Hands over the model (the ONNX file the index was built with) and `tokenizer.json`.
    /// Refuses a model or tokenizer whose sha256 differs from the index's stamp.
    #[wasm_bindgen(js_name = loadModel)]
    pub fn load_model(&mut self, model: &[u8], tokenizer: &[u8]) -> Result<(), JsError> {
        let given = crate::embed::stamp_of(model, tokenizer);
        self.store.stamp().model.check(&given, &self.file).map_err(err)?;
        self.embedder = Some(Embedder::from_bytes(model, tokenizer).map_err(err)?);
        Ok(())
    }

    /// True once hybrid search is available (the model and the vectors are in).
    #[wasm_bindgen(getter, js_name = hasModel)]
    pub fn has_model(&self) -> bool {
        #[cfg(feature = "embed")]
        return self.embedder.is_some()
            && match &self.store {
                Store::Whole(index) => index.has_vectors(),
                Store::Pieces(_) => true,
            };
        #[cfg(not(feature = "embed"))]
        false
    }

    /// Searches; returns a `NeedleResult` (see `www/needle.d.ts`) as JSON text. `mode` is "bm25", "dense" or "hybrid";
    /// without the model every mode falls back to BM25 and nothing passes the gate. `cut` and
    /// `max_chunks` default to the index's settings. Over an index in pieces it may return
    /// `{"missing": [file names]}` instead: hand those pieces over (`addPiece`) and search again.
    pub fn search(
        &self,
        query: &str,
        k: usize,
        mode: &str,
        cut: Option<f32>,
        max_chunks: Option<u32>,
        lang: Option<String>,
    ) -> Result<String, JsError> {
        let mode = parse_mode(mode)?;
        let opts = SearchOptions {
            mode,
            k,
            cut,
            max_chunks: max_chunks.unwrap_or(self.store.settings().max_chunks) as usize,
            lang: lang.filter(|l| !l.is_empty()),
            ..Default::default()
        };
        let analyzer = self.store.analyzer(opts.lang.as_deref());
        match &self.store {
            Store::Whole(index) => {
                let plan = Plan::new(index, &analyzer, query);
                let (vector, embed_ms) = self.query_vector(&plan.embedded(query))?;
                let mut result = search_planned(index, query, plan, vector.as_ref(), &opts);
                result.timings.embed = embed_ms;
                self.to_json(&result, &analyzer)
            }
            Store::Pieces(pieced) => {
                // The text the model reads is known once the query's lexical pieces are in
                // (`Plan::embedded`: a keyword query as the terms it matched is embedded again
                // then, and probes its own lists).
                let text = pieced.plan(query).map_or_else(|| query.to_string(), |p| p.embedded(query).into_owned());
                let mut last = self.last.borrow_mut();
                let (vector, embed_ms) = match last.take() {
                    Some((t, v, ms)) if t == text && (v.is_some() || !self.has_model()) => (v, ms),
                    _ => self.query_vector(&text)?,
                };
                let answer = pieced.search(query, vector.as_ref(), &opts);
                *last = Some((text, vector, embed_ms));
                match answer {
                    Ok(mut result) => {
                        result.timings.embed = embed_ms;
                        self.to_json(&result, &analyzer)
                    }
                    Err(missing) => {
                        let names: Vec<String> = missing.iter().map(PieceId::file_name).collect();
                        serde_json::to_string(&serde_json::json!({ "missing": names })).map_err(err)
                    }
                }
            }
        }
    }

    /// The prompt for any LLM, with numbered sources — what the CLI's `--prompt` prints.
    /// `result` is the JSON text (or `JSON.stringify`) of a `NeedleResult` from `search`; the
    /// quotes are taken from the index, not from the caller.
    pub fn prompt(&self, question: &str, result_json: &str) -> Result<String, JsError> {
        let r: JsResultIn = serde_json::from_str(result_json).map_err(|e| err(format!("prompt: not a search result: {e}")))?;
        let mut hits = Vec::with_capacity(r.hits.len());
        for h in &r.hits {
            let hit = self
                .store
                .entries()
                .hit(h.chunk, h.distance.unwrap_or(f32::NAN), h.rank)
                .ok_or_else(|| err(format!("prompt: chunk {} is not in this index", h.chunk)))?;
            hits.push(hit);
        }
        let result = SearchResult {
            verdict: Verdict::of(!r.answer.is_empty(), hits.len(), r.mode != Mode::Bm25, false, false),
            hits,
            answer: r.answer,
            mode: r.mode,
            cut: r.cut,
            lexical_cut: None,
            foreign: Vec::new(),
            unknown: Vec::new(),
            corrected: None,
            terms: Vec::new(),
            timings: Timings::default(),
            walked: Vec::new(),
        };
        Ok(build_prompt(question, &citations(self.store.entries(), &result)))
    }

    /// The pages of the index (`NeedlePage[]` as JSON text): what the landing highlight checks
    /// a page against.
    pub fn pages(&self) -> Result<String, JsError> {
        let pages: Vec<JsPage> = self
            .store
            .whole("pages")?
            .header
            .pages
            .iter()
            .map(|p| JsPage { path: &p.path, title: &p.title, content_hash: &p.content_hash, text_len: p.text_len, chunks: p.chunk_count })
            .collect();
        serde_json::to_string(&pages).map_err(err)
    }

    /// The quoted text of the chunk of `page` that spans exactly `from..to`, if any: lets the
    /// landing highlight find a quote by text on a page that changed since indexing. (`None` over
    /// an index in pieces: the highlight then finds the range by position only.)
    pub fn quote(&self, page: &str, from: u32, to: u32) -> Option<String> {
        let index = self.store.whole("quote").ok()?;
        let p = index.header.pages.iter().position(|e| e.path == page)? as u32;
        index.header.chunks.iter().find(|c| c.page == p && c.from == from && c.to == to).map(|c| c.content.clone())
    }

    /// The chunks of `page` as JSON text: `[{ from, to, section, content }]` in index order.
    #[wasm_bindgen(js_name = chunksOf)]
    pub fn chunks_of(&self, page: &str) -> Result<String, JsError> {
        #[derive(Serialize)]
        struct C<'a> {
            from: u32,
            to: u32,
            section: &'a str,
            content: &'a str,
        }
        let index = self.store.whole("chunksOf")?;
        let p = index.header.pages.iter().position(|e| e.path == page).map(|p| p as u32);
        let list: Vec<C> = index
            .header
            .chunks
            .iter()
            .filter(|c| Some(c.page) == p)
            .map(|c| C { from: c.from, to: c.to, section: &c.section, content: &c.content })
            .collect();
        serde_json::to_string(&list).map_err(err)
    }

    /// Number of chunks in the index.
    #[wasm_bindgen(getter)]
    pub fn chunks(&self) -> usize {
        match &self.store {
            Store::Whole(index) => index.header.chunks.len(),
            Store::Pieces(p) => p.head.chunks as usize,
        }
    }

    #[cfg(feature = "embed")]
    /// Word-pieces the model sees for `text` (`[CLS]`/`[SEP]` included): for benchmarks.
    #[wasm_bindgen(js_name = tokenCount)]
    pub fn token_count(&self, text: &str) -> Result<usize, JsError> {
        self.embedder.as_ref().ok_or_else(|| err("the model is not loaded"))?.token_count(text).map_err(err)
    }

    #[cfg(feature = "embed")]
    /// The token ids the model sees for `text` (for the onnxruntime-web comparison).
    pub fn tokenize(&self, text: &str) -> Result<Vec<i64>, JsError> {
        self.embedder.as_ref().ok_or_else(|| err("the model is not loaded"))?.tokenize(text).map_err(err)
    }

    #[cfg(feature = "embed")]
    /// The query embedding alone: for benchmarks and the native-vs-browser comparison.
    pub fn embed(&self, text: &str) -> Result<Vec<f32>, JsError> {
        self.embedder.as_ref().ok_or_else(|| err("the model is not loaded"))?.embed(text).map_err(err)
    }
}

impl Engine {
    /// The query's embedding and the milliseconds it took, or `None` while no model is loaded
    /// (always, in the lexical core).
    #[cfg(feature = "embed")]
    fn query_vector(&self, query: &str) -> Result<(Option<QueryVector>, f64), JsError> {
        use crate::query::search::now_ms;
        let t = now_ms();
        let v = self.embedder.as_ref().map(|e| e.query(query).map_err(err)).transpose()?;
        let ms = if v.is_some() { now_ms() - t } else { 0.0 };
        Ok((v, ms))
    }

    #[cfg(not(feature = "embed"))]
    fn query_vector(&self, _query: &str) -> Result<(Option<QueryVector>, f64), JsError> {
        Ok((None, 0.0))
    }

    fn to_json(&self, r: &SearchResult, analyzer: &Analyzer) -> Result<String, JsError> {
        let hits = r
            .hits
            .iter()
            .map(|h| {
                let entry = self.store.entries().entry(h.chunk);
                let chunk = entry.map(|(_, c)| c);
                let title = entry.map(|(p, _)| p.title.clone()).unwrap_or_default();
                JsHit {
                    chunk: h.chunk,
                    page: h.page.clone(),
                    kind: h.kind.clone(),
                    url: h.url.clone(),
                    link: h.link.clone(),
                    title,
                    section: chunk.map(|c| c.section.clone()).unwrap_or_default(),
                    locator: chunk.and_then(|c| c.locator.label()),
                    from: h.from,
                    to: h.to,
                    content: h.content.clone(),
                    distance: h.distance.is_finite().then_some(h.distance),
                    rank: h.rank,
                    marks: marks(analyzer, &h.content, &r.terms),
                }
            })
            .collect();
        serde_json::to_string(&JsResult {
            hits,
            answer: &r.answer,
            verdict: r.verdict,
            mode: r.mode,
            cut: r.cut,
            foreign: &r.foreign,
            unknown: &r.unknown,
            corrected: r.corrected.as_deref(),
            terms: &r.terms,
            timings: &r.timings,
        })
        .map_err(err)
    }
}

fn parse_mode(mode: &str) -> Result<Mode, JsError> {
    match [Mode::Bm25, Mode::Dense, Mode::Hybrid].into_iter().find(|m| m.name() == mode) {
        Some(m) => Ok(m),
        None if mode.is_empty() => Ok(Mode::Hybrid),
        None => Err(err(format!("unknown mode {mode:?}: use bm25, dense or hybrid"))),
    }
}

/// A page's canonical text as the browser's walker sees it (`canonicalText`).
#[wasm_bindgen]
pub struct CanonicalText {
    text: String,
    sources: Vec<u32>,
}

#[wasm_bindgen]
impl CanonicalText {
    #[wasm_bindgen(getter)]
    pub fn text(&self) -> String {
        self.text.clone()
    }

    /// Two numbers per UTF-16 unit of the text: the number of the text node it came from (in
    /// the order the walker sent them) and the unit's offset in that node; the node number is
    /// 4294967295 for the separators the rule adds.
    #[wasm_bindgen(getter)]
    pub fn sources(&self) -> Vec<u32> {
        self.sources.clone()
    }
}

/// The canonical text rule (`doc::canonical`) over the events of a DOM walk: event `i` is
/// `kinds[i]` (0 open, 1 text, 2 close) with, as its tag name or text, the next `lens[i]` UTF-16
/// units of `data`. The landing highlight's one way to the text `#char=` counts in.
#[wasm_bindgen(js_name = canonicalText)]
pub fn canonical_text(kinds: &[u8], lens: &[u32], data: &str) -> Result<CanonicalText, JsError> {
    if kinds.len() != lens.len() {
        return Err(err(format!("canonicalText: {} kinds but {} lengths", kinds.len(), lens.len())));
    }
    let mut rule = Canonicalizer::new(true);
    let mut rest = data;
    for (&kind, &len) in kinds.iter().zip(lens) {
        let (s, tail) = split_utf16(rest, len as usize).ok_or_else(|| err("canonicalText: the lengths run past the data"))?;
        rest = tail;
        match kind {
            0 => rule.open(s),
            1 => rule.text(s),
            2 => rule.close(s),
            other => return Err(err(format!("canonicalText: unknown event kind {other}"))),
        }
    }
    let c = rule.finish();
    let mut sources = Vec::with_capacity(c.sources.len() * 2);
    for Source { node, offset } in c.sources {
        sources.extend([node, offset]);
    }
    Ok(CanonicalText { text: c.text, sources })
}

/// `s` split after its first `units` UTF-16 units (`None` past the end or inside a pair).
fn split_utf16(s: &str, units: usize) -> Option<(&str, &str)> {
    let at = crate::doc::text::utf16_to_byte(s, units)?;
    Some(s.split_at(at))
}

/// The selector lists of the rule's steps 1 and 2, for the DOM walker: `{ roots: string[],
/// drop: string }` as JSON text (`drop` is one selector list for `Element.matches`).
#[wasm_bindgen(js_name = canonicalRule)]
pub fn canonical_rule() -> String {
    serde_json::json!({ "roots": CONTENT_ROOT_SELECTORS, "drop": DROP_SELECTORS.join(", ") }).to_string()
}
