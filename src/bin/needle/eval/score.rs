//! Scoring ranked results against the question set: Recall@k, MRR, destroyed questions, the
//! refusal sweep and the choice of a cut.
//! Invariants: recall is about the ungated ranking, the gate only decides refusals; the sweep
//! re-gates the same stored rankings, at the positions the search's gate walked, with
//! [`needle::query::search::gate`], the function the product answers with, so a cut chosen here
//! behaves the same in `needle query`.

use super::qrels::Phrasing;
use super::stats::{self, Paired};
use needle::query::search::{gate, lexical_gate, Hit, Timings};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How deep the gate walks the ranking (what `needle build` stores in every index).
pub const GATE_DEPTH: usize = needle::query::index::DEFAULT_GATE_DEPTH as usize;

/// One query's result under one configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryRun {
    /// The question's (or OOD query's) id.
    pub id: String,
    pub phrasing: Phrasing,
    /// The top of the ungated ranking, best first.
    pub hits: Vec<Hit>,
    /// Per hit: its content contains the question's needle (always false out of domain).
    pub answers: Vec<bool>,
    /// No chunk of the index contains the needle.
    pub destroyed: bool,
    /// In domain: cosine distance of the closest answering chunk of the whole index (`None`
    /// when destroyed). Out of domain: of the closest chunk.
    pub closest: Option<f32>,
    /// The cut this query met under the index's own gate (`SearchResult::cut`).
    pub cut: f32,
    /// The lexical gate's cut, when it decided this query (`SearchResult::lexical_cut`: a
    /// language the model does not read). A cosine cut then changes nothing.
    pub lexical_cut: Option<f32>,
    /// Positions in `hits` the gate walks (`SearchResult::walked`).
    pub walked: Vec<usize>,
    pub timings: Timings,
}

impl QueryRun {
    /// 1-based rank of the first answering hit.
    pub fn rank(&self) -> Option<usize> {
        self.answers.iter().position(|&a| a).map(|i| i + 1)
    }

    pub fn hit_at(&self, k: usize) -> bool {
        self.rank().is_some_and(|r| r <= k)
    }

    pub fn in_domain(&self) -> bool {
        self.phrasing != Phrasing::Ood
    }

    /// Indices into `hits` the gate keeps at `cut` (or, under the lexical gate, at its own cut).
    pub fn gated(&self, cut: f32, max_chunks: usize) -> Vec<usize> {
        match self.lexical_cut {
            Some(lexical) => lexical_gate(&self.hits, &self.walked, lexical, max_chunks),
            None => gate(&self.hits, &self.walked, cut, max_chunks),
        }
    }

    /// The answering chunk is among the gate's walk but the gate kept none that answers.
    pub fn dropped(&self, cut: f32, max_chunks: usize) -> bool {
        let answers = |i: usize| self.answers.get(i).copied().unwrap_or(false);
        self.walked.iter().any(|&i| answers(i)) && !self.gated(cut, max_chunks).into_iter().any(answers)
    }
}

/// Recall at each k with its Wilson interval, MRR and destroyed questions over a set of
/// in-domain queries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub n: usize,
    /// Keys are the k's as strings (`"4"`), the form the JSON output promises.
    pub recall: BTreeMap<String, f64>,
    pub wilson: BTreeMap<String, [f64; 2]>,
    /// Queries answered within k, per k.
    pub hits: BTreeMap<String, usize>,
    /// Mean reciprocal rank over the scored depth (0 for a query with no answering hit).
    pub mrr: f64,
    /// Distinct questions among these queries that no chunk of the index answers.
    pub destroyed: usize,
}

