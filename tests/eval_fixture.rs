//! `needle eval` on the fixture corpus (the Rustonomicon, 48 in-domain + 30 out-of-domain
//! queries), through the real binary and the real model:
//! - its per-query ranks agree with an independent scorer (tests/score_search_output.py) of
//!   what `needle search` prints for the same index;
//! - hybrid R@8 has not fallen significantly below the committed baseline
//!   (tests/fixtures/eval/baseline-hybrid.json; see tests/fixtures/eval/README.md to update it);
//! - the page list (the default fusion) gains on ticket phrasings against plain fusion and loses
//!   nothing significant on doc phrasings;
//! - a question set whose needles are missing, repeated or only in a heading is rejected,
//!   naming each question.
//!
//! The index is built once (`needle build`) and shared by the tests of this file.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

const NEEDLE: &str = env!("CARGO_BIN_EXE_needle");

fn path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn site() -> PathBuf {
    path("tests/fixtures/nomicon/site")
}

fn qrels() -> PathBuf {
    path("tests/fixtures/nomicon/qrels.jsonl")
}

fn baseline() -> PathBuf {
    path("tests/fixtures/eval/baseline-hybrid.json")
}

fn run(cmd: &mut Command, stdin: Option<&[u8]>) -> Output {
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() }).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    if let Some(bytes) = stdin {
        use std::io::Write;
        let mut pipe = child.stdin.take().expect("stdin is piped");
        pipe.write_all(bytes).expect("write stdin");
    }
    child.wait_with_output().expect("wait")
}

fn ok(cmd: &mut Command, stdin: Option<&[u8]>) -> Output {
    let out = run(cmd, stdin);
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn read_json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn python(args: &[&std::ffi::OsStr], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new("python3");
    cmd.arg(path("tests/score_search_output.py")).args(args);
    ok(&mut cmd, stdin)
}

struct Fixture {
    dir: tempfile::TempDir,
    index: PathBuf,
    /// What `needle eval --json` wrote.
    eval: Value,
    /// What `needle eval --save-runs` wrote.
    runs: Value,
}

/// Builds the fixture index and evaluates it once for every test of this file.
fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let index = dir.path().join("index");
        ok(Command::new(NEEDLE).arg("build").arg(site()).arg("--out").arg(&index), None);
        let (json, runs) = (dir.path().join("eval.json"), dir.path().join("runs.json"));
        ok(
            Command::new(NEEDLE)
                .arg("eval")
                .arg(&index)
                .arg("--site")
                .arg(site())
                .arg("--qrels")
                .arg(qrels())
                .arg("--ood")
                .arg(path("tests/fixtures/nomicon/ood.jsonl"))
                .arg("--max-bluffs")
                .arg("3")
                .arg("--json")
                .arg(&json)
                .arg("--save-runs")
                .arg(&runs)
                .arg("--baseline")
                .arg(baseline()),
            None,
        );
        Fixture { eval: read_json(&json), runs: read_json(&runs), dir, index }
    })
}

#[test]
fn eval_ranks_agree_query_by_query_with_an_independent_scorer_of_needle_search_output() {
    let f = fixture();
    let queries = python(&["queries".as_ref(), "--qrels".as_ref(), qrels().as_os_str()], None).stdout;
    let search = ok(Command::new(NEEDLE).arg("search").arg(&f.index).args(["--k", "20", "--mode", "hybrid"]), Some(&queries)).stdout;
    let search_file = f.dir.path().join("search.jsonl");
    std::fs::write(&search_file, &search).expect("write search output");
    let scored: Value = serde_json::from_slice(
        &python(&["score".as_ref(), "--qrels".as_ref(), qrels().as_os_str(), "--search".as_ref(), search_file.as_os_str()], None).stdout,
    )
    .expect("the scorer prints JSON");

    let mut compared = 0;
    let mut disagree = Vec::new();
    for q in f.runs["queries"].as_array().expect("queries") {
        if q["phrasing"] == "ood" {
            continue;
        }
        let key = format!("{}:{}", q["id"].as_str().expect("id"), q["phrasing"].as_str().expect("phrasing"));
        let theirs = &scored["ranks"][&key];
        if &q["rank"] != theirs {
            disagree.push(format!("{key}: needle eval rank {}, scorer rank {theirs}", q["rank"]));
        }
        compared += 1;
    }
    assert_eq!(compared, 48);
    assert!(disagree.is_empty(), "per-query ranks differ:\n{}", disagree.join("\n"));

    for k in ["1", "4", "8", "20"] {
        assert_eq!(f.eval["overall"]["hits"][k], scored["hits"][k], "hits at {k}");
        let (ours, theirs) = (f.eval["overall"]["recall"][k].as_f64().expect("recall"), scored["recall"][k].as_f64().expect("recall"));
        assert!((ours - theirs).abs() < 1e-4, "R@{k}: needle eval {ours}, scorer {theirs}");
        for phrasing in ["doc", "ticket"] {
            let (ours, theirs) =
                (f.eval[phrasing]["recall"][k].as_f64().expect("recall"), scored[phrasing]["recall"][k].as_f64().expect("recall"));
            assert!((ours - theirs).abs() < 1e-4, "{phrasing} R@{k}: needle eval {ours}, scorer {theirs}");
        }
    }
    let (ours, theirs) = (f.eval["overall"]["mrr"].as_f64().expect("mrr"), scored["mrr"].as_f64().expect("mrr"));
    assert!((ours - theirs).abs() < 1e-4, "MRR: needle eval {ours}, scorer {theirs}");
}

