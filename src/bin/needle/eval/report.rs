//! What an evaluation found, and its three renderings: the terminal table, the JSON file
//! (whose top-level keys automated checks read) and the Markdown report with its plots.
//! Invariants: every rendering is computed from the same [`Outcome`], so they never disagree;
//! nothing here measures or runs anything.

use super::plot::{self, Marker};
use super::qrels::Phrasing;
use super::score::{self, BaselineComparison, QueryRun, Summaries, Summary, SweepRow};
use super::stats::{self, Paired};
use needle::query::index::Gate;
use needle::query::search::{Fusion, Mode};
use serde_json::{json, Value};
use std::fmt::Write as _;

/// One configuration's results: a strategy's index searched in one mode.
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// Chunking strategy (A–F) when known.
    pub strategy: Option<String>,
    pub mode: Mode,
    pub chunks: usize,
    /// In-domain queries (doc phrasings, then ticket), then out-of-domain ones.
    pub runs: Vec<QueryRun>,
    pub summaries: Summaries,
}

impl Evaluation {
    pub fn new(strategy: Option<String>, mode: Mode, chunks: usize, runs: Vec<QueryRun>, ks: &[usize]) -> Self {
        let summaries = Summaries::of(&runs, ks);
        Evaluation { strategy, mode, chunks, runs, summaries }
    }

    pub fn label(&self) -> String {
        match &self.strategy {
            Some(s) => format!("{s}/{}", self.mode.name()),
            None => self.mode.name().to_string(),
        }
    }

    pub fn in_domain(&self) -> impl Iterator<Item = &QueryRun> {
        self.runs.iter().filter(|r| r.in_domain())
    }

    pub fn ood(&self) -> impl Iterator<Item = &QueryRun> {
        self.runs.iter().filter(|r| !r.in_domain())
    }
}

/// What building the index cost. Build-only figures are `None` for an index read from disk.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Cost {
    pub chunks: usize,
    pub embedded_tokens: usize,
    pub header_tokens: usize,
    pub split_for_window: Option<usize>,
    pub build_seconds: Option<f64>,
    pub build_ms_per_chunk: Option<f64>,
    pub threads: Option<usize>,
}

impl Cost {
    pub fn header_share(&self) -> f64 {
        if self.embedded_tokens == 0 {
            0.0
        } else {
            self.header_tokens as f64 / self.embedded_tokens as f64
        }
    }

    fn line(&self) -> String {
        let mut s = format!(
            "{} chunks, {} split for the window; {} embedded tokens, {:.1} % of them header",
            self.chunks,
            opt(self.split_for_window.map(|n| n.to_string())),
            self.embedded_tokens,
            100.0 * self.header_share()
        );
        if let (Some(ms), Some(secs)) = (self.build_ms_per_chunk, self.build_seconds) {
            let _ = write!(s, "; build {secs:.1} s = {ms:.1} ms per chunk on {} threads", opt(self.threads.map(|t| t.to_string())));
        } else {
            s.push_str("; build time unknown (index read from disk)");
        }
        s
    }
}

/// Median query time by stage, in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct QueryTime {
    pub queries: usize,
    pub embed: f64,
    pub bm25: f64,
    pub dense: f64,
    pub fuse: f64,
}

impl QueryTime {
    /// Medians over the runs; `embed_ms` is per query, measured once per query text.
    pub fn of(runs: &[QueryRun], embed_ms: &[f64]) -> QueryTime {
        let med = |v: Vec<f64>| stats::quantile(&v, 0.5).unwrap_or(0.0);
        QueryTime {
            queries: runs.len(),
            embed: med(embed_ms.to_vec()),
            bm25: med(runs.iter().map(|r| r.timings.bm25).collect()),
            dense: med(runs.iter().map(|r| r.timings.dense).collect()),
            fuse: med(runs.iter().map(|r| r.timings.fuse).collect()),
        }
    }
}

/// One strategy of the ablation: its index's cost and its three retrievers.
#[derive(Debug, Clone)]
pub struct Strategy {
    pub name: String,
    pub cost: Cost,
    /// BM25, dense, hybrid.
    pub evals: Vec<Evaluation>,
}

/// A paired comparison `a − b` at k.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Comparison {
    pub a: String,
    pub b: String,
    pub k: usize,
    #[serde(flatten)]
    pub paired: Paired,
    pub delta: f64,
}

impl Comparison {
    pub fn of(a: &Evaluation, b: &Evaluation, k: usize) -> Comparison {
        let paired = score::compare(&a.runs, &b.runs, k);
        Comparison { a: a.label(), b: b.label(), k, delta: paired.delta(), paired }
    }
}

/// The comparisons the method reports: chunking (B–A, E–A, E–C, F–E at R@8 and R@20, per
/// retriever) and fusion (hybrid–BM25, hybrid–dense at R@4, per strategy).
pub fn ablation_comparisons(strategies: &[Strategy]) -> Vec<Comparison> {
    let find = |s: &str, m: Mode| strategies.iter().find(|x| x.name == s).and_then(|x| x.evals.iter().find(|e| e.mode == m));
    let mut out = Vec::new();
    for mode in [Mode::Hybrid, Mode::Dense, Mode::Bm25] {
        for (a, b) in [("B", "A"), ("E", "A"), ("E", "C"), ("F", "E")] {
            if let (Some(ea), Some(eb)) = (find(a, mode), find(b, mode)) {
                for k in [8, 20] {
                    out.push(Comparison::of(ea, eb, k));
                }
            }
        }
    }
    for s in strategies {
        for other in [Mode::Bm25, Mode::Dense] {
            if let (Some(h), Some(o)) = (find(&s.name, Mode::Hybrid), find(&s.name, other)) {
                out.push(Comparison::of(h, o, 4));
            }
        }
    }
    out
}

