//! An index cut into pieces that a browser fetches on demand, so a reader of a large site
//! downloads what a query touches, not the site's whole index. This module is the plan: which
//! chunk's vector goes to which inverted list, which terms' postings to which lexical piece,
//! which chunks to which content piece, each piece's encoded size, and what a query fetches
//! under it; [`write()`] encodes the pieces in the format [`crate::query::pieces`] reads.
//! `needle pieces` reports a plan's costs and its recall against the whole index on real
//! questions, which is how its parameters are chosen.
//!
//! - **Dense side**: an inverted file (IVF, as FAISS's `IndexIVFFlat`). Spherical k-means over
//!   the chunks' stored vectors gives `lists` unit centroids; every chunk belongs to the list
//!   of its nearest centroid; a query scores only the chunks of the `nprobe` lists whose
//!   centroids are nearest to it, and the lexical ranking's first [`LEXICAL_CANDIDATES`]
//!   chunks. A list entry is what the index stores for a chunk today: chunk number (u32),
//!   scale (f32) and `dim` int8 codes.
//! - **Lexical side**: the sorted vocabulary cut into consecutive term ranges of about
//!   `lexical_bytes` each (a term's postings are never split). A term's entry is its bytes and
//!   its postings as varints of (chunk delta, term frequency, the chunk's token count): all that
//!   BM25 needs besides the chunk count and the mean length, which the head holds. So the
//!   lexical ranking over pieces is the whole index's ranking, exactly.
//! - **Content**: the chunk entries (section, header, content, offsets) and their vectors in
//!   order, about `content_bytes` a piece, with the entries of the pages they come from (a long
//!   page spans pieces); a query fetches the pieces of its lexical candidates and of the hits
//!   it shows. So every vector is stored twice, in its list and in its content piece: the
//!   server holds more, a reader fetches less (a lexical candidate's list is rarely probed).
//! - **Head**: what every query needs first: the settings, the chunk count and mean length,
//!   each piece's first term or chunk and checksum, and the centroids (scale + codes each).
//!
//! Invariants: the plan is a function of the index and the configuration alone (k-means starts
//! from evenly spaced chunks and sums in chunk order; its parallel step is per chunk), so two
//! builds of one site cut the same pieces. Every chunk is in exactly one list and one content
//! piece, every term in exactly one lexical piece, and pieces follow term and chunk order.

use crate::query::analyze::Analyzer;
use crate::query::bm25::{self, Bm25};
use crate::query::index::{self, Index, IndexError};
use crate::query::pieces::{self as format, ChunkRun, Head, PieceId};
use rayon::prelude::*;
use std::collections::BTreeSet;

/// How an index is cut.
#[derive(Debug, Clone, PartialEq)]
pub struct PieceConfig {
    /// Inverted lists of the dense side (0: [`auto_lists`] of the chunk count).
    pub lists: usize,
    /// Target encoded size of a lexical piece.
    pub lexical_bytes: usize,
    /// Target encoded size of a content piece.
    pub content_bytes: usize,
    /// k-means rounds.
    pub iterations: usize,
    /// Bits per code of a list's vectors: 8 (the index's own codes, exact distances) or 4
    /// (half the bytes; the lists then only rank, and the gate takes exact distances from the
    /// 8-bit vectors in the hits' content pieces). Only `needle pieces` measures 4.
    pub list_bits: u8,
}

impl Default for PieceConfig {
    fn default() -> Self {
        PieceConfig { lists: 0, lexical_bytes: 16 * 1024, content_bytes: 4 * 1024, iterations: 8, list_bits: 8 }
    }
}

/// How many of the lexical ranking's first chunks the dense side scores besides the probed
/// lists'. On the `std` + `core` questions (148,567 chunks) the probed lists alone lost the
/// answers of two of 64 questions whose vectors sit far from their list's centroid (one's list
/// ranked 286th of 1,542 for its question); with the lexical top 20 scored too, dense R@20
/// equals the whole index's from 4 lists probed on (`needle pieces`, BENCHMARKS.md).
pub const LEXICAL_CANDIDATES: u32 = 20;

