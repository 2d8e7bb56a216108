//! Hybrid retrieval over a loaded index, and the gate.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Bm25,
    Dense,
    Hybrid,
}

impl Mode {
    /// The mode's name, as serialised and as the CLI takes it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Bm25 => "bm25",
            Mode::Dense => "dense",
            Mode::Hybrid => "hybrid",
        }
    }
}

/// How the hybrid ranking fuses its lists (`Mode::Hybrid` only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fusion {
    /// BM25 and dense by reciprocal rank fusion: needle's method before the page list, kept so
    /// the comparison can be run again (`--fusion plain`).
    Plain,
    /// The plain fusion's first hit, then BM25, dense and the page list ([`page_order`]) fused
    /// by reciprocal rank fusion. A reader who describes a symptom in their own words rarely
    /// names the answer's sentence, but the page that holds it is often nearer their question
    /// than any one chunk of it: the page list lifts its chunks into the hits after the first.
    /// The first stays the one BM25 and dense agree on, which a doc-phrased question usually
    /// finds exactly (a page list alone moves it down). The gate walks only the chunks plain
    /// fusion also ranks within its depth (`SearchResult::walked`): the page list chooses which
    /// of them answer, and never answers a question plain fusion refuses. An index in pieces has
    /// no page vectors and fuses plainly.
    #[default]
    Pages,
}
impl Fusion {
    /// The fusion's name, as serialised and as the CLI takes it.
    pub fn name(self) -> &'static str {
        match self {
            Fusion::Plain => "plain",
            Fusion::Pages => "pages",
        }
    }
}

#[derive(Debug, Clone)]
pub struct SearchOptions {
    pub mode: Mode,
    /// How a hybrid ranking fuses.
    pub fusion: Fusion,
    /// How many hits of the ungated ranking to show. The gate does not depend on it: it walks
    /// the index's gate depth, and `hits` grows to the last answered hit if that lies deeper.
    pub k: usize,
    /// Cosine-distance cut of the gate, met by every query alike (the plain cut gate, today's
    /// method); `None` takes the index's gate.
    pub cut: Option<f32>,
    /// At most this many hits pass the gate.
    pub max_chunks: usize,
    /// The reader's language (a BCP 47 tag): the query is analyzed in it and only pages in it
    /// are searched. `None`: the site's main language's analyzer, over every page.
    pub lang: Option<String>,
}

/// One hit of the ungated ranking (what `needle search` prints per hit).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    /// Chunk number in the index.
    pub chunk: usize,
    /// Page path relative to the site root.
    pub page: String,
    /// `text`, `pdf`, `media` or `csv`.
    pub kind: String,
    /// The URL that cites it (`page#char=from,to`, `file.pdf#page=N`, `clip.webm#t=a,b`,
    /// `table.csv#row=a-b`), relative to the site root.
    pub url: String,
    /// Where a reader following it lands: `url`, or for media played on a page, that page
    /// (`cite::chunk_link`).
    pub link: String,
    /// UTF-16 offsets into the page's canonical text.
    pub from: usize,
    pub to: usize,
    pub content: String,
    /// Cosine distance between the query and the chunk's embedded text.
    pub distance: f32,
    /// 1-based rank in the chosen mode's ranking.
    pub rank: usize,
    /// For a query in a language the model does not read: the share of the query's words the
    /// chunk holds, weighted by idf (what the lexical gate meets, `SearchResult::lexical_cut`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<f32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    pub embed: f64,
    pub bm25: f64,
    pub dense: f64,
    pub fuse: f64,
}

/// What a search tells its reader besides the ranked hits, which it always lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The gate kept chunks: needle states an answer and cites them.
    Answer,
    /// No answer is stated, and none was asked for: a keyword query with a word the site knows
    /// (or a search without the model, whose gate cannot speak yet) lists what ranks. Words of
    /// it the site does not know are named beside the results (`SearchResult::unknown`).
    Results,
    /// A question no passage answers, or a keyword query none of whose words the site knows:
    /// the hits are the closest pages, not an answer.
    NoAnswer,
}

