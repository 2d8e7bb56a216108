//! The index file: one versioned, checksummed file holding everything a query needs.
//!
//! Layout (all integers little-endian):
//! ```text
//! b"NEEDLEIX" | format version u32 | header length u64 | header (postcard) |
//! scales: chunks × f32 | codes: chunks × dim i8 |
//! sha256 of everything before it (32 bytes) | b"NEEDLEND"
//! ```
//! A chunk's vector is `codes × scale`: the embedding scaled so its largest component is ±127,
//! rounded, and `scale = 1 / ‖codes‖`, so the stored vector is itself L2-normalised and the
//! cosine distance stays `1 − q·v`. Quantising is idempotent (a stored vector quantises to the
//! same codes and scale), so an incremental build that reuses vectors writes the same bytes as
//! a clean one. Version 1 stored `chunks × dim f32` in place of the scales and codes; versions
//! 1 and 2 had no gate depth (it was 20 wherever they were searched) and no site path in the
//! header; versions 1–3 had no document kinds (every chunk was cited by `#char=`, no page was
//! played by another); versions 1–4 had no gate rule (every query met the one cut,
//! [`Gate::Cut`]); versions 1–5 had no text analysis (every page was analyzed by
//! [`crate::query::analyze::LEGACY_ANALYZER`], its language unknown). This reader still reads
//! them all (tests/fixtures/compat/).
//!
//! Invariants: the reader checks, in this order, the leading magic, the trailing magic (a
//! missing one means a truncated file), the format version, the checksum, then the structure
//! (counts agree, offsets lie inside their page, postings name real chunks). Readers work on
//! byte slices, so the same code opens a file natively and bytes a browser fetched.
//!
//! # Split for the browser
//!
//! A lexical answer never reads the vectors, which are most of the bytes and barely compress.
//! So the browser bundle ships an index as two files ([`Index::to_split_bytes`]): the index file
//! above with an *empty* vector block (its own checksum covers that), and a vectors file
//! ```text
//! b"NEEDLEVC" | vectors format u32 (1) | the index file's checksum (32 bytes) | chunks u32 |
//! dim u32 | scales: chunks × f32 | codes: chunks × dim i8 | sha256 of everything before it
//! (32 bytes) | b"NEEDLEND"
//! ```
//! that names its index file by that file's checksum, so vectors are never attached to another
//! index ([`Index::load_vectors`]). An index read without its vectors answers lexically only
//! ([`Index::has_vectors`]); the native tools refuse it. The browser's index file also leaves
//! out the BM25 statistics (empty in its header): they are a function of the chunks' texts
//! ([`bm25_of`]), which the reader recomputes in a few milliseconds, where shipping them would
//! cost 40 % of that file's compressed bytes.

use crate::doc::chunk::ChunkConfig;
use crate::doc::locator::Locator;
use crate::query::analyze::{Analysis, Analyzer};
use crate::query::bm25::Bm25;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub const MAGIC: &[u8; 8] = b"NEEDLEIX";
pub const END_MAGIC: &[u8; 8] = b"NEEDLEND";
/// The vectors file of a split index (module documentation, "Split for the browser").
pub const VECTORS_MAGIC: &[u8; 8] = b"NEEDLEVC";
pub const VECTORS_FORMAT_VERSION: u32 = 1;
/// Bump on any change to the layout or to the header's fields, and add a compat fixture
/// (tests/fixtures/compat/README.md).
pub const FORMAT_VERSION: u32 = 6;
/// The oldest format version this reader still reads.
pub const OLDEST_READABLE_VERSION: u32 = 1;
/// File name of the index inside an index folder.
pub const INDEX_FILE: &str = "index.needle";

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("{file}: not a needle index (it does not start with NEEDLEIX)")]
    NotAnIndex { file: String },
    #[error("{file}: truncated index ({len} bytes; the end marker is missing)")]
    Truncated { file: String, len: usize },
    #[error("{file}: index format version {found}, this needle reads versions {OLDEST_READABLE_VERSION} to {expected}; rebuild the index with this needle")]
    Version { file: String, found: u32, expected: u32 },
    #[error("{file}: checksum mismatch (stored {stored}, computed {computed}); the file is corrupt")]
    Checksum { file: String, stored: String, computed: String },
    #[error("{file}: malformed index: {reason}")]
    Malformed { file: String, reason: String },
    /// The header could not be serialised (nothing was written).
    #[error("the index could not be encoded: {reason}")]
    Encode { reason: String },
    #[error("{file}: built with model {index_model} ({index_sha}), but the model given is {given_model} ({given_sha}); vectors of two models never mix — rebuild the index or use the model it was built with")]
    ModelMismatch { file: String, index_model: String, index_sha: String, given_model: String, given_sha: String },
    #[error("{file}: built with tokenizer {index_sha}, but the tokenizer given is {given_sha}")]
    TokenizerMismatch { file: String, index_sha: String, given_sha: String },
    #[error("{file}: these vectors belong to another index (index checksum {theirs}, this index is {ours})")]
    VectorsMismatch { file: String, theirs: String, ours: String },
    #[error(
        "{file}: this piece belongs to another build of the index (build {theirs}, the head's is {ours}); fetch the pieces of one build"
    )]
    PieceMismatch { file: String, theirs: String, ours: String },
}

