//! Running an evaluation: find or build the index, validate the questions against the site,
//! embed every query once, search, and hand the rankings to [`super::score`].
//! Invariants: one query vector per query text serves every mode, strategy and cut; the
//! searches go through [`needle::query::search::search`], the function `needle query` answers with.

use super::qrels::{self, Query, Question};
use super::report::{self, Cost, Evaluation, Outcome, QueryTime, Strategy};
use super::score::{self, QueryRun, SavedRuns};
use super::{EvalArgs, EvalError};
use needle::build::{self, BuildOptions, BuildReport, LoadedModel};
use needle::doc::chunk::{self, ChunkConfig};
use needle::doc::extract::ExtractOptions;
use needle::doc::text::{normalize_for_match, Document};
use needle::embed::Embedder;
use needle::model::ModelFiles;
use needle::query::index::{self, Index};
use needle::query::search::{self, Fusion, Mode, QueryVector, SearchOptions};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

const MODES: [Mode; 3] = [Mode::Bm25, Mode::Dense, Mode::Hybrid];

enum Target {
    /// The index file, read once here (reading builds nothing; it names its site).
    Index(PathBuf, Box<Index>),
    Site(PathBuf),
}

fn resolve(path: &Path) -> Result<Target, EvalError> {
    let read = |file: PathBuf| Ok(Target::Index(file.clone(), Box::new(build::read_index(&file)?)));
    if path.is_file() {
        read(path.to_path_buf())
    } else if path.join(index::INDEX_FILE).is_file() {
        read(path.join(index::INDEX_FILE))
    } else if path.is_dir() {
        Ok(Target::Site(path.to_path_buf()))
    } else {
        Err(EvalError::Invalid(format!("{}: no such index or site folder", path.display())))
    }
}

fn needle_err(e: impl Into<needle::Error>) -> EvalError {
    EvalError::Needle(e.into())
}

fn progress(msg: &str) {
    eprintln!("{msg}");
}