/// Everything one `needle eval` found.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The command that produced it, as it should be re-run.
    pub command: String,
    pub target: String,
    pub site: Option<String>,
    pub model: String,
    pub ks: Vec<usize>,
    pub max_chunks: usize,
    /// The cut stored in the index (what `needle query` uses today).
    pub index_cut: f32,
    /// How the index's gate uses its cut.
    pub index_gate: Gate,
    /// The site's main language and its lexical gate's cut, when the model does not read that
    /// language and the index chose one (`Settings::lexical_cuts`): the gate the queries met.
    pub lexical_gate: Option<(String, f32)>,
    /// How the main evaluation fused a hybrid ranking.
    pub fusion: Fusion,
    pub main: Evaluation,
    /// Hybrid with plain fusion on the same queries, beside a main evaluation with the page
    /// list ([`Outcome::plain_against`]).
    pub plain: Option<Evaluation>,
    pub cost: Cost,
    pub time: QueryTime,
    /// With out-of-domain queries only.
    pub sweep: Option<Vec<SweepRow>>,
    pub max_bluffs: usize,
    pub chosen_cut: Option<f32>,
    pub ablation: Vec<Strategy>,
    pub comparisons: Vec<Comparison>,
    pub baseline: Option<BaselineComparison>,
    /// Validation notes that did not stop the run.
    pub warnings: Vec<String>,
}

fn opt(s: Option<String>) -> String {
    s.unwrap_or_else(|| "n/a".into())
}

fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn r4(x: f64) -> f64 {
    (x * 10000.0).round() / 10000.0
}

fn cut_value(c: f32) -> Value {
    json!(r3(c as f64))
}

fn distances<'a>(runs: impl Iterator<Item = &'a QueryRun>) -> Vec<f64> {
    runs.filter_map(|r| r.closest.map(f64::from)).collect()
}

impl Outcome {
    pub fn n_in_domain(&self) -> usize {
        self.main.summaries.overall.n
    }

    pub fn n_ood(&self) -> usize {
        self.main.ood().count()
    }

    fn row_at(&self, cut: f32) -> SweepRow {
        score::sweep_at(&self.main.runs, cut, self.max_chunks)
    }

    /// What the index's own gate did with these queries.
    fn own_gate(&self) -> SweepRow {
        score::own_gate(&self.main.runs, self.index_cut, self.max_chunks)
    }

    /// The main evaluation (with the page list) against plain fusion, per phrasing and k:
    /// `(phrasing, k, paired)`, wins being the queries only the page list answers.
    pub fn plain_against(&self) -> Vec<(&'static str, usize, Paired)> {
        let Some(plain) = &self.plain else { return Vec::new() };
        let hits = |e: &Evaluation, ph: Option<Phrasing>, k: usize| -> Vec<bool> {
            e.in_domain().filter(|r| ph.is_none_or(|p| r.phrasing == p)).map(|r| r.hit_at(k)).collect()
        };
        let mut out = Vec::new();
        for (name, ph) in [("overall", None), ("doc", Some(Phrasing::Doc)), ("ticket", Some(Phrasing::Ticket))] {
            for &k in &self.ks {
                out.push((name, k, Paired::of(&hits(&self.main, ph, k), &hits(plain, ph, k))));
            }
        }
        out
    }

    /// The gate with each fusion, beside the method before issue 18 (plain fusion, the one
    /// default cut for every site): `(what, row)`. Empty without out-of-domain queries.
    fn gates_by_fusion(&self) -> Vec<(String, SweepRow)> {
        let Some(plain) = self.plain.as_ref().filter(|_| self.n_ood() > 0) else { return Vec::new() };
        let default = needle::build::DEFAULT_CUT;
        vec![
            (
                format!("plain fusion, one cut {default:.3} for every site (`--fusion plain`, an index built with `--gate cut`)"),
                score::sweep_at(&plain.runs, default, self.max_chunks),
            ),
            ("plain fusion, the index's own gate".to_string(), score::own_gate(&plain.runs, self.index_cut, self.max_chunks)),
            ("the page list, the index's own gate (the defaults)".to_string(), self.own_gate()),
        ]
    }

    /// The index's gate in words.
    fn gate_words(&self) -> String {
        if let Some((lang, cut)) = &self.lexical_gate {
            return format!(
                "its own lexical gate (the model reads English, the site is in {lang}): a chunk answers when it holds more than {:.0} % of a question's words, weighted by idf, the share only {:.0} % of needle's background questions in {lang} reach",
                cut * 100.0,
                needle::build::gate::BACKGROUND_ANSWERED * 100.0
            );
        }
        match self.index_gate {
            Gate::Cut => format!("the plain cut {:.3}", self.index_cut),
            Gate::Auto { foreign_penalty, background_answered } => format!(
                "its own gate, chosen from the site's text with no labels: cut {:.3} ({:.0} % of needle's background questions answered), lowered by {foreign_penalty} for a query with foreign words",
                self.index_cut,
                background_answered * 100.0
            ),
        }
    }

