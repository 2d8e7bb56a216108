//! A head of a pieced index (of `common::tiny`: two chunks, one list, one piece of each kind)
//! and a piece made of the input: its first byte picks the kind and number, the rest is the
//! body, sealed with the head's build id so it gets past the frame to the parsers. The piece is
//! refused or added, never a panic, and whatever was added can be searched.
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use needle::query::pieces::{head_bytes, seal_piece, Head, PieceId, Pieced};
use needle::query::search::{Mode, QueryVector, SearchOptions};
use std::sync::LazyLock;

const BUILD: [u8; 8] = [1, 2, 3, 4, 5, 6, 7, 8];

static HEAD: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let idx = common::tiny();
    let h = &idx.header;
    head_bytes(&Head {
        build: BUILD,
        stamp: h.stamp.clone(),
        settings: h.settings.clone(),
        site: h.site.clone(),
        chunks: h.chunks.len() as u32,
        avgdl: h.bm25.avgdl(),
        nprobe: 1,
        lexical_candidates: 2,
        lexical_first: vec![String::new(), "m".into()],
        content_first: vec![0, 1],
        centroid_scales: vec![1.0 / 127.0],
        centroid_codes: vec![127, 0],
        analyzer: h.analysis.version,
        lang: h.analysis.main_lang().to_string(),
    })
    .expect("the head writes")
});

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else { return };
    let number = u32::from(pick >> 2 & 1);
    let id = match pick % 3 {
        0 => PieceId::Terms(number),
        1 => PieceId::Vectors(number),
        _ => PieceId::Chunks(number),
    };
    let mut reader = Pieced::from_head(&HEAD, "head.needle").expect("the head reads");
    if reader.add(id, &seal_piece(id, BUILD, body), "fuzz").is_err() {
        assert!(!reader.has(id), "a refused piece is not kept");
        return;
    }
    let qv = QueryVector { vector: vec![0.6, 0.8], unknown_to_model: vec!["zzz".into()] };
    for mode in [Mode::Bm25, Mode::Dense, Mode::Hybrid] {
        let opts = SearchOptions { mode, k: 5, cut: None, max_chunks: 4, ..Default::default() };
        for q in ["hello world", "zzz", ""] {
            let _ = reader.search(q, Some(&qv), &opts);
            let _ = reader.search(q, None, &opts);
        }
    }
});
