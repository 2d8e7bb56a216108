//! The question sets of other real sites (tests/fixtures/qsets/*, and tests/fixtures/kinds for
//! PDFs, captions and a table) obey their rules: at least 30
//! questions, each needle found exactly once in the site's canonical text and not only in a
//! heading (`needle eval --check`), a ticket phrasing that shares at most one content word with
//! its needle (BM25's tokenizer, stop words aside), and 30 out-of-domain queries, two thirds of
//! them adjacent to the site's topic.

use needle::query::bm25::{tokenize, STOP_WORDS};
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn sets() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/qsets");
    let mut sets: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    sets.sort();
    // The PDFs, captions and table of the citation-kinds fixture have their set too.
    sets.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kinds"));
    sets
}

fn lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).unwrap_or_else(|e| panic!("{} line {}: {e}", path.display(), i + 1)))
        .collect()
}

fn field<'a>(v: &'a Value, name: &str, file: &Path) -> &'a str {
    v[name].as_str().unwrap_or_else(|| panic!("{}: {v} has no string field {name}", file.display()))
}

fn content_words(s: &str) -> HashSet<String> {
    tokenize(s).into_iter().filter(|t| STOP_WORDS.binary_search(&t.as_str()).is_err()).collect()
}

#[test]
fn there_are_at_least_two_sets_besides_the_fixture() {
    assert!(sets().len() >= 2, "{:?}", sets());
}

/// The rules of one set (module documentation); `site` is where its pages are, `None` when it
/// is not on this machine (then only the needle check, which needs the site, is left out).
fn problems_of(set: &Path, site: Option<&Path>) -> Vec<String> {
    let mut problems = Vec::new();
    let (qrels, ood) = (set.join("qrels.jsonl"), set.join("ood.jsonl"));
    let questions = lines(&qrels);
    if questions.len() < 30 {
        problems.push(format!("{}: {} questions, at least 30 wanted", qrels.display(), questions.len()));
    }
    let mut ids = HashSet::new();
    for q in &questions {
        let id = field(q, "id", &qrels);
        if !ids.insert(id.to_string()) {
            problems.push(format!("{id}: id used twice"));
        }
        if let Some(site) = site.filter(|s| !s.join(field(q, "page", &qrels)).is_file()) {
            problems.push(format!("{id}: page {} is not in {}", field(q, "page", &qrels), site.display()));
        }
        let needle = content_words(field(q, "needle", &qrels));
        let shared: Vec<String> = content_words(field(q, "q_ticket", &qrels)).intersection(&needle).cloned().collect();
        if shared.len() > 1 {
            problems.push(format!("{id}: the ticket shares {} content words with the needle: {shared:?}", shared.len()));
        }
    }
    let out = lines(&ood);
    let adjacent = out.iter().filter(|o| o["kind"] == "adjacent").count();
    if out.len() != 30 || adjacent < 20 {
        problems.push(format!("{}: {} queries, {adjacent} adjacent; 30 wanted, at least 20 adjacent", ood.display(), out.len()));
    }
    for o in &out {
        let id = field(o, "id", &ood);
        field(o, "query", &ood);
        if !matches!(field(o, "kind", &ood), "adjacent" | "off-topic") || !ids.insert(id.to_string()) {
            problems.push(format!("{id}: kind must be adjacent or off-topic, ids unique"));
        }
    }
    if let Some(site) = site {
        let check = Command::new(env!("CARGO_BIN_EXE_needle"))
            .args(["eval", "--check", "--qrels"])
            .arg(&qrels)
            .arg("--ood")
            .arg(&ood)
            .arg("--site")
            .arg(site)
            .arg(site)
            .output()
            .expect("needle runs");
        if !check.status.success() {
            problems.push(format!("needle eval --check on {}:\n{}", set.display(), String::from_utf8_lossy(&check.stderr)));
        }
    }
    problems
}

#[test]
fn every_set_obeys_its_rules() {
    let problems: Vec<String> = sets().iter().flat_map(|set| problems_of(set, Some(&set.join("site")))).collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The large site's set (tests/fixtures/scale/std) asks about the toolchain's own `std` docs,
/// 122 MB not copied into the repository: its needles are checked against them when this
/// machine's toolchain is the one the set was written on (its README names it), the other rules
/// always.
#[test]
fn the_std_set_obeys_its_rules() {
    let set = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scale/std");
    let readme = std::fs::read_to_string(set.join("README.md")).expect("README");
    let rustc = |arg: &str| Command::new("rustc").arg(arg).output().ok().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let site = rustc("--print=sysroot").map(|root| PathBuf::from(root).join("share/doc/rust/html/std"));
    let same_toolchain = rustc("--version").is_some_and(|v| !v.is_empty() && readme.contains(&format!("`{v}`")));
    let site = site.filter(|s| same_toolchain && s.join("index.html").is_file());
    if site.is_none() {
        eprintln!("the std docs of the toolchain named in {}/README.md are not here: needles not checked", set.display());
    }
    let problems = problems_of(&set, site.as_deref());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_check_refuses_a_needle_that_is_not_on_the_site() {
    let set = &sets()[0];
    let dir = std::env::temp_dir().join(format!("needle-qsets-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let bad = dir.join("qrels.jsonl");
    let mut text = std::fs::read_to_string(set.join("qrels.jsonl")).expect("qrels");
    text.push_str("{\"id\":\"made-up\",\"page\":\"x.html\",\"needle\":\"a sentence written nowhere on this site at all\",\"q_doc\":\"?\",\"q_ticket\":\"?\"}\n");
    std::fs::write(&bad, text).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_needle"))
        .args(["eval", "--check", "--qrels"])
        .arg(&bad)
        .arg(set.join("site"))
        .output()
        .expect("needle runs");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("made-up: the needle occurs nowhere"), "{err}");
}
