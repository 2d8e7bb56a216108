//! The engine end to end on the real fixture site (The Rustonomicon built by mdBook) with the
//! real model, through the real `needle` binary: what `build` reports, the chunk invariants
//! against the extractor's canonical text, retrieval quality floors of issue 3, the gate, the
//! citation table and the prompt, and int8 against fp32 vectors.
#![cfg(feature = "native")]

/// The sign test of `needle eval` (a CLI tool, not library API): the same file, compiled here.
#[path = "../src/bin/needle/eval/stats.rs"]
#[allow(dead_code)]
mod stats;

use needle::build::read_index;
use needle::doc::extract::{discover, extract_file, ExtractOptions, Extracted};
use needle::doc::text::{normalize_for_match, slice_utf16};
use needle::query::index::Index;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

const NEEDLE: &str = env!("CARGO_BIN_EXE_needle");

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nomicon").join(rel)
}

fn needle(args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    let mut child =
        Command::new(NEEDLE).args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start needle");
    {
        use std::io::Write;
        let mut pipe = child.stdin.take().expect("stdin");
        if let Some(s) = stdin {
            pipe.write_all(s.as_bytes()).expect("write stdin");
        }
    }
    let out = child.wait_with_output().expect("wait for needle");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

struct Built {
    _dir: tempfile::TempDir,
    index: PathBuf,
    report: Value,
}

/// `needle build` of the fixture, once per model precision, shared by the tests of this file.
fn built(fp32: bool) -> &'static Built {
    static INT8: OnceLock<Built> = OnceLock::new();
    static FP32: OnceLock<Built> = OnceLock::new();
    (if fp32 { &FP32 } else { &INT8 }).get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let index = dir.path().join("idx");
        let site = fixture("site");
        let mut args = vec!["build", site.to_str().expect("utf-8 path"), "--out", index.to_str().expect("utf-8 path"), "--json"];
        if fp32 {
            args.push("--fp32");
        }
        let (ok, out, err) = needle(&args, None);
        assert!(ok, "needle build failed:\n{out}\n{err}");
        let report: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("build --json is not JSON ({e}):\n{out}"));
        Built { _dir: dir, index, report }
    })
}

struct Question {
    id: String,
    needle: String,
}

fn queries() -> (Vec<(String, String)>, HashMap<String, Question>) {
    let mut queries = Vec::new();
    let mut questions = HashMap::new();
    for line in std::fs::read_to_string(fixture("qrels.jsonl")).expect("qrels").lines() {
        let q: Value = serde_json::from_str(line).expect("qrels line");
        let id = q["id"].as_str().expect("id").to_string();
        for phr in ["q_doc", "q_ticket"] {
            queries.push((format!("{id}:{phr}"), q[phr].as_str().expect("query").to_string()));
        }
        questions.insert(id.clone(), Question { id, needle: q["needle"].as_str().expect("needle").to_string() });
    }
    (queries, questions)
}

fn ood() -> Vec<(String, String)> {
    std::fs::read_to_string(fixture("ood.jsonl"))
        .expect("ood")
        .lines()
        .map(|l| {
            let q: Value = serde_json::from_str(l).expect("ood line");
            (q["id"].as_str().expect("id").to_string(), q["query"].as_str().expect("query").to_string())
        })
        .collect()
}

/// Runs `needle search` and returns, per query id, its output line.
fn search(index: &Path, mode: &str, queries: &[(String, String)]) -> HashMap<String, Value> {
    let input: String = queries.iter().map(|(id, q)| serde_json::json!({"id": id, "query": q}).to_string() + "\n").collect();
    let (ok, out, err) = needle(&["search", index.to_str().expect("path"), "--mode", mode, "--k", "20"], Some(&input));
    assert!(ok, "needle search failed: {err}");
    let lines: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).expect("search output line is JSON")).collect();
    assert_eq!(lines.len(), queries.len(), "one output line per query, in order");
    for ((id, _), line) in queries.iter().zip(&lines) {
        assert_eq!(line["id"].as_str(), Some(id.as_str()), "output in input order");
    }
    lines.into_iter().map(|l| (l["id"].as_str().expect("id").to_string(), l)).collect()
}