pub fn run_cli(args: EvalArgs, files: Option<ModelFiles>) -> Result<(), EvalError> {
    let (mode, fusion) = (Mode::from(args.mode), Fusion::from(args.fusion));
    // Everything that can be wrong with the inputs is found before any index is built.
    let mut ks = args.k.clone();
    ks.sort_unstable();
    ks.dedup();
    if ks.is_empty() || ks[0] == 0 {
        return Err(EvalError::Invalid("--k takes positive cut-offs, e.g. --k 1,4,8,20".into()));
    }
    if let Some(k) = args.fail_below_baseline.filter(|k| !ks.contains(k)) {
        return Err(EvalError::Invalid(format!("--fail-below-baseline {k}: {k} is not one of --k")));
    }
    let questions = qrels::load_questions(&args.qrels)?;
    let ood = match &args.ood {
        Some(p) => qrels::load_ood(p)?,
        None => Vec::new(),
    };
    let saved_baseline = args.baseline.as_deref().map(read_baseline).transpose()?;
    let target = resolve(&args.target)?;
    let site = match (&args.site, &target) {
        (Some(site), _) => Some(site.clone()),
        (None, Target::Site(p)) => Some(p.clone()),
        // The index records its site relative to its own folder (formats 1 and 2 did not: ask).
        (None, Target::Index(file, index)) => index.header.site_folder(file),
    };
    let site_dir = |why: &str| {
        site.as_deref()
            .filter(|s| s.is_dir())
            .ok_or_else(|| EvalError::Invalid(format!("{}: {why}, and no site folder was found; pass --site DIR", args.target.display())))
    };
    let mut warnings = Vec::new();
    if args.skip_validation {
        warnings.push("the needles were not checked against the site (--skip-validation)".to_string());
    } else {
        let site = site_dir("the qrels are validated against the site's text (or pass --skip-validation)")?;
        warnings.extend(validate_against_site(&questions, &args.qrels, site)?);
    }
    if args.check {
        for w in &warnings {
            eprintln!("warning: {w}");
        }
        println!(
            "{}: {} questions, {} out-of-domain queries; every needle occurs exactly once in the site's canonical text",
            args.qrels.display(),
            questions.len(),
            ood.len()
        );
        return Ok(());
    }
    let ablation_site = if args.ablate { Some(site_dir("--ablate builds the site with each strategy")?) } else { None };

    let files = files.ok_or_else(|| EvalError::Invalid("needle eval needs the model (only --check runs without it)".into()))?;
    let model = LoadedModel::load(&files)?;
    let embedder = model.embedder()?;
    let (index, built) = open_or_build(target, &model)?;
    if index.header.settings.gate_depth as usize != score::GATE_DEPTH {
        return Err(EvalError::Invalid(format!(
            "{}: its gate walks the top {} hits; needle eval scores the gate at depth {}",
            args.target.display(),
            index.header.settings.gate_depth,
            score::GATE_DEPTH
        )));
    }
    let queries = qrels::queries(&questions, &ood);
    let (vectors, embed_ms) = embed_all(&embedder, &queries)?;
    let max_chunks = args.max_chunks.unwrap_or(index.header.settings.max_chunks as usize);
    let depth = ks.iter().copied().max().unwrap_or(score::GATE_DEPTH).max(score::GATE_DEPTH);
    let lang = args.lang.as_deref();
    let ctx = Context { questions: &questions, queries: &queries, vectors: &vectors, depth, max_chunks, ks: &ks, fusion, lang };

    let main = ctx.evaluate(&index, &[mode], fusion).remove(0);
    // The method before the page list, on the same queries: what the default is measured against.
    let plain = (mode == Mode::Hybrid && fusion == Fusion::Pages).then(|| ctx.evaluate(&index, &[Mode::Hybrid], Fusion::Plain).remove(0));
    let sweep = (!ood.is_empty()).then(|| score::sweep(&main.runs, &score::sweep_cuts(), max_chunks));
    let chosen_cut = sweep.as_ref().and_then(|rows| score::choose_cut(rows, args.max_bluffs));
    let cost = match &built {
        Some(r) => cost_of_build(r),
        None => cost_of_index(&index, &embedder)?,
    };
    let ablation = match ablation_site {
        // The index built here with the default options is one of the strategies.
        Some(site) => ablate(&ctx, site, &model, built.is_some().then_some((&index, &cost)))?,
        None => Vec::new(),
    };
    let baseline = match (&saved_baseline, &args.baseline) {
        (Some(saved), Some(path)) => {
            Some(score::compare_with_baseline(&main.runs, saved, &ks, &path.display().to_string()).map_err(EvalError::Invalid)?)
        }
        _ => None,
    };

    let outcome = Outcome {
        command: command_line(),
        target: args.target.display().to_string(),
        site: site.as_ref().map(|s| s.display().to_string()),
        model: model_label(&model, &files),
        ks: ks.clone(),
        max_chunks,
        index_cut: index.header.settings.cut,
        index_gate: index.header.settings.gate,
        lexical_gate: {
            let reader = index.header.analysis.reader_lang(lang);
            let cut = index.header.settings.lexical_cut(reader).filter(|_| !needle::query::search::model_reads(reader));
            cut.map(|c| (reader.to_string(), c))
        },
        time: QueryTime::of(&main.runs, &embed_ms),
        fusion,
        main,
        plain,
        cost,
        sweep,
        max_bluffs: args.max_bluffs,
        chosen_cut,
        comparisons: report::ablation_comparisons(&ablation),
        ablation,
        baseline,
        warnings,
    };
    print!("{}", outcome.to_terminal());
    write_outputs(&args, &outcome, &model)?;

    if let (Some(k), Some(b)) = (args.fail_below_baseline, &outcome.baseline) {
        if let Some(p) = b.at.get(&k.to_string()).filter(|p| p.significantly_worse(0.05)) {
            return Err(EvalError::Regression { file: b.file.clone(), mode: mode.name(), k, wins: p.wins, losses: p.losses, p: p.p });
        }
    }
    Ok(())
}

fn model_label(model: &LoadedModel, files: &ModelFiles) -> String {
    format!(
        "{} ({}, sha256 {}…)",
        model.stamp.name,
        files.model.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(),
        model.stamp.model_sha256.get(..12).unwrap_or(&model.stamp.model_sha256)
    )
}

fn read_baseline(path: &Path) -> Result<SavedRuns, EvalError> {
    let text = std::fs::read_to_string(path).map_err(|e| EvalError::io(path, e))?;
    let saved: SavedRuns = serde_json::from_str(&text).map_err(|e| EvalError::Invalid(format!("{}: {e}", path.display())))?;
    if saved.format != score::RUNS_FORMAT {
        return Err(EvalError::Invalid(format!("{}: format {:?}, expected {:?}", path.display(), saved.format, score::RUNS_FORMAT)));
    }
    Ok(saved)
}

/// Checks the needles against the site's canonical text; returns the warnings.
fn validate_against_site(questions: &[Question], qrels_file: &Path, site: &Path) -> Result<Vec<String>, EvalError> {
    let docs = site_documents(site)?;
    if docs.is_empty() {
        return Err(EvalError::Invalid(format!(
            "{}: no pages to check the qrels against; pass --site with the site folder the index was built from",
            site.display()
        )));
    }
    match qrels::validate(questions, &docs, &qrels_file.display().to_string()) {
        Ok(v) => Ok(v.warnings),
        Err(EvalError::Qrels { file, mut problems }) => {
            problems.push(format!("(checked against the canonical text of the {} pages of {})", docs.len(), site.display()));
            Err(EvalError::Qrels { file, problems })
        }
        Err(other) => Err(other),
    }
}

