//! Citations beyond HTML, natively, with the real model on real files (tests/fixtures/kinds:
//! two Debian PDF manuals, PDFs with a scanned page, only scanned pages, a password and a cut
//! file, a WebM video captioned on its page, an Ogg talk with a standalone `.vtt`, a CSV of the
//! MIME database): every chunk of every kind quotes its document's canonical text at
//! `from..to` and carries the locator of the units it covers; broken PDFs fail with their
//! reason while the rest of the site builds; citations and hits link by each kind's standard.
#![cfg(feature = "native")]

use needle::build::site::extract_site;
use needle::build::{self, BuildOptions, LoadedModel};
use needle::doc::extract::{ExtractOptions, Extracted};
use needle::doc::locator::{Locator, Source};
use needle::doc::text::{slice_utf16, utf16_len, Document};
use needle::model::ModelFiles;
use needle::query::cite;
use needle::query::index::{Index, PageStatus};
use needle::query::search::{self, Mode, SearchOptions};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn site() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kinds/site")
}

fn documents() -> &'static HashMap<String, Document> {
    static D: OnceLock<HashMap<String, Document>> = OnceLock::new();
    D.get_or_init(|| {
        let site = extract_site(&site(), &ExtractOptions::default()).expect("walk the fixture");
        site.documents().map(|d| (d.path.clone(), d)).collect()
    })
}

/// The fixture's index, built once with the real model, and the folder holding it.
fn built() -> &'static (tempfile::TempDir, Index) {
    static I: OnceLock<(tempfile::TempDir, Index)> = OnceLock::new();
    I.get_or_init(|| {
        let model = LoadedModel::load(&ModelFiles::locate().expect("model files (./build.sh model)")).expect("load the model");
        let out = tempfile::tempdir().expect("temp dir");
        build::build(&site(), out.path(), &model, &BuildOptions { threads: Some(2), ..BuildOptions::default() }).expect("build");
        let idx = build::read_index(out.path()).expect("read the index back");
        (out, idx)
    })
}

fn index() -> &'static Index {
    &built().1
}

#[test]
fn broken_pdfs_fail_with_their_reason_and_the_rest_is_indexed() {
    let idx = index();
    let status = |path: &str| idx.header.pages.iter().find(|p| p.path == path).map(|p| p.status.clone());
    let failed = |path: &str| match status(path) {
        Some(PageStatus::Failed { reason }) => reason,
        other => panic!("{path}: expected failed, got {other:?}"),
    };
    assert!(failed("manuals/encrypted.pdf").contains("encrypted"));
    assert!(failed("manuals/scanned-only.pdf").starts_with("no text layer"));
    assert!(failed("manuals/broken.pdf").starts_with("not a readable PDF"));
    for ok in [
        "index.html",
        "manuals/libtasn1.pdf",
        "manuals/shared-mime-info-spec.pdf",
        "manuals/scanned-page.pdf",
        "media/tour.webm",
        "media/podcast.ogg",
        "data/text-mime-types.csv",
    ] {
        let page = idx.header.pages.iter().find(|p| p.path == ok).unwrap_or_else(|| panic!("{ok} missing"));
        assert_eq!(page.status, PageStatus::Ok, "{ok}");
        assert!(page.chunk_count > 0, "{ok}");
    }
    // The tour's captions are indexed once, as the video its page plays.
    assert!(
        matches!(status("media/tour.vtt"), Some(PageStatus::Skipped { reason }) if reason.contains("indexed with its player on index.html"))
    );
}

