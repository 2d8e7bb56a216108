//! An index in pieces: the files a reader of a large site fetches on demand instead of one
//! index file, and the search over the pieces it has. `build::pieces` plans the cut and
//! writes them; this module is their format and their reader, native and in WebAssembly.
//!
//! A pieced index is a head and three kinds of piece (module `build::pieces` says how the plan
//! chooses them):
//! ```text
//! head.needle        b"NEEDLEHD" | format u32 | postcard(Head) | sha256 | b"NEEDLEND"
//! terms-N.needle     the postings of a range of the sorted vocabulary
//! vectors-N.needle   inverted list N: the int8 vectors of the chunks nearest centroid N
//! chunks-N.needle    a run of chunk entries, with the entries of their pages and the chunks'
//!                    int8 vectors
//! piece = b"NEEDLEPC" | format u32 | kind u8 | number u32 | build [8] | body | sha256 | b"NEEDLEND"
//! ```
//! Every file checks its own sha256 (a corrupt piece is refused by name, the others stay
//! usable) and every piece names its head's build id (the first 8 bytes of the whole index
//! file's checksum), so pieces of two builds never mix.
//!
//! Invariants: the lexical ranking over pieces is the whole index's, to the bit (the postings
//! carry each chunk's token count and the head the mean, and BM25 adds the same
//! terms in the same order). The dense ranking scores the chunks of the `nprobe` lists whose
//! centroids are nearest to the query and the lexical ranking's first `lexical_candidates`
//! chunks (their vectors travel in their content pieces), with the index's own int8 vectors, so
//! a scored chunk's distance is exact and any other chunk has none (it never passes the gate).
//! The lexical candidates catch the answers whose vectors sit far from their list's centroid:
//! the probed lists alone lose them. With every list probed, a search over pieces is the whole
//! index's search.

use crate::query::analyze::{Analyzer, ANALYZER_VERSION};
use crate::query::bm25;
use crate::query::index::{
    hex, read_vector_block, seal, write_vector_block, ChunkEntry, IndexError, PageEntry, Settings, Stamp, END_MAGIC,
};
use crate::query::lexicon::{self, How, Plan, Vocabulary};
use crate::query::search::{self, Dense, Distances, Entries, QueryVector, SearchOptions, SearchResult, Source};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;

pub const HEAD_MAGIC: &[u8; 8] = b"NEEDLEHD";
pub const PIECE_MAGIC: &[u8; 8] = b"NEEDLEPC";
/// Bump on any change to the head's fields or a piece's layout.
pub const PIECES_FORMAT: u32 = 3;
/// Bytes of a piece's frame: magic, format, kind, number, build id, sha256, end mark.
pub const PIECE_FRAME: usize = 8 + 4 + 1 + 4 + 8 + 32 + 8;
/// File name of the head inside an index folder.
pub const HEAD_FILE: &str = "head.needle";

/// What every query needs first: the settings, the statistics BM25 needs besides the postings,
/// where each piece starts, and the centroids of the lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Head {
    /// The first 8 bytes of the whole index file's sha256: every piece repeats it.
    pub build: [u8; 8],
    pub stamp: Stamp,
    pub settings: Settings,
    pub site: String,
    pub chunks: u32,
    /// Mean token count of a chunk ([`bm25::Bm25::avgdl`] of the whole index).
    pub avgdl: f32,
    /// Lists a query probes.
    pub nprobe: u32,
    /// How many of the lexical ranking's first chunks the dense side scores besides the
    /// probed lists' (their vectors come with their content pieces).
    pub lexical_candidates: u32,
    /// The first term of each lexical piece, ascending (the first is "").
    pub lexical_first: Vec<String>,
    /// The first chunk of each content piece, ascending (the first is 0).
    pub content_first: Vec<u32>,
    /// The centroids as int8 codes (lists × dim) and a scale each, as the index stores vectors.
    pub centroid_scales: Vec<f32>,
    pub centroid_codes: Vec<i8>,
    /// The analyzer version the terms were made by (`query::analyze`).
    pub analyzer: u32,
    /// The site's main language (`Analysis::main_lang`): a reader's query is analyzed in it.
    pub lang: String,
}

