//! `needle build`: site folder → index file. Discover, extract, drop duplicates, chunk, embed
//! on every core (one shared optimised tract plan, one run state per thread), BM25, write.
//! Invariants: a page that fails at any stage ends `failed` with its reason and contributes no
//! chunk; every count in the report and in the index is what was written, never what was
//! planned; skipped pages are recorded in the index too, so `needle status` shows everything.
//!
//! Incremental builds: given the previous index, a page whose path, title and content hash are
//! unchanged keeps its chunks and vectors; every other page is chunked and embedded. Vectors
//! are reused only when the previous index carries the same model, tokenizer, pipeline and
//! extractor stamp and the same chunker settings; otherwise everything is rebuilt and the
//! report says why. Reused vectors are bit-identical to what a clean build computes (one
//! chunk per tract run, so no batch effects), which the tests check.

pub(crate) mod assets;
pub mod bundle;
pub mod gate;
pub mod part;
pub mod pieces;
pub mod site;

use crate::doc::chunk::{self, ChunkConfig};
use crate::doc::extract::{self, ExtractOptions, Extracted};
use crate::doc::text::{utf16_len, Document};
use crate::embed::Embedder;
use crate::model::ModelFiles;
use crate::query::analyze::Analysis;
use crate::query::index::Gate;
use crate::query::index::{self, ChunkEntry, Header, Index, ModelStamp, PageEntry, PageStatus, Settings, Stamp, DEFAULT_GATE_DEPTH};
use crate::Error;
use rayon::prelude::*;
use serde::Serialize;
use std::path::Path;
use std::time::Instant;

/// The plain cut gate's cut when the builder is given none (`--gate cut`). On the fixture
/// corpus (EVAL.md's sweep) 0.50 is where the two errors meet: 5 of 30 out-of-domain queries
/// still answered, 11 of 48 answerable ones refused. `needle eval --max-bluffs N` picks a
/// site's own with labelled questions; the default gate ([`gate`]) needs none.
pub const DEFAULT_CUT: f32 = 0.5;

#[derive(Debug, Clone)]
pub struct BuildOptions {
    pub extract: ExtractOptions,
    pub chunk: ChunkConfig,
    /// The cut of the plain cut gate (when `auto_gate` is false).
    pub cut: f32,
    /// Let the index choose its gate from the site's own text ([`gate`]) instead of one cut.
    pub auto_gate: bool,
    pub max_chunks: u32,
    /// Embedding threads; `None` = all cores.
    pub threads: Option<usize>,
    pub progress: bool,
    /// Reuse the chunks and vectors of unchanged pages from the index already in the output
    /// folder (see the module documentation).
    pub incremental: bool,
    /// Embed only this share of the pages, into a partial index (see [`part`]).
    pub part: Option<part::Part>,
    /// Index every page in this language (a BCP 47 tag) instead of the one it declares or is
    /// detected in (`doc::lang`).
    pub lang: Option<String>,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            extract: ExtractOptions::default(),
            chunk: ChunkConfig::default(),
            cut: DEFAULT_CUT,
            auto_gate: true,
            max_chunks: 4,
            threads: None,
            progress: false,
            incremental: true,
            part: None,
            lang: None,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct BuildReport {
    pub pages_ok: usize,
    pub failed: Vec<(String, String)>,
    pub skipped: Vec<(String, String)>,
    pub chunks: usize,
    pub split_for_window: usize,
    /// Word-pieces embedded, `[CLS]`/`[SEP]` included, and how many of them were header.
    pub embedded_tokens: usize,
    pub header_tokens: usize,
    pub seconds: f64,
    pub embed_seconds: f64,
    /// Choosing the gate (`gate`: the background questions embedded and searched).
    pub gate_seconds: f64,
    /// The cut the index chose for itself (`--gate auto`), if it did.
    pub chosen_cut: Option<f32>,
    pub threads: usize,
    pub index_bytes: usize,
    /// Pages (and their chunks) taken unchanged from the previous index.
    pub reused_pages: usize,
    pub reused_chunks: usize,
    /// Chunks embedded by this build (`chunks - reused_chunks`).
    pub embedded_chunks: usize,
    /// Why a previous index in the output folder was not reused, when there was one.
    pub full_rebuild_reason: Option<String>,
    /// Pages indexed per language (primary subtag, "und" for unknown), most first.
    pub languages: Vec<(String, usize)>,
    /// Pages not indexed in the language they declare, or are named or filed as: (path, why).
    pub language_notes: Vec<(String, String)>,
}

impl BuildReport {
    pub fn ms_per_chunk(&self) -> f64 {
        if self.chunks == 0 {
            0.0
        } else {
            self.seconds * 1e3 / self.chunks as f64
        }
    }
}

/// The model as loaded for a build: bytes plus the stamp the index records.
pub struct LoadedModel {
    pub model: Vec<u8>,
    pub tokenizer: Vec<u8>,
    pub stamp: ModelStamp,
    /// Where the bytes came from, for error messages.
    pub files: ModelFiles,
}

impl LoadedModel {
    pub fn load(files: &ModelFiles) -> Result<Self, Error> {
        let model = std::fs::read(&files.model).map_err(|e| Error::io(&files.model, e))?;
        let tokenizer = std::fs::read(&files.tokenizer).map_err(|e| Error::io(&files.tokenizer, e))?;
        let stamp = crate::embed::stamp_of(&model, &tokenizer);
        Ok(LoadedModel { model, tokenizer, stamp, files: files.clone() })
    }