/// What produced the vectors. Two indexes (or an index and a model) with different stamps
/// never share vectors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelStamp {
    pub name: String,
    pub dim: u32,
    pub model_sha256: String,
    pub tokenizer_sha256: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stamp {
    pub model: ModelStamp,
    pub pipeline_version: u32,
    pub extractor_version: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub chunk: ChunkConfig,
    /// Default cosine-distance cut of the gate.
    pub cut: f32,
    /// At most this many chunks pass the gate.
    pub max_chunks: u32,
    /// How deep the gate walks the ranking: the same answer whatever number of hits a front end
    /// shows (see `search::search`).
    pub gate_depth: u32,
    /// How the gate uses `cut` (format 5; every older index holds [`Gate::Cut`]).
    pub gate: Gate,
    /// The lexical gate of each language the model does not read (format 6): the share of a
    /// query's words, weighted by idf, a chunk must hold beyond this to answer
    /// (`search::search`). A language not listed states no answer.
    pub lexical_cuts: Vec<(String, f32)>,
}

impl Settings {
    /// The lexical gate's cut for `lang` (a primary subtag), if the index chose one.
    pub fn lexical_cut(&self, lang: &str) -> Option<f32> {
        self.lexical_cuts.iter().find(|(l, _)| l == lang).map(|&(_, c)| c)
    }
}

/// Settings as format 5 wrote them: no lexical gate.
#[derive(Deserialize)]
struct SettingsV5 {
    chunk: ChunkConfig,
    cut: f32,
    max_chunks: u32,
    gate_depth: u32,
    gate: Gate,
}

impl From<SettingsV5> for Settings {
    fn from(s: SettingsV5) -> Settings {
        let SettingsV5 { chunk, cut, max_chunks, gate_depth, gate } = s;
        Settings { chunk, cut, max_chunks, gate_depth, gate, lexical_cuts: Vec::new() }
    }
}

/// How the gate decides which hits answer a query (`search::search`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Gate {
    /// Every query meets the one cut: a hit answers when its cosine distance is under it.
    Cut,
    /// `needle build` chose the cut from the site's own text, against needle's background
    /// questions (`build::gate`), and a query naming words that neither the site nor the model's
    /// vocabulary holds (`search::foreign_words`) must come closer: its cut is lowered by
    /// `foreign_penalty` × min(foreign words, 2) / 2.
    Auto {
        foreign_penalty: f32,
        /// The share of the background questions the chosen cut lets answer.
        background_answered: f32,
    },
}

