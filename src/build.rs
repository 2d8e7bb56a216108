//! `needle build`: site folder → index file. Discover, extract, drop duplicates, chunk, embed
//! on every core (one tract model per thread), BM25, write.
//! Invariants: a page that fails at any stage ends `failed` with its reason and contributes no
//! chunk; every count in the report and in the index is what was written, never what was
//! planned.

use crate::chunk::{self, ChunkConfig};
use crate::embed::Embedder;
use crate::extract::{self, ExtractOptions, Extracted};
use crate::index::{self, ChunkEntry, Header, Index, ModelStamp, PageEntry, PageStatus, Settings, Stamp};
use crate::model::ModelFiles;
use crate::text::{utf16_len, Document};
use crate::Error;
use rayon::prelude::*;
use serde::Serialize;
use std::path::Path;
use std::time::Instant;

/// The gate's default cut when the builder is given none. On the fixture corpus (EVAL.md's
/// sweep) 0.50 is where the two errors meet: 6 of 30 out-of-domain queries still answered,
/// 9 of 48 answerable ones refused. `needle eval --max-bluffs N` picks a site's own.
pub const DEFAULT_CUT: f32 = 0.5;

#[derive(Debug, Clone)]
pub struct BuildOptions {
    pub extract: ExtractOptions,
    pub chunk: ChunkConfig,
    pub cut: f32,
    pub max_chunks: u32,
    /// Embedding threads; `None` = all cores.
    pub threads: Option<usize>,
    pub progress: bool,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            extract: ExtractOptions::default(),
            chunk: ChunkConfig::default(),
            cut: DEFAULT_CUT,
            max_chunks: 4,
            threads: None,
            progress: false,
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
    /// Word-pieces embedded, [CLS]/[SEP] included, and how many of them were header.
    pub embedded_tokens: usize,
    pub header_tokens: usize,
    pub seconds: f64,
    pub embed_seconds: f64,
    pub threads: usize,
    pub index_bytes: usize,
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
}

impl LoadedModel {
    pub fn load(files: &ModelFiles) -> Result<Self, Error> {
        let model = std::fs::read(&files.model).map_err(|e| Error::io(&files.model, e))?;
        let tokenizer = std::fs::read(&files.tokenizer).map_err(|e| Error::io(&files.tokenizer, e))?;
        let stamp = crate::model::stamp(&model, &tokenizer);
        Ok(LoadedModel { model, tokenizer, stamp })
    }

    pub fn embedder(&self) -> Result<Embedder, Error> {
        Ok(Embedder::from_bytes(&self.model, &self.tokenizer)?)
    }
}

struct PlannedChunk {
    page: usize,
    chunk: chunk::Chunk,
}