impl Summary {
    pub fn of<'a>(runs: impl IntoIterator<Item = &'a QueryRun>, ks: &[usize]) -> Summary {
        let runs: Vec<&QueryRun> = runs.into_iter().filter(|r| r.in_domain()).collect();
        let n = runs.len();
        let (mut recall, mut wilson, mut hits) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
        for &k in ks {
            let h = runs.iter().filter(|r| r.hit_at(k)).count();
            let (lo, hi) = stats::wilson(h, n, stats::Z95);
            recall.insert(k.to_string(), if n == 0 { 0.0 } else { h as f64 / n as f64 });
            wilson.insert(k.to_string(), [lo, hi]);
            hits.insert(k.to_string(), h);
        }
        let mrr = if n == 0 { 0.0 } else { runs.iter().filter_map(|r| r.rank()).map(|r| 1.0 / r as f64).sum::<f64>() / n as f64 };
        let destroyed: std::collections::BTreeSet<&str> = runs.iter().filter(|r| r.destroyed).map(|r| r.id.as_str()).collect();
        Summary { n, recall, wilson, hits, mrr, destroyed: destroyed.len() }
    }

    pub fn recall_at(&self, k: usize) -> f64 {
        self.recall.get(&k.to_string()).copied().unwrap_or(0.0)
    }

    pub fn wilson_at(&self, k: usize) -> [f64; 2] {
        self.wilson.get(&k.to_string()).copied().unwrap_or([0.0, 1.0])
    }
}

/// Overall and per phrasing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summaries {
    pub overall: Summary,
    pub doc: Summary,
    pub ticket: Summary,
}

impl Summaries {
    pub fn of(runs: &[QueryRun], ks: &[usize]) -> Summaries {
        let by = |p: Phrasing| Summary::of(runs.iter().filter(|r| r.phrasing == p), ks);
        Summaries { overall: Summary::of(runs, ks), doc: by(Phrasing::Doc), ticket: by(Phrasing::Ticket) }
    }
}

/// One cut of the refusal sweep.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    pub cut: f32,
    /// Out-of-domain queries the gate still answers.
    pub bluffs: usize,
    /// In-domain queries the gate refuses (NO ANSWER).
    pub refused: usize,
    /// In-domain queries whose answering chunk is in the gate's walk but not kept by it.
    pub dropped: usize,
    /// In-domain queries given a stated answer (the gate kept chunks).
    #[serde(default)]
    pub stated: usize,
    /// Of those, the ones whose kept chunks hold the needle: a stated answer can be trusted as
    /// far as `stated_right / stated` goes.
    #[serde(default)]
    pub stated_right: usize,
    /// In-domain queries with an answering chunk in the top 4 that get no stated answer.
    #[serde(default)]
    pub silent_top4: usize,
}

impl SweepRow {
    /// A row with nothing counted yet.
    pub fn at(cut: f32) -> SweepRow {
        SweepRow { cut, bluffs: 0, refused: 0, dropped: 0, stated: 0, stated_right: 0, silent_top4: 0 }
    }
}

/// The sweep's cuts: 0.400, 0.425, …, 0.800.
pub fn sweep_cuts() -> Vec<f32> {
    (0..=16).map(|i| (400 + 25 * i) as f32 / 1000.0).collect()
}

pub fn sweep_at(runs: &[QueryRun], cut: f32, max_chunks: usize) -> SweepRow {
    gate_row(runs, cut, max_chunks, |_| cut)
}

/// What the index's own gate did: each query gated at the cut it met (`QueryRun::cut`). The
/// row's `cut` is `index_cut`, the cut of a query with no foreign words.
pub fn own_gate(runs: &[QueryRun], index_cut: f32, max_chunks: usize) -> SweepRow {
    gate_row(runs, index_cut, max_chunks, |r| r.cut)
}