/// About four times the square root of the chunk count (FAISS's rule of thumb for IVF lists),
/// at least one: 1,000 chunks → 126 lists of ~8, 100,000 → 1,265 of ~79.
pub fn auto_lists(chunks: usize) -> usize {
    ((4.0 * (chunks as f64).sqrt()).round() as usize).clamp(1, chunks.max(1))
}

/// Bytes of one stored vector in a list: chunk number, scale, codes.
pub fn list_entry_bytes(dim: usize, bits: u8) -> usize {
    4 + 4 + (dim * bits as usize).div_ceil(8)
}

/// What every piece carries besides its entries ([`crate::query::pieces`]): magic, format, kind
/// and number, the build's id (so a piece of another build is refused), its own sha256 (so a
/// corrupt piece is refused by name) and the end mark. The head needs no checksum per piece.
pub const PIECE_OVERHEAD: usize = crate::query::pieces::PIECE_FRAME;

/// The cut of one index (module documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct PiecePlan {
    pub dim: usize,
    pub list_bits: u8,
    /// `lists × dim`, each row unit length.
    pub centroids: Vec<f32>,
    /// The chunks of each list, ascending.
    pub lists: Vec<Vec<u32>>,
    /// First term (index into the sorted vocabulary) of each lexical piece; the first is 0.
    pub lexical_first: Vec<usize>,
    pub lexical_bytes: Vec<usize>,
    /// First chunk of each content piece; the first is 0.
    pub content_first: Vec<usize>,
    pub content_bytes: Vec<usize>,
}

/// Unsigned LEB128, the varint of the pieces' postings.
pub fn varint_len(mut v: u32) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Encoded size of one term's entry in a lexical piece.
fn term_entry_bytes(term: &str, postings: &[(u32, u32)], doc_len: &[u32]) -> usize {
    let mut n = varint_len(term.len() as u32) + term.len() + varint_len(postings.len() as u32);
    let mut last = 0;
    for &(chunk, tf) in postings {
        n += varint_len(chunk - last) + varint_len(tf) + varint_len(doc_len.get(chunk as usize).copied().unwrap_or(0));
        last = chunk;
    }
    n
}

/// Cuts `sizes` (in order) into consecutive runs of about `target` bytes, an item never split:
/// the first item of each run and each run's size.
fn runs(sizes: impl IntoIterator<Item = (usize, usize)>, target: usize) -> (Vec<usize>, Vec<usize>) {
    let (mut first, mut bytes) = (Vec::new(), Vec::new());
    for (at, size) in sizes {
        match bytes.last_mut() {
            Some(b) if *b + size <= target => *b += size,
            _ => {
                first.push(at);
                bytes.push(size);
            }
        }
    }
    (first, bytes)
}

/// Spherical k-means: `k` unit centroids of the unit rows of `vectors` and each row's list.
/// Starts from rows spread evenly over the index; an emptied list keeps its centroid.
pub fn kmeans(vectors: &[f32], dim: usize, k: usize, iterations: usize) -> (Vec<f32>, Vec<u32>) {
    let n = vectors.len().checked_div(dim).unwrap_or(0);
    let k = k.clamp(1, n.max(1));
    if n == 0 {
        return (vec![0.0; k * dim], Vec::new());
    }
    let row = |i: usize| &vectors[i * dim..(i + 1) * dim];
    let mut centroids: Vec<f32> = (0..k).flat_map(|c| row(c * n / k).iter().copied()).collect();
    let mut assign = nearest(vectors, dim, &centroids);
    for _ in 0..iterations {
        let mut sums = vec![0f32; k * dim];
        for (i, &c) in assign.iter().enumerate() {
            for (s, x) in sums[c as usize * dim..(c as usize + 1) * dim].iter_mut().zip(row(i)) {
                *s += x;
            }
        }
        for (c, sum) in sums.chunks_exact_mut(dim).enumerate() {
            let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
            if norm > 0.0 {
                sum.iter_mut().for_each(|x| *x /= norm);
                centroids[c * dim..(c + 1) * dim].copy_from_slice(sum);
            }
        }
        let next = nearest(vectors, dim, &centroids);
        if next == assign {
            break;
        }
        assign = next;
    }
    (centroids, assign)
}