    /// A ready embedder; a file that does not load is named in the error.
    pub fn embedder(&self) -> Result<Embedder, Error> {
        Embedder::from_bytes(&self.model, &self.tokenizer).map_err(|cause| {
            let path = match cause {
                crate::embed::EmbedError::Tokenizer(_) => self.files.tokenizer.clone(),
                _ => self.files.model.clone(),
            };
            Error::Load { path, cause }
        })
    }
}

struct PlannedChunk {
    page: usize,
    chunk: chunk::Chunk,
}

/// What a build may take from the previous index: its pages by path, or why nothing.
struct Previous<'a> {
    index: &'a Index,
    /// path → the previous page's position, for `ok` pages only.
    pages: std::collections::HashMap<&'a str, usize>,
    /// previous page → its chunks' positions (chunks of a page are contiguous, in order).
    chunks: Vec<std::ops::Range<usize>>,
}

impl<'a> Previous<'a> {
    /// `Err(reason)` when the previous index's vectors must not be mixed with this build's.
    fn new(index: &'a Index, stamp: &Stamp, opts: &BuildOptions) -> Result<Self, String> {
        let old = &index.header.stamp;
        if old.model != stamp.model {
            let (a, b) = (&old.model, &stamp.model);
            let what = if a.name != b.name || a.dim != b.dim || a.model_sha256 != b.model_sha256 {
                format!("the model changed ({} {} → {} {})", a.name, short(&a.model_sha256), b.name, short(&b.model_sha256))
            } else {
                format!("the tokenizer changed ({} → {})", short(&a.tokenizer_sha256), short(&b.tokenizer_sha256))
            };
            return Err(what);
        }
        if old.pipeline_version != stamp.pipeline_version {
            return Err(format!("the pipeline version changed ({} → {})", old.pipeline_version, stamp.pipeline_version));
        }
        if old.extractor_version != stamp.extractor_version {
            return Err(format!("the extractor version changed ({} → {})", old.extractor_version, stamp.extractor_version));
        }
        if index.header.settings.chunk != opts.chunk {
            return Err(format!("the chunker settings changed ({:?} → {:?})", index.header.settings.chunk, opts.chunk));
        }
        let h = &index.header;
        let mut chunks = vec![0..0; h.pages.len()];
        let mut i = 0;
        while i < h.chunks.len() {
            let p = h.chunks[i].page as usize;
            let start = i;
            while i < h.chunks.len() && h.chunks[i].page as usize == p {
                i += 1;
            }
            // The reader checked the page numbers. A page whose chunks are not contiguous was not
            // written by this builder: its run is shorter than its count, and it is not reused.
            if let Some(r) = chunks.get_mut(p) {
                *r = start..i;
            }
        }
        let pages = h
            .pages
            .iter()
            .enumerate()
            .filter(|(p, e)| e.status == PageStatus::Ok && chunks[*p].len() == e.chunk_count as usize && e.chunk_count > 0)
            .map(|(p, e)| (e.path.as_str(), p))
            .collect();
        Ok(Previous { index, pages, chunks })
    }

