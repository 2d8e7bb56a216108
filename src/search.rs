//! Hybrid retrieval over a loaded index, and the gate. STUB (types are final).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Bm25,
    Dense,
    Hybrid,
}

#[derive(Debug, Clone)]
pub struct SearchOptions {
    pub mode: Mode,
    /// How many hits of the ungated ranking to return.
    pub k: usize,
    /// Cosine-distance cut of the gate; `None` takes the index's default.
    pub cut: Option<f32>,
    /// At most this many hits pass the gate.
    pub max_chunks: usize,
}

/// One hit of the ungated ranking (what `needle search` prints per hit).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    /// Chunk number in the index.
    pub chunk: usize,
    /// Page path relative to the site root.
    pub page: String,
    /// UTF-16 offsets into the page's canonical text.
    pub from: usize,
    pub to: usize,
    pub content: String,
    /// Cosine distance between the query and the chunk's embedded text.
    pub distance: f32,
    /// 1-based rank in the chosen mode's ranking.
    pub rank: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    pub embed: f64,
    pub bm25: f64,
    pub dense: f64,
    pub fuse: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    /// Top k of the ungated ranking.
    pub hits: Vec<Hit>,
    /// Indices into `hits` kept by the gate (empty = NO ANSWER).
    pub answer: Vec<usize>,
    pub mode: Mode,
    pub cut: f32,
    /// Milliseconds.
    pub timings: Timings,
}

use crate::fuse;
use crate::index::Index;

/// Milliseconds from a monotonic clock: `Instant` natively, `performance.now()` in the browser
/// (wasm32-unknown-unknown has no `Instant`).
#[cfg(not(target_arch = "wasm32"))]
pub fn now_ms() -> f64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64() * 1e3
}

#[cfg(target_arch = "wasm32")]
pub fn now_ms() -> f64 {
    #[wasm_bindgen::prelude::wasm_bindgen]
    extern "C" {
        #[wasm_bindgen(js_namespace = performance, js_name = now)]
        fn performance_now() -> f64;
    }
    performance_now()
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions { mode: Mode::Hybrid, k: 20, cut: None, max_chunks: 4 }
    }
}

/// Cosine distance of every chunk to the query (vectors are normalised: 1 − dot).
pub fn distances(index: &Index, query: &[f32]) -> Vec<f32> {
    let d = index.dim();
    index.vectors.chunks_exact(d).map(|v| crate::embed::cosine_distance(v, query)).collect()
}

/// Searches a loaded index. `query_vec` is the query's embedding; without it (the model is
/// not loaded yet) only BM25 can rank, distances are unknown (NaN) and nothing passes the
/// gate, whatever mode was asked for.
pub fn search(index: &Index, query: &str, query_vec: Option<&[f32]>, opts: &SearchOptions) -> SearchResult {
    let mut timings = Timings::default();
    let cut = opts.cut.unwrap_or(index.header.settings.cut);

    let t = now_ms();
    let bm25: Vec<usize> = index.header.bm25.rank(query).into_iter().map(|(c, _)| c).collect();
    timings.bm25 = now_ms() - t;

    let t = now_ms();
    let dist = query_vec.filter(|q| q.len() == index.dim()).map(|q| distances(index, q));
    let dense: Vec<usize> = match &dist {
        Some(dist) => {
            let mut order: Vec<usize> = (0..dist.len()).collect();
            order.sort_unstable_by(|&a, &b| dist[a].total_cmp(&dist[b]).then(a.cmp(&b)));
            order
        }
        None => Vec::new(),
    };
    timings.dense = now_ms() - t;

    let mode = if dist.is_none() { Mode::Bm25 } else { opts.mode };
    let t = now_ms();
    let ranking: Vec<usize> = match mode {
        Mode::Bm25 => bm25,
        Mode::Dense => dense,
        Mode::Hybrid => fuse::rrf(&[&bm25, &dense]).into_iter().map(|(c, _)| c).collect(),
    };
    timings.fuse = now_ms() - t;

    let hits: Vec<Hit> = ranking
        .iter()
        .take(opts.k)
        .enumerate()
        .filter_map(|(i, &c)| {
            let chunk = index.header.chunks.get(c)?;
            let page = index.header.pages.get(chunk.page as usize)?;
            Some(Hit {
                chunk: c,
                page: page.path.clone(),
                from: chunk.from as usize,
                to: chunk.to as usize,
                content: chunk.content.clone(),
                distance: dist.as_ref().and_then(|d| d.get(c).copied()).unwrap_or(f32::NAN),
                rank: i + 1,
            })
        })
        .collect();
    let answer = gate(&hits, cut, opts.max_chunks);
    SearchResult { hits, answer, mode, cut, timings }
}

/// Walks the ranking top-down and keeps at most `max_chunks` hits whose cosine distance is
/// under `cut`. Empty means NO ANSWER. An unknown (NaN) distance never passes.
pub fn gate(hits: &[Hit], cut: f32, max_chunks: usize) -> Vec<usize> {
    hits.iter().enumerate().filter(|(_, h)| h.distance < cut).map(|(i, _)| i).take(max_chunks).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::tests::tiny;

    #[test]
    fn the_gate_keeps_at_most_max_chunks_under_the_cut_in_rank_order() {
        let h = |d: f32| Hit { chunk: 0, page: "p".into(), from: 0, to: 1, content: "x".into(), distance: d, rank: 1 };
        let hits = [h(0.7), h(0.3), h(0.5), h(f32::NAN), h(0.1), h(0.2), h(0.4)];
        assert_eq!(gate(&hits, 0.6, 4), vec![1, 2, 4, 5]);
        assert!(gate(&hits, 0.05, 4).is_empty());
    }

    #[test]
    fn dense_ranks_by_cosine_distance_and_hybrid_fuses() {
        let idx = tiny();
        let r = search(&idx, "world", Some(&[0.0, 1.0]), &SearchOptions { mode: Mode::Dense, ..Default::default() });
        assert_eq!(r.hits[0].content, "world");
        assert!(r.hits[0].distance.abs() < 1e-6 && (r.hits[1].distance - 1.0).abs() < 1e-6);
        let r = search(&idx, "hello", Some(&[0.0, 1.0]), &SearchOptions { cut: Some(0.5), ..Default::default() });
        assert_eq!(r.mode, Mode::Hybrid);
        assert_eq!(r.answer.len(), 1, "only 'world' is under the cut");
        assert_eq!(r.hits[r.answer[0]].content, "world");
    }

    #[test]
    fn without_a_query_vector_search_is_lexical_and_answers_nothing() {
        let idx = tiny();
        let r = search(&idx, "hello", None, &SearchOptions::default());
        assert_eq!(r.mode, Mode::Bm25);
        assert_eq!(r.hits.len(), 1);
        assert!(r.hits[0].distance.is_nan());
        assert!(r.answer.is_empty());
    }
}
