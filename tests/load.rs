//! Issue 6, point 7, natively: 10,000 hybrid queries in a row (real model, real index) leave
//! the heap flat, and queries that are huge, empty, punctuation or emoji get hits or NO ANSWER,
//! never an error or a panic. The heap is measured by a counting global allocator: live bytes
//! after a warm-up pass over every query (tract plans once per input length) against live bytes
//! after the 10,000. Run with `--nocapture` to see the numbers.
#![cfg(feature = "native")]

use needle::build::LoadedModel;
use needle::model::ModelFiles;
use needle::query::index::Index;
use needle::query::search::{self, Mode, SearchOptions};
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            LIVE.fetch_add(new_size, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The real index of the compat fixture (three nomicon pages, 32 chunks) and the model.
fn setup() -> (Index, needle::embed::Embedder) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(root.join("tests/fixtures/compat/v1/index.needle")).expect("fixture index");
    let idx = Index::from_bytes(&bytes, "compat v1").expect("read");
    // The fixture was built with the int8 form, which every models folder keeps beside the
    // shipped one; the index refuses any other.
    let files = ModelFiles::locate().expect("model files");
    let int8 = ModelFiles { model: files.dir.join(needle::model::INT8_FILE), ..files };
    let model = LoadedModel::load(&int8).expect("model");
    idx.check_model(&model.stamp, "compat v1").expect("same model");
    (idx, model.embedder().expect("embedder"))
}

fn odd_queries() -> Vec<String> {
    vec![
        "why is unsafe code needed? ".repeat(370), // ≈ 10,000 characters
        "x".repeat(10_000),
        "?!.,;:".into(),
        "🦀🔥".into(),
        "🦀".repeat(3000),
        String::new(),
        "   \n\t  ".into(),
        "\u{0}\u{1}\u{7f}".into(),
        "שלום עולם مرحبا".into(),
        "e\u{301}\u{301}\u{301} 𝔘𝔫𝔦𝔠𝔬𝔡𝔢".into(),
        "<script>alert(1)</script>".into(),
    ]
}

fn check(idx: &Index, emb: &needle::embed::Embedder, q: &str, mode: Mode) {
    let v = emb.query(q).unwrap_or_else(|e| panic!("embedding {:?}… failed: {e}", q.chars().take(40).collect::<String>()));
    assert_eq!(v.vector.len(), idx.dim());
    let r = search::search(idx, q, Some(&v), &SearchOptions { mode, k: 8, cut: None, max_chunks: 4, ..Default::default() });
    assert!(r.hits.len() <= 8);
    assert!(r.answer.len() <= 4 && r.answer.iter().all(|&i| i < r.hits.len()), "the gate keeps hits it returned");
    for h in &r.hits {
        assert!(h.distance.is_finite() && (-1e-3..=2.001).contains(&h.distance), "cosine distance {}", h.distance);
    }
}

#[test]
fn odd_queries_get_hits_or_no_answer_never_an_error() {
    let (idx, emb) = setup();
    for q in odd_queries() {
        for mode in [Mode::Bm25, Mode::Dense, Mode::Hybrid] {
            check(&idx, &emb, &q, mode);
        }
    }
    // Punctuation and emoji carry no word: BM25 finds nothing, and the gate refuses them.
    let v = emb.query("?!.,;:").expect("embed");
    let r =
        search::search(&idx, "?!.,;:", Some(&v), &SearchOptions { mode: Mode::Bm25, k: 8, cut: None, max_chunks: 4, ..Default::default() });
    assert!(r.hits.is_empty());
}

#[test]
fn ten_thousand_queries_leave_the_heap_flat() {
    let (idx, emb) = setup();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nomicon");
    let mut queries: Vec<String> = Vec::new();
    for file in ["qrels.jsonl", "ood.jsonl"] {
        for line in std::fs::read_to_string(fixture.join(file)).expect("queries").lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("json line");
            for key in ["q_doc", "q_ticket", "query"] {
                if let Some(q) = v[key].as_str() {
                    queries.push(q.to_string());
                }
            }
        }
    }
    queries.extend(odd_queries());
    assert!(queries.len() > 80);
    let opts = SearchOptions { mode: Mode::Hybrid, k: 20, cut: None, max_chunks: 4, ..Default::default() };
    let run = |q: &str| {
        let v = emb.query(q).expect("embed");
        let r = search::search(&idx, q, Some(&v), &opts);
        std::hint::black_box(needle::query::cite::citations(&idx, &r));
    };
    // Warm-up: every query once, so every input length has been planned.
    for q in &queries {
        run(q);
    }
    let (live_before, rss_before) = (LIVE.load(Ordering::Relaxed), rss_kib());
    let start = std::time::Instant::now();
    for i in 0..10_000 {
        run(&queries[i % queries.len()]);
    }
    let (live_after, rss_after) = (LIVE.load(Ordering::Relaxed), rss_kib());
    println!(
        "10,000 hybrid queries in {:.1} s: live heap {} → {} bytes, RSS {:?} → {:?} KiB",
        start.elapsed().as_secs_f64(),
        live_before,
        live_after,
        rss_before,
        rss_after
    );
    assert!(live_after <= live_before + 64 * 1024, "the heap grew by {} bytes over 10,000 queries", live_after.saturating_sub(live_before));
}
