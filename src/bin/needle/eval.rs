//! `needle eval`: measures retrieval on a question set without calling any language model.
//! A question names a verbatim sentence (the needle) of the page that answers it; a hit
//! answers when its quoted content contains the needle under [`needle::doc::text::normalize_for_match`].
//! Reports Recall@k with Wilson intervals, MRR, destroyed questions, paired sign tests between
//! configurations (`--ablate`: strategies A–F × BM25 / dense / hybrid), and the refusal sweep
//! that picks the gate's cut (`--ood`, `--max-bluffs`).
//! Invariants: each query is embedded once and its vector reused by every mode, cut and
//! strategy (the sweep re-gates stored rankings); the qrels are validated against the site's
//! canonical text before anything is scored.
//!
//! Reading order: [`qrels`] (question sets), [`score`] (metrics over stored rankings),
//! [`stats`] (Wilson, sign test), [`report`] (terminal, JSON, Markdown), [`plot`] (SVG), and
//! `run` (indexes, embedding, searching: the only part that needs the model).

pub mod plot;
pub mod qrels;
pub mod report;
pub mod score;
pub mod stats;

mod run;

use crate::{FusionArg, ModeArg};
use std::path::PathBuf;

#[derive(Debug, Clone, clap::Args)]
pub struct EvalArgs {
    /// An index folder (holding index.needle), an index file, or a site folder; a site is
    /// indexed in memory with the default options first.
    #[arg(value_name = "INDEX_OR_SITE")]
    pub target: PathBuf,
    /// Questions, one JSON object a line: {"id","page","needle","q_doc","q_ticket"}.
    #[arg(long, value_name = "QRELS.jsonl")]
    pub qrels: PathBuf,
    /// Out-of-domain queries, {"id","query"} a line: turns on the refusal sweep.
    #[arg(long, value_name = "OOD.jsonl")]
    pub ood: Option<PathBuf>,
    /// The site, to validate the qrels against its canonical text and to build the ablation
    /// (default: the target if it is a site, else the site folder the index records).
    #[arg(long, value_name = "DIR")]
    pub site: Option<PathBuf>,
    /// Cut-offs for Recall@k.
    #[arg(long, value_delimiter = ',', default_value = "1,4,8,20")]
    pub k: Vec<usize>,
    /// The ranking to score: hybrid, bm25 or dense.
    #[arg(long, default_value = "hybrid", ignore_case = true)]
    pub mode: ModeArg,
    /// How hybrid fuses: pages (BM25, dense and the page list, the default) or plain (BM25 and
    /// dense). With pages the report also scores plain on the same queries, side by side.
    #[arg(long, default_value = "pages", ignore_case = true)]
    pub fusion: FusionArg,
    /// At most this many chunks pass the gate (default: the index's setting).
    #[arg(long, value_name = "N")]
    pub max_chunks: Option<usize>,
    /// The readers' language (a BCP 47 tag): the questions are analyzed in it and only pages in
    /// it are searched, as `needle query --lang` does (default: the site's main language, every
    /// page). One language of a site written in several is scored this way.
    #[arg(long, value_name = "L")]
    pub lang: Option<String>,
    /// Bluff budget of the sweep: the chosen cut refuses least among the cuts that let at
    /// most N out-of-domain queries through.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_bluffs: usize,
    /// Also build strategies A–F from the site and score BM25, dense and hybrid on each.
    #[arg(long)]
    pub ablate: bool,
    /// Write the results as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a Markdown report; its two SVG plots go into a folder beside it named after it
    /// (EVAL.md → eval/).
    #[arg(long, value_name = "FILE.md")]
    pub report: Option<PathBuf>,
    /// Write the per-query results (rank of the first answering hit), for a later --baseline.
    #[arg(long, value_name = "FILE")]
    pub save_runs: Option<PathBuf>,
    /// Compare with per-query results saved by --save-runs: wins, losses, sign test at each k.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Exit with an error when the baseline comparison shows a significant loss (p < 0.05) at
    /// this k.
    #[arg(long, value_name = "K", requires = "baseline")]
    pub fail_below_baseline: Option<usize>,
    /// Score without checking the needles against the site (when the site is not at hand).
    #[arg(long)]
    pub skip_validation: bool,
    /// Only check the question set (and the out-of-domain list) against the site, then stop:
    /// no model is loaded and no index is read or built. For writing a question set.
    #[arg(long, conflicts_with = "skip_validation")]
    pub check: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("{0}")]
    Invalid(String),
    #[error("{path}: {cause}")]
    Io { path: PathBuf, cause: std::io::Error },
    #[error("{file}: the question set is not valid:\n  {}", problems.join("\n  "))]
    Qrels { file: String, problems: Vec<String> },
    #[error(transparent)]
    Needle(#[from] needle::Error),
    #[error("{file}: {mode} R@{k} fell significantly below the baseline: {wins} wins, {losses} losses, sign test p = {p:.4}")]
    Regression { file: String, mode: &'static str, k: usize, wins: usize, losses: usize, p: f64 },
}

impl EvalError {
    pub(crate) fn io(path: impl Into<PathBuf>, cause: std::io::Error) -> Self {
        EvalError::Io { path: path.into(), cause }
    }
}

/// Runs `needle eval` as the command line asked, with the model in `files` (`None` only with
/// `--check`, which loads none).
pub fn run_cli(args: EvalArgs, files: Option<needle::model::ModelFiles>) -> Result<(), EvalError> {
    run::run_cli(args, files)
}