/// 1-based rank of the first hit whose content contains the question's needle.
fn rank_of(line: &Value, needle: &str) -> Option<usize> {
    let n = normalize_for_match(needle);
    line["hits"]
        .as_array()?
        .iter()
        .find(|h| normalize_for_match(h["content"].as_str().unwrap_or("")).contains(&n))
        .and_then(|h| h["rank"].as_u64())
        .map(|r| r as usize)
}

fn recall(ranks: &[Option<usize>], k: usize) -> f64 {
    ranks.iter().filter(|r| r.is_some_and(|r| r <= k)).count() as f64 / ranks.len() as f64
}

fn ranks(index: &Path, mode: &str) -> Vec<Option<usize>> {
    let (queries, questions) = queries();
    let out = search(index, mode, &queries);
    queries
        .iter()
        .map(|(id, _)| {
            let q = &questions[id.split(':').next().expect("id")];
            rank_of(&out[id], &q.needle)
        })
        .collect()
}

fn canonical_texts() -> HashMap<String, String> {
    let opts = ExtractOptions::default();
    let found = discover(&fixture("site"), &opts).expect("discover");
    found
        .files
        .iter()
        .filter_map(|f| {
            let bytes = std::fs::read(&f.abs_path).ok()?;
            match extract_file(f, &bytes, &opts).ok()? {
                Extracted::Page(doc) => Some((doc.path, doc.text)),
                Extracted::Skipped(_) => None,
            }
        })
        .collect()
}

#[test]
fn build_reports_what_it_wrote_and_skips_what_is_not_content() {
    let b = built(false);
    let r = &b.report;
    let skipped: Vec<&str> = r["skipped"].as_array().expect("skipped").iter().map(|s| s[0].as_str().expect("path")).collect();
    for page in ["print.html", "toc.html", "index.html", "arc.html", "vec.html"] {
        assert!(skipped.contains(&page), "{page} should be skipped, skipped = {skipped:?}");
    }
    assert_eq!(r["failed"].as_array().map(Vec::len), Some(0), "no page of the fixture fails: {}", r["failed"]);
    let idx = read_index(&b.index).expect("read the index back");
    assert_eq!(r["chunks"].as_u64(), Some(idx.header.chunks.len() as u64), "reported chunks = chunks in the index");
    let ok: Vec<_> = idx.header.pages.iter().filter(|p| p.status == needle::query::index::PageStatus::Ok).collect();
    assert_eq!(r["pages_ok"].as_u64(), Some(ok.len() as u64));
    let skipped_in_index = idx.header.pages.iter().filter(|p| matches!(p.status, needle::query::index::PageStatus::Skipped { .. })).count();
    assert_eq!(skipped_in_index, skipped.len(), "skipped pages are recorded in the index too");
    let sum: u32 = idx.header.pages.iter().map(|p| p.chunk_count).sum();
    assert_eq!(sum as usize, idx.header.chunks.len(), "per-page counts add up");
    assert!(ok.iter().all(|p| p.chunk_count > 0), "every indexed page has chunks");
    assert!(r["embedded_tokens"].as_u64().unwrap_or(0) > r["header_tokens"].as_u64().unwrap_or(0));
}

#[test]
fn every_chunk_quotes_exactly_its_range_of_the_canonical_text() {
    let idx: Index = read_index(&built(false).index).expect("index");
    let texts = canonical_texts();
    for (i, c) in idx.header.chunks.iter().enumerate() {
        let page = &idx.header.pages[c.page as usize];
        let text = texts.get(&page.path).unwrap_or_else(|| panic!("{} not extracted", page.path));
        assert_eq!(needle::query::index::sha256_hex(text.as_bytes()), page.content_hash, "{}: content hash", page.path);
        let slice = slice_utf16(text, c.from as usize, c.to as usize);
        assert_eq!(slice, Some(c.content.as_str()), "chunk {i} of {}: canonical[{}..{}] != content", page.path, c.from, c.to);
        assert!(!c.content.trim().is_empty());
        assert!(!c.header.contains(&c.content), "chunk {i}: the header is not the quote");
    }
}