    /// The cut each of a few bluff budgets would choose, with what it costs.
    pub fn cut_by_budget(&self) -> Vec<(usize, Option<SweepRow>)> {
        let Some(rows) = &self.sweep else { return Vec::new() };
        let mut budgets: Vec<usize> = [0, 1, 2, 3, 5, 10, self.max_bluffs].into_iter().filter(|&b| b <= self.n_ood()).collect();
        budgets.sort_unstable();
        budgets.dedup();
        budgets.into_iter().map(|b| (b, score::choose_cut(rows, b).map(|c| self.row_at(c)))).collect()
    }

    /// The JSON written by `--json`. Top-level keys `overall`, `doc`, `ticket`, `sweep` and
    /// `chosen_cut` are the documented interface; the rest is detail.
    pub fn to_json(&self) -> Value {
        let s = &self.main.summaries;
        let sweep: Vec<Value> = self
            .sweep
            .iter()
            .flatten()
            .map(|r| json!({"cut": cut_value(r.cut), "bluffs": r.bluffs, "refused": r.refused, "dropped": r.dropped}))
            .collect();
        let queries: Vec<Value> = self
            .main
            .runs
            .iter()
            .map(|r| {
                json!({
                    "id": r.id, "phrasing": r.phrasing.name(), "rank": r.rank(), "destroyed": r.destroyed,
                    "closest": r.closest.map(|d| r4(d as f64)),
                    "gated_at_index_cut": r.gated(self.index_cut, self.max_chunks).len(),
                    "gated_by_index_gate": r.gated(r.cut, self.max_chunks).len(),
                })
            })
            .collect();
        let ablation: Vec<Value> = self
            .ablation
            .iter()
            .map(|st| {
                let modes: serde_json::Map<String, Value> =
                    st.evals.iter().map(|e| (e.mode.name().to_string(), json!(e.summaries))).collect();
                json!({"strategy": st.name, "cost": st.cost, "modes": modes})
            })
            .collect();
        let comparisons: Vec<Value> = self
            .comparisons
            .iter()
            .map(|c| json!({"a": c.a, "b": c.b, "k": c.k, "wins": c.paired.wins, "losses": c.paired.losses, "n": c.paired.n, "delta": c.delta, "p": c.paired.p}))
            .collect();
        let ood_n = self.n_ood();
        json!({
            "overall": json!(s.overall),
            "doc": json!(s.doc),
            "ticket": json!(s.ticket),
            "sweep": sweep,
            "chosen_cut": self.chosen_cut.map(cut_value),
            "max_bluffs": self.max_bluffs,
            "cut_by_budget": self.cut_by_budget().into_iter().map(|(b, row)| json!({
                "max_bluffs": b, "cut": row.map(|r| cut_value(r.cut)),
                "bluffs": row.map(|r| r.bluffs), "refused": row.map(|r| r.refused), "dropped": row.map(|r| r.dropped),
            })).collect::<Vec<Value>>(),
            "ood": {"n": ood_n},
            "index_cut": cut_value(self.index_cut),
            "at_index_cut": (ood_n > 0 || s.overall.n > 0).then(|| {
                let r = self.row_at(self.index_cut);
                json!({"bluffs": r.bluffs, "refused": r.refused, "dropped": r.dropped, "stated": r.stated, "stated_right": r.stated_right, "silent_top4": r.silent_top4})
            }),
            "index_gate": self.index_gate,
            "at_index_gate": (ood_n > 0 || s.overall.n > 0).then(|| {
                let r = self.own_gate();
                json!({"bluffs": r.bluffs, "refused": r.refused, "dropped": r.dropped, "stated": r.stated, "stated_right": r.stated_right, "silent_top4": r.silent_top4})
            }),
            "config": {
                "target": self.target, "site": self.site, "model": self.model, "mode": self.main.mode.name(),
                "strategy": self.main.strategy, "chunks": self.main.chunks, "ks": self.ks, "max_chunks": self.max_chunks,
                "gate_depth": score::GATE_DEPTH, "command": self.command,
            },
            "cost": self.cost,
            "query_ms": self.time,
            "queries": queries,
            "ablation": ablation,
            "comparisons": comparisons,
            "baseline": self.baseline,
            "fusion": self.fusion.name(),
            "plain": self.plain.as_ref().map(|e| json!({
                "overall": e.summaries.overall, "doc": e.summaries.doc, "ticket": e.summaries.ticket,
                "against": self.plain_against().into_iter().map(|(ph, k, p)| json!({
                    "phrasing": ph, "k": k, "wins": p.wins, "losses": p.losses, "delta": r4(p.delta()), "p": r4(p.p),
                })).collect::<Vec<Value>>(),
                "gates": self.gates_by_fusion().into_iter().map(|(what, r)| json!({
                    "gate": what, "bluffs": r.bluffs, "refused": r.refused, "dropped": r.dropped,
                })).collect::<Vec<Value>>(),
            })),
            "warnings": self.warnings,
        })
    }

    fn recall_cell(s: &Summary, k: usize) -> String {
        let [lo, hi] = s.wilson_at(k);
        format!("{:.3} [{:.2}–{:.2}]", s.recall_at(k), lo, hi)
    }

    /// The readable terminal summary: recall, the refusal sweep, cost and time, the ablation
    /// and the baseline comparison, each written by its own part.
    pub fn to_terminal(&self) -> String {
        let mut t = String::new();
        self.recall_to_terminal(&mut t);
        self.sweep_to_terminal(&mut t);
        self.cost_to_terminal(&mut t);
        self.ablation_to_terminal(&mut t);
        self.baseline_to_terminal(&mut t);
        t
    }