#[test]
fn every_chunk_quotes_its_document_and_carries_its_units_locator() {
    let (idx, docs) = (index(), documents());
    let mut kinds = HashMap::<&str, usize>::new();
    for (i, c) in idx.header.chunks.iter().enumerate() {
        let page = &idx.header.pages[c.page as usize];
        let doc = docs.get(&page.path).unwrap_or_else(|| panic!("{}: not extracted", page.path));
        assert_eq!(slice_utf16(&doc.text, c.from as usize, c.to as usize), Some(c.content.as_str()), "chunk {i} of {}", page.path);
        assert_eq!(page.text_len as usize, utf16_len(&doc.text));
        *kinds.entry(c.locator.kind()).or_default() += 1;
        let (start, end) = (
            needle::doc::text::utf16_to_byte(&doc.text, c.from as usize).expect("char boundary"),
            needle::doc::text::utf16_to_byte(&doc.text, c.to as usize).expect("char boundary"),
        );
        match (&doc.source, c.locator) {
            (Source::Page, Locator::Char) => {}
            (Source::Pdf { pages }, Locator::Page(n)) => {
                let range = &pages[n as usize - 1];
                assert!(range.start <= start && end <= range.end, "chunk {i} spans beyond page {n} of {}", page.path);
            }
            (Source::Media { cues, .. }, Locator::Time { start_ms, end_ms }) => {
                let touched: Vec<_> = cues.iter().filter(|q| q.range.start < end && start < q.range.end).collect();
                assert_eq!(start_ms, touched.iter().map(|q| q.start_ms).min().unwrap_or_default(), "chunk {i}");
                assert_eq!(end_ms, touched.iter().map(|q| q.end_ms).max().unwrap_or_default(), "chunk {i}");
            }
            (Source::Table { rows }, Locator::Rows { first, last }) => {
                let touched: Vec<u32> = rows.iter().filter(|(r, _)| r.start < end && start < r.end).map(|&(_, n)| n).collect();
                assert_eq!((first, last), (touched[0], touched[touched.len() - 1]), "chunk {i}");
                // The header record is embedded with each chunk, never quoted.
                assert!(c.header.contains("mime_type | description") && !c.content.contains("mime_type | description"));
            }
            (source, locator) => panic!("chunk {i} of {}: {locator:?} for a {source:?}", page.path),
        }
    }
    for kind in ["text", "pdf", "media", "csv"] {
        assert!(kinds.get(kind).is_some_and(|&n| n > 0), "no {kind} chunk: {kinds:?}");
    }
}

#[test]
fn pdf_pages_lose_running_headers_and_gain_outline_sections() {
    let docs = documents();
    let tasn = &docs["manuals/libtasn1.pdf"];
    let Source::Pdf { pages } = &tasn.source else { panic!("not a PDF source") };
    assert_eq!(pages.len(), 36);
    assert!(!tasn.text.contains("Chapter 4: Function reference"), "a running header was kept");
    assert!(tasn.text.contains("declarations"));
    assert!(!tasn.text.contains('\u{FB01}'), "a ligature was kept");
    // The outline's "DER functions" (page 18) is a heading, and the section of what follows.
    let der = tasn.blocks.iter().find(|b| &tasn.text[b.start..b.end] == "DER functions").expect("the outline entry as a heading");
    assert!(pages[17].contains(&der.start));
    assert_eq!(der.section, vec!["4 Function reference".to_string(), "DER functions".to_string()]);
    let spec = &docs["manuals/shared-mime-info-spec.pdf"];
    assert!(!spec.text.contains("Shared MIME-info Database 1.3."), "the spec's running header was kept");
    // The scanned third page has no text; its neighbours do.
    let Source::Pdf { pages } = &docs["manuals/scanned-page.pdf"].source else { panic!("not a PDF source") };
    assert_eq!(pages.iter().map(|r| r.is_empty()).collect::<Vec<_>>(), [false, false, true, false]);
}

#[test]
fn captions_become_media_documents_sectioned_by_their_player_page() {
    let docs = documents();
    let tour = &docs["media/tour.webm"];
    assert_eq!(tour.source.host(), Some("index.html"));
    assert_eq!(tour.blocks[0].section, ["Media and reference files", "Video walkthrough"]);
    let Source::Media { cues, .. } = &tour.source else { panic!("not media") };
    assert_eq!(cues.len(), 10);
    assert!(cues.windows(2).all(|w| w[0].start_ms <= w[1].start_ms));
    let podcast = &docs["media/podcast.ogg"];
    assert_eq!(podcast.source.host(), None);
    assert!(!podcast.text.contains("-->") && !podcast.text.contains("WEBVTT"));
    let table = &docs["data/text-mime-types.csv"];
    let Source::Table { rows } = &table.source else { panic!("not a table") };
    assert_eq!(rows.len(), 136);
    assert_eq!(rows[0].1, 2, "RFC 7111: the header record is row 1");
    assert_eq!(table.text.lines().count(), 136, "a quoted line break stays inside its record");
}