/// Bluffs, refusals and dropped answers when each query is gated at `cut_of(query)`; the row
/// is labelled `cut`.
fn gate_row(runs: &[QueryRun], cut: f32, max_chunks: usize, cut_of: impl Fn(&QueryRun) -> f32) -> SweepRow {
    let mut row = SweepRow::at(cut);
    for r in runs {
        let at = cut_of(r);
        let kept = r.gated(at, max_chunks);
        if r.in_domain() {
            row.refused += kept.is_empty() as usize;
            row.dropped += r.dropped(at, max_chunks) as usize;
            row.stated += !kept.is_empty() as usize;
            row.stated_right += kept.iter().any(|&i| r.answers.get(i).copied().unwrap_or(false)) as usize;
            row.silent_top4 += (kept.is_empty() && r.hit_at(4)) as usize;
        } else {
            row.bluffs += !kept.is_empty() as usize;
        }
    }
    row
}

pub fn sweep(runs: &[QueryRun], cuts: &[f32], max_chunks: usize) -> Vec<SweepRow> {
    cuts.iter().map(|&c| sweep_at(runs, c, max_chunks)).collect()
}

/// The cut with the fewest refusals among those with at most `max_bluffs` bluffs; ties go to
/// fewer dropped answers, then fewer bluffs, then the lower cut.
pub fn choose_cut(rows: &[SweepRow], max_bluffs: usize) -> Option<f32> {
    rows.iter()
        .filter(|r| r.bluffs <= max_bluffs)
        .min_by(|a, b| (a.refused, a.dropped, a.bluffs).cmp(&(b.refused, b.dropped, b.bluffs)).then(a.cut.total_cmp(&b.cut)))
        .map(|r| r.cut)
}

/// Per in-domain query: answered within k.
pub fn hits_at(runs: &[QueryRun], k: usize) -> Vec<bool> {
    runs.iter().filter(|r| r.in_domain()).map(|r| r.hit_at(k)).collect()
}

/// `a` against `b` at k; both must hold the same in-domain queries in the same order.
pub fn compare(a: &[QueryRun], b: &[QueryRun], k: usize) -> Paired {
    Paired::of(&hits_at(a, k), &hits_at(b, k))
}

/// The per-query results saved by `--save-runs`, and read back by `--baseline`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedRuns {
    pub format: String,
    /// What produced them (informative): index, strategy, mode, model.
    pub config: BTreeMap<String, String>,
    pub queries: Vec<SavedQuery>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedQuery {
    pub id: String,
    pub phrasing: Phrasing,
    /// Rank of the first answering hit in the ungated ranking, if within the scored depth.
    pub rank: Option<usize>,
    pub destroyed: bool,
    pub closest: Option<f32>,
}

pub const RUNS_FORMAT: &str = "needle-eval-runs/1";

impl SavedRuns {
    pub fn of(runs: &[QueryRun], config: BTreeMap<String, String>) -> SavedRuns {
        let queries = runs
            .iter()
            .map(|r| SavedQuery { id: r.id.clone(), phrasing: r.phrasing, rank: r.rank(), destroyed: r.destroyed, closest: r.closest })
            .collect();
        SavedRuns { format: RUNS_FORMAT.into(), config, queries }
    }
}

/// The current in-domain results against a saved baseline at each k, paired by (id,
/// phrasing). Every in-domain query of one side must be in the other.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BaselineComparison {
    pub file: String,
    /// Keyed by k as a string: current − baseline.
    pub at: BTreeMap<String, Paired>,
}