/// One piece of a pieced index, by kind and number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum PieceId {
    Terms(u32),
    Vectors(u32),
    Chunks(u32),
}

impl PieceId {
    pub fn file_name(&self) -> String {
        match self {
            PieceId::Terms(n) => format!("terms-{n}.needle"),
            PieceId::Vectors(n) => format!("vectors-{n}.needle"),
            PieceId::Chunks(n) => format!("chunks-{n}.needle"),
        }
    }

    /// The piece a file name names (`terms-3.needle`; a path's folders are ignored).
    pub fn from_file_name(name: &str) -> Option<PieceId> {
        let name = name.rsplit('/').next()?.strip_suffix(".needle")?;
        let (kind, number) = name.split_once('-')?;
        let number: u32 = number.parse().ok()?;
        match kind {
            "terms" => Some(PieceId::Terms(number)),
            "vectors" => Some(PieceId::Vectors(number)),
            "chunks" => Some(PieceId::Chunks(number)),
            _ => None,
        }
    }

    fn kind(&self) -> (u8, u32) {
        match *self {
            PieceId::Terms(n) => (0, n),
            PieceId::Vectors(n) => (1, n),
            PieceId::Chunks(n) => (2, n),
        }
    }
}

/// A term's postings in a lexical piece: (chunk, term frequency, the chunk's token count).
type Postings = Vec<(u32, u32, u32)>;

/// The entries of a content piece.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkRun {
    /// The pages the chunks come from, by page number.
    pub pages: Vec<(u32, PageEntry)>,
    /// Chunks `first..first + len`, `first` being the head's `content_first` of this piece.
    pub chunks: Vec<ChunkEntry>,
}

fn push_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads bytes front to back; every read past the end is an error, not a panic.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or("runs past its end")?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    /// Nothing may follow the entries.
    fn finished(&self) -> Result<(), String> {
        match self.bytes.len() - self.at {
            0 => Ok(()),
            n => Err(format!("{n} bytes after the entries")),
        }
    }

    fn varint(&mut self) -> Result<u32, String> {
        let mut v: u64 = 0;
        for shift in (0..35).step_by(7) {
            let b = self.take(1)?[0];
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return u32::try_from(v).map_err(|_| "a varint overflows".to_string());
            }
        }
        Err("a varint is too long".into())
    }
}

/// Encodes the postings of `terms` (in order) as a lexical piece's body.
pub fn terms_body<'a>(terms: impl IntoIterator<Item = (&'a str, &'a [(u32, u32)])>, doc_len: &[u32]) -> Vec<u8> {
    let terms: Vec<_> = terms.into_iter().collect();
    let mut out = Vec::new();
    push_varint(&mut out, terms.len() as u32);
    for (term, postings) in terms {
        push_varint(&mut out, term.len() as u32);
        out.extend_from_slice(term.as_bytes());
        push_varint(&mut out, postings.len() as u32);
        let mut last = 0;
        for &(chunk, tf) in postings {
            push_varint(&mut out, chunk - last);
            push_varint(&mut out, tf);
            push_varint(&mut out, doc_len.get(chunk as usize).copied().unwrap_or(0));
            last = chunk;
        }
    }
    out
}

/// Encodes the vectors of `chunks` (ascending) as an inverted list's body: chunk deltas, then
/// each vector's scale, then its int8 codes.
pub fn vectors_body<'a>(chunks: &[u32], vector: impl Fn(usize) -> &'a [f32]) -> Vec<u8> {
    let mut out = Vec::new();
    push_varint(&mut out, chunks.len() as u32);
    let mut last = 0;
    for &c in chunks {
        push_varint(&mut out, c - last);
        last = c;
    }
    write_vector_block(chunks.iter().map(|&c| vector(c as usize)), &mut out);
    out
}