#[test]
fn no_embedded_text_exceeds_the_encoder_window() {
    let idx = read_index(&built(false).index).expect("index");
    let files = needle::model::ModelFiles::locate().expect("model");
    let emb = needle::build::LoadedModel::load(&files).expect("model").embedder().expect("embedder");
    for c in &idx.header.chunks {
        let n = emb.token_count(&c.embedded_text()).expect("tokenize");
        assert!(n <= needle::embed::MAX_TOKENS, "{} word-pieces in a chunk of page {}", n, c.page);
    }
}

#[test]
fn strategy_e_hybrid_meets_the_recall_floors_and_destroys_nothing() {
    let b = built(false);
    let idx = read_index(&b.index).expect("index");
    let (_, questions) = queries();
    let mut destroyed = Vec::new();
    for q in questions.values() {
        let n = normalize_for_match(&q.needle);
        let holders = idx.header.chunks.iter().filter(|c| normalize_for_match(&c.content).contains(&n)).count();
        if holders == 0 {
            destroyed.push(q.id.clone());
        }
    }
    assert!(destroyed.is_empty(), "answers destroyed by chunking: {destroyed:?}");
    let r = ranks(&b.index, "hybrid");
    let (r4, r20) = (recall(&r, 4), recall(&r, 20));
    println!("hybrid int8: R@4 {r4:.3}  R@20 {r20:.3}");
    assert!(r4 >= 0.60, "hybrid R@4 {r4:.3} < 0.60");
    // Issue 3's floor: R@20 >= 0.79 (38/48, a Python reference's figure), reached with int8 and
    // fp32 alike since an oversized block's first sentences fill the chunk before it.
    assert!(r20 >= 0.79, "hybrid R@20 {r20:.3} < 0.79");
}

#[test]
fn int8_dense_recall_is_not_significantly_below_fp32() {
    let int8 = ranks(&built(false).index, "dense");
    let fp32 = ranks(&built(true).index, "dense");
    let hit = |r: &Option<usize>| r.is_some_and(|r| r <= 4);
    let wins = int8.iter().zip(&fp32).filter(|(a, b)| hit(a) && !hit(b)).count();
    let losses = int8.iter().zip(&fp32).filter(|(a, b)| !hit(a) && hit(b)).count();
    let p = stats::sign_test(wins, losses);
    println!(
        "dense R@4 int8 {:.3} fp32 {:.3}; int8 wins {wins}, losses {losses}, sign test p = {p:.3}",
        recall(&int8, 4),
        recall(&fp32, 4)
    );
    assert!(!(losses > wins && p < 0.05), "int8 dense R@4 is significantly below fp32 (p = {p:.4})");
}

#[test]
fn query_prints_citations_and_refuses_off_topic_questions() {
    let index = built(false).index.to_str().expect("path").to_string();
    let (ok, out, err) = needle(&["query", &index, "How can the scope of unsafe code be limited?"], None);
    assert!(ok, "{err}");
    let first = out.lines().next().unwrap_or("");
    assert!(first.starts_with("[1] working-with-unsafe.html  "), "the page that answers is cited first: {out}");
    assert!(first.contains("  working-with-unsafe.html#char=") && first.contains("  d=0."), "{first}");
    assert!(out.contains("the only bullet-proof way to limit the scope of unsafe code"), "the quote is shown: {out}");

    let (ok, out, _) = needle(&["query", &index, "What is a good recipe for sourdough bread with a crisp crust?"], None);
    assert!(ok);
    assert!(out.starts_with("NO ANSWER: nothing under cosine distance "), "{out}");
    assert!(out.contains("\nthe site never mentions: ") && out.contains("sourdough"), "the reader is told why: {out}");

    // A misspelt keyword query says what it read and lists results or cites, never NO ANSWER.
    let (ok, out, _) = needle(&["query", &index, "phantm data"], None);
    assert!(ok);
    assert!(out.starts_with("showing results for \"phantom data\""), "{out}");
    assert!(!out.contains("NO ANSWER") && out.contains("phantom-data.html"), "{out}");

    let (ok, out, _) = needle(&["query", &index, "How can the scope of unsafe code be limited?", "--prompt"], None);
    assert!(ok);
    assert!(out.starts_with(needle::query::cite::INSTRUCTIONS), "{out}");
    assert!(out.contains("\n[1] ") && out.contains("Question: How can the scope of unsafe code be limited?"));
    assert!(!out.contains("#char="), "the prompt carries no links");
}

