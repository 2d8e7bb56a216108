//! Shared by the index targets (included with `#[path]`, not a target itself).
#![allow(dead_code)]

use needle::doc::chunk::ChunkConfig;
use needle::query::analyze::Analysis;
use needle::query::bm25::Bm25;
use needle::query::index::{sha256_hex, ChunkEntry, Gate, Header, Index, ModelStamp, PageEntry, PageStatus, Settings, Stamp};
use needle::query::search::{self, Mode, QueryVector, SearchOptions};
use sha2::{Digest, Sha256};

/// The index of `src/query/index.rs`'s unit tests (`tests::tiny`), plus a failed and a skipped page
/// so that every `PageStatus` variant is in the bytes.
pub fn tiny() -> Index {
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
    let page = |path: &str, status: PageStatus, text_len: u32, chunk_count: u32| PageEntry {
        path: path.into(),
        title: "T".into(),
        content_hash: if chunk_count > 0 { sha256_hex(b"hello\n\nworld") } else { String::new() },
        text_len,
        status,
        chunk_count,
        host: String::new(),
    };
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
                gate_depth: 20,
                gate: Gate::Auto { foreign_penalty: 0.3, background_answered: 0.05 },
                lexical_cuts: vec![("de".into(), 0.5)],
            },
            site: "..".into(),
            pages: vec![
                page("p.html", PageStatus::Ok, 12, 2),
                page("bad.html", PageStatus::Failed { reason: "binary".into() }, 0, 0),
                page("moved.html", PageStatus::Skipped { reason: "redirect stub".into() }, 0, 0),
            ],
            chunks,
            bm25,
            analysis: Analysis::of(["en", "und", "und"]),
        },
        vec![1.0, 0.0, 0.0, 1.0],
    )
}

/// Rewrites the checksum slot (the 32 bytes before the end magic) so that a mutated body gets
/// past the checksum to the postcard decoder and the structural checks.
pub fn reseal(bytes: &mut [u8]) {
    if bytes.len() < 60 {
        return;
    }
    let body_end = bytes.len() - 40;
    let digest = Sha256::digest(&bytes[..body_end]);
    bytes[body_end..body_end + 32].copy_from_slice(&digest);
}

/// Everything a reader does with an index it accepted: it must not panic either.
pub fn use_index(idx: &Index) {
    let dim = idx.dim();
    let _ = idx.check_model(&idx.header.stamp.model, "fuzz");
    // An index file may come without its vectors (the browser's lexical part, or a resealed
    // cut that emptied the block): then it must answer lexically, below, and never panic.
    if idx.has_vectors() {
        for c in 0..idx.header.chunks.len() {
            assert_eq!(idx.vector(c).len(), dim);
        }
    }
    for mode in [Mode::Bm25, Mode::Dense, Mode::Hybrid] {
        let opts = SearchOptions { mode, k: 5, cut: None, max_chunks: 4, ..Default::default() };
        let q = vec![0.5f32; dim.min(4096)];
        // "zzz" is a word no model holds whole: the gate's foreign-word path runs too.
        let qv = (q.len() == dim).then(|| QueryVector { vector: q, unknown_to_model: vec!["zzz".into(), "world".into()] });
        for query in ["hello world", "", "world 🦀", "zzz world"] {
            let r = search::search(idx, query, qv.as_ref(), &opts);
            let _ = needle::query::cite::citations(idx, &r);
        }
    }
    // What was read writes back, and that reads and writes back to the same bytes (compared as
    // bytes: a NaN read from the vectors or the cut would defeat `PartialEq`).
    let again = idx.to_bytes().expect("an index that was read writes back");
    let reread = Index::from_bytes(&again, "fuzz").expect("what needle writes, needle reads");
    assert!(reread.to_bytes().expect("writes back") == again, "the index does not round-trip");
}
