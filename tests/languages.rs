//! Languages, natively, with the real model on a real translated manual
//! (tests/fixtures/i18n/handbook: three chapters of the Debian Administrator's Handbook in
//! English, German and Simplified Chinese, one folder per language, no `<html lang>`): each
//! page is indexed in its folder's language, a reader searches their own language's pages with
//! its analyzer, the model (English) neither answers nor refuses for German or Chinese, and
//! every citation quotes its page.
#![cfg(feature = "native")]

use needle::build::{self, BuildOptions, LoadedModel};
use needle::model::ModelFiles;
use needle::query::index::Index;
use needle::query::search::{self, SearchOptions, SearchResult, Verdict};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn model() -> &'static LoadedModel {
    static M: OnceLock<LoadedModel> = OnceLock::new();
    M.get_or_init(|| LoadedModel::load(&ModelFiles::locate().expect("model files (./build.sh model)")).expect("load the model"))
}

/// The fixture's index, built once.
fn index() -> &'static Index {
    static I: OnceLock<(tempfile::TempDir, Index)> = OnceLock::new();
    &I.get_or_init(|| {
        let out = tempfile::tempdir().expect("temp dir");
        let site = root().join("tests/fixtures/i18n/handbook");
        build::build(&site, out.path(), model(), &BuildOptions { threads: Some(2), ..BuildOptions::default() }).expect("build");
        let idx = build::read_index(out.path()).expect("read the index back");
        (out, idx)
    })
    .1
}

/// Question `id` of the handbook's question set in `lang` (eval/i18n/debian-handbook).
fn question(lang: &str, id: &str) -> Value {
    let path = root().join(format!("eval/i18n/debian-handbook/{lang}.qrels.jsonl"));
    std::fs::read_to_string(&path)
        .expect("question set")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("json"))
        .find(|q| q["id"] == id)
        .unwrap_or_else(|| panic!("{id} in {}", path.display()))
}

fn ask(query: &str, lang: Option<&str>) -> SearchResult {
    let idx = index();
    let analyzer = idx.header.analyzer(lang);
    let plan = needle::query::lexicon::Plan::new(idx, &analyzer, query);
    let v = model().embedder().expect("embedder").query(&plan.embedded(query)).expect("embed");
    let opts = SearchOptions { k: 8, lang: lang.map(str::to_string), ..SearchOptions::default() };
    search::search_planned(idx, query, plan, Some(&v), &opts)
}

#[test]
fn every_page_is_indexed_in_its_folder_s_language() {
    let idx = index();
    let a = &idx.header.analysis;
    for (p, page) in idx.header.pages.iter().enumerate().filter(|(_, p)| p.path.contains('/')) {
        let want = &page.path[..2];
        assert_eq!(a.lang_of(p), want, "{}", page.path);
    }
    // The language chooser at the top declares nothing and is too short to detect: it goes to
    // the site's main language, never to a language of its own.
    let chooser = idx.header.pages.iter().position(|p| p.path == "index.html").expect("index.html");
    assert_eq!(a.lang_of(chooser), a.main_lang());
    let mut langs = a.langs.clone();
    langs.sort();
    assert_eq!(langs, ["de", "en", "zh"]);
}

#[test]
fn a_reader_searches_their_own_language_and_finds_the_page() {
    for (lang, folder) in [("de", "de-DE"), ("zh", "zh-CN"), ("en", "en-US")] {
        for id in ["dh-07", "dh-12", "dh-20"] {
            let q = question(folder, id);
            let page = format!("{folder}/{}", q["page"].as_str().expect("page"));
            let r = ask(q["q_doc"].as_str().expect("q_doc"), Some(lang));
            assert!(r.hits.iter().all(|h| h.page.starts_with(folder)), "{lang} {id}: only {folder} pages: {:?}", r.hits);
            assert!(r.hits.iter().take(4).any(|h| h.page == page), "{lang} {id}: {page} in the top 4: {:?}", r.hits);
        }
    }
}