/// The chunks a `needle search` output line answers with, as `page#from,to`.
fn answered(line: &Value) -> Vec<String> {
    let hits = line["hits"].as_array().expect("hits");
    line["answer"]
        .as_array()
        .expect("answer")
        .iter()
        .map(|i| {
            let h = &hits[i.as_u64().expect("index") as usize];
            format!("{}#{},{}", h["page"].as_str().expect("page"), h["from"], h["to"])
        })
        .collect()
}

#[test]
fn every_front_end_answers_a_question_the_same_whatever_k_it_shows() {
    let b = built(false);
    let index = b.index.to_str().expect("path");
    let (mut qs, _) = queries();
    qs.extend(ood());
    let deep = search(&b.index, "hybrid", &qs);
    let input: String = qs.iter().map(|(id, q)| serde_json::json!({"id": id, "query": q}).to_string() + "\n").collect();
    let (ok, out, err) = needle(&["search", index, "--k", "1"], Some(&input));
    assert!(ok, "{err}");
    let mut below_first = 0;
    for line in out.lines().map(|l| serde_json::from_str::<Value>(l).expect("json")) {
        let id = line["id"].as_str().expect("id");
        assert_eq!(answered(&line), answered(&deep[id]), "{id}: --k 1 and --k 20 answer differently");
        below_first += usize::from(deep[id]["answer"].as_array().expect("answer").iter().any(|i| i.as_u64() != Some(0)));
    }
    assert!(below_first > 0, "some answer lies below rank 1, so --k 1 really is put to the test");
    // `needle query` cites the same chunks, in the same order.
    for (id, q) in qs.iter().take(6) {
        let (ok, out, err) = needle(&["query", index, q, "--json"], None);
        assert!(ok, "{err}");
        let v: Value = serde_json::from_str(&out).expect("query --json");
        let cited: Vec<String> =
            v["citations"].as_array().expect("citations").iter().map(|c| c["url"].as_str().expect("url").replace("#char=", "#")).collect();
        assert_eq!(cited, answered(&deep[id]), "{id}: needle query and needle search differ");
    }
}

#[test]
fn the_gate_refuses_most_out_of_domain_queries_and_json_matches_the_table() {
    let b = built(false);
    // The index chose its own gate from the site's text (no labelled questions).
    let idx = read_index(&b.index).expect("index");
    assert!(matches!(idx.header.settings.gate, needle::query::index::Gate::Auto { .. }), "{:?}", idx.header.settings.gate);
    let cut = idx.header.settings.cut;
    assert!((0.45..0.75).contains(&cut), "chosen cut {cut}");
    let answered = |out: &HashMap<String, Value>| out.values().filter(|l| l["answer"].as_array().is_some_and(|a| !a.is_empty())).count();
    let out = search(&b.index, "hybrid", &ood());
    let bluffs = answered(&out);
    let (qs, _) = queries();
    let refused = qs.len() - answered(&search(&b.index, "hybrid", &qs));
    // Measured when the gate was made: 2 bluffs, 8 of 48 refused; 7 since a word counts as the
    // site's in any inflected form (EVAL.md); the plain cut 0.5 that it replaced: 5 bluffs, 11.
    println!("the index's own gate (cut {cut:.3}): {bluffs}/30 out-of-domain answered, {refused}/{} answerable refused", qs.len());
    assert!(bluffs <= 4, "{bluffs} of 30 out-of-domain queries got an answer");
    assert!(refused <= 10, "{refused} of {} answerable queries refused", qs.len());
    // A query naming things neither the site nor the model knows meets a lower cut.
    let foreign: Vec<&Value> = out.values().filter(|l| l["foreign"].as_array().is_some_and(|f| !f.is_empty())).collect();
    assert!(!foreign.is_empty(), "some out-of-domain query names a foreign word");
    assert!(foreign.iter().all(|l| l["cut"].as_f64().expect("cut") < f64::from(cut)), "foreign words lower the cut");
    for line in out.values() {
        for &i in line["answer"].as_array().expect("answer").iter().map(|v| v.as_u64().expect("index")).collect::<Vec<_>>().iter() {
            let hit = &line["hits"][i as usize];
            assert!(hit["distance"].as_f64().expect("distance") < 1.0);
        }
    }
}