/// The `count` centroids (rows of `centroids`) nearest to `v`, nearest first (the lower number
/// on a tie): the lists a query probes, and at build time the list a chunk joins.
pub fn closest(v: &[f32], centroids: &[f32], dim: usize, count: usize) -> Vec<usize> {
    let sims: Vec<f32> = centroids.chunks_exact(dim.max(1)).map(|c| search::dot(v, c)).collect();
    let mut order: Vec<usize> = (0..sims.len()).collect();
    order.sort_unstable_by(|&a, &b| sims[b].total_cmp(&sims[a]).then(a.cmp(&b)));
    order.truncate(count);
    order
}

/// Wraps a body as piece `id` of build `build`.
pub fn seal_piece(id: PieceId, build: [u8; 8], body: &[u8]) -> Vec<u8> {
    let (kind, number) = id.kind();
    let mut out = Vec::with_capacity(body.len() + 65);
    out.extend_from_slice(PIECE_MAGIC);
    out.extend_from_slice(&PIECES_FORMAT.to_le_bytes());
    out.push(kind);
    out.extend_from_slice(&number.to_le_bytes());
    out.extend_from_slice(&build);
    out.extend_from_slice(body);
    seal(&mut out);
    out
}

/// Encodes the head.
pub fn head_bytes(head: &Head) -> Result<Vec<u8>, IndexError> {
    let body = postcard::to_stdvec(head).map_err(|e| IndexError::Encode { reason: e.to_string() })?;
    let mut out = Vec::with_capacity(body.len() + 52);
    out.extend_from_slice(HEAD_MAGIC);
    out.extend_from_slice(&PIECES_FORMAT.to_le_bytes());
    out.extend_from_slice(&body);
    seal(&mut out);
    Ok(out)
}

/// Checks a file's frame (magic, end mark, format, sha256) and returns what lies between the
/// format and the checksum.
fn unseal<'a>(bytes: &'a [u8], magic: &[u8; 8], file: &str) -> Result<&'a [u8], IndexError> {
    let f = || file.to_string();
    if bytes.len() < 8 || &bytes[..8] != magic {
        let what = String::from_utf8_lossy(magic).into_owned();
        return Err(IndexError::Malformed { file: f(), reason: format!("not a needle {what} file") });
    }
    if bytes.len() < 8 + 4 + 32 + 8 || &bytes[bytes.len() - 8..] != END_MAGIC {
        return Err(IndexError::Truncated { file: f(), len: bytes.len() });
    }
    let body_end = bytes.len() - 40;
    let computed = Sha256::digest(&bytes[..body_end]);
    if bytes[body_end..body_end + 32] != computed[..] {
        return Err(IndexError::Checksum { file: f(), stored: hex(&bytes[body_end..body_end + 32]), computed: hex(&computed) });
    }
    let format = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if format != PIECES_FORMAT {
        return Err(IndexError::Malformed { file: f(), reason: format!("pieces format {format}, this needle reads {PIECES_FORMAT}") });
    }
    Ok(&bytes[12..body_end])
}

/// A pieced index as far as a reader has fetched it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pieced {
    pub head: Head,
    /// The centroids, decoded (lists × dim).
    centroids: Vec<f32>,
    terms: HashMap<u32, Vec<(String, Postings)>>,
    /// Per list: its chunks and their vectors (chunks × dim).
    vectors: HashMap<u32, (Vec<u32>, Vec<f32>)>,
    /// Per content piece: its entries and its chunks' vectors (chunks × dim).
    chunks: HashMap<u32, (ChunkRun, Vec<f32>)>,
}