impl Verdict {
    /// The verdict on a search whose gate kept `answered` chunks of `hits` hits: `gated` when a
    /// query vector met the gate, `keywords` when the query reads as keywords, `matched` when a
    /// word of it is the site's in some form (`Plan::matched`).
    pub fn of(answered: bool, hits: usize, gated: bool, keywords: bool, matched: bool) -> Verdict {
        match () {
            _ if answered => Verdict::Answer,
            _ if hits > 0 && (!gated || keywords && matched) => Verdict::Results,
            _ => Verdict::NoAnswer,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    /// Top k of the ungated ranking (more when the gate kept a hit below k).
    pub hits: Vec<Hit>,
    /// Indices into `hits` kept by the gate (empty = NO ANSWER).
    pub answer: Vec<usize>,
    /// Whether the result states an answer, lists keyword results, or says no passage answers.
    pub verdict: Verdict,
    pub mode: Mode,
    /// The cut this query met (the index's gate may lower it for foreign words).
    pub cut: f32,
    /// For a query in a language the model does not read, when the index chose a lexical gate
    /// for it: the coverage (`Hit::coverage`) a hit must exceed to answer. `cut` then plays no
    /// part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lexical_cut: Option<f32>,
    /// The query's words that neither the site nor the model knows ([`foreign_in`]).
    pub foreign: Vec<String>,
    /// The query's words the site does not know (`Plan::unknown`).
    pub unknown: Vec<String>,
    /// A keyword query as matched when a word of it was a typo: each such word replaced by the
    /// site term it most likely meant (`Plan::corrected`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrected: Option<String>,
    /// The site terms the query's words reached that a result marks (`Plan::marked`).
    pub terms: Vec<String>,
    /// Milliseconds.
    pub timings: Timings,
    /// Positions in the ranking the gate walked, best first (those below `hits.len()` index
    /// `hits`): the top of the ranking to the gate's depth, and with the page list only those
    /// plain fusion also ranks there ([`Fusion::Pages`]). `needle eval` re-gates these at other cuts.
    #[serde(skip)]
    pub walked: Vec<usize>,
}

use crate::query::fuse;
use crate::query::index::{ChunkEntry, Gate, Index, PageEntry, Settings};
use crate::query::lexicon::{Plan, Vocabulary};

/// A query as the model saw it: its embedding, and the words of it (lowercased, as
/// [`crate::query::bm25::tokenize`] makes them) that the model's word-piece vocabulary does not hold whole —
/// names and jargon it had to spell out in pieces. The gate asks which of those the site never
/// uses either ([`foreign_words`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueryVector {
    pub vector: Vec<f32>,
    pub unknown_to_model: Vec<String>,
}

/// The query's words that neither the site nor the model knows: its distinct words the site
/// does not know ([`Plan::unknown`]: of a question, those it holds in none of their inflected
/// forms, so a reader's "corrupts" is the site's "corrupt"; of a keyword query, those that
/// reached nothing, so "worksapces" is the site's "workspaces") that are in
/// `q.unknown_to_model`. An adjacent out-of-domain question usually names such a thing
/// ("tokio", "PyO3"); a reader describing a symptom in plain words rarely does.
pub fn foreign_words(index: &Index, query: &str, q: &QueryVector) -> Vec<String> {
    foreign_in(&Plan::new(&index.header.bm25, &index.header.analyzer(None), query), q)
}

/// [`foreign_words`] of a planned query.
pub fn foreign_in(plan: &Plan, q: &QueryVector) -> Vec<String> {
    plan.unknown().into_iter().filter(|t| q.unknown_to_model.contains(t)).collect()
}

impl Settings {
    /// The cut a query with `foreign` foreign words meets under this index's gate.
    pub fn cut_for(&self, foreign: usize) -> f32 {
        match self.gate {
            Gate::Cut => self.cut,
            Gate::Auto { foreign_penalty, .. } => self.cut - foreign_penalty * foreign.min(2) as f32 / 2.0,
        }
    }
}

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

/// Where a chunk's entry and its page's are read: a whole index, or the content pieces a reader
/// of an index in pieces has fetched.
pub trait Entries {
    /// Chunk `chunk`'s page entry and its own entry, if this source has them.
    fn entry(&self, chunk: usize) -> Option<(&PageEntry, &ChunkEntry)>;

    /// Chunk `chunk` as a hit at `rank` (1-based).
    fn hit(&self, chunk: usize, distance: f32, rank: usize) -> Option<Hit> {
        let (page, c) = self.entry(chunk)?;
        Some(Hit::new(page, c, chunk, distance, rank))
    }
}

impl Entries for Index {
    fn entry(&self, chunk: usize) -> Option<(&PageEntry, &ChunkEntry)> {
        let c = self.header.chunks.get(chunk)?;
        Some((self.header.pages.get(c.page as usize)?, c))
    }
}

impl Hit {
    /// Chunk number `chunk`, entry `c` of `page`, as a hit at `rank` (1-based): the one place a
    /// `Hit` is made, from a whole index or from its pieces.
    pub(crate) fn new(page: &PageEntry, c: &ChunkEntry, chunk: usize, distance: f32, rank: usize) -> Hit {
        Hit {
            chunk,
            page: page.path.clone(),
            kind: c.locator.kind().to_string(),
            url: crate::query::cite::chunk_url(page, c),
            link: crate::query::cite::chunk_link(page, c),
            from: c.from as usize,
            to: c.to as usize,
            content: c.content.clone(),
            distance,
            rank,
            coverage: None,
        }
    }
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions { mode: Mode::Hybrid, fusion: Fusion::default(), k: 20, cut: None, max_chunks: 4, lang: None }
    }
}