#[test]
fn a_corrupt_index_is_refused_with_the_file_named() {
    let b = built(false);
    let dir = tempfile::tempdir().expect("tmp");
    let mut bytes = std::fs::read(b.index.join("index.needle")).expect("read");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    std::fs::write(dir.path().join("index.needle"), &bytes).expect("write");
    let (ok, _, err) = needle(&["query", dir.path().to_str().expect("path"), "anything"], None);
    assert!(!ok);
    assert!(err.contains("index.needle") && err.contains("checksum mismatch"), "{err}");

    // No index at all: the file is named and the reason given once (an error that both prints
    // its cause and returns it as `source()` reads "…: No such file…: No such file…" in the CLI).
    let missing = dir.path().join("nowhere");
    let (ok, _, err) = needle(&["query", missing.to_str().expect("path"), "anything"], None);
    assert!(!ok);
    assert!(err.contains("nowhere"), "{err}");
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
}

/// The plan of an index in pieces (`needle::build::pieces`) on the real fixture index: every
/// chunk in one list and one content piece of at most the target size, every term in one lexical
/// piece in order, the same plan twice; and `needle pieces` probing every list loses nothing
/// against the whole index, while probing one list of many does lose dense recall.
#[test]
fn the_piece_plan_cuts_every_chunk_and_term_once_and_probing_every_list_is_the_whole_index() {
    use needle::build::pieces::{self, PieceConfig, PiecePlan};
    let b = built(false);
    let idx = read_index(&b.index).expect("index");
    let config = PieceConfig { lists: 16, lexical_bytes: 8 * 1024, content_bytes: 8 * 1024, ..Default::default() };
    let plan = PiecePlan::new(&idx, &config);
    assert_eq!(plan, PiecePlan::new(&idx, &config), "the plan is a function of the index");
    assert_eq!(plan.lists.len(), 16);
    let mut listed: Vec<u32> = plan.lists.iter().flatten().copied().collect();
    listed.sort_unstable();
    assert_eq!(listed, (0..idx.header.chunks.len() as u32).collect::<Vec<_>>(), "each chunk in exactly one list");
    let chunks = &idx.header.chunks;
    assert!(plan.content_first.len() > 10 && plan.content_first[0] == 0 && plan.content_first.windows(2).all(|w| w[0] < w[1]));
    for (p, &bytes) in plan.content_bytes.iter().enumerate() {
        let end = plan.content_first.get(p + 1).copied().unwrap_or(chunks.len());
        assert!(
            bytes <= 8 * 1024 + pieces::PIECE_OVERHEAD || end - plan.content_first[p] == 1,
            "content piece {p}: {bytes} bytes in {} chunks",
            end - plan.content_first[p]
        );
        assert!((plan.content_first[p]..end).all(|c| plan.content_piece(c) == p));
    }
    let terms = &idx.header.bm25.terms;
    assert!(plan.lexical_first.len() > 5 && plan.lexical_first[0] == 0 && plan.lexical_first.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(plan.lexical_piece(terms.len() - 1), plan.lexical_first.len() - 1);
    let q = "Why does mem::forget not run the destructor?";
    let pieces = plan.lexical_pieces(&idx.header.bm25, &idx.header.analyzer(None), q, &[]);
    for t in needle::query::bm25::tokenize(q) {
        if let Ok(at) = terms.binary_search(&t) {
            let p = plan.lexical_piece(at);
            assert!(pieces.contains(&p) && plan.lexical_first[p] <= at, "{t}: its piece is fetched");
        }
    }
    // A word the model does not know brings the pieces of its forms the site has (the gate asks
    // whether the site knows it in any form), even where a form lies across a piece boundary.
    let bm = &idx.header.bm25;
    let forms_in = |w: &str| {
        needle::query::bm25::forms(w)
            .iter()
            .filter_map(|f| terms.binary_search(f).ok())
            .map(|at| plan.lexical_piece(at))
            .collect::<std::collections::BTreeSet<_>>()
    };
    let across = terms.iter().find(|w| forms_in(w).len() > 1).expect("some word's forms span two pieces");
    let unknown = [across.clone()];
    assert!(
        forms_in(across).is_subset(&plan.lexical_pieces(bm, &idx.header.analyzer(None), across, &unknown)),
        "{across}: its forms' pieces are fetched"
    );
    assert!(
        !forms_in(across).is_subset(&plan.lexical_pieces(bm, &idx.header.analyzer(None), across, &[])),
        "{across}: a known word brings its own piece only"
    );
    let qrels = fixture("qrels.jsonl");
    let report = |nprobe: &str| {
        let (ok, out, err) = needle(
            &["pieces", b.index.to_str().expect("path"), "--questions", qrels.to_str().expect("path"), "--lists", "16", "--nprobe", nprobe],
            None,
        );
        assert!(ok, "needle pieces failed:\n{out}\n{err}");
        let row = out
            .lines()
            .find(|l| l.starts_with(&format!("| {nprobe} |")))
            .unwrap_or_else(|| panic!("no row for {nprobe}:\n{out}"))
            .to_string();
        row.split('|').map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect::<Vec<String>>()
    };
    let all = report("16");
    assert_eq!((all[4].as_str(), all[5].as_str(), all[6].as_str()), ("1.000", "1.000", "48/48"), "{all:?}");
    let (exact, pieces) = all[7].split_once(" → ").expect("recall cell");
    assert_eq!(exact, pieces, "{all:?}");
    let one = report("1");
    assert!(one[4].parse::<f64>().expect("overlap") < 0.9, "one list of 16 misses some of the dense top 20: {one:?}");
}

/// One query of the fixture's keyword set (`tests/fixtures/keywords/nomicon.jsonl`): a
/// page or section title as typed, whole, cut to a prefix, or with one typo.
struct Keyword {
    id: String,
    query: String,
    variant: String,
    pages: Vec<String>,
}

fn keyword_set() -> Vec<Keyword> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/keywords/nomicon.jsonl");
    std::fs::read_to_string(path)
        .expect("keyword set")
        .lines()
        .map(|l| {
            let k: Value = serde_json::from_str(l).expect("keyword line");
            let pages = k["pages"].as_array().expect("pages").iter().map(|p| p.as_str().expect("page").to_string()).collect();
            let s = |f: &str| k[f].as_str().expect(f).to_string();
            Keyword { id: s("id"), query: s("query"), variant: s("variant"), pages }
        })
        .collect()
}