impl Pieced {
    /// Reads a head; `file` names it in errors.
    pub fn from_head(bytes: &[u8], file: &str) -> Result<Pieced, IndexError> {
        let body = unseal(bytes, HEAD_MAGIC, file)?;
        let malformed = |reason: String| IndexError::Malformed { file: file.to_string(), reason };
        let head: Head = postcard::from_bytes(body).map_err(|e| malformed(format!("head: {e}")))?;
        let dim = head.stamp.model.dim as usize;
        let lists = head.centroid_scales.len();
        if dim == 0 || head.centroid_codes.len() != lists * dim || lists == 0 {
            return Err(malformed(format!("{lists} centroids, {} codes of dimension {dim}", head.centroid_codes.len())));
        }
        if head.lexical_first.first().map(String::as_str) != Some("") || !head.lexical_first.windows(2).all(|w| w[0] < w[1]) {
            return Err(malformed("the lexical pieces' first terms are not ascending from \"\"".into()));
        }
        if head.analyzer != ANALYZER_VERSION {
            return Err(malformed(format!(
                "built with text analyzer version {}, this needle analyzes with version {ANALYZER_VERSION}; rebuild the index with this needle",
                head.analyzer
            )));
        }
        if !cfg!(feature = "stemmers") && crate::query::analyze::stems(&head.lang) {
            return Err(malformed(format!(
                "its pages in {} are stemmed (Snowball), and this build of needle has no stemmers; rebuild the bundle with this needle",
                head.lang
            )));
        }
        if head.content_first.first() != Some(&0) || !head.content_first.windows(2).all(|w| w[0] < w[1]) {
            return Err(malformed("the content pieces' first chunks are not ascending from 0".into()));
        }
        let centroids = head
            .centroid_codes
            .chunks_exact(dim)
            .zip(&head.centroid_scales)
            .flat_map(|(codes, &s)| codes.iter().map(move |&c| f32::from(c) * s))
            .collect();
        Ok(Pieced { head, centroids, terms: HashMap::new(), vectors: HashMap::new(), chunks: HashMap::new() })
    }

    fn dim(&self) -> usize {
        self.head.stamp.model.dim as usize
    }

    /// Adds piece `id`, read from `file` (named in errors). A piece that fails its checks is
    /// refused, and the pieces already added stay.
    pub fn add(&mut self, id: PieceId, bytes: &[u8], file: &str) -> Result<(), IndexError> {
        let malformed = |reason: String| IndexError::Malformed { file: file.to_string(), reason };
        let framed = unseal(bytes, PIECE_MAGIC, file)?;
        if framed.len() < 13 {
            return Err(IndexError::Truncated { file: file.to_string(), len: bytes.len() });
        }
        let (kind, number) = id.kind();
        let found = (framed[0], u32::from_le_bytes([framed[1], framed[2], framed[3], framed[4]]));
        if found != (kind, number) {
            return Err(malformed(format!("piece {found:?} where {} was asked for", id.file_name())));
        }
        if framed[5..13] != self.head.build {
            return Err(IndexError::PieceMismatch { file: file.to_string(), theirs: hex(&framed[5..13]), ours: hex(&self.head.build) });
        }
        let mut r = Reader { bytes: &framed[13..], at: 0 };
        let n = self.head.chunks;
        let in_range = |c: u32| if c < n { Ok(c) } else { Err(format!("names chunk {c} of {n}")) };
        match id {
            PieceId::Terms(p) => {
                let count = r.varint().map_err(&malformed)?;
                let mut terms = Vec::with_capacity(count.min(1 << 16) as usize);
                for _ in 0..count {
                    let len = r.varint().map_err(&malformed)? as usize;
                    let term = std::str::from_utf8(r.take(len).map_err(&malformed)?).map_err(|e| malformed(e.to_string()))?.to_string();
                    let postings = r.varint().map_err(&malformed)?;
                    let mut list = Vec::with_capacity(postings.min(n) as usize);
                    let mut chunk = 0u32;
                    for _ in 0..postings {
                        chunk = chunk.checked_add(r.varint().map_err(&malformed)?).ok_or_else(|| malformed("chunk overflow".into()))?;
                        let tf = r.varint().map_err(&malformed)?;
                        let dl = r.varint().map_err(&malformed)?;
                        list.push((in_range(chunk).map_err(&malformed)?, tf, dl));
                    }
                    terms.push((term, list));
                }
                if !terms.windows(2).all(|w| w[0].0 < w[1].0) {
                    return Err(malformed("terms are not sorted".into()));
                }
                r.finished().map_err(&malformed)?;
                self.terms.insert(p, terms);
            }
            PieceId::Vectors(l) => {
                let dim = self.dim();
                let count = r.varint().map_err(&malformed)? as usize;
                let mut chunks = Vec::with_capacity(count.min(n as usize));
                let mut chunk = 0u32;
                for _ in 0..count {
                    chunk = chunk.checked_add(r.varint().map_err(&malformed)?).ok_or_else(|| malformed("chunk overflow".into()))?;
                    chunks.push(in_range(chunk).map_err(&malformed)?);
                }
                // The index file's vector block: scales, then codes (a bad scale is refused there).
                let block = r.take(count.saturating_mul(4 + dim)).map_err(&malformed)?;
                let vectors = read_vector_block(block, count, dim).map_err(&malformed)?;
                r.finished().map_err(&malformed)?;
                self.vectors.insert(l, (chunks, vectors));
            }
            PieceId::Chunks(p) => {
                let (run, rest): (ChunkRun, &[u8]) =
                    postcard::take_from_bytes(r.take(framed.len() - 13).map_err(&malformed)?).map_err(|e| malformed(e.to_string()))?;
                let first = *self.head.content_first.get(p as usize).ok_or_else(|| malformed(format!("no content piece {p}")))?;
                let end = self.head.content_first.get(p as usize + 1).copied().unwrap_or(n);
                if run.chunks.len() as u32 != end.saturating_sub(first) {
                    return Err(malformed(format!("{} chunks where {} were expected", run.chunks.len(), end.saturating_sub(first))));
                }
                for (i, c) in run.chunks.iter().enumerate() {
                    // As the index file's reader checks: a chunk's range lies inside its page.
                    let page = run.pages.iter().find(|(n, _)| *n == c.page).map(|(_, p)| p);
                    if !page.is_some_and(|p| c.from <= c.to && c.to <= p.text_len) {
                        return Err(malformed(format!("chunk {} has no page here, or lies outside it", first as usize + i)));
                    }
                }
                let count = run.chunks.len();
                let dim = self.dim();
                if rest.len() != count.saturating_mul(4 + dim) {
                    return Err(malformed(format!("{} bytes of vectors for {count} chunks of dimension {dim}", rest.len())));
                }
                let vectors = read_vector_block(rest, count, dim).map_err(&malformed)?;
                self.chunks.insert(p, (run, vectors));
            }
        }
        Ok(())
    }