/// Cosine distance `1 − a·b` of two L2-normalised vectors (0 = same direction, 2 = opposite).
pub fn cosine_distance(a: &[f32], b: &[f32]) -> f32 {
    1.0 - dot(a, b)
}

/// Dot product (the cosine similarity of normalised vectors), over the shorter of the two.
/// Eight independent partial sums, so the compiler vectorises it (SSE/AVX natively, simd128 in
/// WebAssembly); a single running sum would be a serial chain of float adds. The summation
/// order is fixed, so every platform gets the same bits.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 8;
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0f32; LANES];
    let (mut ca, mut cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    for (x, y) in (&mut ca).zip(&mut cb) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i];
        }
    }
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

/// Cosine distance of every chunk to the query (vectors are normalised: 1 − dot).
pub fn distances(index: &Index, query: &[f32]) -> Vec<f32> {
    let d = index.dim();
    index.vectors.chunks_exact(d).map(|v| cosine_distance(v, query)).collect()
}

/// Where the two rankings of a query come from: a whole index, or the pieces of one that a
/// browser fetched (`query::pieces`). [`rank`] is the one search over either.
pub(crate) trait Source: Vocabulary {
    fn settings(&self) -> &Settings;
    /// Whether chunk `chunk` is in language `lang` (a primary subtag), as far as this source
    /// knows (an index in pieces does not know: every chunk is).
    fn in_lang(&self, _chunk: usize, _lang: &str) -> bool {
        true
    }
    /// The language a reader asking in `lang` searches (`Analysis::reader_lang`).
    fn reader_lang(&self, lang: Option<&str>) -> &str;
    /// The model's dimension (a query vector of another length ranks nothing).
    fn dim(&self) -> usize;
    /// The BM25 ranking of every chunk that shares a term with the planned query, best first.
    fn lexical(&self, plan: &Plan) -> Vec<usize>;
    /// The share of the planned query's words each of `chunks` holds (`bm25::coverage`).
    fn coverage(&self, plan: &Plan, chunks: &[usize]) -> Vec<f32>;
    /// The chunks this source can score against `query`, nearest first, and their distances;
    /// `None` when it holds no vectors. `lexical` is the query's lexical ranking (an index in
    /// pieces scores its first chunks too; a whole index scores every chunk anyway).
    fn dense(&self, query: &[f32], lexical: &[usize]) -> Option<Dense>;
    /// The page list of [`Fusion::Pages`] for a dense ranking of this source; `None` when the
    /// source cannot rank every page (an index in pieces).
    fn page_order(&self, _dense: &Dense) -> Option<Vec<usize>> {
        None
    }
}

/// A dense ranking: the chunks scored, nearest first, with their cosine distances.
pub(crate) struct Dense {
    pub order: Vec<usize>,
    pub distances: Distances,
}

/// Cosine distances of the chunks a dense ranking scored.
pub(crate) enum Distances {
    /// Of every chunk, by chunk number (a whole index).
    Every(Vec<f32>),
    /// Of some chunks (the lists a query probed); any other chunk's is unknown.
    Probed(std::collections::HashMap<usize, f32>),
}

impl Distances {
    /// The distance of `chunk`, NaN when unknown (NaN never passes the gate).
    fn of(&self, chunk: usize) -> f32 {
        match self {
            Distances::Every(d) => d.get(chunk).copied(),
            Distances::Probed(d) => d.get(&chunk).copied(),
        }
        .unwrap_or(f32::NAN)
    }
}

/// A query ranked and gated, before its hits are made: what [`rank`] decides.
pub(crate) struct Ranked {
    /// The hits to show, in rank order: (chunk, cosine distance).
    pub shown: Vec<(usize, f32)>,
    pub answer: Vec<usize>,
    pub mode: Mode,
    pub cut: f32,
    /// The lexical gate's cut, when it decided (`SearchResult::lexical_cut`).
    pub lexical_cut: Option<f32>,
    /// Under the lexical gate, each ranked chunk's coverage by position, as far as the gate
    /// walked or the hits reach (`Hit::coverage`).
    pub coverage: Option<Vec<f32>>,
    pub foreign: Vec<String>,
    /// How the query's words met the site's vocabulary.
    pub plan: Plan,
    /// A query vector met the gate (without one the gate cannot speak).
    pub gated: bool,
    pub timings: Timings,
    /// The lexical ranking the search fused (an index in pieces names its first chunks'
    /// content pieces from it).
    pub lexical: Vec<usize>,
    /// Positions in the ranking the gate walked (`SearchResult::walked`).
    pub walked: Vec<usize>,
}