    /// The previous page that `page` may reuse: same path, title and canonical text.
    fn matching(&self, page: &PageEntry) -> Option<usize> {
        let &p = self.pages.get(page.path.as_str())?;
        let old = &self.index.header.pages[p];
        (old.content_hash == page.content_hash && old.title == page.title && old.text_len == page.text_len).then_some(p)
    }
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

/// Builds the index of `site` and returns it with the report; the caller writes it.
/// `previous` is the index already in the output folder, if any (see the module documentation).
pub fn build_index(site: &Path, model: &LoadedModel, opts: &BuildOptions, previous: Option<&Index>) -> Result<(Index, BuildReport), Error> {
    let start = Instant::now();
    let mut report = BuildReport::default();
    let stamp = Stamp {
        model: model.stamp.clone(),
        pipeline_version: crate::PIPELINE_VERSION,
        extractor_version: crate::doc::canonical::EXTRACTOR_VERSION,
    };
    let previous = match previous.map(|p| Previous::new(p, &stamp, opts)) {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(reason)) => {
            report.full_rebuild_reason = Some(reason);
            None
        }
    };
    let mut pages = read_pages(site, opts, &mut report)?;
    if let Some(part) = opts.part {
        pages.retain(|p| part.owns(&p.entry.path));
    }
    // Unchanged pages keep their chunks and vectors.
    if let Some(prev) = &previous {
        for page in pages.iter_mut().filter(|p| p.doc.is_some()) {
            page.reuse = prev.matching(&page.entry);
        }
    }
    // One optimised tract plan, loaded once and shared by every pool thread; each run has its
    // own state, so threads never wait on each other. Measured against one plan per thread on
    // the fixture (2 threads): the same speed, 183 MB peak RSS instead of 299 MB. Chunking needs
    // its tokenizer too (the window check).
    let embedder = model.embedder()?;
    let planned = plan_chunks(&mut pages, &embedder, opts, &mut report);
    let embedded = embed_chunks(&planned, &embedder, opts, &mut report)?;
    let (chunks, vectors) = assemble(&mut pages, planned, embedded, previous.as_ref(), &mut report);

    let mut langs: Vec<String> = pages.iter().map(|p| p.lang.clone()).collect();
    let mut entries: Vec<PageEntry> = pages.into_iter().map(|p| p.entry).collect();
    report.pages_ok = entries.iter().filter(|p| p.status == PageStatus::Ok).count();
    report.chunks = chunks.len();
    report.embedded_chunks = report.chunks - report.reused_chunks;
    // Skipped pages close the list (they own no chunks), so `needle status` shows them too.
    report.skipped.sort();
    let listed: std::collections::HashSet<String> = entries.iter().map(|p| p.path.clone()).collect();
    let skipped: Vec<PageEntry> = report
        .skipped
        .iter()
        .filter(|(path, _)| !listed.contains(path))
        .map(|(path, reason)| skipped_page(path.clone(), reason.clone()))
        .collect();
    entries.extend(skipped);
    langs.resize(entries.len(), crate::query::analyze::UNDETERMINED.into());
    let analysis = Analysis::of(langs.iter().map(String::as_str));
    report.languages = pages_per_language(&analysis, &entries);

    let bm25 = index::bm25_of(&chunks, &analysis);
    // A part's gate is chosen by the merge, over the whole site.
    let gate = if opts.auto_gate { Gate::Auto { foreign_penalty: 0.0, background_answered: 0.0 } } else { Gate::Cut };
    let mut index = Index::new(
        Header {
            stamp,
            settings: Settings {
                chunk: opts.chunk.clone(),
                cut: opts.cut,
                max_chunks: opts.max_chunks,
                gate_depth: DEFAULT_GATE_DEPTH,
                gate,
                lexical_cuts: Vec::new(),
            },
            site: String::new(),
            pages: entries,
            chunks,
            bm25,
            analysis,
        },
        vectors,
    );
    if opts.auto_gate && opts.part.is_none() {
        let t = Instant::now();
        gate::choose(&mut index, &embedder)?;
        report.gate_seconds = t.elapsed().as_secs_f64();
        report.chosen_cut = Some(index.header.settings.cut);
    }
    report.seconds = start.elapsed().as_secs_f64();
    Ok((index, report))
}