#[test]
fn hits_and_citations_link_by_each_kinds_standard() {
    let idx = index();
    let opts = SearchOptions { mode: Mode::Bm25, cut: Some(2.0), ..SearchOptions::default() };
    let find = |query: &str, kind: &str| {
        let r = search::search(idx, query, None, &opts);
        let hit = r.hits.iter().find(|h| h.kind == kind).cloned().unwrap_or_else(|| panic!("no {kind} hit for {query:?}"));
        (r, hit)
    };
    let (_, video) = find("remote cache CI machines reuse", "media");
    assert!(video.url.starts_with("media/tour.webm#t="), "{}", video.url);
    assert!(video.link.starts_with("index.html#media=media/tour.webm&t="), "{}", video.link);
    assert_eq!(video.link.split("&t=").nth(1), video.url.split("#t=").nth(1));
    let (_, talk) = find("recursive resolver authoritative server", "media");
    assert!(talk.url.starts_with("media/podcast.ogg#t=") && talk.link == talk.url, "{} {}", talk.url, talk.link);
    let (_, pdf) = find("asn1_der_decoding", "pdf");
    assert!(pdf.url.starts_with("manuals/libtasn1.pdf#page="), "{}", pdf.url);
    let (mut r, csv) = find("troff", "csv");
    assert!(csv.url.starts_with("data/text-mime-types.csv#row="), "{}", csv.url);
    // A lexical ranking has no distances for the gate: cite the hits as if it kept them all.
    r.answer = (0..r.hits.len().min(4)).collect();
    let cites = cite::citations(idx, &r);
    let c = cites.iter().find(|c| c.kind == "csv").expect("a csv citation");
    assert!(c.locator_label.contains("rows ") || c.locator_label.contains("row "), "{}", c.locator_label);
    assert!(cite::build_prompt("q", &cites).contains(&c.locator_label));
}

#[test]
fn the_documents_the_builder_and_eval_share_are_one_per_file_or_player() {
    let site = extract_site(&site(), &ExtractOptions::default()).expect("walk");
    let paths: Vec<(&str, bool)> = site.results.iter().map(|(p, r)| (p.as_str(), matches!(r, Ok(Extracted::Page(_))))).collect();
    assert!(paths.contains(&("media/tour.webm", true)), "{paths:?}");
    assert!(paths.contains(&("media/podcast.vtt", true)), "the standalone captions give the podcast's document: {paths:?}");
    assert!(paths.contains(&("media/tour.vtt", false)));
}

#[test]
fn needle_eval_answers_the_question_set_over_pdfs_cues_and_rows() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kinds");
    let json = built().0.path().join("eval.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_needle"))
        .arg("eval")
        .arg(built().0.path())
        .arg("--site")
        .arg(site())
        .arg("--qrels")
        .arg(fixture.join("qrels.jsonl"))
        .arg("--ood")
        .arg(fixture.join("ood.jsonl"))
        .arg("--json")
        .arg(&json)
        .output()
        .expect("run needle eval");
    assert!(out.status.success(), "needle eval: {}", String::from_utf8_lossy(&out.stderr));
    let eval: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).expect("eval json")).expect("json");
    // The questions in the documents' own words, asked of PDFs, captions and rows: every one was
    // found in the top 8 when the set was written (1.000, tests/fixtures/kinds/README.md).
    let doc_r8 = eval["doc"]["recall"]["8"].as_f64().expect("doc R@8");
    assert!(doc_r8 >= 0.9, "doc R@8 = {doc_r8}");
    assert_eq!(eval["overall"]["destroyed"], 0, "a needle split by a chunk boundary");
    let pages: std::collections::HashSet<String> = std::fs::read_to_string(fixture.join("qrels.jsonl"))
        .expect("qrels")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a question")["page"].as_str().unwrap_or_default().to_string())
        .collect();
    for doc in ["manuals/libtasn1.pdf", "media/tour.webm", "media/podcast.ogg", "data/text-mime-types.csv"] {
        assert!(pages.contains(doc), "no question on {doc}");
    }
}