impl Vocabulary for Index {
    fn df(&self, term: &str) -> Option<usize> {
        self.header.bm25.df(term)
    }

    fn with_prefix(&self, prefix: &str, each: &mut dyn FnMut(&str, usize)) {
        self.header.bm25.with_prefix(prefix, each)
    }
}

impl Source for Index {
    fn settings(&self) -> &Settings {
        &self.header.settings
    }

    fn reader_lang(&self, lang: Option<&str>) -> &str {
        self.header.analysis.reader_lang(lang)
    }

    fn in_lang(&self, chunk: usize, lang: &str) -> bool {
        let page = self.header.chunks.get(chunk).map_or(usize::MAX, |c| c.page as usize);
        self.header.analysis.langs.len() < 2 || self.header.analysis.lang_of(page) == lang
    }

    fn dim(&self) -> usize {
        Index::dim(self)
    }

    fn lexical(&self, plan: &Plan) -> Vec<usize> {
        self.header.bm25.rank_plan(plan).into_iter().map(|(c, _)| c).collect()
    }

    fn coverage(&self, plan: &Plan, chunks: &[usize]) -> Vec<f32> {
        let bm = &self.header.bm25;
        crate::query::bm25::coverage(plan, bm.len(), chunks, |term, visit| bm.visit_postings(term, visit))
    }

    fn dense(&self, query: &[f32], _lexical: &[usize]) -> Option<Dense> {
        // The lexical part of a split index has no vectors to rank by yet: as without the model.
        if !self.has_vectors() {
            return None;
        }
        let dist = distances(self, query);
        let mut order: Vec<usize> = (0..dist.len()).collect();
        order.sort_unstable_by(|&a, &b| dist[a].total_cmp(&dist[b]).then(a.cmp(&b)));
        Some(Dense { order, distances: Distances::Every(dist) })
    }

    fn page_order(&self, dense: &Dense) -> Option<Vec<usize>> {
        match &dense.distances {
            Distances::Every(dist) => Some(page_order(self, dist)),
            Distances::Probed(_) => None,
        }
    }
}

/// The lexical gate's evidence for `query` asked in `lang` (a primary subtag the site has
/// pages in): the highest coverage (`bm25::coverage`) among the chunks the gate walks, the top
/// of the lexical ranking of that language's pages. What `build::gate` measures a site's
/// background questions by.
pub fn lexical_evidence(index: &Index, query: &str, lang: &str) -> f32 {
    let plan = Plan::new(index, &index.header.analyzer(Some(lang)), query);
    let mut walked = index.lexical(&plan);
    walked.retain(|&c| index.in_lang(c, lang));
    walked.truncate(index.header.settings.gate_depth as usize);
    index.coverage(&plan, &walked).into_iter().fold(0.0, f32::max)
}

/// Every chunk ordered by its page's cosine distance to the query, then by its own distance
/// `dist` (ties by chunk number): the page list of [`Fusion::Pages`]. A page's vector is the
/// normalised mean of its chunks' vectors, so its cosine similarity to the query is the sum of
/// its chunks' similarities over the length of their vector sum ([`Index::page_norms`]): the
/// index stores nothing for it, and a query adds one pass over the chunk distances.
pub fn page_order(index: &Index, dist: &[f32]) -> Vec<usize> {
    let norms = index.page_norms();
    let mut similarity = vec![0f32; norms.len()];
    let page_of = |c: usize| index.header.chunks.get(c).map(|e| e.page as usize).filter(|&p| p < norms.len());
    for (c, d) in dist.iter().enumerate() {
        if let Some(p) = page_of(c) {
            similarity[p] += 1.0 - d;
        }
    }
    let page_distance: Vec<f32> = similarity.iter().zip(norms).map(|(s, n)| if *n > 0.0 { 1.0 - s / n } else { f32::INFINITY }).collect();
    let key = |c: usize| page_of(c).map_or(f32::INFINITY, |p| page_distance[p]);
    let mut order: Vec<usize> = (0..dist.len()).collect();
    order.sort_unstable_by(|&a, &b| key(a).total_cmp(&key(b)).then(dist[a].total_cmp(&dist[b])).then(a.cmp(&b)));
    order
}

/// Searches a loaded index. `query_vec` is the query as the model saw it; without it (the
/// model is not loaded yet) only BM25 can rank, distances are unknown (NaN) and nothing passes
/// the gate, whatever mode was asked for.
pub fn search(index: &Index, query: &str, query_vec: Option<&QueryVector>, opts: &SearchOptions) -> SearchResult {
    search_planned(index, query, Plan::new(index, &index.header.analyzer(opts.lang.as_deref()), query), query_vec, opts)
}