#[test]
fn the_model_neither_answers_nor_refuses_for_a_language_it_does_not_read() {
    // German and Chinese: the ranking is lexical, and the index's lexical gate (chosen from
    // needle's background questions in that language) decides by the share of the question's
    // words a chunk holds; every answer holds more than the cut.
    let idx = index();
    for (lang, folder) in [("de", "de-DE"), ("zh", "zh-CN")] {
        let cut = idx.header.settings.lexical_cut(lang).unwrap_or_else(|| panic!("{lang}: a lexical gate"));
        assert!(cut > 0.0 && cut < 1.0, "{lang}: {cut}");
        for id in ["dh-07", "dh-12", "dh-20"] {
            let q = question(folder, id);
            let r = ask(q["q_doc"].as_str().expect("q_doc"), Some(lang));
            assert_eq!((r.mode, r.lexical_cut), (search::Mode::Bm25, Some(cut)), "{lang} {id}");
            assert!(r.hits.iter().all(|h| h.coverage.is_some() && h.distance.is_nan()), "{lang} {id}: the model scored nothing");
            assert!(r.answer.iter().all(|&i| r.hits[i].coverage > Some(cut)), "{lang} {id}");
            assert_eq!(r.verdict == Verdict::Answer, !r.answer.is_empty());
        }
        // A question the site has no words for is refused by the words, not the model.
        let off =
            if lang == "de" { "Wie lange muss ein Ei kochen, damit das Eigelb flüssig bleibt?" } else { "溏心蛋要煮多长时间？" };
        let r = ask(off, Some(lang));
        assert!(r.answer.is_empty() && r.verdict != Verdict::Answer, "{lang}: {off} {:?}", r.hits.first());
    }
    // English is read by the model: its cosine gate decides.
    let q = question("en-US", "dh-12");
    let r = ask(q["q_doc"].as_str().expect("q_doc"), Some("en"));
    assert_ne!(r.mode, search::Mode::Bm25);
    assert_eq!(r.lexical_cut, None);
    assert!(r.hits.iter().all(|h| h.coverage.is_none()));
}

#[test]
fn german_words_meet_their_inflections_and_are_marked_whole() {
    let idx = index();
    let de = idx.header.analyzer(Some("de"));
    // "Paketquellen" (plural, in the question) and the site's "Paketquelle" are one term.
    let r = ask("Paketquellen", Some("de"));
    assert!(r.terms.contains(&de.term("Paketquelle")), "{:?}", r.terms);
    let hit = r.hits.first().expect("a hit");
    let marks = needle::query::bm25::marks(&de, &hit.content, &r.terms);
    let units: Vec<u16> = hit.content.encode_utf16().collect();
    let marked: Vec<String> = marks.iter().map(|&(a, b)| String::from_utf16_lossy(&units[a as usize..b as usize])).collect();
    assert!(marked.iter().all(|m| m.to_lowercase().starts_with("paketquelle")), "{marked:?}");
}

#[test]
fn chinese_hits_quote_their_page_and_mark_whole_words() {
    let site = root().join("tests/fixtures/i18n/handbook");
    let docs: std::collections::HashMap<String, needle::doc::text::Document> =
        needle::build::site::extract_site(&site, &Default::default()).expect("walk").documents().map(|d| (d.path.clone(), d)).collect();
    let q = question("zh-CN", "dh-12");
    let r = ask(q["q_doc"].as_str().expect("q_doc"), Some("zh"));
    let zh = index().header.analyzer(Some("zh"));
    for h in &r.hits {
        let doc = &docs[&h.page];
        assert_eq!(needle::doc::text::slice_utf16(&doc.text, h.from, h.to), Some(h.content.as_str()), "{}", h.url);
        // Marks never split a character pair: each starts and ends on the content's characters.
        for (a, b) in needle::query::bm25::marks(&zh, &h.content, &r.terms) {
            assert!(a < b && b as usize <= h.content.encode_utf16().count());
        }
    }
    assert!(r.hits.iter().any(|h| h.content.contains("APT")), "{:?}", r.hits.iter().map(|h| &h.url).collect::<Vec<_>>());
}