/// A page on its way into the index: what the index will say of it, its text while it has
/// one, and the previous index's page it takes its chunks from when unchanged.
struct Page {
    entry: PageEntry,
    doc: Option<Document>,
    reuse: Option<usize>,
    /// The language the page is indexed in (`doc::lang`; "und" for a page without text), and
    /// whether only a guess placed it.
    lang: String,
    guessed: bool,
}

impl Page {
    fn failed(path: String, reason: String) -> Page {
        Page { entry: failed_page(path, reason), doc: None, reuse: None, lang: crate::query::analyze::UNDETERMINED.into(), guessed: false }
    }
}

/// Discovers and extracts the site's pages (in parallel, order kept); unreadable and broken
/// pages are `failed`, excluded and empty ones `skipped`, and a page with the same text as an
/// earlier one is skipped in its favour (mdBook's `index.html` copies the first chapter: the
/// chapter keeps its own name).
fn read_pages(site: &Path, opts: &BuildOptions, report: &mut BuildReport) -> Result<Vec<Page>, Error> {
    let site = site::extract_site(site, &opts.extract)?;
    let discovered = site.discovered;
    report.skipped.extend(discovered.excluded.iter().cloned());
    let extracted = site.results.into_iter().map(|(path, res)| {
        let res = res.map_err(|e| strip_path(&e.to_string(), &path));
        (path, res)
    });

    let mut pages: Vec<Page> = Vec::new();
    for (path, reason) in &discovered.unreadable {
        report.failed.push((path.clone(), reason.clone()));
        pages.push(Page::failed(path.clone(), reason.clone()));
    }
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (path, res) in extracted {
        match res {
            Err(reason) => {
                report.failed.push((path.clone(), reason.clone()));
                pages.push(Page::failed(path, reason));
            }
            Ok(Extracted::Skipped(reason)) => report.skipped.push((path, reason)),
            Ok(Extracted::Page(doc)) => {
                let hash = content_hash(&doc);
                if let Some(&first) = seen.get(&hash) {
                    let kept = &mut pages[first];
                    if extract::is_index_page(&kept.entry.path) && !extract::is_index_page(&doc.path) {
                        let old = std::mem::replace(&mut kept.entry, ok_page(&doc, hash.clone()));
                        (kept.lang, kept.guessed) = language(&doc, opts, report);
                        report.skipped.push((old.path, format!("same text as {}", doc.path)));
                        kept.doc = Some(doc);
                    } else {
                        report.skipped.push((doc.path.clone(), format!("same text as {}", kept.entry.path)));
                    }
                    continue;
                }
                seen.insert(hash.clone(), pages.len());
                let (lang, guessed) = language(&doc, opts, report);
                pages.push(Page { entry: ok_page(&doc, hash), doc: Some(doc), reuse: None, lang, guessed });
            }
        }
    }
    // A page only a guess placed (too short, or code) is in the language most placed pages are.
    let placed = Analysis::of(pages.iter().filter(|p| !p.guessed && p.doc.is_some()).map(|p| p.lang.as_str()));
    if !placed.page_lang.is_empty() {
        let main = placed.main_lang().to_string();
        for p in pages.iter_mut().filter(|p| p.guessed) {
            p.lang = main.clone();
        }
    }
    // By path, whatever became of them: the order a merge of parts rebuilds (see `part`).
    pages.sort_by(|a, b| a.entry.path.cmp(&b.entry.path));
    Ok(pages)
}