/// The nearest centroid (largest dot product, the lower number on a tie) of every row.
fn nearest(vectors: &[f32], dim: usize, centroids: &[f32]) -> Vec<u32> {
    vectors.par_chunks_exact(dim).map(|v| format::closest(v, centroids, dim, 1)[0] as u32).collect()
}

/// `v` as a list of `bits`-bit codes stores it, decoded and made unit length again: codes
/// `round(v / s)` in `[−2^(bits−1), 2^(bits−1) − 1]` with `s = max |v| / (2^(bits−1) − 1)`.
pub fn through_codes(v: &[f32], bits: u8) -> Vec<f32> {
    let top = ((1i32 << (bits.clamp(2, 8) - 1)) - 1) as f32;
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    if max == 0.0 {
        return v.to_vec();
    }
    let s = max / top;
    let decoded: Vec<f32> = v.iter().map(|x| (x / s).round().clamp(-top - 1.0, top) * s).collect();
    let norm = decoded.iter().map(|x| x * x).sum::<f32>().sqrt();
    decoded.iter().map(|x| x / norm).collect()
}

impl PiecePlan {
    /// Cuts `index` (which must hold its vectors) as `config` says.
    pub fn new(index: &Index, config: &PieceConfig) -> PiecePlan {
        let h = &index.header;
        let dim = index.dim();
        let n = h.chunks.len();
        let k = if config.lists == 0 { auto_lists(n) } else { config.lists };
        let (centroids, assign) = kmeans(&index.vectors, dim, k, config.iterations);
        // As the head stores them (int8 codes and a scale), so the plan probes as a reader does.
        let centroids: Vec<f32> = centroids.chunks_exact(dim.max(1)).flat_map(crate::query::index::quantized).collect();
        let mut lists = vec![Vec::new(); centroids.len() / dim.max(1)];
        for (chunk, &list) in assign.iter().enumerate() {
            lists[list as usize].push(chunk as u32);
        }
        let bm: &Bm25 = &h.bm25;
        let terms = bm.terms.iter().zip(&bm.postings).map(|(t, p)| term_entry_bytes(t, p, &bm.doc_len)).enumerate();
        let (lexical_first, mut lexical_bytes) = runs(terms, config.lexical_bytes);
        // Chunks in order; a piece also carries the entry (path, title) of each page its chunks
        // come from, so a long page spans pieces and a hit fetches only its own part of it.
        let (mut content_first, mut content_bytes) = (Vec::new(), Vec::<usize>::new());
        for (i, c) in h.chunks.iter().enumerate() {
            let page = h.pages.get(c.page as usize).map_or(0, |p| p.path.len() + p.title.len() + p.host.len() + 16);
            let size = c.section.len() + c.header.len() + c.content.len() + 4 * 4 + (4 + dim);
            let same_page = i > 0 && h.chunks[i - 1].page == c.page;
            match content_bytes.last_mut() {
                Some(b) if *b + size + if same_page { 0 } else { page } <= config.content_bytes => {
                    *b += size + if same_page { 0 } else { page }
                }
                _ => {
                    content_first.push(i);
                    content_bytes.push(size + page);
                }
            }
        }
        lexical_bytes.iter_mut().chain(&mut content_bytes).for_each(|b| *b += PIECE_OVERHEAD);
        let list_bits = config.list_bits;
        PiecePlan { dim, list_bits, centroids, lists, lexical_first, lexical_bytes, content_first, content_bytes }
    }