    fn terms_piece(&self, term: &str) -> u32 {
        self.head.lexical_first.partition_point(|f| f.as_str() <= term).saturating_sub(1) as u32
    }

    fn chunks_piece(&self, chunk: u32) -> u32 {
        self.head.content_first.partition_point(|&f| f <= chunk).saturating_sub(1) as u32
    }

    /// The lists a query vector probes: the head's `nprobe` nearest centroids.
    pub fn probe(&self, query: &[f32]) -> Vec<u32> {
        closest(query, &self.centroids, self.dim(), self.head.nprobe as usize).into_iter().map(|l| l as u32).collect()
    }

    /// The pieces a query needs to be ranked that this reader does not have yet: the lexical
    /// pieces that a plan of it reads (`lexicon::Plan`: each word's own term and its inflected
    /// forms, which sort beside it; the terms the last word begins while typed; and, for a word
    /// the site turns out not to hold, the terms of its first letter and its first two letters
    /// swapped, where its typo's corrections lie), and with a query vector the lists it probes.
    /// A typo's pieces are known once the word's own piece is in, so they come a round later.
    /// (The lexical candidates' content pieces follow from the ranking: [`Pieced::search`]
    /// names them.)
    pub fn needs(&self, query: &str, query_vec: Option<&QueryVector>) -> Vec<PieceId> {
        let analyzer = self.analyzer();
        let words = analyzer.tokens(query);
        let mut out: Vec<u32> = if analyzer.stems() {
            words.iter().map(|w| self.terms_piece(&w.term)).collect()
        } else {
            words.iter().flat_map(|w| bm25::forms(&w.term)).map(|f| self.terms_piece(&f)).collect()
        };
        if let Some(last) = words.last().filter(|w| lexicon::is_open(query) && w.norm.chars().count() >= lexicon::MIN_PREFIX) {
            out.extend(self.terms_pieces_from(&last.norm));
        }
        if out.iter().all(|&p| self.has(PieceId::Terms(p))) {
            for w in Plan::new(self, &analyzer, query)
                .words
                .iter()
                .filter(|w| matches!(w.how, How::Typo | How::Unknown) && lexicon::may_be_typo(&w.token))
            {
                let mut cs = w.token.chars();
                if let (Some(a), Some(b)) = (cs.next(), cs.next()) {
                    out.extend(self.terms_pieces_from(a.encode_utf8(&mut [0; 4])));
                    out.push(self.terms_piece(&format!("{b}{a}{}", cs.as_str())));
                }
            }
        }
        let mut out: Vec<PieceId> = out.into_iter().map(PieceId::Terms).collect();
        if let Some(q) = query_vec.filter(|q| q.vector.len() == self.dim()) {
            out.extend(self.probe(&q.vector).into_iter().map(PieceId::Vectors));
        }
        out.sort_unstable();
        out.dedup();
        out.retain(|id| !self.has(*id));
        out
    }