/// Builds the index of `site` and returns it with the report; the caller writes it.
pub fn build_index(site: &Path, model: &LoadedModel, opts: &BuildOptions) -> Result<(Index, BuildReport), Error> {
    let start = Instant::now();
    let mut report = BuildReport::default();
    let discovered = extract::discover(site, &opts.extract)?;
    report.skipped.extend(discovered.excluded.iter().cloned());

    // Extraction is I/O plus parsing: parallel, order kept.
    let extracted: Vec<(String, Result<Extracted, String>)> = discovered
        .files
        .par_iter()
        .map(|src| {
            let res = std::fs::read(&src.abs_path)
                .map_err(|e| format!("cannot read: {e}"))
                .and_then(|bytes| extract::extract_file(src, &bytes, &opts.extract).map_err(|e| e.to_string()));
            (src.rel_path.clone(), res)
        })
        .collect();

    let mut pages: Vec<PageEntry> = Vec::new();
    let mut docs: Vec<Option<Document>> = Vec::new();
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (path, res) in extracted {
        match res {
            Err(reason) => {
                report.failed.push((path.clone(), reason.clone()));
                pages.push(failed_page(path, reason));
                docs.push(None);
            }
            Ok(Extracted::Skipped(reason)) => report.skipped.push((path, reason)),
            Ok(Extracted::Page(doc)) => {
                let hash = index::sha256_hex(doc.text.as_bytes());
                if let Some(&first) = seen.get(&hash) {
                    // mdBook's index.html copies the first chapter: keep the chapter's own name.
                    let keep_new = is_index_page(&pages[first].path) && !is_index_page(&doc.path);
                    if keep_new {
                        let old = std::mem::replace(&mut pages[first], ok_page(&doc, hash.clone()));
                        report.skipped.push((old.path, format!("same text as {}", doc.path)));
                        docs[first] = Some(doc);
                    } else {
                        report.skipped.push((doc.path.clone(), format!("same text as {}", pages[first].path)));
                    }
                    continue;
                }
                seen.insert(hash.clone(), pages.len());
                pages.push(ok_page(&doc, hash));
                docs.push(Some(doc));
            }
        }
    }

    // Chunking needs the tokenizer (window check); one embedder per thread does it all.
    let threads = opts.threads.unwrap_or_else(rayon::current_num_threads).max(1);
    report.threads = threads;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| crate::embed::EmbedError::Model(format!("thread pool: {e}")))?;
    let counter = model.embedder()?;

    let mut planned: Vec<PlannedChunk> = Vec::new();
    for (p, doc) in docs.iter().enumerate() {
        let Some(doc) = doc else { continue };
        let mut failure = None;
        let mut count = |s: &str| match counter.token_count(s) {
            Ok(n) => n,
            Err(e) => {
                failure.get_or_insert_with(|| e.to_string());
                usize::MAX
            }
        };
        let (chunks, stats) = chunk::chunk_document(doc, &opts.chunk, &mut count);
        if let Some(reason) = failure {
            mark_failed(&mut pages[p], &mut report, format!("tokenizer: {reason}"));
            continue;
        }
        report.split_for_window += stats.split_for_window;
        planned.extend(chunks.into_iter().map(|chunk| PlannedChunk { page: p, chunk }));
    }

    let bar = progress_bar(opts.progress, planned.len());
    let embed_start = Instant::now();
    let embedded: Vec<Result<(Vec<f32>, usize, usize), String>> = pool.install(|| {
        planned
            .par_iter()
            .map_init(
                || model.embedder().map_err(|e| e.to_string()),
                |emb, pc| {
                    let emb = emb.as_ref().map_err(|e| e.clone())?;
                    let tokens = emb.token_count(&pc.chunk.text).map_err(|e| e.to_string())?;
                    let header_tokens = if pc.chunk.header_len == 0 {
                        0
                    } else {
                        // The header's own pieces, without its [CLS]/[SEP].
                        emb.token_count(&pc.chunk.text[..pc.chunk.header_len]).map_err(|e| e.to_string())?.saturating_sub(2)
                    };
                    let v = emb.embed(&pc.chunk.text).map_err(|e| e.to_string())?;
                    if let Some(b) = &bar {
                        b.inc(1);
                    }
                    Ok((v, tokens, header_tokens))
                },
            )
            .collect()
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    report.embed_seconds = embed_start.elapsed().as_secs_f64();

    // A page with any chunk that failed to embed fails whole: half a page would answer wrongly.
    for (pc, res) in planned.iter().zip(&embedded) {
        if let Err(reason) = res {
            if pages[pc.page].status == PageStatus::Ok {
                mark_failed(&mut pages[pc.page], &mut report, format!("embedding: {reason}"));
            }
        }
    }

    let mut chunks = Vec::new();
    let mut vectors = Vec::new();
    for (pc, res) in planned.into_iter().zip(embedded) {
        let Ok((v, tokens, header_tokens)) = res else { continue };
        if pages[pc.page].status != PageStatus::Ok {
            continue;
        }
        report.embedded_tokens += tokens;
        report.header_tokens += header_tokens;
        let c = pc.chunk;
        chunks.push(ChunkEntry {
            page: pc.page as u32,
            section: c.section,
            from: c.from as u32,
            to: c.to as u32,
            header: c.text[..c.header_len].trim_end().to_string(),
            content: c.content,
        });
        pages[pc.page].chunk_count += 1;
        vectors.extend_from_slice(&v);
    }
    report.pages_ok = pages.iter().filter(|p| p.status == PageStatus::Ok).count();
    report.chunks = chunks.len();

    let texts: Vec<String> = chunks.iter().map(ChunkEntry::embedded_text).collect();
    let bm25 = crate::bm25::Bm25::build(texts.iter().map(String::as_str));
    let index = Index {
        header: Header {
            stamp: Stamp {
                model: model.stamp.clone(),
                pipeline_version: crate::PIPELINE_VERSION,
                extractor_version: extract::EXTRACTOR_VERSION,
            },
            settings: Settings { chunk: opts.chunk.clone(), cut: opts.cut, max_chunks: opts.max_chunks },
            pages,
            chunks,
            bm25,
        },
        vectors,
    };
    report.seconds = start.elapsed().as_secs_f64();
    Ok((index, report))
}

/// Builds and writes `out_dir/index.needle` atomically (write then rename), so a failed build
/// never leaves a half-written index behind. Returns the bytes written, for the browser bundle.
pub fn build(site: &Path, out_dir: &Path, model: &LoadedModel, opts: &BuildOptions) -> Result<(Vec<u8>, BuildReport), Error> {
    let (index, mut report) = build_index(site, model, opts)?;
    let bytes = index.to_bytes()?;
    report.index_bytes = bytes.len();
    std::fs::create_dir_all(out_dir).map_err(|e| Error::io(out_dir, e))?;
    let path = out_dir.join(index::INDEX_FILE);
    let tmp = out_dir.join(format!("{}.tmp", index::INDEX_FILE));
    std::fs::write(&tmp, &bytes).map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
    Ok((bytes, report))
}

/// Reads `dir/index.needle` (or the file itself if `path` is a file).
pub fn read_index(path: &Path) -> Result<Index, Error> {
    let file = if path.is_dir() { path.join(index::INDEX_FILE) } else { path.to_path_buf() };
    let bytes = std::fs::read(&file).map_err(|e| Error::io(&file, e))?;
    Ok(Index::from_bytes(&bytes, &file.display().to_string())?)
}

fn ok_page(doc: &Document, hash: String) -> PageEntry {
    PageEntry {
        path: doc.path.clone(),
        title: doc.title.clone(),
        content_hash: hash,
        text_len: utf16_len(&doc.text) as u32,
        status: PageStatus::Ok,
        chunk_count: 0,
    }
}

fn failed_page(path: String, reason: String) -> PageEntry {
    PageEntry { path, title: String::new(), content_hash: String::new(), text_len: 0, status: PageStatus::Failed { reason }, chunk_count: 0 }
}

fn mark_failed(page: &mut PageEntry, report: &mut BuildReport, reason: String) {
    report.failed.push((page.path.clone(), reason.clone()));
    page.status = PageStatus::Failed { reason };
}

fn is_index_page(path: &str) -> bool {
    path == "index.html" || path.ends_with("/index.html")
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