    fn recall_to_terminal(&self, t: &mut String) {
        let m = &self.main;
        let _ = writeln!(
            t,
            "needle eval: {} — {}{} ranking, {} chunks, model {}",
            self.target,
            m.strategy.as_deref().map(|s| format!("strategy {s}, ")).unwrap_or_default(),
            m.mode.name(),
            m.chunks,
            self.model
        );
        let _ = writeln!(t, "{} in-domain queries, {} out-of-domain", self.n_in_domain(), self.n_ood());
        for w in &self.warnings {
            let _ = writeln!(t, "warning: {w}");
        }
        t.push('\n');
        let _ = write!(t, "{:<8} {:>3}", "", "n");
        for k in &self.ks {
            let _ = write!(t, "  {:<20}", format!("R@{k} [95 % CI]"));
        }
        let _ = writeln!(t, "  {:>6}  destroyed", "MRR");
        for (name, s) in [("overall", &m.summaries.overall), ("doc", &m.summaries.doc), ("ticket", &m.summaries.ticket)] {
            let _ = write!(t, "{name:<8} {:>3}", s.n);
            for &k in &self.ks {
                let _ = write!(t, "  {:<20}", Self::recall_cell(s, k));
            }
            let _ = writeln!(t, "  {:>6.3}  {}", s.mrr, s.destroyed);
        }
        if self.plain.is_some() {
            let _ = writeln!(t, "\nthe page list against plain fusion (wins-losses, sign test p)");
            for (name, k, p) in self.plain_against() {
                let _ = writeln!(t, "  {name:<8} R@{k:<3} {:+.3}  {}-{}  p = {:.4}", p.delta(), p.wins, p.losses, p.p);
            }
            for (what, r) in self.gates_by_fusion() {
                let _ = writeln!(t, "  {what}: {} bluffs, {} refused, {} dropped", r.bluffs, r.refused, r.dropped);
            }
        }
    }

    fn sweep_to_terminal(&self, t: &mut String) {
        let m = &self.main;
        if let Some(rows) = &self.sweep {
            let _ = writeln!(
                t,
                "\nrefusal sweep ({} ranking; the gate keeps ≤ {} chunks of the top {} under the cut)",
                m.mode.name(),
                self.max_chunks,
                score::GATE_DEPTH
            );
            let _ = writeln!(t, "  cut    bluffs/{:<3} refused/{:<3} dropped/{}", self.n_ood(), self.n_in_domain(), self.n_in_domain());
            for r in rows {
                let mark = if Some(r.cut) == self.chosen_cut { "  ← chosen" } else { "" };
                let _ = writeln!(t, "  {:.3}  {:<10} {:<11} {}{mark}", r.cut, r.bluffs, r.refused, r.dropped);
            }
            match self.chosen_cut {
                Some(c) => {
                    let r = self.row_at(c);
                    let _ = writeln!(
                        t,
                        "chosen cut {c:.3} (at most {} bluffs): {} bluffs, {} refused, {} dropped; use it with `needle build SITE --cut {c:.3}`",
                        self.max_bluffs, r.bluffs, r.refused, r.dropped
                    );
                }
                None => {
                    let _ = writeln!(t, "no cut in the sweep lets at most {} out-of-domain queries through", self.max_bluffs);
                }
            }
            let r = self.own_gate();
            let _ =
                writeln!(t, "the index's gate ({}): {} bluffs, {} refused, {} dropped", self.gate_words(), r.bluffs, r.refused, r.dropped);
            let top4 = self.main.runs.iter().filter(|q| q.in_domain() && q.hit_at(4)).count();
            let _ = writeln!(
                t,
                "  stated answers holding the needle: {} of {} ({}); needle in the top 4 without a stated answer: {} of {top4} ({})",
                r.stated_right,
                r.stated,
                share(r.stated_right, r.stated),
                r.silent_top4,
                share(r.silent_top4, top4)
            );
        }
    }

    fn cost_to_terminal(&self, t: &mut String) {
        let _ = writeln!(t, "\ncost: {}", self.cost.line());
        let q = &self.time;
        let _ = writeln!(
            t,
            "query time (median of {}): embed {:.2} ms, BM25 {:.2} ms, dense {:.2} ms, fusion {:.2} ms",
            q.queries, q.embed, q.bm25, q.dense, q.fuse
        );
    }

    fn ablation_to_terminal(&self, t: &mut String) {
        if !self.ablation.is_empty() {
            let _ = writeln!(t, "\nablation (R@k over {} in-domain queries)", self.n_in_domain());
            let _ = write!(t, "  {:<10} {:>6}", "config", "chunks");
            for k in &self.ks {
                let _ = write!(t, " {:>6}", format!("R@{k}"));
            }
            let _ = writeln!(t, " {:>6} {:>9}", "MRR", "destroyed");
            for st in &self.ablation {
                for e in &st.evals {
                    let s = &e.summaries.overall;
                    let _ = write!(t, "  {:<10} {:>6}", e.label(), e.chunks);
                    for &k in &self.ks {
                        let _ = write!(t, " {:>6.3}", s.recall_at(k));
                    }
                    let _ = writeln!(t, " {:>6.3} {:>9}", s.mrr, s.destroyed);
                }
            }
            let _ = writeln!(t, "\npaired comparisons (a − b: wins/losses, exact sign test)");
            for c in &self.comparisons {
                let _ = writeln!(
                    t,
                    "  {:<10} − {:<10} R@{:<3} {:+.3}  {:>2}/{:<2}  p = {:.4}",
                    c.a, c.b, c.k, c.delta, c.paired.wins, c.paired.losses, c.paired.p
                );
            }
        }
    }