/// Chunks every page that is not reused. A page the tokenizer fails on is `failed`; one with
/// no text outside headings (nothing a citation could quote) is `skipped`.
fn plan_chunks(pages: &mut [Page], embedder: &Embedder, opts: &BuildOptions, report: &mut BuildReport) -> Vec<PlannedChunk> {
    let mut planned: Vec<PlannedChunk> = Vec::new();
    for (p, page) in pages.iter_mut().enumerate() {
        let Some(doc) = page.doc.as_ref().filter(|_| page.reuse.is_none()) else { continue };
        let mut failure = None;
        let mut count = |s: &str| match embedder.token_count(s) {
            Ok(n) => n,
            Err(e) => {
                failure.get_or_insert_with(|| e.to_string());
                usize::MAX
            }
        };
        let (chunks, stats) = chunk::chunk_document(doc, &opts.chunk, &mut count);
        if let Some(reason) = failure {
            mark_failed(&mut page.entry, report, format!("tokenizer: {reason}"));
            continue;
        }
        if chunks.is_empty() {
            let reason = "no text outside headings".to_string();
            report.skipped.push((page.entry.path.clone(), reason.clone()));
            page.entry.status = PageStatus::Skipped { reason };
            continue;
        }
        report.split_for_window += stats.split_for_window;
        planned.extend(chunks.into_iter().map(|chunk| PlannedChunk { page: p, chunk }));
    }
    planned
}

/// One embedded chunk: its vector, its word-pieces and how many of them the header took.
type Embedded = Result<(Vec<f32>, usize, usize), String>;