/// The index to score: the target's (checked against the model), or the site built with the
/// default options, with the build's report.
fn open_or_build(target: Target, model: &LoadedModel) -> Result<(Index, Option<BuildReport>), EvalError> {
    match target {
        Target::Index(file, index) => {
            index.check_model(&model.stamp, &file.display().to_string()).map_err(needle_err)?;
            Ok((*index, None))
        }
        Target::Site(dir) => {
            progress(&format!("indexing {} (default options)…", dir.display()));
            let opts = BuildOptions { progress: std::io::stderr().is_terminal(), ..BuildOptions::default() };
            let (index, report) = build::build_index(&dir, model, &opts, None)?;
            Ok((index, Some(report)))
        }
    }
}

/// Every query's vector, and how long each took.
fn embed_all(embedder: &Embedder, queries: &[Query]) -> Result<(Vec<QueryVector>, Vec<f64>), EvalError> {
    progress(&format!("embedding {} queries…", queries.len()));
    let mut vectors = Vec::with_capacity(queries.len());
    let mut ms = Vec::with_capacity(queries.len());
    for q in queries {
        let t = search::now_ms();
        vectors.push(embedder.query(&q.text).map_err(needle_err)?);
        ms.push(search::now_ms() - t);
    }
    Ok((vectors, ms))
}

/// Builds the site with strategies A–F and scores BM25, dense and hybrid on each. `default`
/// is an index already built here with the default options, reused for its strategy.
fn ablate(ctx: &Context<'_>, site: &Path, model: &LoadedModel, default: Option<(&Index, &Cost)>) -> Result<Vec<Strategy>, EvalError> {
    let mut out = Vec::new();
    for strategy in chunk::Strategy::ALL {
        let config = ChunkConfig { strategy, ..ChunkConfig::default() };
        let (evals, cost) = match default.filter(|(idx, _)| idx.header.settings.chunk == config) {
            Some((idx, cost)) => (ctx.evaluate(idx, &MODES, ctx.fusion), cost.clone()),
            None => {
                progress(&format!("ablation: indexing {} with strategy {strategy}…", site.display()));
                let opts = BuildOptions { chunk: config, progress: std::io::stderr().is_terminal(), ..BuildOptions::default() };
                let (idx, rep) = build::build_index(site, model, &opts, None)?;
                (ctx.evaluate(&idx, &MODES, ctx.fusion), cost_of_build(&rep))
            }
        };
        out.push(Strategy { name: strategy.to_string(), cost, evals });
    }
    Ok(out)
}

/// What every configuration is scored on.
struct Context<'a> {
    questions: &'a [Question],
    queries: &'a [Query],
    vectors: &'a [QueryVector],
    depth: usize,
    max_chunks: usize,
    ks: &'a [usize],
    /// How the main evaluation and the ablation fuse a hybrid ranking.
    fusion: Fusion,
    /// The readers' language (`--lang`).
    lang: Option<&'a str>,
}

impl Context<'_> {
    /// Searches every query in `index` with each mode and scores the rankings. What does not
    /// depend on the mode (answering chunks, closest distances) is computed once.
    fn evaluate(&self, index: &Index, modes: &[Mode], fusion: Fusion) -> Vec<Evaluation> {
        let answering = answering_chunks(index, self.questions);
        let closest: Vec<Option<f32>> = self
            .queries
            .iter()
            .zip(self.vectors)
            .map(|(q, v)| {
                let dist = search::distances(index, &v.vector);
                match q.question.and_then(|i| answering.get(i)) {
                    Some(set) => set.iter().filter_map(|&c| dist.get(c).copied()).reduce(f32::min),
                    None => dist.iter().copied().reduce(f32::min),
                }
            })
            .collect();
        let strategy = Some(index.header.settings.chunk.strategy.to_string());
        modes
            .iter()
            .map(|&mode| {
                let opts = SearchOptions {
                    mode,
                    fusion,
                    k: self.depth,
                    cut: None,
                    max_chunks: self.max_chunks,
                    lang: self.lang.map(str::to_string),
                };
                let runs: Vec<QueryRun> = self
                    .queries
                    .iter()
                    .zip(self.vectors)
                    .zip(&closest)
                    .map(|((q, v), &closest)| {
                        let result = search::search(index, &q.text, Some(v), &opts);
                        let set = q.question.and_then(|i| answering.get(i));
                        let answers = result.hits.iter().map(|h| set.is_some_and(|s| s.contains(&h.chunk))).collect();
                        let destroyed = set.is_some_and(|s| s.is_empty());
                        QueryRun {
                            id: q.id.clone(),
                            phrasing: q.phrasing,
                            hits: result.hits,
                            answers,
                            destroyed,
                            closest,
                            cut: result.cut,
                            lexical_cut: result.lexical_cut,
                            timings: result.timings,
                            walked: result.walked,
                        }
                    })
                    .collect();
                Evaluation::new(strategy.clone(), mode, index.header.chunks.len(), runs, self.ks)
            })
            .collect()
    }
}