    fn baseline_to_terminal(&self, t: &mut String) {
        if let Some(b) = &self.baseline {
            let _ = writeln!(t, "\nagainst the baseline {} (now − then)", b.file);
            for &k in &self.ks {
                if let Some(p) = b.at.get(&k.to_string()) {
                    let _ = writeln!(t, "  R@{k:<3} {:+.3}  {} wins / {} losses  p = {:.4}", p.delta(), p.wins, p.losses, p.p);
                }
            }
        }
    }

    /// The distance-distribution and sweep plots, as SVG.
    pub fn plots(&self) -> Result<Vec<(&'static str, String)>, String> {
        let markers = self.markers();
        let mut out =
            vec![("distances.svg", plot::distances_svg(&distances(self.main.in_domain()), &distances(self.main.ood()), &markers)?)];
        if let Some(rows) = &self.sweep {
            out.push(("sweep.svg", plot::sweep_svg(rows, self.n_in_domain(), self.n_ood(), &markers)?));
        }
        Ok(out)
    }

    fn markers(&self) -> Vec<Marker> {
        let mut m = Vec::new();
        if let Some(c) = self.chosen_cut {
            m.push(Marker { at: c as f64, label: format!("chosen cut {c:.3} (≤ {} bluffs)", self.max_bluffs) });
        }
        if self.chosen_cut != Some(self.index_cut) {
            m.push(Marker { at: self.index_cut as f64, label: format!("index cut {:.3}", self.index_cut) });
        }
        m
    }

    /// The Markdown report; `plot_dir` is the plots' folder relative to the report.
    pub fn to_markdown(&self, plot_dir: &str) -> String {
        let mut md = String::new();
        let m = &self.main;
        let _ = writeln!(md, "# Retrieval evaluation\n");
        let _ = writeln!(md, "Generated by `needle eval`; regenerate this report (and its plots) with:\n");
        let _ = writeln!(md, "```sh\n{}\n```\n", self.command);
        let _ = writeln!(
            md,
            "Everything below is measured, not estimated: {} in-domain queries ({} questions × a doc and a ticket phrasing) and {} \
             out-of-domain queries, model {}. A hit answers a query when its quoted content, lowercased with whitespace runs collapsed, \
             contains the question's needle normalised the same way. Intervals are 95 % Wilson score intervals; comparisons are exact \
             two-sided sign tests on the queries where the two configurations disagree.\n",
            self.n_in_domain(),
            m.summaries.doc.n.max(m.summaries.ticket.n),
            self.n_ood(),
            self.model
        );
        for w in &self.warnings {
            let _ = writeln!(md, "> warning: {w}\n");
        }

        let _ = writeln!(md, "## Retrieval\n");
        let _ = writeln!(
            md,
            "{} — {}{} ranking, {} chunks. Recall@k counts queries with an answering chunk in the top k of the ungated ranking; MRR is over the top {}.\n",
            self.target,
            m.strategy.as_deref().map(|s| format!("strategy {s}, ")).unwrap_or_default(),
            m.mode.name(),
            m.chunks,
            self.ks.iter().max().copied().unwrap_or(score::GATE_DEPTH).max(score::GATE_DEPTH)
        );
        let _ = write!(md, "| queries | n |");
        for k in &self.ks {
            let _ = write!(md, " R@{k} [95 % CI] |");
        }
        let _ = writeln!(md, " MRR | destroyed |");
        let _ = writeln!(md, "|---|---:|{}---:|---:|", "---|".repeat(self.ks.len()));
        for (name, s) in [("overall", &m.summaries.overall), ("doc", &m.summaries.doc), ("ticket", &m.summaries.ticket)] {
            let _ = write!(md, "| {name} | {} |", s.n);
            for &k in &self.ks {
                let _ = write!(md, " {} |", Self::recall_cell(s, k));
            }
            let _ = writeln!(md, " {:.3} | {} |", s.mrr, s.destroyed);
        }
        md.push('\n');
        self.markdown_plain(&mut md);

        if !self.ablation.is_empty() {
            self.markdown_ablation(&mut md);
        }

        if let Some(rows) = &self.sweep {
            self.markdown_sweep(&mut md, rows, plot_dir);
        } else {
            let _ = writeln!(md, "## Distances\n\n![distance distribution]({plot_dir}/distances.svg)\n");
        }

        let _ = writeln!(md, "## Cost\n");
        let _ = writeln!(md, "- Index: {}.", self.cost.line());
        let _ = writeln!(md, "- Times are wall-clock on the machine that ran this report, as it was loaded at the time.");
        let q = &self.time;
        let _ = writeln!(
            md,
            "- Query time, median of {} queries: embed {:.2} ms, BM25 {:.2} ms, dense scan {:.2} ms, fusion {:.2} ms.\n",
            q.queries, q.embed, q.bm25, q.dense, q.fuse
        );
        if let Some(b) = &self.baseline {
            let _ = writeln!(md, "## Against the baseline\n\n`{}` (now − then):\n", b.file);
            let _ = writeln!(md, "| k | Δ recall | wins | losses | p |\n|---:|---:|---:|---:|---:|");
            for &k in &self.ks {
                if let Some(p) = b.at.get(&k.to_string()) {
                    let _ = writeln!(md, "| {k} | {:+.3} | {} | {} | {:.4} |", p.delta(), p.wins, p.losses, p.p);
                }
            }
            md.push('\n');
        }
        self.markdown_queries(&mut md);
        md
    }