/// The search box on the fixture: page and section titles typed whole, with the last word cut
/// to its first letters, and with one dropped, doubled or swapped letter list their page in the
/// top 3 (issue 32's floors: 90 %, 80 %, 80 %), and none is told the docs do not answer it.
#[test]
fn keyword_prefix_and_typo_queries_find_their_page_and_are_never_refused() {
    let set = keyword_set();
    let input: Vec<(String, String)> = set.iter().map(|k| (k.id.clone(), k.query.clone())).collect();
    let out = search(&built(false).index, "hybrid", &input);
    let mut found: HashMap<&str, (usize, usize)> = HashMap::new();
    for k in &set {
        let line = &out[&k.id];
        assert_ne!(line["verdict"].as_str(), Some("no-answer"), "{} {:?} is told the docs do not answer it: {line}", k.id, k.query);
        let mut pages: Vec<&str> = Vec::new();
        for h in line["hits"].as_array().expect("hits") {
            let p = h["page"].as_str().expect("page");
            if !pages.contains(&p) {
                pages.push(p);
            }
        }
        let top3 = pages.iter().take(3).any(|p| k.pages.iter().any(|want| want == p));
        let f = found.entry(&k.variant).or_default();
        f.0 += usize::from(top3);
        f.1 += 1;
    }
    for (variant, floor) in [("exact", 0.9), ("prefix", 0.8), ("typo", 0.8)] {
        let (hit, n) = found[variant];
        assert!(n >= 20 && hit as f64 >= floor * n as f64, "{variant}: page in the top 3 for {hit} of {n}, floor {floor}");
    }
}