/// Embeds the planned chunks on `opts.threads` threads (all cores by default), in order.
fn embed_chunks(
    planned: &[PlannedChunk],
    embedder: &Embedder,
    opts: &BuildOptions,
    report: &mut BuildReport,
) -> Result<Vec<Embedded>, Error> {
    let threads = opts.threads.unwrap_or_else(rayon::current_num_threads).max(1);
    report.threads = threads;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| crate::embed::EmbedError::Model(format!("thread pool: {e}")))?;
    let bar = progress_bar(opts.progress, planned.len());
    let embed_start = Instant::now();
    let embedded: Vec<Embedded> = pool.install(|| {
        planned
            .par_iter()
            .map(|pc| {
                // The chunker kept every text inside the window, so nothing here is truncated.
                let ids = embedder.tokenize(&pc.chunk.text).map_err(|e| e.to_string())?;
                let tokens = ids.len();
                let header_tokens = if pc.chunk.header_len == 0 {
                    0
                } else {
                    // The header's own pieces, without its [CLS]/[SEP].
                    embedder.token_count(&pc.chunk.text[..pc.chunk.header_len]).map_err(|e| e.to_string())?.saturating_sub(2)
                };
                let v = embedder.embed_ids(&ids).map_err(|e| e.to_string())?;
                if let Some(b) = &bar {
                    b.inc(1);
                }
                Ok((v, tokens, header_tokens))
            })
            .collect()
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    report.embed_seconds = embed_start.elapsed().as_secs_f64();
    Ok(embedded)
}

/// The index's chunks and vectors, page by page in page order: reused pages copy their old
/// chunks and vectors, the others take what was embedded. A page with any chunk that failed to
/// embed fails whole: half a page would answer wrongly.
fn assemble(
    pages: &mut [Page],
    planned: Vec<PlannedChunk>,
    embedded: Vec<Embedded>,
    previous: Option<&Previous<'_>>,
    report: &mut BuildReport,
) -> (Vec<ChunkEntry>, Vec<f32>) {
    for (pc, res) in planned.iter().zip(&embedded) {
        if let Err(reason) = res {
            if pages[pc.page].entry.status == PageStatus::Ok {
                mark_failed(&mut pages[pc.page].entry, report, format!("embedding: {reason}"));
            }
        }
    }
    let mut fresh: Vec<Vec<(ChunkEntry, Vec<f32>)>> = vec![Vec::new(); pages.len()];
    for (pc, res) in planned.into_iter().zip(embedded) {
        let Ok((v, tokens, header_tokens)) = res else { continue };
        if pages[pc.page].entry.status != PageStatus::Ok {
            continue;
        }
        report.embedded_tokens += tokens;
        report.header_tokens += header_tokens;
        let c = pc.chunk;
        let entry = ChunkEntry {
            page: pc.page as u32,
            section: c.section,
            from: c.from as u32,
            to: c.to as u32,
            header: c.text[..c.header_len].trim_end().to_string(),
            content: c.content,
            locator: c.locator,
        };
        // Kept as the file will hold it, so this index searches exactly like the one read back.
        fresh[pc.page].push((entry, index::quantized(&v)));
    }
    let mut chunks = Vec::new();
    let mut vectors = Vec::new();
    for (p, (page, page_chunks)) in pages.iter_mut().zip(fresh).enumerate() {
        if page.entry.status != PageStatus::Ok {
            continue;
        }
        if let (Some(old), Some(prev)) = (page.reuse, previous) {
            for i in prev.chunks[old].clone() {
                let mut entry = prev.index.header.chunks[i].clone();
                entry.page = p as u32;
                chunks.push(entry);
                // A version-1 index holds f32 vectors: quantising them gives what a clean build
                // computes (quantising is idempotent on already stored ones).
                vectors.extend(index::quantized(prev.index.vector(i)));
            }
            page.entry.chunk_count = prev.chunks[old].len() as u32;
            report.reused_pages += 1;
            report.reused_chunks += prev.chunks[old].len();
            continue;
        }
        for (entry, v) in page_chunks {
            chunks.push(entry);
            vectors.extend_from_slice(&v);
            page.entry.chunk_count += 1;
        }
    }
    (chunks, vectors)
}

/// Builds and writes `out_dir/index.needle` atomically (write then rename), so a failed build
/// never leaves a half-written index behind. With `opts.incremental`, an index already there
/// lends the vectors of unchanged pages; one that cannot be read is rebuilt from scratch (the
/// report says why). Returns the bytes written, for the browser bundle.
pub fn build(site: &Path, out_dir: &Path, model: &LoadedModel, opts: &BuildOptions) -> Result<(Vec<u8>, BuildReport), Error> {
    let name = opts.part.map_or_else(|| index::INDEX_FILE.to_string(), |p| p.file_name());
    let path = out_dir.join(&name);
    let mut unreadable = None;
    let previous = if opts.incremental && path.is_file() {
        match read_index(&path) {
            Ok(idx) => Some(idx),
            Err(e) => {
                unreadable = Some(format!("the previous index could not be read ({e})"));
                None
            }
        }
    } else {
        None
    };
    let (mut index, mut report) = build_index(site, model, opts, previous.as_ref())?;
    if unreadable.is_some() {
        report.full_rebuild_reason = unreadable;
    }
    let bytes = write_index(&mut index, out_dir, &name, Some(site))?;
    report.index_bytes = bytes.len();
    Ok((bytes, report))
}

/// Writes `index` as `out_dir/name` (through a temporary file, so a reader never sees half of
/// it), recording `site` relative to `out_dir`; returns the bytes written.
pub(crate) fn write_index(index: &mut Index, out_dir: &Path, name: &str, site: Option<&Path>) -> Result<Vec<u8>, Error> {
    std::fs::create_dir_all(out_dir).map_err(|e| Error::io(out_dir, e))?;
    index.header.site = site.and_then(|s| relative_path(out_dir, s)).unwrap_or_default();
    let bytes = index.to_bytes()?;
    let (tmp, path) = (out_dir.join(format!("{name}.tmp")), out_dir.join(name));
    std::fs::write(&tmp, &bytes).map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
    Ok(bytes)
}

/// `to` relative to the folder `from`, `/`-separated (`..` for a site's `needle/` folder):
/// what the index records so `needle eval INDEX` finds the site wherever the index was put.
/// `None` when either cannot be resolved.
fn relative_path(from: &Path, to: &Path) -> Option<String> {
    let (from, to) = (from.canonicalize().ok()?, to.canonicalize().ok()?);
    let (a, b): (Vec<_>, Vec<_>) = (from.components().collect(), to.components().collect());
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let parts: Vec<String> = std::iter::repeat_n("..".to_string(), a.len() - common)
        .chain(b[common..].iter().map(|c| c.as_os_str().to_string_lossy().into_owned()))
        .collect();
    Some(if parts.is_empty() { ".".into() } else { parts.join("/") })
}

/// Reads `dir/index.needle` (or the file itself if `path` is a file).
pub fn read_index(path: &Path) -> Result<Index, Error> {
    let file = if path.is_dir() { path.join(index::INDEX_FILE) } else { path.to_path_buf() };
    let bytes = std::fs::read(&file).map_err(|e| Error::io(&file, e))?;
    let index = Index::from_bytes(&bytes, &file.display().to_string())?;
    if !index.has_vectors() {
        // A browser bundle's hashed index file: its vectors are in a file of their own.
        return Err(index::IndexError::Malformed {
            file: file.display().to_string(),
            reason: format!("no vectors: this is the lexical part of a browser bundle's index; open {} instead", index::INDEX_FILE),
        }
        .into());
    }
    Ok(index)
}

/// What decides that a page is unchanged (its chunks are reused) or a copy of another: its
/// canonical text, and for the other kinds also the units it is cited by (a cue retimed with
/// the same words cites another time range).
fn content_hash(doc: &Document) -> String {
    match &doc.source {
        crate::doc::locator::Source::Page => index::sha256_hex(doc.text.as_bytes()),
        source => index::sha256_hex(format!("{}\0{source:?}", doc.text).as_bytes()),
    }
}

/// The language `doc` is indexed in (`doc::lang`) and whether only a guess (or nothing) placed
/// it, noting in the report a declaration it was not indexed in.
fn language(doc: &Document, opts: &BuildOptions, report: &mut BuildReport) -> (String, bool) {
    use crate::doc::lang::Source;
    let l = crate::doc::lang::resolve(doc, opts.lang.as_deref());
    let guessed = matches!(l.source, Source::Guessed | Source::Unknown);
    if let Some(note) = l.note {
        let as_ = if guessed { "the site's main language" } else { &l.lang };
        report.language_notes.push((doc.path.clone(), format!("{note}; indexed in {as_}")));
    }
    (l.lang, guessed)
}

/// The pages with text (status ok) per language, most first (ties by language).
pub fn pages_per_language(analysis: &Analysis, pages: &[PageEntry]) -> Vec<(String, usize)> {
    let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for (p, _) in pages.iter().enumerate().filter(|(_, page)| page.status == PageStatus::Ok) {
        *counts.entry(analysis.lang_of(p)).or_default() += 1;
    }
    let mut out: Vec<(String, usize)> = counts.into_iter().map(|(l, n)| (l.to_string(), n)).collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

fn ok_page(doc: &Document, hash: String) -> PageEntry {
    PageEntry {
        path: doc.path.clone(),
        title: doc.title.clone(),
        content_hash: hash,
        text_len: utf16_len(&doc.text) as u32,
        status: PageStatus::Ok,
        chunk_count: 0,
        host: doc.source.host().unwrap_or_default().to_string(),
    }
}

fn failed_page(path: String, reason: String) -> PageEntry {
    PageEntry {
        path,
        title: String::new(),
        content_hash: String::new(),
        text_len: 0,
        status: PageStatus::Failed { reason },
        chunk_count: 0,
        host: String::new(),
    }
}

pub(crate) fn skipped_page(path: String, reason: String) -> PageEntry {
    PageEntry {
        path,
        title: String::new(),
        content_hash: String::new(),
        text_len: 0,
        status: PageStatus::Skipped { reason },
        chunk_count: 0,
        host: String::new(),
    }
}

/// Extraction errors start with the page's path; the report pairs the path with the reason.
fn strip_path(message: &str, path: &str) -> String {
    message.strip_prefix(path).and_then(|m| m.strip_prefix(": ")).unwrap_or(message).to_string()
}

fn mark_failed(page: &mut PageEntry, report: &mut BuildReport, reason: String) {
    report.failed.push((page.path.clone(), reason.clone()));
    page.status = PageStatus::Failed { reason };
}

fn progress_bar(enabled: bool, len: usize) -> Option<indicatif::ProgressBar> {
    if !enabled {
        return None;
    }
    let bar = indicatif::ProgressBar::new(len as u64);
    if let Ok(style) = indicatif::ProgressStyle::with_template("embedding {bar:40} {pos}/{len} chunks  {per_sec}  eta {eta}") {
        bar.set_style(style);
    }
    Some(bar)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_site_is_recorded_relative_to_the_index_folder() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (site, elsewhere) = (tmp.path().join("site"), tmp.path().join("out/idx"));
        for d in [site.join("needle"), elsewhere.clone()] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        assert_eq!(relative_path(&site.join("needle"), &site).as_deref(), Some(".."));
        assert_eq!(relative_path(&elsewhere, &site).as_deref(), Some("../../site"));
        assert_eq!(relative_path(&site, &site).as_deref(), Some("."));
        assert_eq!(relative_path(&tmp.path().join("missing"), &site), None);
    }
}