    fn markdown_plain(&self, md: &mut String) {
        let Some(plain) = &self.plain else { return };
        let _ = writeln!(md, "## The page list against plain fusion\n");
        let _ = writeln!(
            md,
            "Hybrid as needle ranks by default (`--fusion pages`: the plain fusion's first hit, then BM25, dense and the page list fused) \
             against plain fusion of BM25 and dense (`--fusion plain`, the method before it), on the same queries.\n"
        );
        let _ = write!(md, "| queries | fusion |");
        for k in &self.ks {
            let _ = write!(md, " R@{k} |");
        }
        let _ = writeln!(md, " MRR |\n|---|---|{}---:|", "---:|".repeat(self.ks.len()));
        for (name, now, then) in [
            ("overall", &self.main.summaries.overall, &plain.summaries.overall),
            ("doc", &self.main.summaries.doc, &plain.summaries.doc),
            ("ticket", &self.main.summaries.ticket, &plain.summaries.ticket),
        ] {
            for (fusion, s) in [("plain", then), ("pages", now)] {
                let _ = write!(md, "| {name} | {fusion} |");
                for &k in &self.ks {
                    let _ = write!(md, " {:.3} |", s.recall_at(k));
                }
                let _ = writeln!(md, " {:.3} |", s.mrr);
            }
        }
        let _ = writeln!(
            md,
            "\npages − plain: wins = queries only the page list answers within k, losses = only plain. p is the exact two-sided sign test; * marks p < 0.05.\n"
        );
        let _ = writeln!(md, "| queries | k | Δ recall | wins | losses | p |\n|---|---:|---:|---:|---:|---:|");
        for (name, k, p) in self.plain_against() {
            let star = if p.p < 0.05 { " *" } else { "" };
            let _ = writeln!(md, "| {name} | {k} | {:+.3} | {} | {} | {:.4}{star} |", p.delta(), p.wins, p.losses, p.p);
        }
        let gates = self.gates_by_fusion();
        if !gates.is_empty() {
            let _ = writeln!(
                md,
                "\nRefusal with each ({} out-of-domain and {} answerable queries):\n\n| fusion and gate | bluffs | refused | dropped |\n|---|---:|---:|---:|",
                self.n_ood(),
                self.n_in_domain()
            );
            for (what, r) in gates {
                let _ = writeln!(md, "| {what} | {} | {} | {} |", r.bluffs, r.refused, r.dropped);
            }
        }
        md.push('\n');
    }