    /// The plan of `query` (`lexicon::Plan`) once the lexical pieces it reads are in.
    pub fn plan(&self, query: &str) -> Option<Plan> {
        self.needs(query, None).is_empty().then(|| Plan::new(self, &self.analyzer(), query))
    }

    /// The analyzer of the site's terms, in its main language.
    pub fn analyzer(&self) -> Analyzer {
        Analyzer::new(self.head.analyzer, &self.head.lang)
    }

    /// The lexical pieces that hold the terms `prefix` begins.
    fn terms_pieces_from(&self, prefix: &str) -> std::ops::RangeInclusive<u32> {
        let last = self.head.lexical_first.partition_point(|f| f.as_str() < prefix || f.starts_with(prefix));
        self.terms_piece(prefix)..=(last.saturating_sub(1) as u32).max(self.terms_piece(prefix))
    }

    /// The chunks of a lexical ranking whose vectors the dense side scores.
    fn lexical_candidates<'a>(&self, lexical: &'a [usize]) -> impl Iterator<Item = u32> + 'a {
        lexical.iter().take(self.head.lexical_candidates as usize).map(|&c| c as u32)
    }

    /// The vector of `chunk` from its content piece, when this reader has it.
    fn content_vector(&self, chunk: u32) -> Option<&[f32]> {
        let piece = self.chunks_piece(chunk);
        let (_, vectors) = self.chunks.get(&piece)?;
        let at = chunk.checked_sub(*self.head.content_first.get(piece as usize)?)? as usize * self.dim();
        vectors.get(at..at + self.dim())
    }

    pub fn has(&self, id: PieceId) -> bool {
        match id {
            PieceId::Terms(p) => self.terms.contains_key(&p),
            PieceId::Vectors(l) => self.vectors.contains_key(&l),
            PieceId::Chunks(p) => self.chunks.contains_key(&p),
        }
    }

    /// Calls `visit(chunk, tf, chunk length)` for each posting of `term` this reader has: the
    /// `postings` of `bm25::rank_plan` and `bm25::coverage`.
    fn visit_postings(&self, term: &str, visit: &mut dyn FnMut(u32, u32, u32)) {
        for &(chunk, tf, dl) in self.postings(term).into_iter().flatten() {
            visit(chunk, tf, dl);
        }
    }

    fn postings(&self, term: &str) -> Option<&Postings> {
        let piece = self.terms.get(&self.terms_piece(term))?;
        piece.binary_search_by(|(t, _)| t.as_str().cmp(term)).ok().map(|i| &piece[i].1)
    }

    /// Searches the pieces this reader has, as `search::search` searches a whole index. `Err`
    /// lists the pieces it lacks: first those that rank ([`Pieced::needs`]), then the content
    /// pieces of the lexical candidates (whose vectors the dense side scores too) and of the
    /// hits it shows, then those of hits the candidates' distances moved in; fetch them,
    /// [`Pieced::add`] them, and search again. A query takes at most four rounds.
    pub fn search(&self, query: &str, query_vec: Option<&QueryVector>, opts: &SearchOptions) -> Result<SearchResult, Vec<PieceId>> {
        let missing = self.needs(query, query_vec);
        if !missing.is_empty() {
            return Err(missing);
        }
        let r = search::rank(self, Plan::new(self, &self.analyzer(), query), query_vec, opts);
        // With a usable query vector the dense side scores them, whatever the mode: their
        // distances also stand beside a BM25 ranking's hits and meet the gate.
        let scored = query_vec.is_some_and(|q| q.vector.len() == self.dim());
        let candidates = self.lexical_candidates(if scored { &r.lexical } else { &[] });
        let mut missing: Vec<PieceId> = candidates
            .chain(r.shown.iter().map(|&(c, _)| c as u32))
            .map(|c| PieceId::Chunks(self.chunks_piece(c)))
            .filter(|id| !self.has(*id))
            .collect();
        if !missing.is_empty() {
            missing.sort_unstable();
            missing.dedup();
            return Err(missing);
        }
        let hits = r.hits(self);
        Ok(r.into_result(query, hits, self.head.chunks as usize))
    }
}