pub fn compare_with_baseline(runs: &[QueryRun], base: &SavedRuns, ks: &[usize], file: &str) -> Result<BaselineComparison, String> {
    let base_rank: std::collections::HashMap<(&str, Phrasing), Option<usize>> =
        base.queries.iter().filter(|q| q.phrasing != Phrasing::Ood).map(|q| ((q.id.as_str(), q.phrasing), q.rank)).collect();
    let current: Vec<&QueryRun> = runs.iter().filter(|r| r.in_domain()).collect();
    let missing: Vec<String> = current
        .iter()
        .filter(|r| !base_rank.contains_key(&(r.id.as_str(), r.phrasing)))
        .map(|r| format!("{}:{}", r.id, r.phrasing.name()))
        .collect();
    if !missing.is_empty() || base_rank.len() != current.len() {
        return Err(format!(
            "{file}: the baseline holds {} in-domain queries, this run {}; not in the baseline: {}",
            base_rank.len(),
            current.len(),
            if missing.is_empty() { "-".to_string() } else { missing.join(", ") }
        ));
    }
    let mut at = BTreeMap::new();
    for &k in ks {
        let now: Vec<bool> = current.iter().map(|r| r.hit_at(k)).collect();
        let then: Vec<bool> =
            current.iter().map(|r| base_rank.get(&(r.id.as_str(), r.phrasing)).copied().flatten().is_some_and(|rank| rank <= k)).collect();
        at.insert(k.to_string(), Paired::of(&now, &then));
    }
    Ok(BaselineComparison { file: file.to_string(), at })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn hit(distance: f32, rank: usize) -> Hit {
        Hit {
            chunk: rank,
            page: "p.html".into(),
            kind: "text".into(),
            url: "p.html#char=0,1".into(),
            link: "p.html#char=0,1".into(),
            from: 0,
            to: 1,
            content: "c".into(),
            distance,
            rank,
            coverage: None,
        }
    }

    /// An in-domain run whose hits have these distances; `answer` is the 0-based position of
    /// the answering hit.
    pub(crate) fn run(id: &str, phrasing: Phrasing, distances: &[f32], answer: Option<usize>) -> QueryRun {
        let hits: Vec<Hit> = distances.iter().enumerate().map(|(i, &d)| hit(d, i + 1)).collect();
        let answers = (0..hits.len()).map(|i| Some(i) == answer).collect();
        QueryRun {
            id: id.into(),
            phrasing,
            closest: answer.map(|a| distances[a]).or(distances.iter().copied().reduce(f32::min)),
            hits,
            answers,
            destroyed: false,
            cut: 0.6,
            lexical_cut: None,
            timings: Timings::default(),
            walked: (0..distances.len().min(GATE_DEPTH)).collect(),
        }
    }

    fn synthetic() -> Vec<QueryRun> {
        let mut destroyed = run("q4", Phrasing::Ticket, &[0.5, 0.6], None);
        destroyed.destroyed = true;
        vec![
            run("q1", Phrasing::Doc, &[0.30, 0.40, 0.50], Some(0)),
            run("q2", Phrasing::Doc, &[0.45, 0.50, 0.55, 0.60, 0.62], Some(4)),
            run("q1", Phrasing::Ticket, &[0.55, 0.58, 0.70], Some(1)),
            destroyed,
            run("o1", Phrasing::Ood, &[0.52, 0.7], None),
            run("o2", Phrasing::Ood, &[0.66, 0.7], None),
        ]
    }

    #[test]
    fn recall_mrr_and_destroyed_by_phrasing() {
        let runs = synthetic();
        let s = Summaries::of(&runs, &[1, 4, 8]);
        assert_eq!(s.overall.n, 4, "OOD queries are not in-domain queries");
        assert_eq!(s.overall.recall_at(1), 0.25);
        assert_eq!(s.overall.recall_at(4), 0.5);
        assert_eq!(s.overall.recall_at(8), 0.75);
        assert_eq!(s.overall.hits["8"], 3);
        assert!((s.overall.mrr - (1.0 + 0.2 + 0.5) / 4.0).abs() < 1e-12);
        assert_eq!(s.overall.destroyed, 1);
        assert_eq!((s.doc.n, s.ticket.n), (2, 2));
        assert_eq!(s.doc.recall_at(4), 0.5);
        assert_eq!((s.doc.destroyed, s.ticket.destroyed), (0, 1));
        let [lo, hi] = s.overall.wilson_at(4);
        assert_eq!((lo, hi), stats::wilson(2, 4, stats::Z95));
    }

    #[test]
    fn the_sweep_counts_bluffs_refusals_and_drops() {
        let runs = synthetic();
        // cut 0.5: q1 doc keeps 0.30, 0.40 (answer kept); q2 keeps 0.45 (answer at 0.62 dropped);
        // q1 ticket refused (answer 0.58 dropped); destroyed q4 refused; no OOD under 0.5.
        // Stated: q1 doc (its answer kept) and q2 (not); q1 ticket's answer ranks 2nd, unstated.
        let row = |cut, bluffs, refused, dropped, stated, stated_right, silent_top4| SweepRow {
            cut,
            bluffs,
            refused,
            dropped,
            stated,
            stated_right,
            silent_top4,
        };
        assert_eq!(sweep_at(&runs, 0.5, 4), row(0.5, 0, 2, 2, 2, 1, 1));
        // cut 0.6: q2 keeps 0.45, 0.50, 0.55 (answer at 0.62 still out); q1 ticket keeps its
        // answer 0.58; q4 keeps 0.5; o1 bluffs.
        assert_eq!(sweep_at(&runs, 0.6, 4), row(0.6, 1, 0, 1, 4, 2, 0));
        // max_chunks 2 at 0.7: q2's answer (5th) is cut off by the first two hits.
        assert_eq!(sweep_at(&runs, 0.7, 2), row(0.7, 2, 0, 1, 4, 2, 0));
        assert_eq!(sweep_at(&runs, 0.7, 4).dropped, 1, "the 5th hit is beyond 4 chunks");
    }

    #[test]
    fn the_sweep_runs_from_040_to_080_by_0025() {
        let cuts = sweep_cuts();
        assert_eq!(cuts.len(), 17);
        assert_eq!(cuts[0], 0.4);
        assert_eq!(cuts[1], 0.425);
        assert_eq!(cuts[16], 0.8);
    }

    #[test]
    fn the_chosen_cut_has_fewest_refusals_within_the_bluff_budget() {
        let row = |cut, bluffs, refused, dropped| SweepRow { bluffs, refused, dropped, ..SweepRow::at(cut) };
        let rows = [row(0.4, 0, 9, 3), row(0.45, 0, 5, 2), row(0.5, 1, 5, 1), row(0.55, 2, 2, 1), row(0.6, 4, 0, 0)];
        assert_eq!(choose_cut(&rows, 0), Some(0.45));
        assert_eq!(choose_cut(&rows, 1), Some(0.5), "same refusals, fewer drops");
        assert_eq!(choose_cut(&rows, 3), Some(0.55));
        assert_eq!(choose_cut(&rows, 10), Some(0.6));
        assert_eq!(choose_cut(&[row(0.4, 2, 0, 0)], 1), None);
        let tie = [row(0.5, 0, 3, 1), row(0.45, 0, 3, 1)];
        assert_eq!(choose_cut(&tie, 0), Some(0.45));
    }

    #[test]
    fn comparisons_pair_queries_and_baselines_match_by_id() {
        let a = synthetic();
        let mut b = synthetic();
        b[0].answers = vec![false, false, false];
        let p = compare(&a, &b, 1);
        assert_eq!((p.wins, p.losses, p.n), (1, 0, 4));

        let saved = SavedRuns::of(&b, BTreeMap::new());
        let json = serde_json::to_string(&saved).unwrap();
        let back: SavedRuns = serde_json::from_str(&json).unwrap();
        assert_eq!(back, saved);
        let c = compare_with_baseline(&a, &back, &[1, 8], "base.json").unwrap();
        assert_eq!((c.at["1"].wins, c.at["1"].losses), (1, 0));
        assert_eq!((c.at["8"].wins, c.at["8"].losses, c.at["8"].both), (1, 0, 2));

        let mut short = back.clone();
        short.queries.remove(1);
        let err = compare_with_baseline(&a, &short, &[8], "base.json").unwrap_err();
        assert!(err.contains("q2:doc"), "{err}");
    }
}