    /// Bytes of the head: the centroids (scale + 8-bit codes), each lexical piece's first term
    /// and each content piece's first chunk, and the fixed fields (settings, counts, mean
    /// length, build id), counted as 1 KB.
    pub fn head_bytes(&self, bm: &Bm25) -> usize {
        let first_terms: usize = self.lexical_first.iter().map(|&t| bm.terms.get(t).map_or(0, |t| t.len() + 1)).sum();
        self.lists.len() * (4 + self.dim) + first_terms + self.content_first.len() * 4 + 1024
    }

    pub fn list_bytes(&self, list: usize) -> usize {
        self.lists.get(list).map_or(0, |l| l.len() * list_entry_bytes(self.dim, self.list_bits) + PIECE_OVERHEAD)
    }

    /// The lexical piece holding term number `term` of the sorted vocabulary.
    pub fn lexical_piece(&self, term: usize) -> usize {
        self.lexical_first.partition_point(|&f| f <= term).saturating_sub(1)
    }

    /// The content piece holding `chunk`.
    pub fn content_piece(&self, chunk: usize) -> usize {
        self.content_first.partition_point(|&f| f <= chunk).saturating_sub(1)
    }

    /// The lexical pieces a query's terms fall in, and those of every form of the words the model
    /// does not know (`unknown_to_model`), as a reader fetches them (`query::pieces::Pieced::needs`).
    /// A term the site does not have costs the piece its range falls in too: that piece is what
    /// tells the reader the site lacks it (the gate's foreign words).
    pub fn lexical_pieces(&self, bm: &Bm25, analyzer: &Analyzer, query: &str, unknown_to_model: &[String]) -> BTreeSet<usize> {
        let forms = unknown_to_model.iter().flat_map(|w| bm25::forms(w));
        analyzer.terms(query).into_iter().chain(forms).map(|t| self.lexical_piece(bm.terms.partition_point(|x| *x < t))).collect()
    }

    /// The `nprobe` lists a query vector scans.
    pub fn probe(&self, query: &[f32], nprobe: usize) -> Vec<usize> {
        format::closest(query, &self.centroids, self.dim, nprobe)
    }
}