/// [`search`] of a query already planned over this index: the front ends plan once, to give the
/// model the text it reads ([`Plan::embedded`]) and to search.
pub fn search_planned(index: &Index, query: &str, plan: Plan, query_vec: Option<&QueryVector>, opts: &SearchOptions) -> SearchResult {
    let r = rank(index, plan, query_vec, opts);
    let hits = r.hits(index);
    r.into_result(query, hits, index.header.chunks.len())
}

impl Ranked {
    /// The hits shown, made from `entries` (those it lacks left out), with their coverage under
    /// the lexical gate.
    pub(crate) fn hits(&self, entries: &impl Entries) -> Vec<Hit> {
        let coverage = |i: usize| self.coverage.as_ref().map(|c| c.get(i).copied().unwrap_or(0.0));
        self.shown
            .iter()
            .enumerate()
            .filter_map(|(i, &(c, d))| entries.hit(c, d, i + 1).map(|h| Hit { coverage: coverage(i), ..h }))
            .collect()
    }

    /// The search result of this ranking of `query` over a site of `chunks` chunks, with its
    /// hits made (`Entries::hit`).
    pub(crate) fn into_result(self, query: &str, hits: Vec<Hit>, chunks: usize) -> SearchResult {
        let unknown = self.plan.unknown();
        let verdict = Verdict::of(!self.answer.is_empty(), hits.len(), self.gated, self.plan.keywords, self.plan.matched());
        SearchResult {
            hits,
            answer: self.answer,
            verdict,
            mode: self.mode,
            cut: self.cut,
            lexical_cut: self.lexical_cut,
            foreign: self.foreign,
            unknown,
            corrected: self.plan.corrected(query),
            terms: self.plan.marked(chunks),
            timings: self.timings,
            walked: self.walked,
        }
    }
}

/// The search of [`search`] over any [`Source`]: both rankings, their fusion and the gate.
pub(crate) fn rank(source: &impl Source, plan: Plan, query_vec: Option<&QueryVector>, opts: &SearchOptions) -> Ranked {
    let settings = source.settings();
    let mut timings = Timings::default();

    // Only a reader who named a language has the others' pages left out.
    let reader = source.reader_lang(opts.lang.as_deref()).to_string();
    let only = opts.lang.as_ref().map(|_| reader.as_str());
    let t = now_ms();
    let mut lexical = source.lexical(&plan);
    if let Some(lang) = only {
        lexical.retain(|&c| source.in_lang(c, lang));
    }
    timings.bm25 = now_ms() - t;

    // The model reads English: for a reader in another language it neither ranks nor gates
    // (the search is lexical, and the lexical gate below decides), so it never answers or
    // refuses for a language it does not know.
    let t = now_ms();
    let model_reads = model_reads(&reader);
    let dense =
        query_vec.filter(|q| model_reads && q.vector.len() == source.dim()).and_then(|q| source.dense(&q.vector, &lexical)).map(|mut d| {
            if let Some(lang) = only {
                d.order.retain(|&c| source.in_lang(c, lang));
            }
            d
        });
    timings.dense = now_ms() - t;

    // Foreign words ask the model's vocabulary too: only a query the model saw has them.
    let foreign = match (&dense, query_vec) {
        (Some(_), Some(q)) => foreign_in(&plan, q),
        _ => Vec::new(),
    };
    let cut = opts.cut.unwrap_or_else(|| settings.cut_for(foreign.len()));

    let mode = if dense.is_none() { Mode::Bm25 } else { opts.mode };
    let t = now_ms();
    let empty = Vec::new();
    let dense_order = dense.as_ref().map_or(&empty, |d| &d.order);
    // The gate walks the index's depth whatever k is asked for, so the CLI, the widget, the API
    // and eval give one question one answer; the hits shown reach at least the last answer.
    let depth = settings.gate_depth as usize;
    // With the page list, the chunks the gate may answer with are plain fusion's top `depth`:
    // the page list orders them but never widens them, so a question plain fusion refuses is
    // refused (a page near an out-of-domain question would otherwise lift its chunks into the
    // walk: 2 more bluffs of 30 on the Edition Guide).
    let (ranking, walkable): (Vec<usize>, Option<Vec<usize>>) = match mode {
        Mode::Bm25 => (lexical.clone(), None),
        Mode::Dense => (dense_order.clone(), None),
        Mode::Hybrid => {
            let plain: Vec<usize> = fuse::rrf(&[&lexical, dense_order]).into_iter().map(|(c, _)| c).collect();
            let pages = dense.as_ref().filter(|_| opts.fusion == Fusion::Pages).and_then(|d| source.page_order(d));
            match (pages, plain.first().copied()) {
                (Some(pages), Some(first)) => {
                    let fused = std::iter::once(first)
                        .chain(fuse::rrf(&[&lexical, dense_order, &pages]).into_iter().map(|(c, _)| c).filter(|&c| c != first))
                        .collect();
                    (fused, Some(plain.into_iter().take(depth).collect()))
                }
                _ => (plain, None),
            }
        }
    };
    timings.fuse = now_ms() - t;

    let distance = |c: usize| dense.as_ref().map_or(f32::NAN, |d| d.distances.of(c));
    let walked: Vec<usize> = (0..ranking.len().min(depth)).filter(|&i| walkable.as_ref().is_none_or(|w| w.contains(&ranking[i]))).collect();
    // The model does not read the reader's language: the words decide, where the index chose a
    // lexical gate for that language (`build::gate`); elsewhere no answer is stated.
    let lexical_cut = if model_reads { None } else { settings.lexical_cut(&reader) };
    let coverage = lexical_cut.map(|_| source.coverage(&plan, &ranking[..ranking.len().min(depth.max(opts.k))]));
    let answer = match (&coverage, lexical_cut) {
        (Some(cov), Some(lc)) => lexical_walk(&walked, |i| cov.get(i).copied().unwrap_or(0.0), lc, opts.max_chunks),
        _ => gate_walk(&walked, |i| distance(ranking[i]), cut, opts.max_chunks),
    };
    let shown = opts.k.max(answer.last().map_or(0, |&i| i + 1));
    let shown = ranking.iter().take(shown).map(|&c| (c, distance(c))).collect();
    let gated = dense.is_some() || lexical_cut.is_some();
    Ranked { shown, answer, mode, cut, lexical_cut, coverage, foreign, plan, gated, timings, lexical, walked }
}