impl Entries for Pieced {
    fn entry(&self, chunk: usize) -> Option<(&PageEntry, &ChunkEntry)> {
        let piece = self.chunks_piece(u32::try_from(chunk).ok()?);
        let (run, _) = self.chunks.get(&piece)?;
        let entry = run.chunks.get(chunk.checked_sub(*self.head.content_first.get(piece as usize)? as usize)?)?;
        Some((&run.pages.iter().find(|(n, _)| *n == entry.page)?.1, entry))
    }
}

/// The terms of the lexical pieces this reader has.
impl Vocabulary for Pieced {
    fn df(&self, term: &str) -> Option<usize> {
        self.postings(term).map(Vec::len)
    }

    fn with_prefix(&self, prefix: &str, each: &mut dyn FnMut(&str, usize)) {
        for p in self.terms_pieces_from(prefix) {
            let Some(piece) = self.terms.get(&p) else { continue };
            let from = piece.partition_point(|(t, _)| t.as_str() < prefix);
            for (t, postings) in piece[from..].iter().take_while(|(t, _)| t.starts_with(prefix)) {
                each(t, postings.len());
            }
        }
    }
}

impl Source for Pieced {
    fn settings(&self) -> &Settings {
        &self.head.settings
    }

    fn reader_lang(&self, _lang: Option<&str>) -> &str {
        &self.head.lang
    }

    fn dim(&self) -> usize {
        Pieced::dim(self)
    }

    fn lexical(&self, plan: &Plan) -> Vec<usize> {
        let ranked = bm25::rank_plan(plan, self.head.chunks as usize, self.head.avgdl, |term, visit| self.visit_postings(term, visit));
        ranked.into_iter().map(|(c, _)| c).collect()
    }

    fn coverage(&self, plan: &Plan, chunks: &[usize]) -> Vec<f32> {
        bm25::coverage(plan, self.head.chunks as usize, chunks, |term, visit| self.visit_postings(term, visit))
    }

    fn dense(&self, query: &[f32], lexical: &[usize]) -> Option<Dense> {
        let dim = self.dim();
        let mut distances = HashMap::new();
        for list in self.probe(query) {
            let (chunks, vectors) = self.vectors.get(&list)?;
            for (&c, v) in chunks.iter().zip(vectors.chunks_exact(dim)) {
                distances.insert(c as usize, search::cosine_distance(v, query));
            }
        }
        for c in self.lexical_candidates(lexical) {
            if let Some(v) = self.content_vector(c) {
                distances.insert(c as usize, search::cosine_distance(v, query));
            }
        }
        let mut order: Vec<usize> = distances.keys().copied().collect();
        order.sort_unstable_by(|a, b| distances[a].total_cmp(&distances[b]).then(a.cmp(b)));
        Some(Dense { order, distances: Distances::Probed(distances) })
    }
}