/// The gate depth of indexes written before it was stored (formats 1 and 2), and the default.
pub const DEFAULT_GATE_DEPTH: u32 = 20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PageStatus {
    Ok,
    Failed { reason: String },
    Skipped { reason: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageEntry {
    /// Relative to the site root, `/`-separated.
    pub path: String,
    pub title: String,
    /// sha256 of the canonical text (hex); empty for pages that were not read.
    pub content_hash: String,
    /// UTF-16 length of the canonical text.
    pub text_len: u32,
    pub status: PageStatus,
    /// Chunks written for this page (what the indexer wrote, not what it planned).
    pub chunk_count: u32,
    /// For a media document: the page whose player plays it ("" for none, and for every other
    /// kind). A reader following a citation goes there.
    pub host: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkEntry {
    pub page: u32,
    pub section: String,
    /// UTF-16 offsets into the page's canonical text.
    pub from: u32,
    pub to: u32,
    /// The quoted text.
    pub content: String,
    /// The contextual header embedded before `content` ("" for strategies without one).
    pub header: String,
    /// How it is cited beyond `from..to`: a PDF page, a time range, rows.
    pub locator: Locator,
}

impl ChunkEntry {
    /// The text that was embedded and that BM25 scores.
    pub fn embedded_text(&self) -> String {
        if self.header.is_empty() {
            self.content.clone()
        } else {
            format!("{}\n{}", self.header, self.content)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub stamp: Stamp,
    pub settings: Settings,
    /// The site folder the index was built from, relative to the index's own folder and
    /// `/`-separated (`..` for `SITE/needle`); empty when unknown (formats 1 and 2).
    pub site: String,
    pub pages: Vec<PageEntry>,
    pub chunks: Vec<ChunkEntry>,
    pub bm25: Bm25,
    /// How the text was analyzed into BM25's terms: the analyzer version and each page's
    /// language (format 6; older indexes: [`Analysis::legacy`]).
    pub analysis: Analysis,
}

impl Header {
    /// The site folder this index records, resolved against the folder of `index_file` (the
    /// file it was read from); `None` when it records none (formats 1 and 2).
    pub fn site_folder(&self, index_file: &std::path::Path) -> Option<std::path::PathBuf> {
        (!self.site.is_empty()).then(|| index_file.parent().unwrap_or(std::path::Path::new("")).join(&self.site))
    }

    /// The analyzer of a reader searching in `lang` (a BCP 47 tag; `None`: the site's main
    /// language; see `Analysis::reader_lang`): the analyzer version the index was built with, in
    /// that language.
    pub fn analyzer(&self, lang: Option<&str>) -> Analyzer {
        self.analysis.analyzer(self.analysis.reader_lang(lang))
    }
}

/// The header as format 5 wrote it: no text analysis.
#[derive(Deserialize)]
struct HeaderV5 {
    stamp: Stamp,
    settings: SettingsV5,
    site: String,
    pages: Vec<PageEntry>,
    chunks: Vec<ChunkEntry>,
    bm25: Bm25,
}

impl From<HeaderV5> for Header {
    fn from(h: HeaderV5) -> Header {
        let HeaderV5 { stamp, settings, site, pages, chunks, bm25 } = h;
        let analysis = Analysis::legacy(pages.len());
        Header { stamp, settings: settings.into(), site, pages, chunks, bm25, analysis }
    }
}

/// The header as formats 1 and 2 wrote it.
#[derive(Deserialize)]
struct HeaderV2 {
    stamp: Stamp,
    settings: SettingsV2,
    pages: Vec<PageEntryV3>,
    chunks: Vec<ChunkEntryV3>,
    bm25: Bm25,
}

/// The header as format 4 wrote it: no gate rule.
#[derive(Deserialize)]
struct HeaderV4 {
    stamp: Stamp,
    settings: SettingsV4,
    site: String,
    pages: Vec<PageEntry>,
    chunks: Vec<ChunkEntry>,
    bm25: Bm25,
}

/// Settings as formats 3 and 4 wrote them.
#[derive(Deserialize)]
struct SettingsV4 {
    chunk: ChunkConfig,
    cut: f32,
    max_chunks: u32,
    gate_depth: u32,
}

impl From<SettingsV4> for SettingsV5 {
    fn from(s: SettingsV4) -> SettingsV5 {
        let SettingsV4 { chunk, cut, max_chunks, gate_depth } = s;
        SettingsV5 { chunk, cut, max_chunks, gate_depth, gate: Gate::Cut }
    }
}

impl From<HeaderV4> for Header {
    fn from(h: HeaderV4) -> Header {
        let HeaderV4 { stamp, settings, site, pages, chunks, bm25 } = h;
        HeaderV5 { stamp, settings: settings.into(), site, pages, chunks, bm25 }.into()
    }
}

/// The header as format 3 wrote it.
#[derive(Deserialize)]
struct HeaderV3 {
    stamp: Stamp,
    settings: SettingsV4,
    site: String,
    pages: Vec<PageEntryV3>,
    chunks: Vec<ChunkEntryV3>,
    bm25: Bm25,
}

/// A page as formats 1–3 wrote it: no host.
#[derive(Deserialize)]
struct PageEntryV3 {
    path: String,
    title: String,
    content_hash: String,
    text_len: u32,
    status: PageStatus,
    chunk_count: u32,
}

/// A chunk as formats 1–3 wrote it: every one cited by `#char=`.
#[derive(Deserialize)]
struct ChunkEntryV3 {
    page: u32,
    section: String,
    from: u32,
    to: u32,
    content: String,
    header: String,
}

impl From<PageEntryV3> for PageEntry {
    fn from(p: PageEntryV3) -> PageEntry {
        let PageEntryV3 { path, title, content_hash, text_len, status, chunk_count } = p;
        PageEntry { path, title, content_hash, text_len, status, chunk_count, host: String::new() }
    }
}

impl From<ChunkEntryV3> for ChunkEntry {
    fn from(c: ChunkEntryV3) -> ChunkEntry {
        let ChunkEntryV3 { page, section, from, to, content, header } = c;
        ChunkEntry { page, section, from, to, content, header, locator: Locator::Char }
    }
}

impl From<HeaderV3> for Header {
    fn from(h: HeaderV3) -> Header {
        HeaderV5 {
            stamp: h.stamp,
            settings: h.settings.into(),
            site: h.site,
            pages: h.pages.into_iter().map(Into::into).collect(),
            chunks: h.chunks.into_iter().map(Into::into).collect(),
            bm25: h.bm25,
        }
        .into()
    }
}

#[derive(Deserialize)]
struct SettingsV2 {
    chunk: ChunkConfig,
    cut: f32,
    max_chunks: u32,
}

impl From<HeaderV2> for Header {
    fn from(h: HeaderV2) -> Header {
        let SettingsV2 { chunk, cut, max_chunks } = h.settings;
        HeaderV5 {
            stamp: h.stamp,
            settings: SettingsV5 { chunk, cut, max_chunks, gate_depth: DEFAULT_GATE_DEPTH, gate: Gate::Cut },
            site: String::new(),
            pages: h.pages.into_iter().map(Into::into).collect(),
            chunks: h.chunks.into_iter().map(Into::into).collect(),
            bm25: h.bm25,
        }
        .into()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Index {
    pub header: Header,
    /// Row-major, `chunks × dim`, L2-normalised.
    pub vectors: Vec<f32>,
    page_norms: PageNorms,
}

/// Each page's length of the sum of its chunk vectors ([`Index::page_norms`]): derived from the
/// vectors at first use and kept, never stored, so it plays no part in comparing two indexes. A
/// clone starts without it (whoever clones an index may change its chunks before searching).
#[derive(Debug, Default)]
struct PageNorms(std::sync::OnceLock<Vec<f32>>);

impl Clone for PageNorms {
    fn clone(&self) -> Self {
        PageNorms::default()
    }
}

impl PartialEq for PageNorms {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Index {
    pub fn new(header: Header, vectors: Vec<f32>) -> Index {
        Index { header, vectors, page_norms: PageNorms::default() }
    }

    /// Per page, the length of the sum of its chunks' vectors (0 for a page without chunks):
    /// the page's vector is that sum over this length (`search::page_order`). Computed once,
    /// on first use after the vectors are read: change an index's chunks or vectors before its
    /// first search, or in a clone.
    pub fn page_norms(&self) -> &[f32] {
        self.page_norms.0.get_or_init(|| {
            let d = self.dim();
            let mut sums = vec![0f32; self.header.pages.len() * d];
            if d > 0 {
                for (entry, v) in self.header.chunks.iter().zip(self.vectors.chunks_exact(d)) {
                    let p = entry.page as usize;
                    if let Some(sum) = sums.get_mut(p * d..(p + 1) * d) {
                        sum.iter_mut().zip(v).for_each(|(a, b)| *a += b);
                    }
                }
            }
            sums.chunks_exact(d.max(1)).map(|s| crate::query::search::dot(s, s).sqrt()).collect()
        })
    }

    pub fn dim(&self) -> usize {
        self.header.stamp.model.dim as usize
    }

    /// The vector of `chunk`. Panics, as slice indexing does, for a chunk out of range or an
    /// index read without its vectors: check [`Index::has_vectors`] first (every native reader
    /// refuses such an index; the browser's search checks it).
    pub fn vector(&self, chunk: usize) -> &[f32] {
        let d = self.dim();
        &self.vectors[chunk * d..(chunk + 1) * d]
    }

    /// False for the lexical part of a split index until [`Index::load_vectors`]: dense
    /// ranking and the gate need vectors.
    pub fn has_vectors(&self) -> bool {
        !self.vectors.is_empty() || self.header.chunks.is_empty()
    }

    pub fn to_bytes(&self) -> Result<Vec<u8>, IndexError> {
        self.index_file(&self.header, true)
    }

    /// The index as the browser bundle ships it: the index file with an empty vector block and
    /// the vectors file that names it (module documentation, "Split for the browser").
    pub fn to_split_bytes(&self) -> Result<(Vec<u8>, Vec<u8>), IndexError> {
        let without_bm25 = Header { bm25: Bm25::default(), ..self.header.clone() };
        let index = self.index_file(&without_bm25, false)?;
        let mut out = Vec::with_capacity(56 + self.vectors.len() + self.header.chunks.len() * 4 + 40);
        out.extend_from_slice(VECTORS_MAGIC);
        out.extend_from_slice(&VECTORS_FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(stored_checksum(&index).unwrap_or_default());
        out.extend_from_slice(&(self.header.chunks.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.header.stamp.model.dim.to_le_bytes());
        self.write_vector_block(&mut out);
        seal(&mut out);
        Ok((index, out))
    }

    /// The index file with `header` (this index's, or a lighter copy of it), with or without
    /// this index's vectors.
    fn index_file(&self, header: &Header, with_vectors: bool) -> Result<Vec<u8>, IndexError> {
        let header = postcard::to_stdvec(header).map_err(|e| IndexError::Encode { reason: e.to_string() })?;
        let mut out = Vec::with_capacity(28 + header.len() + self.vectors.len() + 40);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&(header.len() as u64).to_le_bytes());
        out.extend_from_slice(&header);
        if with_vectors {
            self.write_vector_block(&mut out);
        }
        seal(&mut out);
        Ok(out)
    }

    /// Scales, then codes (formats 2 and later).
    fn write_vector_block(&self, out: &mut Vec<u8>) {
        write_vector_block(self.vectors.chunks(self.dim().max(1)), out);
    }

    /// Attaches the vectors file of a split index; `index_checksum` is [`stored_checksum`] of
    /// the index file this index was read from, and `file` names the vectors file in errors.
    pub fn load_vectors(&mut self, bytes: &[u8], index_checksum: &[u8], file: &str) -> Result<(), IndexError> {
        let f = || file.to_string();
        let malformed = |reason: String| IndexError::Malformed { file: f(), reason };
        if bytes.len() < 8 || &bytes[..8] != VECTORS_MAGIC {
            return Err(malformed("not a needle vectors file (it does not start with NEEDLEVC)".into()));
        }
        const FIXED: usize = 8 + 4 + 32 + 4 + 4 + 32 + 8;
        if bytes.len() < FIXED || &bytes[bytes.len() - 8..] != END_MAGIC {
            return Err(IndexError::Truncated { file: f(), len: bytes.len() });
        }
        let word = |at: usize| bytes.get(at..at + 4).and_then(|b| b.try_into().ok()).map(u32::from_le_bytes).unwrap_or_default();
        if word(8) != VECTORS_FORMAT_VERSION {
            return Err(malformed(format!("vectors format {}, this needle reads {VECTORS_FORMAT_VERSION}", word(8))));
        }
        let body_end = bytes.len() - 40;
        let computed = Sha256::digest(&bytes[..body_end]);
        if bytes[body_end..body_end + 32] != computed[..] {
            return Err(IndexError::Checksum { file: f(), stored: hex(&bytes[body_end..body_end + 32]), computed: hex(&computed) });
        }
        let theirs = &bytes[12..44];
        if theirs != index_checksum {
            return Err(IndexError::VectorsMismatch { file: f(), theirs: hex(theirs), ours: hex(index_checksum) });
        }
        let (n, dim) = (self.header.chunks.len(), self.dim());
        if word(44) as usize != n || word(48) as usize != dim {
            return Err(malformed(format!("{} vectors of dimension {} for {n} chunks of dimension {dim}", word(44), word(48))));
        }
        self.vectors = read_vector_block(&bytes[52..body_end], n, dim).map_err(malformed)?;
        self.page_norms = PageNorms::default();
        Ok(())
    }

    /// Reads an index from bytes; `file` names it in errors.
    pub fn from_bytes(bytes: &[u8], file: &str) -> Result<Index, IndexError> {
        let f = || file.to_string();
        let malformed = |reason: String| IndexError::Malformed { file: f(), reason };
        if bytes.len() < 8 || &bytes[..8] != MAGIC {
            return Err(IndexError::NotAnIndex { file: f() });
        }
        const FIXED: usize = 8 + 4 + 8 + 32 + 8;
        if bytes.len() < FIXED || &bytes[bytes.len() - 8..] != END_MAGIC {
            return Err(IndexError::Truncated { file: f(), len: bytes.len() });
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().map_err(|_| malformed("version".into()))?);
        if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(IndexError::Version { file: f(), found: version, expected: FORMAT_VERSION });
        }
        let body_end = bytes.len() - 40;
        let stored = &bytes[body_end..body_end + 32];
        let computed = Sha256::digest(&bytes[..body_end]);
        if stored != computed.as_slice() {
            return Err(IndexError::Checksum { file: f(), stored: hex(stored), computed: hex(&computed) });
        }
        let header_len = u64::from_le_bytes(bytes[12..20].try_into().map_err(|_| malformed("length".into()))?);
        let header_end = usize::try_from(header_len)
            .ok()
            .and_then(|l| l.checked_add(20))
            .filter(|&e| e <= body_end)
            .ok_or_else(|| malformed(format!("header length {header_len} runs past the end")))?;
        let header_bytes = &bytes[20..header_end];
        let mut header: Header = if version < 3 {
            postcard::from_bytes::<HeaderV2>(header_bytes).map_err(|e| malformed(format!("header: {e}")))?.into()
        } else if version == 3 {
            postcard::from_bytes::<HeaderV3>(header_bytes).map_err(|e| malformed(format!("header: {e}")))?.into()
        } else if version == 4 {
            postcard::from_bytes::<HeaderV4>(header_bytes).map_err(|e| malformed(format!("header: {e}")))?.into()
        } else if version == 5 {
            postcard::from_bytes::<HeaderV5>(header_bytes).map_err(|e| malformed(format!("header: {e}")))?.into()
        } else {
            postcard::from_bytes(header_bytes).map_err(|e| malformed(format!("header: {e}")))?
        };
        if header.bm25.is_empty() && !header.chunks.is_empty() {
            // A browser index file (see "Split for the browser"); an analysis this reader cannot
            // run is refused below, before anything is searched.
            if header.analysis.validate(header.pages.len()).is_ok() {
                header.bm25 = bm25_of(&header.chunks, &header.analysis);
            }
        }
        let raw = &bytes[header_end..body_end];
        let vectors = if version == 1 {
            if !raw.len().is_multiple_of(4) {
                return Err(malformed("vector block is not a whole number of f32".into()));
            }
            raw.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
        } else if raw.is_empty() {
            Vec::new() // the lexical part of a split index (the checksum vouches for the empty block)
        } else {
            read_vector_block(raw, header.chunks.len(), header.stamp.model.dim as usize).map_err(malformed)?
        };
        let index = Index::new(header, vectors);
        index.validate().map_err(malformed)?;
        Ok(index)
    }

    /// Structural checks that make every later access in bounds.
    fn validate(&self) -> Result<(), String> {
        let h = &self.header;
        h.analysis.validate(h.pages.len())?;
        let dim = self.dim();
        if dim == 0 {
            return Err("vector dimension 0".into());
        }
        if self.has_vectors() && self.vectors.len() != h.chunks.len() * dim {
            return Err(format!("{} vector values for {} chunks of dimension {dim}", self.vectors.len(), h.chunks.len()));
        }
        if h.bm25.len() != h.chunks.len() {
            return Err(format!("BM25 covers {} chunks, the index has {}", h.bm25.len(), h.chunks.len()));
        }
        h.bm25.validate()?;
        let mut per_page = vec![0u32; h.pages.len()];
        for (i, c) in h.chunks.iter().enumerate() {
            let page = h.pages.get(c.page as usize).ok_or_else(|| format!("chunk {i} names page {} of {}", c.page, h.pages.len()))?;
            if c.from > c.to || c.to > page.text_len {
                return Err(format!("chunk {i} range {}..{} lies outside {} ({} units)", c.from, c.to, page.path, page.text_len));
            }
            per_page[c.page as usize] += 1;
        }
        for (p, n) in h.pages.iter().zip(&per_page) {
            if p.chunk_count != *n {
                return Err(format!("{} claims {} chunks, the index holds {n}", p.path, p.chunk_count));
            }
        }
        Ok(())
    }

    /// Refuses a model or tokenizer other than the one the vectors came from.
    pub fn check_model(&self, given: &ModelStamp, file: &str) -> Result<(), IndexError> {
        self.header.stamp.model.check(given, file)
    }
}

impl ModelStamp {
    /// Refuses a model (or tokenizer) other than this one; `file` names the index in the error.
    pub fn check(&self, given: &ModelStamp, file: &str) -> Result<(), IndexError> {
        let ours = self;
        if ours.name != given.name || ours.dim != given.dim || ours.model_sha256 != given.model_sha256 {
            return Err(IndexError::ModelMismatch {
                file: file.into(),
                index_model: ours.name.clone(),
                index_sha: ours.model_sha256.clone(),
                given_model: given.name.clone(),
                given_sha: given.model_sha256.clone(),
            });
        }
        if ours.tokenizer_sha256 != given.tokenizer_sha256 {
            return Err(IndexError::TokenizerMismatch {
                file: file.into(),
                index_sha: ours.tokenizer_sha256.clone(),
                given_sha: given.tokenizer_sha256.clone(),
            });
        }
        Ok(())
    }
}

/// BM25 over the chunks' embedded texts, each analyzed in its page's language: what an index
/// stores, and what a reader recomputes when the file leaves it out.
pub fn bm25_of(chunks: &[ChunkEntry], analysis: &Analysis) -> Bm25 {
    let analyzers: Vec<Analyzer> = analysis.langs.iter().map(|l| analysis.analyzer(l)).collect();
    let fallback = analysis.analyzer(crate::query::analyze::UNDETERMINED);
    Bm25::from_terms(chunks.iter().map(|c| {
        let lang = analysis.page_lang.get(c.page as usize).and_then(|&l| analyzers.get(l as usize));
        lang.unwrap_or(&fallback).terms(&c.embedded_text())
    }))
}

/// The checksum an index (or vectors) file stores before its end marker, if it is long enough
/// to have one (it is verified when the file is read, not here).
pub fn stored_checksum(bytes: &[u8]) -> Option<&[u8]> {
    let end = bytes.len().checked_sub(8)?;
    bytes.get(end.checked_sub(32)?..end)
}

/// Appends the sha256 of `out` and the end marker.
pub(crate) fn seal(out: &mut Vec<u8>) {
    let digest = Sha256::digest(&*out);
    out.extend_from_slice(&digest);
    out.extend_from_slice(END_MAGIC);
}

/// `rows` as a vector block: each row's scale, then each row's int8 codes ([`quantize`]).
pub(crate) fn write_vector_block<'a>(rows: impl Iterator<Item = &'a [f32]>, out: &mut Vec<u8>) {
    let rows: Vec<(f32, Vec<i8>)> = rows.map(quantize).collect();
    for (scale, _) in &rows {
        out.extend_from_slice(&scale.to_le_bytes());
    }
    for (_, codes) in &rows {
        out.extend(codes.iter().map(|&c| c as u8));
    }
}

/// `n` vectors of dimension `dim` from a block of scales then int8 codes.
pub(crate) fn read_vector_block(raw: &[u8], n: usize, dim: usize) -> Result<Vec<f32>, String> {
    let expected = dim.checked_add(4).and_then(|row| row.checked_mul(n));
    if expected != Some(raw.len()) {
        return Err(format!("vector block of {} bytes for {n} chunks of dimension {dim}", raw.len()));
    }
    let (scales, codes) = raw.split_at(4 * n);
    let mut vectors = Vec::with_capacity(n * dim);
    for (s, row) in scales.chunks_exact(4).zip(codes.chunks_exact(dim.max(1))) {
        let scale = f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
        if !scale.is_finite() || scale < 0.0 {
            return Err(format!("vector scale {scale}"));
        }
        vectors.extend(row.iter().map(|&c| f32::from(c as i8) * scale));
    }
    Ok(vectors)
}

/// A vector as the index stores it: int8 codes (the largest component ±127) and the scale that
/// makes `codes × scale` unit-length. A zero (or non-finite) vector stores as zeros.
pub(crate) fn quantize(v: &[f32]) -> (f32, Vec<i8>) {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    if max == 0.0 || !max.is_finite() {
        return (0.0, vec![0; v.len()]);
    }
    let codes: Vec<i8> = v.iter().map(|x| (x / max * 127.0).round().clamp(-127.0, 127.0) as i8).collect();
    let norm = codes.iter().map(|&c| f32::from(c) * f32::from(c)).sum::<f32>().sqrt();
    (1.0 / norm, codes)
}

/// `v` as the reader will see it after a write: quantised and dequantised. The builder keeps
/// its in-memory index in this form, so searching it equals searching the file.
#[cfg(any(feature = "native", test))]
pub(crate) fn quantized(v: &[f32]) -> Vec<f32> {
    let (scale, codes) = quantize(v);
    codes.iter().map(|&c| f32::from(c) * scale).collect()
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn tiny() -> Index {
        let chunks = vec![
            ChunkEntry {
                page: 0,
                section: "S".into(),
                from: 0,
                to: 5,
                content: "hello".into(),
                header: "[T > S]".into(),
                locator: Default::default(),
            },
            ChunkEntry {
                page: 0,
                section: "S".into(),
                from: 7,
                to: 12,
                content: "world".into(),
                header: "[T > S]".into(),
                locator: Default::default(),
            },
        ];
        let bm25 = Bm25::build(chunks.iter().map(|c| c.embedded_text()).collect::<Vec<_>>().iter().map(|s| s.as_str()));
        Index::new(
            Header {
                stamp: Stamp {
                    model: ModelStamp { name: "m".into(), dim: 2, model_sha256: "aa".into(), tokenizer_sha256: "bb".into() },
                    pipeline_version: 1,
                    extractor_version: 1,
                },
                settings: Settings {
                    chunk: ChunkConfig::default(),
                    cut: 0.5,
                    max_chunks: 4,
                    gate_depth: DEFAULT_GATE_DEPTH,
                    gate: Gate::Cut,
                    lexical_cuts: Vec::new(),
                },
                site: "..".into(),
                pages: vec![PageEntry {
                    path: "p.html".into(),
                    title: "T".into(),
                    content_hash: sha256_hex(b"hello\n\nworld"),
                    text_len: 12,
                    status: PageStatus::Ok,
                    chunk_count: 2,
                    host: String::new(),
                }],
                chunks,
                bm25,
                analysis: Analysis::of(["en"]),
            },
            [quantized(&[1.0, 0.0]), quantized(&[0.0, 1.0])].concat(),
        )
    }

    #[test]
    fn quantising_is_idempotent_and_keeps_vectors_unit_length() {
        let mut seed = 7u64;
        for _ in 0..200 {
            let raw: Vec<f32> = (0..384)
                .map(|_| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    ((seed >> 33) as f32 / (1u64 << 31) as f32) - 0.5
                })
                .collect();
            let norm = raw.iter().map(|x| x * x).sum::<f32>().sqrt();
            let v: Vec<f32> = raw.iter().map(|x| x / norm).collect();
            let q = quantized(&v);
            assert_eq!(quantized(&q).iter().map(|x| x.to_bits()).collect::<Vec<_>>(), q.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
            let qn = q.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((qn - 1.0).abs() < 1e-5, "norm {qn}");
            let cos: f32 = v.iter().zip(&q).map(|(a, b)| a * b).sum();
            assert!(1.0 - cos < 1e-4, "quantisation moved the vector by cosine distance {}", 1.0 - cos);
        }
        assert_eq!(quantize(&[0.0, 0.0]), (0.0, vec![0, 0]));
    }

    #[test]
    fn round_trips() {
        let idx = tiny();
        let bytes = idx.to_bytes().unwrap();
        assert_eq!(Index::from_bytes(&bytes, "t").unwrap(), idx);
    }

    #[test]
    fn every_corruption_is_named() {
        let bytes = tiny().to_bytes().unwrap();
        let err = |b: &[u8]| Index::from_bytes(b, "x.needle").unwrap_err();
        assert!(matches!(err(b"hello"), IndexError::NotAnIndex { .. }));
        assert!(matches!(err(&bytes[..bytes.len() - 3]), IndexError::Truncated { .. }));
        let mut v = bytes.clone();
        v[8] = 99;
        assert!(matches!(err(&v), IndexError::Version { found: 99, .. }));
        let mut c = bytes.clone();
        c[30] ^= 1;
        assert!(matches!(err(&c), IndexError::Checksum { .. }));
        assert!(err(&c).to_string().starts_with("x.needle: checksum mismatch"));
    }

    #[test]
    fn a_split_index_reads_back_whole_and_refuses_vectors_of_another_index() {
        let idx = tiny();
        let (lexical, vectors) = idx.to_split_bytes().unwrap();
        let mut read = Index::from_bytes(&lexical, "index.x.needle").unwrap();
        assert!(!read.has_vectors(), "the lexical part has no vectors");
        assert_eq!(read.header, idx.header);
        let checksum = stored_checksum(&lexical).unwrap().to_vec();
        read.load_vectors(&vectors, &checksum, "vectors.x.bin").unwrap();
        assert_eq!(read, Index::from_bytes(&idx.to_bytes().unwrap(), "t").unwrap(), "split + joined = whole");

        let mut other = idx.clone();
        other.header.pages[0].title = "another build".into();
        let (other_lexical, other_vectors) = other.to_split_bytes().unwrap();
        let mut lex = Index::from_bytes(&lexical, "i").unwrap();
        let e = lex.load_vectors(&other_vectors, &checksum, "vectors.y.bin").unwrap_err();
        assert!(matches!(e, IndexError::VectorsMismatch { .. }), "{e}");
        assert!(e.to_string().starts_with("vectors.y.bin: these vectors belong to another index"), "{e}");
        assert!(stored_checksum(&other_lexical) != Some(&checksum[..]));
        let e = lex.load_vectors(&vectors[..vectors.len() - 1], &checksum, "v").unwrap_err();
        assert!(matches!(e, IndexError::Truncated { .. }), "{e}");
        let mut bad = vectors.clone();
        bad[60] ^= 1;
        assert!(matches!(lex.load_vectors(&bad, &checksum, "v"), Err(IndexError::Checksum { .. })));
        assert!(lex.load_vectors(&lexical, &checksum, "v").is_err(), "an index file is not a vectors file");
        assert!(!lex.has_vectors(), "a refused file attaches nothing");
    }

    #[test]
    fn a_different_model_is_refused() {
        let idx = tiny();
        let mut other = idx.header.stamp.model.clone();
        other.model_sha256 = "cc".into();
        assert!(matches!(idx.check_model(&other, "i"), Err(IndexError::ModelMismatch { .. })));
        let mut tok = idx.header.stamp.model.clone();
        tok.tokenizer_sha256 = "dd".into();
        assert!(matches!(idx.check_model(&tok, "i"), Err(IndexError::TokenizerMismatch { .. })));
        assert!(idx.check_model(&idx.header.stamp.model.clone(), "i").is_ok());
    }

    #[test]
    fn the_reader_never_panics_on_prefixes() {
        let bytes = tiny().to_bytes().unwrap();
        for n in 0..bytes.len() {
            assert!(Index::from_bytes(&bytes[..n], "t").is_err());
        }
    }

    /// Rewrites the checksum so that a mutation reaches the structural checks.
    fn reseal(bytes: &mut [u8]) {
        let body_end = bytes.len() - 40;
        let digest = Sha256::digest(&bytes[..body_end]);
        bytes[body_end..body_end + 32].copy_from_slice(&digest);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Any byte string is refused or read, never a panic.
        #[test]
        fn the_reader_never_panics_on_any_bytes(tail in proptest::collection::vec(proptest::num::u8::ANY, 0..512), magic in proptest::bool::ANY) {
            let mut bytes = if magic { MAGIC.to_vec() } else { Vec::new() };
            bytes.extend_from_slice(&tail);
            let _ = Index::from_bytes(&bytes, "fuzz");
        }

        /// A valid index with bytes changed and its checksum resealed: the structural checks
        /// refuse it or it reads; whatever reads can be searched without a panic.
        #[test]
        fn a_resealed_mutation_is_refused_or_safe_to_search(
            edits in proptest::collection::vec((proptest::num::usize::ANY, proptest::num::u8::ANY), 1..6),
            cut in proptest::option::of(0usize..400),
        ) {
            let mut bytes = tiny().to_bytes().unwrap();
            let body_end = bytes.len() - 40;
            for (at, value) in edits {
                // Past the version field, inside the header and vectors.
                let at = 12 + at % (body_end - 12);
                bytes[at] = value;
            }
            if let Some(n) = cut {
                // Cut the body short (keeping the footer) to desynchronise lengths.
                let n = n.min(body_end - 12);
                bytes.drain(body_end - n..body_end);
            }
            reseal(&mut bytes);
            if let Ok(idx) = Index::from_bytes(&bytes, "fuzz") {
                let dim = idx.dim();
                for mode in [crate::query::search::Mode::Bm25, crate::query::search::Mode::Dense, crate::query::search::Mode::Hybrid] {
                    let opts = crate::query::search::SearchOptions { mode, k: 5, cut: None, max_chunks: 4, ..Default::default() };
                    let q = vec![0.5f32; dim.min(4096)];
                    let qv = (q.len() == dim).then(|| crate::query::search::QueryVector { vector: q, unknown_to_model: vec!["world".into()] });
                    let r = crate::query::search::search(&idx, "hello world", qv.as_ref(), &opts);
                    let _ = crate::query::cite::citations(&idx, &r);
                }
            }
        }
    }
}