#[test]
fn hybrid_recall_at_8_has_not_fallen_significantly_below_the_committed_baseline() {
    let f = fixture();
    let at8 = &f.eval["baseline"]["at"]["8"];
    let (wins, losses, p) = (at8["wins"].as_u64().expect("wins"), at8["losses"].as_u64().expect("losses"), at8["p"].as_f64().expect("p"));
    assert_eq!(at8["n"], 48, "the baseline pairs all 48 in-domain queries");
    assert!(
        !(losses > wins && p < 0.05),
        "hybrid R@8 fell below the baseline: {wins} queries gained, {losses} lost, sign test p = {p:.4}. If this is intended, \
         regenerate tests/fixtures/eval/baseline-hybrid.json as tests/fixtures/eval/README.md says and commit it on its own."
    );
}

/// The default fusion (the page list) against plain fusion on the same queries, as `needle eval`
/// reports it: on the fixture the page list answers more ticket-phrased questions within 4 and 8
/// hits (EVAL.md: 4 wins, 0 losses at R@4; 2, 0 at R@8) and loses no doc-phrased one significantly.
#[test]
fn the_page_list_gains_on_ticket_phrasings_and_loses_nothing_significant_on_doc_phrasings() {
    let f = fixture();
    assert_eq!(f.eval["fusion"], "pages");
    let against = f.eval["plain"]["against"].as_array().expect("the report scores plain fusion beside the default");
    let at = |phrasing: &str, k: u64| {
        let p = against.iter().find(|p| p["phrasing"] == phrasing && p["k"] == k).unwrap_or_else(|| panic!("{phrasing} R@{k}"));
        (p["wins"].as_u64().expect("wins"), p["losses"].as_u64().expect("losses"), p["p"].as_f64().expect("p"))
    };
    for k in [1, 4, 8, 20] {
        let (wins, losses, p) = at("doc", k);
        assert!(!(losses > wins && p < 0.05), "doc R@{k}: the page list won {wins}, lost {losses}, p = {p}");
    }
    let (wins, losses, _) = at("ticket", 4);
    assert!(wins >= losses + 2, "ticket R@4: the page list won {wins}, lost {losses}");
    let (wins, losses, _) = at("ticket", 8);
    assert!(wins > losses, "ticket R@8: the page list won {wins}, lost {losses}");
    // R@1 is the plain fusion's by construction.
    assert_eq!(at("ticket", 1).0 + at("ticket", 1).1 + at("doc", 1).0 + at("doc", 1).1, 0, "the first hit is plain fusion's");
}

#[test]
fn the_json_report_has_the_documented_shape_on_real_data() {
    let f = fixture();
    for part in ["overall", "doc", "ticket"] {
        for key in ["n", "recall", "wilson", "mrr", "destroyed"] {
            assert!(f.eval[part].get(key).is_some(), "{part}.{key} missing");
        }
    }
    assert_eq!(f.eval["overall"]["n"], 48);
    assert_eq!((f.eval["doc"]["n"].as_u64(), f.eval["ticket"]["n"].as_u64()), (Some(24), Some(24)));
    let sweep = f.eval["sweep"].as_array().expect("sweep");
    let cuts: Vec<f64> = sweep.iter().map(|r| r["cut"].as_f64().expect("cut")).collect();
    assert_eq!(cuts.len(), 17);
    assert!((cuts[0] - 0.4).abs() < 1e-9 && (cuts[16] - 0.8).abs() < 1e-9);
    // Raising the cut can only let more out-of-domain queries through.
    let bluffs: Vec<u64> = sweep.iter().map(|r| r["bluffs"].as_u64().expect("bluffs")).collect();
    assert!(bluffs.windows(2).all(|w| w[0] <= w[1]), "{bluffs:?}");
    let chosen = f.eval["chosen_cut"].as_f64().expect("a cut lets at most 3 of 30 out-of-domain queries through");
    let row = sweep.iter().find(|r| (r["cut"].as_f64().unwrap_or(-1.0) - chosen).abs() < 1e-9).expect("the chosen cut is a swept cut");
    assert!(row["bluffs"].as_u64().expect("bluffs") <= 3);
}

#[test]
fn a_question_set_with_bad_needles_is_rejected_naming_each_question() {
    let dir = tempfile::tempdir().expect("temp dir");
    let text = std::fs::read_to_string(qrels()).expect("qrels");
    let mut lines: Vec<Value> = text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).expect("json")).collect();
    let mut expect = Vec::new();
    for (i, needle, fragments) in [
        (4, "a sentence that the Rustonomicon never wrote", ["the needle occurs nowhere in the site's canonical text", ""]),
        (5, "Table of  PhantomData\npatterns", ["the needle occurs only inside a heading", "phantom-data.html"]),
        (6, "unsafe Rust", ["times (", "it must name exactly one place"]),
    ] {
        lines[i]["needle"] = Value::from(needle);
        expect.push((format!("{}: ", lines[i]["id"].as_str().expect("id")), fragments));
    }
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, lines.iter().map(|l| l.to_string() + "\n").collect::<String>()).expect("write");
    // Validation comes first: the site is not indexed for a question set that is wrong.
    let out = run(Command::new(NEEDLE).arg("eval").arg(site()).arg("--qrels").arg(&bad), None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "bad needles must fail the run");
    for (id, fragments) in expect {
        assert!(
            stderr.lines().any(|l| l.trim_start().starts_with(&id) && fragments.iter().all(|f| l.contains(f))),
            "no line {id}… {fragments:?} in:\n{stderr}"
        );
    }
}