/// Whether the model (all-MiniLM-L6-v2, trained on English) reads text in `lang` (a primary
/// subtag): English, or a language not known ("und": an index built before languages were told
/// apart, or a page no detector could place).
pub fn model_reads(lang: &str) -> bool {
    matches!(lang, "en" | crate::query::analyze::UNDETERMINED)
}

/// Walks `hits` at the positions `walked` (a search's `SearchResult::walked`), in order, and
/// keeps at most `max_chunks` whose cosine distance is under `cut`. Empty means NO ANSWER. An
/// unknown (NaN) distance, or a position past the hits, never passes.
pub fn gate(hits: &[Hit], walked: &[usize], cut: f32, max_chunks: usize) -> Vec<usize> {
    gate_walk(walked, |i| hits.get(i).map_or(f32::NAN, |h| h.distance), cut, max_chunks)
}

/// The lexical gate over `hits` (a search's hits with their `coverage`, at the positions
/// `walked`): at most `max_chunks` whose coverage exceeds `lexical_cut`.
pub fn lexical_gate(hits: &[Hit], walked: &[usize], lexical_cut: f32, max_chunks: usize) -> Vec<usize> {
    lexical_walk(walked, |i| hits.get(i).and_then(|h| h.coverage).unwrap_or(0.0), lexical_cut, max_chunks)
}

/// The lexical gate over positions: at most `max_chunks` whose coverage exceeds `lexical_cut`.
fn lexical_walk(walked: &[usize], coverage_at: impl Fn(usize) -> f32, lexical_cut: f32, max_chunks: usize) -> Vec<usize> {
    walked.iter().copied().filter(|&i| coverage_at(i) > lexical_cut).take(max_chunks).collect()
}