    fn markdown_ablation(&self, md: &mut String) {
        let _ = writeln!(md, "## Ablation: chunking strategies × retrievers\n");
        let c = needle::doc::chunk::ChunkConfig::default();
        let _ = writeln!(
            md,
            "A: blind cuts every {t} characters; B = A + the previous chunk's last {o} characters; C: the page's blocks packed up \
             to {t} characters (a heading starts a chunk, a longer block is split at sentences); D = C + overlap; E = C + the \
             contextual header `[page title > section]`, embedded but never quoted; F = E + overlap. Each strategy is a separate \
             index of the same site; every query is embedded once and searched in all of them.\n",
            t = c.target_chars,
            o = c.overlap_chars
        );
        let _ = write!(md, "| strategy | retriever | chunks |");
        for k in &self.ks {
            let _ = write!(md, " R@{k} |");
        }
        let _ = writeln!(md, " MRR | destroyed | doc R@8 | ticket R@8 |");
        let _ = writeln!(md, "|---|---|---:|{}---:|---:|---:|---:|", "---:|".repeat(self.ks.len()));
        for st in &self.ablation {
            for e in &st.evals {
                let s = &e.summaries;
                let _ = write!(md, "| {} | {} | {} |", st.name, e.mode.name(), e.chunks);
                for &k in &self.ks {
                    let _ = write!(md, " {:.3} |", s.overall.recall_at(k));
                }
                let _ = writeln!(
                    md,
                    " {:.3} | {} | {:.3} | {:.3} |",
                    s.overall.mrr,
                    s.overall.destroyed,
                    s.doc.recall_at(8),
                    s.ticket.recall_at(8)
                );
            }
        }
        let _ = writeln!(md, "\n### Index cost per strategy\n");
        let _ = writeln!(md, "| strategy | chunks | split for the window | embedded tokens | header share | build ms/chunk |\n|---|---:|---:|---:|---:|---:|");
        for st in &self.ablation {
            let c = &st.cost;
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {:.1} % | {} |",
                st.name,
                c.chunks,
                opt(c.split_for_window.map(|n| n.to_string())),
                c.embedded_tokens,
                100.0 * c.header_share(),
                opt(c.build_ms_per_chunk.map(|m| format!("{m:.1}")))
            );
        }
        let _ = writeln!(md, "\n### Paired comparisons\n");
        let _ = writeln!(
            md,
            "a − b on the same {} queries: wins = queries only a answers within k, losses = only b. p is the exact two-sided sign test on wins + losses; * marks p < 0.05.\n",
            self.n_in_domain()
        );
        let _ = writeln!(md, "| a | b | k | Δ recall | wins | losses | p |\n|---|---|---:|---:|---:|---:|---:|");
        for c in &self.comparisons {
            let sig = if c.paired.p < 0.05 { " *" } else { "" };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {:+.3} | {} | {} | {:.4}{sig} |",
                c.a, c.b, c.k, c.delta, c.paired.wins, c.paired.losses, c.paired.p
            );
        }
        md.push('\n');
    }

    fn markdown_sweep(&self, md: &mut String, rows: &[SweepRow], plot_dir: &str) {
        let m = &self.main;
        let _ = writeln!(md, "## Refusal: where the cut goes\n");
        let _ = writeln!(
            md,
            "The gate walks the top {} of the {} ranking and keeps at most {} chunks whose cosine distance is under the cut; none \
             means NO ANSWER. Bluffs are out-of-domain queries still answered; refused are in-domain queries answered NO ANSWER; \
             dropped are in-domain queries whose answering chunk is in the top {} but not among the chunks the gate keeps \
             (a refused query with its answer in the top {} counts in both).\n",
            score::GATE_DEPTH,
            m.mode.name(),
            self.max_chunks,
            score::GATE_DEPTH,
            score::GATE_DEPTH
        );
        let _ = writeln!(
            md,
            "| cut | bluffs (of {}) | refused (of {}) | dropped (of {}) |\n|---:|---:|---:|---:|",
            self.n_ood(),
            self.n_in_domain(),
            self.n_in_domain()
        );
        for r in rows {
            let mark = if Some(r.cut) == self.chosen_cut { " ← chosen" } else { "" };
            let _ = writeln!(md, "| {:.3}{mark} | {} | {} | {} |", r.cut, r.bluffs, r.refused, r.dropped);
        }
        md.push('\n');
        match self.chosen_cut {
            Some(c) => {
                let r = self.row_at(c);
                let _ = writeln!(
                    md,
                    "With at most {} bluffs (`--max-bluffs {}`), the cut that refuses least is **{c:.3}**: {} bluffs, {} refused, {} dropped. \
                     Build with it: `needle build SITE --cut {c:.3}`.",
                    self.max_bluffs, self.max_bluffs, r.bluffs, r.refused, r.dropped
                );
            }
            None => {
                let _ = writeln!(md, "No cut of the sweep lets at most {} out-of-domain queries through.", self.max_bluffs);
            }
        }
        let r = self.own_gate();
        let _ = writeln!(
            md,
            "The index answered with {}: **{} bluffs, {} refused**, {} dropped (of {} out-of-domain and {} answerable queries).\n",
            self.gate_words(),
            r.bluffs,
            r.refused,
            r.dropped,
            self.n_ood(),
            self.main.runs.iter().filter(|r| r.in_domain()).count()
        );
        let _ = writeln!(
            md,
            "Can a stated answer be trusted? Of the {} answerable queries given one, {} cite a chunk that holds the needle ({}); \
             {} of the {} queries with the needle in the top 4 get no stated answer ({}).\n",
            r.stated,
            r.stated_right,
            share(r.stated_right, r.stated),
            r.silent_top4,
            self.main.runs.iter().filter(|q| q.in_domain() && q.hit_at(4)).count(),
            share(r.silent_top4, self.main.runs.iter().filter(|q| q.in_domain() && q.hit_at(4)).count()),
        );
        let _ = writeln!(md, "Other bluff budgets:\n\n| at most … bluffs | cut | bluffs | refused | dropped |\n|---:|---:|---:|---:|---:|");
        for (b, row) in self.cut_by_budget() {
            match row {
                Some(r) => {
                    let _ = writeln!(md, "| {b} | {:.3} | {} | {} | {} |", r.cut, r.bluffs, r.refused, r.dropped);
                }
                None => {
                    let _ = writeln!(md, "| {b} | none | | | |");
                }
            }
        }
        md.push('\n');
        let _ = writeln!(md, "![refusal sweep]({plot_dir}/sweep.svg)\n");

        let ind = distances(m.in_domain());
        let ood = distances(m.ood());
        let _ = writeln!(md, "### Distance distributions\n");
        let _ = writeln!(
            md,
            "In-domain: the cosine distance of the closest chunk that contains the needle (anywhere in the index, not only in the top {}). \
             Out-of-domain: the distance of the closest chunk of all. A cut separates them where the two do not overlap.\n",
            score::GATE_DEPTH
        );
        let _ = writeln!(md, "| | n | min | 25 % | median | 75 % | max |\n|---|---:|---:|---:|---:|---:|---:|");
        for (name, v) in [("in-domain answering chunk", &ind), ("out-of-domain best chunk", &ood)] {
            let q = |p| stats::quantile(v, p).map(|x| format!("{x:.3}")).unwrap_or_else(|| "–".into());
            let _ = writeln!(md, "| {name} | {} | {} | {} | {} | {} | {} |", v.len(), q(0.0), q(0.25), q(0.5), q(0.75), q(1.0));
        }
        let _ = writeln!(md, "\n![distance distributions]({plot_dir}/distances.svg)\n");
    }

    fn markdown_queries(&self, md: &mut String) {
        let _ = writeln!(md, "## Per query\n");
        let _ = writeln!(
            md,
            "<details><summary>{} queries: rank of the first answering chunk ({}), distance of the closest answering (or, out of domain, closest) chunk, chunks kept by the index's gate</summary>\n",
            self.main.runs.len(),
            self.main.mode.name()
        );
        let _ = writeln!(md, "| id | phrasing | rank | closest | kept |\n|---|---|---:|---:|---:|");
        for r in &self.main.runs {
            let rank = match (r.rank(), r.destroyed, r.phrasing) {
                (_, _, Phrasing::Ood) => "–".to_string(),
                (_, true, _) => "destroyed".to_string(),
                (Some(k), _, _) => k.to_string(),
                (None, _, _) => format!("> {}", r.hits.len()),
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} |",
                r.id,
                r.phrasing.name(),
                rank,
                r.closest.map(|d| format!("{d:.3}")).unwrap_or_else(|| "–".into()),
                r.gated(r.cut, self.max_chunks).len()
            );
        }
        let _ = writeln!(md, "\n</details>");
    }
}