/// The head and the pieces of `index` cut as `plan` says, with `nprobe` lists probed per query:
/// (file name, bytes), the head first. Only 8-bit lists are written (4-bit ones are measured by
/// `needle pieces --list-bits 4`, not yet a format).
pub fn write(index: &Index, plan: &PiecePlan, nprobe: usize) -> Result<Vec<(String, Vec<u8>)>, IndexError> {
    let h = &index.header;
    let bm = &h.bm25;
    let whole = index.to_bytes()?;
    let mut build = [0u8; 8];
    build.copy_from_slice(&index::stored_checksum(&whole).unwrap_or(&[0; 8])[..8]);
    let rows: Vec<(f32, Vec<i8>)> = plan.centroids.chunks_exact(plan.dim.max(1)).map(index::quantize).collect();
    let head = Head {
        build,
        stamp: h.stamp.clone(),
        settings: h.settings.clone(),
        site: h.site.clone(),
        chunks: h.chunks.len() as u32,
        avgdl: bm.avgdl(),
        nprobe: nprobe.clamp(1, plan.lists.len().max(1)) as u32,
        lexical_candidates: LEXICAL_CANDIDATES,
        lexical_first: plan
            .lexical_first
            .iter()
            .enumerate()
            .map(|(p, &t)| if p == 0 { String::new() } else { bm.terms[t].clone() })
            .collect(),
        content_first: plan.content_first.iter().map(|&c| c as u32).collect(),
        centroid_scales: rows.iter().map(|r| r.0).collect(),
        centroid_codes: rows.into_iter().flat_map(|r| r.1).collect(),
        analyzer: h.analysis.version,
        lang: h.analysis.main_lang().to_string(),
    };
    let mut out = vec![(format::HEAD_FILE.to_string(), format::head_bytes(&head)?)];
    let ends = |first: &[usize], p: usize, total: usize| first[p]..first.get(p + 1).copied().unwrap_or(total);
    for p in 0..plan.lexical_first.len() {
        let terms = ends(&plan.lexical_first, p, bm.terms.len()).map(|t| (bm.terms[t].as_str(), bm.postings[t].as_slice()));
        let id = PieceId::Terms(p as u32);
        out.push((id.file_name(), format::seal_piece(id, build, &format::terms_body(terms, &bm.doc_len))));
    }
    for (l, chunks) in plan.lists.iter().enumerate() {
        let id = PieceId::Vectors(l as u32);
        out.push((id.file_name(), format::seal_piece(id, build, &format::vectors_body(chunks, |c| index.vector(c)))));
    }
    for p in 0..plan.content_first.len() {
        let chunks: Vec<_> = h.chunks[ends(&plan.content_first, p, h.chunks.len())].to_vec();
        let mut pages: Vec<(u32, index::PageEntry)> = Vec::new();
        for c in &chunks {
            if pages.last().is_none_or(|(n, _)| *n != c.page) {
                pages.push((c.page, h.pages[c.page as usize].clone()));
            }
        }
        let range = ends(&plan.content_first, p, h.chunks.len());
        let mut body = postcard::to_stdvec(&ChunkRun { pages, chunks }).map_err(|e| IndexError::Encode { reason: e.to_string() })?;
        index::write_vector_block(range.map(|c| index.vector(c)), &mut body);
        let id = PieceId::Chunks(p as u32);
        out.push((id.file_name(), format::seal_piece(id, build, &body)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::search::dot;

    #[test]
    fn runs_cut_in_order_near_the_target_and_never_split_an_item() {
        let (first, bytes) = runs([(0, 5), (1, 5), (2, 5), (3, 30), (4, 1)], 10);
        assert_eq!(first, [0, 2, 3, 4]);
        assert_eq!(bytes, [10, 5, 30, 1]);
        assert_eq!(runs(std::iter::empty(), 10), (vec![], vec![]));
    }

    #[test]
    fn varint_lengths() {
        assert_eq!([0, 127, 128, 16_383, 16_384, u32::MAX].map(varint_len), [1, 1, 2, 2, 3, 5]);
    }

    #[test]
    fn kmeans_separates_clear_clusters_and_is_deterministic() {
        // Two tight groups around (1, 0) and (0, 1), interleaved in order.
        let mut v = Vec::new();
        for i in 0..20 {
            let e = 0.01 * (i % 5) as f32;
            let (x, y) = if i % 2 == 0 { (1.0, e) } else { (e, 1.0) };
            let norm = (x * x + y * y).sqrt();
            v.extend([x / norm, y / norm]);
        }
        let (c, a) = kmeans(&v, 2, 2, 10);
        assert_eq!(kmeans(&v, 2, 2, 10), (c.clone(), a.clone()));
        for i in 0..20 {
            assert_eq!(a[i], a[i % 2], "row {i} joins the rows of its group");
        }
        assert_ne!(a[0], a[1]);
        for row in c.chunks_exact(2) {
            assert!((row[0] * row[0] + row[1] * row[1] - 1.0).abs() < 1e-5, "unit centroids");
        }
        assert_eq!(format::closest(&[0.0, 1.0], &c, 2, 2)[0], a[1] as usize);
        // More lists than rows: one per row.
        assert_eq!(kmeans(&v[..4], 2, 9, 3).1.len(), 2);
    }

    #[test]
    fn four_bit_codes_keep_a_vector_close() {
        let v: Vec<f32> = (0..384).map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0).collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        let v: Vec<f32> = v.iter().map(|x| x / norm).collect();
        let four = through_codes(&v, 4);
        assert!(1.0 - dot(&v, &four) < 0.01, "cosine distance {}", 1.0 - dot(&v, &four));
        assert!(1.0 - dot(&v, &through_codes(&v, 8)) < 1e-4);
        assert_eq!(through_codes(&[0.0, 0.0], 4), [0.0, 0.0]);
    }

    #[test]
    fn auto_lists_grow_with_the_square_root() {
        assert_eq!([0, 1, 1_000, 100_000].map(auto_lists), [1, 1, 126, 1_265]);
    }
}