/// Searches `reader`, adding the pieces it names from `file` until it answers: at most four
/// rounds of missing pieces.
fn ask_pieces(
    reader: &mut needle::query::pieces::Pieced,
    file: &dyn Fn(&str) -> Vec<u8>,
    q: &str,
    qv: Option<&needle::query::search::QueryVector>,
    opts: &needle::query::search::SearchOptions,
) -> needle::query::search::SearchResult {
    for round in 0..5 {
        match reader.search(q, qv, opts) {
            Ok(r) => return r,
            Err(missing) => {
                assert!(round < 4 && !missing.is_empty(), "{q}: round {round} still lacks {missing:?}");
                for id in missing {
                    reader.add(id, &file(&id.file_name()), &id.file_name()).expect("a good piece");
                }
            }
        }
    }
    unreachable!()
}

/// An index written in pieces (`needle::build::pieces::write`, read by
/// `needle::query::pieces::Pieced`) answers every question of the fixture, answerable and
/// out-of-domain, exactly as the whole index does when every list is probed: the same hits,
/// distances, answer, cut and foreign words in every mode (hybrid fused plainly on both sides: an
/// index in pieces has no page vectors, and the test below checks that it falls back), and the
/// fixture's keyword queries typed as prefixes and with typos match the same terms and say the
/// same. A reader asks for what it lacks in at most four rounds (terms and lists; a misspelt
/// word's letter; the lexical candidates' and shown hits' content; the content of hits the
/// candidates moved in). With one list probed, the dense side
/// still scores the lexical top 20 with their exact distances. A corrupt, truncated,
/// mislabelled or foreign piece is refused by name while the reader keeps what it has.
#[test]
fn an_index_in_pieces_answers_as_the_whole_index() {
    use needle::build::pieces::{self, PieceConfig, PiecePlan};
    use needle::query::pieces::{seal_piece, PieceId, Pieced, HEAD_FILE};
    use needle::query::search::{search, Fusion, Mode, SearchOptions};
    let idx = read_index(&built(false).index).expect("index");
    let plan = PiecePlan::new(&idx, &PieceConfig { lists: 16, lexical_bytes: 8 * 1024, content_bytes: 4 * 1024, ..Default::default() });
    let files = pieces::write(&idx, &plan, 16).expect("write the pieces");
    assert_eq!(files.len(), 1 + plan.lexical_first.len() + 16 + plan.content_first.len());
    let file = |name: &str| files.iter().find(|(n, _)| n == name).map(|(_, b)| b.clone()).unwrap_or_else(|| panic!("no {name}"));
    let emb = needle::build::LoadedModel::load(&needle::model::ModelFiles::locate().expect("model"))
        .expect("model")
        .embedder()
        .expect("embedder");
    let mut reader = Pieced::from_head(&file(HEAD_FILE), HEAD_FILE).expect("head");
    let ask = |reader: &mut Pieced, q: &str, qv: Option<&needle::query::search::QueryVector>, opts: &SearchOptions| {
        ask_pieces(reader, &file, q, qv, opts)
    };
    let (answerable, _) = queries();
    let keywords: Vec<(String, String)> = keyword_set().into_iter().step_by(3).map(|k| (k.id, k.query)).collect();
    for (id, q) in answerable.iter().chain(ood().iter()).chain(&keywords) {
        let qv = emb.query(q).expect("embed");
        for mode in [Mode::Hybrid, Mode::Bm25, Mode::Dense] {
            let opts = SearchOptions { mode, k: 10, fusion: Fusion::Plain, ..Default::default() };
            let whole = search(&idx, q, Some(&qv), &opts);
            let got = ask(&mut reader, q, Some(&qv), &opts);
            assert_eq!(
                (&got.hits, &got.answer, got.cut, &got.foreign, &got.unknown, &got.corrected, &got.terms, got.verdict),
                (&whole.hits, &whole.answer, whole.cut, &whole.foreign, &whole.unknown, &whole.corrected, &whole.terms, whole.verdict),
                "{id} {mode:?}"
            );
        }
        // Without the model: lexical, the same chunks (distances unknown on both sides).
        let whole = search(&idx, q, None, &SearchOptions::default());
        let got = ask(&mut reader, q, None, &SearchOptions::default());
        let chunks = |r: &needle::query::search::SearchResult| r.hits.iter().map(|h| h.chunk).collect::<Vec<_>>();
        assert_eq!(chunks(&got), chunks(&whole), "{id} lexical");
        assert!(got.answer.is_empty());
    }

    // One list of 16 probed: every hit's distance is still the whole index's, and the lexical
    // top 20 are scored even where their lists are not probed.
    let one = pieces::write(&idx, &plan, 1).expect("write the pieces");
    let file_one = |name: &str| one.iter().find(|(n, _)| n == name).map(|(_, b)| b.clone()).unwrap_or_else(|| panic!("no {name}"));
    let mut reader = Pieced::from_head(&file_one(HEAD_FILE), HEAD_FILE).expect("head");
    let list_of = |c: usize| plan.lists.iter().position(|l| l.contains(&(c as u32))).expect("every chunk is in a list");
    let mut from_lexical = 0;
    for (id, q) in &answerable {
        let qv = emb.query(q).expect("embed");
        let opts = SearchOptions { mode: Mode::Dense, k: 20, ..Default::default() };
        let whole: std::collections::HashMap<usize, f32> =
            search(&idx, q, Some(&qv), &SearchOptions { k: 711, ..opts.clone() }).hits.iter().map(|h| (h.chunk, h.distance)).collect();
        let got = ask_pieces(&mut reader, &file_one, q, Some(&qv), &opts);
        let probed = plan.probe(&qv.vector, 1)[0];
        let lexical: Vec<usize> = idx.header.bm25.rank(q).into_iter().take(20).map(|(c, _)| c).collect();
        for h in &got.hits {
            assert_eq!(h.distance, whole[&h.chunk], "{id}: chunk {}", h.chunk);
            if list_of(h.chunk) != probed {
                assert!(lexical.contains(&h.chunk), "{id}: chunk {} is neither probed nor a lexical candidate", h.chunk);
                from_lexical += 1;
            }
        }
    }
    assert!(from_lexical > answerable.len(), "lexical candidates ranked by the dense side: {from_lexical}");

    // Bad pieces, each refused with its file named; the reader keeps what it had.
    let mut fresh = Pieced::from_head(&file(HEAD_FILE), HEAD_FILE).expect("head");
    let good = file("terms-0.needle");
    let mut corrupt = good.clone();
    corrupt[good.len() / 2] ^= 0x40;
    let refused = |r: Result<(), needle::query::index::IndexError>| r.expect_err("refused").to_string();
    let e = refused(fresh.add(PieceId::Terms(0), &corrupt, "terms-0.needle"));
    assert!(e.starts_with("terms-0.needle: checksum mismatch"), "{e}");
    let e = refused(fresh.add(PieceId::Terms(0), &good[..good.len() - 9], "terms-0.needle"));
    assert!(e.starts_with("terms-0.needle: truncated"), "{e}");
    let e = refused(fresh.add(PieceId::Terms(1), &good, "terms-1.needle"));
    assert!(e.contains("terms-1.needle") && e.contains("was asked for"), "{e}");
    let e = refused(fresh.add(PieceId::Terms(0), &seal_piece(PieceId::Terms(0), [7; 8], &[0]), "terms-0.needle"));
    assert!(e.contains("belongs to another build"), "{e}");
    assert!(!fresh.has(PieceId::Terms(0)));
    fresh.add(PieceId::Terms(0), &good, "terms-0.needle").expect("the good piece after the bad ones");
    assert!(fresh.has(PieceId::Terms(0)));
    let e = Pieced::from_head(&file("vectors-0.needle"), "vectors-0.needle").expect_err("a piece is not a head").to_string();
    assert!(e.starts_with("vectors-0.needle: malformed"), "{e}");
}