/// Per question: the chunks whose quoted content contains its needle (the matching rule).
fn answering_chunks(index: &Index, questions: &[Question]) -> Vec<Vec<usize>> {
    let contents: Vec<String> = index.header.chunks.par_iter().map(|c| normalize_for_match(&c.content)).collect();
    questions
        .iter()
        .map(|q| {
            let needle = q.needle_norm();
            contents.iter().enumerate().filter(|(_, c)| c.contains(&needle)).map(|(i, _)| i).collect()
        })
        .collect()
}

/// The site's documents as the builder extracts them (default options); files that fail to
/// extract are left out, as the index leaves them out.
fn site_documents(site: &Path) -> Result<Vec<Document>, EvalError> {
    Ok(needle::build::site::extract_site(site, &ExtractOptions::default()).map_err(needle_err)?.documents().collect())
}

fn cost_of_build(r: &BuildReport) -> Cost {
    Cost {
        chunks: r.chunks,
        embedded_tokens: r.embedded_tokens,
        header_tokens: r.header_tokens,
        split_for_window: Some(r.split_for_window),
        build_seconds: Some(r.seconds),
        build_ms_per_chunk: Some(r.ms_per_chunk()),
        threads: Some(r.threads),
    }
}

/// The token counts of an index read from disk, counted the way the builder counts them.
fn cost_of_index(index: &Index, embedder: &Embedder) -> Result<Cost, EvalError> {
    let mut cost = Cost { chunks: index.header.chunks.len(), ..Cost::default() };
    for c in &index.header.chunks {
        cost.embedded_tokens += embedder.token_count(&c.embedded_text()).map_err(needle_err)?;
        if !c.header.is_empty() {
            cost.header_tokens += embedder.token_count(&c.header).map_err(needle_err)?.saturating_sub(2);
        }
    }
    Ok(cost)
}

/// The command as typed, with `needle` for the program, quoted for a POSIX shell.
fn command_line() -> String {
    let quote = |a: String| {
        if !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=,:@%+".contains(c)) {
            a
        } else {
            format!("'{}'", a.replace('\'', r"'\''"))
        }
    };
    std::iter::once("needle".to_string()).chain(std::env::args().skip(1).map(quote)).collect::<Vec<_>>().join(" ")
}

fn write_file(path: &Path, text: &str) -> Result<(), EvalError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| EvalError::io(dir, e))?;
    }
    std::fs::write(path, text).map_err(|e| EvalError::io(path, e))
}

fn write_outputs(args: &EvalArgs, outcome: &Outcome, model: &LoadedModel) -> Result<(), EvalError> {
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&outcome.to_json()).map_err(|e| EvalError::Invalid(e.to_string()))?;
        write_file(path, &(text + "\n"))?;
    }
    if let Some(path) = &args.report {
        let stem = path.file_stem().map(|s| s.to_string_lossy().to_lowercase()).unwrap_or_else(|| "report".into());
        let dir = path.parent().unwrap_or(Path::new("")).join(&stem);
        for (name, svg) in outcome.plots().map_err(EvalError::Invalid)? {
            write_file(&dir.join(name), &svg)?;
        }
        write_file(path, &outcome.to_markdown(&stem))?;
    }
    if let Some(path) = &args.save_runs {
        let m = &outcome.main;
        let config = BTreeMap::from([
            ("target".to_string(), outcome.target.clone()),
            ("strategy".to_string(), m.strategy.clone().unwrap_or_default()),
            ("mode".to_string(), m.mode.name().to_string()),
            ("chunks".to_string(), m.chunks.to_string()),
            ("model_sha256".to_string(), model.stamp.model_sha256.clone()),
            ("command".to_string(), outcome.command.clone()),
        ]);
        let saved = SavedRuns::of(&m.runs, config);
        let text = serde_json::to_string_pretty(&saved).map_err(|e| EvalError::Invalid(e.to_string()))?;
        write_file(path, &(text + "\n"))?;
    }
    Ok(())
}
