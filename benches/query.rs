//! Query-path latency natively: BM25, dense scan, fusion, and the whole search without the
//! embedding, on the real fixture corpus's index tiled to 3,000 chunks (the size the goal is
//! set for). Needs the model (to build the index once): `./build.sh model`.
//!
//! cargo bench --bench query

use criterion::{criterion_group, criterion_main, Criterion};
use needle::build::{build_index, BuildOptions, LoadedModel};
use needle::model::ModelFiles;
use needle::query::bm25::Bm25;
use needle::query::index::Index;
use needle::query::search::{self, Fusion, Mode, SearchOptions};
use std::hint::black_box;
use std::path::Path;

const TARGET_CHUNKS: usize = 3000;

fn fixture_index(model: &LoadedModel) -> Index {
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-nomicon.needle");
    if let Ok(bytes) = std::fs::read(&cache) {
        if let Ok(idx) = Index::from_bytes(&bytes, "bench cache") {
            if idx.header.stamp.model == model.stamp {
                return idx;
            }
        }
    }
    let site = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nomicon/site");
    let (idx, _) = build_index(&site, model, &BuildOptions::default(), None).expect("build the fixture index");
    std::fs::write(&cache, idx.to_bytes().expect("serialise")).expect("cache the index");
    idx
}

/// Repeats the real chunks (and their vectors) until there are `n`, rebuilding BM25 over them.
fn tile(idx: &Index, n: usize) -> Index {
    let mut out = idx.clone();
    let orig = idx.header.chunks.len();
    let mut i = 0;
    while out.header.chunks.len() < n {
        let c = idx.header.chunks[i % orig].clone();
        out.header.pages[c.page as usize].chunk_count += 1;
        out.header.chunks.push(c);
        out.vectors.extend_from_slice(idx.vector(i % orig));
        i += 1;
    }
    let texts: Vec<String> = out.header.chunks.iter().map(|c| c.embedded_text()).collect();
    out.header.bm25 = Bm25::build(texts.iter().map(String::as_str));
    out
}

fn bench(c: &mut Criterion) {
    let model = LoadedModel::load(&ModelFiles::locate().expect("model: run ./build.sh model")).expect("load model");
    let idx = tile(&fixture_index(&model), TARGET_CHUNKS);
    let emb = model.embedder().expect("embedder");
    let q = "Can unsafe code trust a safe trait implementation such as Ord to be correct?";
    let qv = emb.query(q).expect("embed");
    let n = idx.header.chunks.len();

    c.bench_function(&format!("bm25 rank ({n} chunks)"), |b| b.iter(|| black_box(idx.header.bm25.rank(black_box(q)))));
    // A search box's keystrokes: the last word typed as a prefix, and a misspelt word.
    for (what, keys) in [("prefix", "unsafe trai"), ("typo", "unsfe trait ")] {
        c.bench_function(&format!("bm25 rank, {what} ({n} chunks)"), |b| b.iter(|| black_box(idx.header.bm25.rank(black_box(keys)))));
    }
    c.bench_function(&format!("dense scan ({n} chunks)"), |b| b.iter(|| black_box(search::distances(&idx, black_box(&qv.vector)))));
    let bm: Vec<usize> = idx.header.bm25.rank(q).into_iter().map(|(c, _)| c).collect();
    let dist = search::distances(&idx, &qv.vector);
    let mut dense: Vec<usize> = (0..n).collect();
    dense.sort_by(|&a, &b| dist[a].total_cmp(&dist[b]));
    c.bench_function(&format!("rrf fusion ({n} chunks)"), |b| b.iter(|| black_box(needle::query::fuse::rrf(&[&bm, &dense]))));
    c.bench_function(&format!("page list ({n} chunks)"), |b| b.iter(|| black_box(search::page_order(&idx, black_box(&dist)))));
    for (mode, fusion) in
        [(Mode::Bm25, Fusion::Pages), (Mode::Dense, Fusion::Pages), (Mode::Hybrid, Fusion::Plain), (Mode::Hybrid, Fusion::Pages)]
    {
        let opts = SearchOptions { mode, fusion, ..SearchOptions::default() };
        let name = if mode == Mode::Hybrid { format!("{mode:?} {fusion:?}") } else { format!("{mode:?}") };
        c.bench_function(&format!("search {name} without embedding ({n} chunks)"), |b| {
            b.iter(|| black_box(search::search(&idx, black_box(q), Some(&qv), &opts)))
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(50);
    targets = bench
}
criterion_main!(benches);