/// The gate over positions: `distance_at(position)` for each walked position, in order.
fn gate_walk(walked: &[usize], distance_at: impl Fn(usize) -> f32, cut: f32, max_chunks: usize) -> Vec<usize> {
    walked.iter().copied().filter(|&i| distance_at(i) < cut).take(max_chunks).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_distance_of_normalised_vectors() {
        let a = [0.6, 0.8];
        assert!(cosine_distance(&a, &a).abs() < 1e-6);
        assert!((cosine_distance(&a, &[-0.6, -0.8]) - 2.0).abs() < 1e-6);
        assert!((cosine_distance(&[1.0, 0.0], &[0.0, 1.0]) - 1.0).abs() < 1e-6);
    }

    #[test]
    fn dot_matches_a_plain_sum_for_every_length() {
        for n in 0..40 {
            let a: Vec<f32> = (0..n).map(|i| ((i * 7 % 11) as f32 - 5.0) / 8.0).collect();
            let b: Vec<f32> = (0..n).map(|i| ((i * 3 % 13) as f32 - 6.0) / 4.0).collect();
            let plain: f64 = a.iter().zip(&b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
            assert!((f64::from(dot(&a, &b)) - plain).abs() < 1e-5, "n = {n}");
        }
        assert_eq!(dot(&[1.0, 2.0, 3.0], &[4.0]), 4.0, "the shorter length counts");
    }

    use crate::query::index::tests::tiny;

    #[test]
    fn foreign_words_are_unknown_to_both_the_site_and_the_model_and_lower_the_auto_cut() {
        let mut idx = tiny();
        // "hello" is the site's word, "worlds" a form of it ("world"); "the" a stop word; "tokio"
        // and "zzz" neither the site's nor the model's; "extra" is unknown to the site but a word
        // the model holds whole.
        let unknown = ["hello", "worlds", "tokio", "zzz", "the"].map(String::from).to_vec();
        let qv = QueryVector { vector: vec![0.6, 0.8], unknown_to_model: unknown };
        let q = "hello worlds the Tokio tokio zzz extra";
        assert_eq!(foreign_words(&idx, q, &qv), vec!["tokio".to_string(), "zzz".to_string()]);
        // Distances: hello 0.4, world 0.2. The plain cut keeps both…
        let opts = SearchOptions { mode: Mode::Dense, ..Default::default() };
        assert_eq!(search(&idx, q, Some(&qv), &opts).answer.len(), 2);
        // …the auto gate lowers the cut by the whole penalty for two foreign words (half for one)…
        idx.header.settings.gate = Gate::Auto { foreign_penalty: 0.2, background_answered: 0.05 };
        assert!((idx.header.settings.cut_for(1) - 0.4).abs() < 1e-6 && (idx.header.settings.cut_for(5) - 0.3).abs() < 1e-6);
        let r = search(&idx, q, Some(&qv), &opts);
        assert_eq!((r.answer.len(), r.hits[r.answer[0]].content.as_str()), (1, "world"));
        assert!((r.cut - 0.3).abs() < 1e-6 && r.foreign.len() == 2);
        // …and an explicit cut is the plain gate, whatever the index chose.
        assert_eq!(search(&idx, q, Some(&qv), &SearchOptions { cut: Some(0.5), ..opts.clone() }).answer.len(), 2);
        // Without the model nothing is foreign (and nothing passes the gate).
        assert!(search(&idx, q, None, &opts).foreign.is_empty());
    }

    #[test]
    fn the_gate_keeps_at_most_max_chunks_under_the_cut_in_rank_order() {
        let h = |d: f32| Hit {
            chunk: 0,
            page: "p".into(),
            kind: "text".into(),
            url: "p#char=0,1".into(),
            link: "p#char=0,1".into(),
            from: 0,
            to: 1,
            content: "x".into(),
            distance: d,
            rank: 1,
            coverage: Some(1.0 - d),
        };
        let hits = [h(0.7), h(0.3), h(0.5), h(f32::NAN), h(0.1), h(0.2), h(0.4)];
        let every: Vec<usize> = (0..hits.len()).collect();
        assert_eq!(gate(&hits, &every, 0.6, 4), vec![1, 2, 4, 5]);
        // The lexical gate: coverage strictly above its cut (1 − d here), the same walk.
        assert_eq!(lexical_gate(&hits, &every, 0.4, 4), vec![1, 2, 4, 5]);
        assert_eq!(lexical_gate(&hits, &every, 0.7, 4), vec![4, 5]);
        assert!(gate(&hits, &every, 0.05, 4).is_empty());
        // Only the walked positions, in the walk's order; one past the hits never passes.
        assert_eq!(gate(&hits, &[6, 2, 0, 9, 1], 0.6, 2), vec![6, 2]);
    }

    #[test]
    fn dense_ranks_by_cosine_distance_and_hybrid_fuses() {
        let idx = tiny();
        let r = search(
            &idx,
            "world",
            Some(&QueryVector { vector: vec![0.0, 1.0], unknown_to_model: Vec::new() }),
            &SearchOptions { mode: Mode::Dense, ..Default::default() },
        );
        assert_eq!(r.hits[0].content, "world");
        assert!(r.hits[0].distance.abs() < 1e-6 && (r.hits[1].distance - 1.0).abs() < 1e-6);
        let r = search(
            &idx,
            "hello",
            Some(&QueryVector { vector: vec![0.0, 1.0], unknown_to_model: Vec::new() }),
            &SearchOptions { cut: Some(0.5), ..Default::default() },
        );
        assert_eq!(r.mode, Mode::Hybrid);
        assert_eq!(r.answer.len(), 1, "only 'world' is under the cut");
        assert_eq!(r.hits[r.answer[0]].content, "world");
    }

    /// Two pages of three chunks in two dimensions, the query along the first axis: page 0 holds
    /// the nearest chunk but leans away as a whole, page 1 leans toward the query.
    fn two_pages() -> Index {
        use crate::query::index::ChunkEntry;
        let mut idx = tiny();
        let page = idx.header.pages[0].clone();
        idx.header.pages = vec![PageEntry { chunk_count: 3, ..page.clone() }, PageEntry { path: "q.html".into(), chunk_count: 3, ..page }];
        let vectors: [[f32; 2]; 6] = [[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [0.9, 0.435_89], [0.6, 0.8], [0.0, 1.0]];
        idx.header.chunks =
            (0..6).map(|c| ChunkEntry { page: (c / 3) as u32, content: format!("chunk{c}"), ..idx.header.chunks[0].clone() }).collect();
        idx.header.bm25 = crate::query::index::bm25_of(&idx.header.chunks, &idx.header.analysis);
        idx.vectors = vectors.concat();
        idx
    }

    #[test]
    fn the_page_list_orders_chunks_by_their_pages_vector_then_their_own() {
        let idx = two_pages();
        // Page 1's vector (its chunks' mean) is nearer the query than page 0's, though chunk 0
        // (page 0) is the nearest chunk of all.
        let dist = distances(&idx, &[1.0, 0.0]);
        assert_eq!(page_order(&idx, &dist), vec![3, 4, 5, 0, 1, 2]);
        let norms = idx.page_norms();
        assert!(
            (norms[0] - 5f32.sqrt()).abs() < 1e-5 && (norms[1] - (1.5f32.powi(2) + 2.23589f32.powi(2)).sqrt()).abs() < 1e-4,
            "{norms:?}"
        );
    }

    #[test]
    fn the_page_fusion_keeps_the_plain_first_hit_and_lifts_the_near_pages_chunks_after_it() {
        let idx = two_pages();
        let qv = QueryVector { vector: vec![1.0, 0.0], unknown_to_model: Vec::new() };
        let order = |fusion: Fusion| -> Vec<usize> {
            // "zzz" matches no word, so the ranking is dense and the page list alone.
            search(&idx, "zzz", Some(&qv), &SearchOptions { fusion, k: 6, ..Default::default() }).hits.iter().map(|h| h.chunk).collect()
        };
        // Plain: dense order (chunks 1, 2 and 5 tie at distance 1 and break by number).
        assert_eq!(order(Fusion::Plain), vec![0, 3, 4, 1, 2, 5]);
        // Pages: chunk 0 stays first; chunk 5 rises above page 0's far chunks with its page.
        assert_eq!(order(Fusion::Pages), vec![0, 3, 4, 5, 1, 2]);
        // The gate walks only what plain fusion ranks within the gate's depth: at depth 4 that is
        // chunks 0, 3, 4 and 1, so chunk 5, lifted to the fourth place, is not walked; with a cut
        // every chunk passes, plain answers with its top 4, the page list with three of them.
        let mut shallow = two_pages();
        shallow.header.settings.gate_depth = 4;
        let at = |fusion: Fusion, cut: f32| {
            search(&shallow, "zzz", Some(&qv), &SearchOptions { fusion, k: 6, cut: Some(cut), ..Default::default() })
        };
        assert_eq!(at(Fusion::Plain, 2.0).walked, vec![0, 1, 2, 3]);
        let pages = at(Fusion::Pages, 2.0);
        assert_eq!((pages.walked.as_slice(), pages.answer.as_slice()), (&[0, 1, 2][..], &[0, 1, 2][..]));
        let far = |r: SearchResult| r.answer.iter().map(|&i| r.hits[i].chunk).collect::<Vec<_>>();
        assert_eq!(far(at(Fusion::Plain, 2.0)), vec![0, 3, 4, 1]);
        assert_eq!(far(at(Fusion::Pages, 2.0)), vec![0, 3, 4], "chunk 5 is outside plain fusion's top 4");
        // BM25 and dense alone ignore the fusion.
        for mode in [Mode::Bm25, Mode::Dense] {
            let r = |fusion| search(&idx, "chunk5", Some(&qv), &SearchOptions { mode, fusion, ..Default::default() }).hits;
            assert_eq!(r(Fusion::Plain), r(Fusion::Pages), "{mode:?}");
        }
    }

    #[test]
    fn the_answer_does_not_depend_on_how_many_hits_are_shown() {
        let idx = tiny();
        // Hybrid puts "hello" first (BM25) and "world", the only chunk under the cut, second.
        let answers: Vec<Vec<usize>> = (1..=3)
            .map(|k| {
                let r = search(
                    &idx,
                    "hello",
                    Some(&QueryVector { vector: vec![0.0, 1.0], unknown_to_model: Vec::new() }),
                    &SearchOptions { k, cut: Some(0.5), ..Default::default() },
                );
                assert!(r.hits.len() >= k.min(2), "k = {k}: at least k hits");
                r.answer.iter().map(|&i| r.hits[i].chunk).collect()
            })
            .collect();
        assert_eq!(answers, vec![vec![1]; 3]);
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