/// `part` of `whole` as a percentage, or "–" of nothing.
fn share(part: usize, whole: usize) -> String {
    if whole == 0 {
        return "–".into();
    }
    format!("{:.0} %", 100.0 * part as f64 / whole as f64)
}

#[cfg(test)]
mod tests {
    use super::super::score::tests::run;
    use super::*;

    fn outcome() -> Outcome {
        let runs = vec![
            run("q1", Phrasing::Doc, &[0.30, 0.40], Some(0)),
            run("q2", Phrasing::Doc, &[0.45, 0.5, 0.55, 0.6, 0.62], Some(4)),
            run("q1", Phrasing::Ticket, &[0.55, 0.58], Some(1)),
            run("q2", Phrasing::Ticket, &[0.7, 0.8], None),
            run("o1", Phrasing::Ood, &[0.52, 0.7], None),
        ];
        let ks = vec![1, 4, 8, 20];
        let main = Evaluation::new(Some("E".into()), Mode::Hybrid, 7, runs, &ks);
        let sweep = score::sweep(&main.runs, &score::sweep_cuts(), 4);
        let chosen_cut = score::choose_cut(&sweep, 0);
        let time = QueryTime::of(&main.runs, &[5.0, 7.0, 6.0]);
        let strategies: Vec<Strategy> = ["A", "E"]
            .iter()
            .map(|s| Strategy {
                name: s.to_string(),
                cost: Cost { chunks: 7, ..Default::default() },
                evals: [Mode::Bm25, Mode::Dense, Mode::Hybrid]
                    .into_iter()
                    .map(|m| Evaluation::new(Some(s.to_string()), m, 7, main.runs.clone(), &ks))
                    .collect(),
            })
            .collect();
        let comparisons = ablation_comparisons(&strategies);
        Outcome {
            command: "needle eval site --qrels q.jsonl --ood o.jsonl".into(),
            target: "site".into(),
            site: Some("site".into()),
            model: "all-MiniLM-L6-v2".into(),
            ks,
            max_chunks: 4,
            index_cut: 0.6,
            index_gate: Gate::Cut,
            lexical_gate: None,
            fusion: Fusion::Pages,
            plain: Some(main.clone()),
            main,
            cost: Cost { chunks: 7, embedded_tokens: 100, header_tokens: 20, ..Default::default() },
            time,
            sweep: Some(sweep),
            max_bluffs: 0,
            chosen_cut,
            ablation: strategies,
            comparisons,
            baseline: None,
            warnings: vec![],
        }
    }

    #[test]
    fn the_json_carries_the_documented_keys() {
        let o = outcome();
        let j = o.to_json();
        for part in ["overall", "doc", "ticket"] {
            for key in ["n", "recall", "wilson", "mrr", "destroyed"] {
                assert!(j[part].get(key).is_some(), "{part}.{key}");
            }
        }
        assert_eq!(j["overall"]["n"], 4);
        assert_eq!(j["overall"]["recall"]["1"], 0.25);
        assert_eq!(j["overall"]["recall"]["8"], 0.75);
        assert_eq!(j["doc"]["n"], 2);
        assert!(j["overall"]["wilson"]["4"].as_array().is_some_and(|a| a.len() == 2));
        let sweep = j["sweep"].as_array().unwrap();
        assert_eq!(sweep.len(), 17);
        assert_eq!(sweep[0]["cut"], 0.4);
        assert_eq!(sweep[7]["cut"], 0.575);
        for key in ["cut", "bluffs", "refused", "dropped"] {
            assert!(sweep[3].get(key).is_some());
        }
        // o1's best chunk is at 0.52, so no bluff means a cut ≤ 0.5; 0.475 and 0.5 both refuse
        // q1 and q2 ticket and drop two answers: the lower cut wins the tie.
        assert_eq!(j["chosen_cut"], 0.475);
        // A ⨉ {bm25, dense, hybrid} compared with itself: E–A at 8 and 20 per mode, then
        // hybrid–BM25 and hybrid–dense at 4 for both strategies.
        assert_eq!(j["comparisons"].as_array().unwrap().len(), 3 * 2 + 2 * 2);
    }

    #[test]
    fn terminal_and_markdown_agree_with_the_json() {
        let o = outcome();
        let t = o.to_terminal();
        assert!(t.contains("overall    4  0.250 ["), "{t}");
        assert!(t.contains("← chosen"));
        let md = o.to_markdown("eval");
        assert!(md.contains("```sh\nneedle eval site --qrels q.jsonl --ood o.jsonl\n```"));
        assert!(md.contains("![refusal sweep](eval/sweep.svg)"));
        assert!(md.contains("![distance distributions](eval/distances.svg)"));
        assert!(md.contains("| 0.475 ← chosen |"));
        assert!(md.contains("| E/hybrid | A/hybrid | 8 |"));
        let plots = o.plots().unwrap();
        assert_eq!(plots.iter().map(|p| p.0).collect::<Vec<_>>(), ["distances.svg", "sweep.svg"]);
    }
}
