//! Issue 6, natively, with the real model on real pages of the fixture site: broken pages end
//! `failed` or `skipped` with their reason in the index (read back by `needle status`) while
//! every other page is indexed; incremental rebuilds re-embed only what changed and equal a
//! clean build; a changed model, chunker or an unreadable index forces a full rebuild that says
//! why; the format-compatibility fixtures open (or are refused by name).
#![cfg(feature = "native")]

use needle::build::{self, read_index, BuildOptions, BuildReport, LoadedModel};
use needle::doc::chunk::{ChunkConfig, Strategy};
use needle::model::ModelFiles;
use needle::query::index::{Index, PageStatus, FORMAT_VERSION, INDEX_FILE};
use needle::query::search::{self, Mode, SearchOptions};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const NEEDLE: &str = env!("CARGO_BIN_EXE_needle");

fn nomicon(page: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nomicon/site").join(page)
}

fn model() -> &'static LoadedModel {
    static M: OnceLock<LoadedModel> = OnceLock::new();
    M.get_or_init(|| LoadedModel::load(&ModelFiles::locate().expect("model files (./build.sh model)")).expect("load the model"))
}

/// The int8 form every models folder keeps beside the shipped one: the compat indexes were
/// written with it, and an index answers only with the model it names.
fn int8_model() -> &'static LoadedModel {
    static M: OnceLock<LoadedModel> = OnceLock::new();
    M.get_or_init(|| {
        let files = ModelFiles::locate().expect("model files (./build.sh model)");
        LoadedModel::load(&ModelFiles { model: files.dir.join(needle::model::INT8_FILE), ..files }).expect("load the int8 model")
    })
}

/// A site folder holding copies of these fixture pages.
fn site_of(pages: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for p in pages {
        std::fs::copy(nomicon(p), dir.path().join(p)).expect("copy a fixture page");
    }
    dir
}

fn opts() -> BuildOptions {
    BuildOptions { threads: Some(2), ..BuildOptions::default() }
}

fn build_into(site: &Path, out: &Path, opts: &BuildOptions) -> (Index, BuildReport) {
    let (_, report) = build::build(site, out, model(), opts).expect("build");
    (read_index(out).expect("read the index back"), report)
}

fn page<'a>(idx: &'a Index, path: &str) -> Option<&'a needle::query::index::PageEntry> {
    idx.header.pages.iter().find(|p| p.path == path)
}

#[test]
fn an_incremental_rebuild_embeds_only_what_changed_and_equals_a_clean_build() {
    let site = site_of(&["casts.html", "coercions.html", "phantom-data.html", "dropck.html", "intro.html"]);
    let s = site.path();
    std::fs::copy(nomicon("leaking.html"), s.join("gone.html")).expect("copy");
    // A page that fails now (binary) and is mended before the second build: it must be retried.
    std::fs::write(s.join("retry.html"), b"<html>\0\0\0binary</html>").expect("write");
    let out = tempfile::tempdir().expect("temp dir");

    let (first, r1) = build_into(s, out.path(), &opts());
    assert_eq!(r1.reused_chunks, 0);
    assert_eq!(r1.embedded_chunks, first.header.chunks.len());
    assert!(matches!(page(&first, "retry.html").map(|p| &p.status), Some(PageStatus::Failed { .. })));
    assert!(page(&first, "gone.html").is_some_and(|p| p.chunk_count > 0));

    // Edit one page, delete one, mend the failed one.
    let edited = std::fs::read_to_string(s.join("phantom-data.html")).expect("read");
    let edited = edited.replacen("<main>", "<main><p>This paragraph was added after the first build.</p>", 1);
    assert!(edited.contains("added after the first build"));
    std::fs::write(s.join("phantom-data.html"), edited).expect("write");
    std::fs::remove_file(s.join("gone.html")).expect("delete");
    std::fs::copy(nomicon("obrm.html"), s.join("retry.html")).expect("mend");

    let (second, r2) = build_into(s, out.path(), &opts());
    assert_eq!(r2.full_rebuild_reason, None);
    assert!(page(&second, "gone.html").is_none(), "a deleted page is dropped");
    let changed: usize = ["phantom-data.html", "retry.html"].iter().map(|p| page(&second, p).expect("page").chunk_count as usize).sum();
    assert!(page(&second, "retry.html").is_some_and(|p| p.status == PageStatus::Ok && p.chunk_count > 0), "the failed page was retried");
    assert_eq!(r2.embedded_chunks, changed, "only the edited and the retried pages were embedded");
    assert_eq!(r2.reused_pages, 4);
    assert_eq!(r2.reused_chunks + r2.embedded_chunks, second.header.chunks.len());
    let unchanged: usize = ["casts.html", "coercions.html", "dropck.html", "intro.html"]
        .iter()
        .map(|p| page(&first, p).expect("page").chunk_count as usize)
        .sum();
    assert_eq!(r2.reused_chunks, unchanged);

    // A clean build of the same folder writes the very same index, vectors bit for bit.
    let clean_out = tempfile::tempdir().expect("temp dir");
    let (clean, r3) = build_into(s, clean_out.path(), &BuildOptions { incremental: false, ..opts() });
    assert_eq!(r3.reused_chunks, 0);
    assert_eq!(clean.header, second.header);
    assert!(clean.vectors.iter().zip(&second.vectors).all(|(a, b)| a.to_bits() == b.to_bits()));
    assert_eq!(clean.vectors.len(), second.vectors.len());

    // And answers the same.
    let q = "What is PhantomData for?";
    let v = model().embedder().expect("embedder").query(q).expect("embed");
    let o = SearchOptions { mode: Mode::Hybrid, k: 10, cut: None, max_chunks: 4, ..Default::default() };
    let (a, b) = (search::search(&second, q, Some(&v), &o), search::search(&clean, q, Some(&v), &o));
    assert_eq!(
        a.hits.iter().map(|h| (&h.page, h.from, h.to)).collect::<Vec<_>>(),
        b.hits.iter().map(|h| (&h.page, h.from, h.to)).collect::<Vec<_>>()
    );
    assert_eq!(a.answer, b.answer);
}

#[test]
fn a_different_model_chunker_or_an_unreadable_index_rebuilds_everything_and_says_why() {
    let site = site_of(&["casts.html", "coercions.html"]);
    let out = tempfile::tempdir().expect("temp dir");
    let (first, _) = build_into(site.path(), out.path(), &opts());
    let n = first.header.chunks.len();

    let fp32 = LoadedModel::load(&ModelFiles::locate().expect("model").fp32_files()).expect("fp32 model");
    let (_, r) = build::build(site.path(), out.path(), &fp32, &opts()).expect("fp32 build");
    assert_eq!((r.reused_chunks, r.embedded_chunks), (0, n));
    assert!(r.full_rebuild_reason.as_deref().is_some_and(|w| w.contains("model changed")), "{:?}", r.full_rebuild_reason);
    let fp32_index = read_index(out.path()).expect("read");
    assert_eq!(fp32_index.header.stamp.model, fp32.stamp, "no int8 vector survives in the fp32 index");

    let c = BuildOptions { chunk: ChunkConfig { strategy: Strategy::C, ..ChunkConfig::default() }, ..opts() };
    let (_, r) = build::build(site.path(), out.path(), &fp32, &c).expect("strategy C build");
    assert_eq!(r.reused_chunks, 0);
    assert!(r.full_rebuild_reason.as_deref().is_some_and(|w| w.contains("chunker settings changed")), "{:?}", r.full_rebuild_reason);

    let file = out.path().join(INDEX_FILE);
    let mut bytes = std::fs::read(&file).expect("read");
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&file, bytes).expect("truncate");
    let (again, r) = build_into(site.path(), out.path(), &opts());
    assert_eq!(r.reused_chunks, 0);
    assert!(
        r.full_rebuild_reason.as_deref().is_some_and(|w| w.contains("could not be read") && w.contains("truncated")),
        "{:?}",
        r.full_rebuild_reason
    );
    assert_eq!(again.header, first.header);
}

/// Writes the broken-page zoo into `dir`; returns the expected state per page.
fn broken_site(dir: &Path) -> Vec<(&'static str, &'static str, &'static str)> {
    let w = |name: &str, bytes: &[u8]| std::fs::write(dir.join(name), bytes).expect("write");
    std::fs::copy(nomicon("casts.html"), dir.join("casts.html")).expect("copy");
    w("binary.html", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    w("huge.html", format!("<html><body><main><p>{}</p></main></body></html>", "word ".repeat(60_000)).as_bytes());
    w("empty.html", b"<!doctype html><html><head><title>Empty</title></head><body><main>  </main></body></html>");
    w("zero.html", b"");
    w("latin1.html", b"<html><head><meta charset=\"windows-1252\"><title>Caf\xe9</title></head><body><main><h1>Caf\xe9 cr\xe8me</h1><p>Na\xefve r\xe9sum\xe9 \x93quoted\x94.</p></main></body></html>");
    w("bad-utf8.html", b"<html><body><main><p>ok then \xff\xfe broken</p></main></body></html>");
    w("bad.md", b"# Title\n\nvalid then \xc3\x28 invalid\n");
    w("nested.html", format!("<html><body><main>{}<p>deep text survives</p></main></body></html>", "<div><span>".repeat(5000)).as_bytes());
    w("unclosed.html", b"<html><body><main><h1>Unclosed</h1><p>first paragraph<p>second <b>bold <i>both</main>");
    w("headings.html", b"<html><body><main><h1>Only</h1><h2>headings</h2></main></body></html>");
    w("redirect.html", b"<html><head><meta http-equiv=\"refresh\" content=\"0; url=casts.html\"></head><body></body></html>");
    #[cfg(unix)]
    std::os::unix::fs::symlink(dir.join("nowhere.html"), dir.join("dangling.html")).expect("symlink");
    vec![
        ("casts.html", "ok", ""),
        ("latin1.html", "ok", ""),
        ("nested.html", "ok", ""),
        ("unclosed.html", "ok", ""),
        ("binary.html", "failed", "binary file"),
        ("huge.html", "failed", "over the page size limit"),
        ("bad-utf8.html", "failed", "invalid UTF-8 at byte 29 and no charset declared"),
        ("bad.md", "failed", "invalid UTF-8 at byte 20 (Markdown and text files are read as UTF-8)"),
        ("empty.html", "skipped", "no text"),
        ("zero.html", "skipped", ""),
        ("redirect.html", "skipped", "redirect"),
        ("headings.html", "skipped", "no text outside headings"),
        #[cfg(unix)]
        ("dangling.html", "failed", "cannot read"),
    ]
}

#[test]
fn broken_pages_end_failed_or_skipped_with_reasons_and_the_rest_is_searchable() {
    let site = tempfile::tempdir().expect("temp dir");
    let expected = broken_site(site.path());
    let out = site.path().join("needle");
    let run = |args: &[&str]| {
        let o = Command::new(NEEDLE).args(args).output().expect("run needle");
        (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (ok, stdout, stderr) = run(&["build", site.path().to_str().expect("utf-8"), "--max-page-bytes", "100000", "--json"]);
    assert!(ok, "the build succeeds while pages are broken:\n{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("build --json");

    let (ok, status, stderr) = run(&["status", out.to_str().expect("utf-8"), "--json"]);
    assert!(ok, "{stderr}");
    let status: Value = serde_json::from_str(&status).expect("status --json");
    let pages = status["pages"].as_array().expect("pages");
    for (path, state, reason) in &expected {
        let p = pages.iter().find(|p| p["path"] == *path).unwrap_or_else(|| panic!("{path} missing from status: {status:#}"));
        assert_eq!(p["state"], *state, "{path}: {p}");
        let why = p["reason"].as_str().unwrap_or("");
        assert!(why.contains(reason), "{path}: reason {why:?} should mention {reason:?}");
        if *state != "ok" {
            assert!(!why.is_empty(), "{path}: a page that is not indexed says why");
            assert_eq!(p["chunks"], 0);
        } else {
            assert!(p["chunks"].as_u64().unwrap_or(0) > 0, "{path} has chunks");
        }
    }
    // The counts are what the index holds, and what the build reported.
    let idx = read_index(&out).expect("read back");
    let count = |f: fn(&PageStatus) -> bool| idx.header.pages.iter().filter(|p| f(&p.status)).count() as u64;
    assert_eq!(status["ok"].as_u64(), Some(count(|s| *s == PageStatus::Ok)));
    assert_eq!(status["failed"].as_u64(), Some(count(|s| matches!(s, PageStatus::Failed { .. }))));
    assert_eq!(status["skipped"].as_u64(), Some(count(|s| matches!(s, PageStatus::Skipped { .. }))));
    assert_eq!(report["pages_ok"], status["ok"]);
    assert_eq!(report["failed"].as_array().map(|a| a.len() as u64), status["failed"].as_u64());
    assert_eq!(report["skipped"].as_array().map(|a| a.len() as u64), status["skipped"].as_u64());
    assert_eq!(status["chunks"].as_u64(), Some(idx.header.chunks.len() as u64));
    assert_eq!(report["chunks"], status["chunks"]);

    // Every good page answers, including the decoded legacy one and the deep one.
    let v = |q: &str| model().embedder().expect("embedder").query(q).expect("embed");
    for (q, page) in
        [("naïve résumé café crème", "latin1.html"), ("deep text survives", "nested.html"), ("casting between types with as", "casts.html")]
    {
        let r = search::search(
            &idx,
            q,
            Some(&v(q)),
            &SearchOptions { mode: Mode::Hybrid, k: 3, cut: None, max_chunks: 4, ..Default::default() },
        );
        assert_eq!(r.hits.first().map(|h| h.page.as_str()), Some(page), "{q}");
    }
    let latin = idx.header.chunks.iter().find(|c| idx.header.pages[c.page as usize].path == "latin1.html").expect("latin1 chunk");
    assert!(latin.content.contains("Naïve résumé “quoted”."), "windows-1252 decoded: {:?}", latin.content);

    // A failed page is retried on the next build: raise the limit, and huge.html gets in.
    let (ok, stdout, _) = run(&["build", site.path().to_str().expect("utf-8"), "--json"]);
    assert!(ok);
    let r2: Value = serde_json::from_str(&stdout).expect("json");
    assert!(r2["failed"].as_array().expect("failed").iter().all(|f| f[0] != "huge.html"));
    assert!(r2["embedded_chunks"].as_u64().unwrap_or(0) > 0 && r2["reused_pages"].as_u64().unwrap_or(0) >= 4, "{r2}");
}

/// Format compatibility (as tantivy's compat tests): an index written by each released format
/// version is kept in `tests/fixtures/compat/v{N}/` with the site it was built from. This
/// needle must read each one correctly, or refuse it by name. A format change without a new
/// fixture fails here.
#[test]
fn every_released_index_format_opens_or_is_refused_by_name() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compat");
    assert!(
        root.join(format!("v{FORMAT_VERSION}")).join(INDEX_FILE).is_file(),
        "format version {FORMAT_VERSION} has no compat fixture: add tests/fixtures/compat/v{FORMAT_VERSION}/ (see its README)"
    );
    for version in 1..=FORMAT_VERSION {
        let dir = root.join(format!("v{version}"));
        let bytes = std::fs::read(dir.join(INDEX_FILE)).unwrap_or_else(|e| panic!("v{version}: {e}"));
        let expected: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).expect("expected.json")).expect("json");
        match Index::from_bytes(&bytes, &format!("compat v{version}")) {
            Ok(idx) => {
                assert_eq!(idx.header.pages.len() as u64, expected["pages"].as_u64().expect("pages"), "v{version}");
                assert_eq!(idx.header.chunks.len() as u64, expected["chunks"].as_u64().expect("chunks"), "v{version}");
                // Formats 1 and 2 had no gate depth (20 wherever they were searched) and no site path.
                let depth = expected.get("gate_depth").and_then(Value::as_u64).unwrap_or(20);
                assert_eq!(u64::from(idx.header.settings.gate_depth), depth, "v{version} gate depth");
                assert_eq!(idx.header.site, expected.get("site").and_then(Value::as_str).unwrap_or(""), "v{version} site");
                // Formats 1–4 had one cut for every query; 5 records the gate rule.
                let gate = match idx.header.settings.gate {
                    needle::query::index::Gate::Cut => "cut",
                    needle::query::index::Gate::Auto { .. } => "auto",
                };
                assert_eq!(gate, expected.get("gate").and_then(Value::as_str).unwrap_or("cut"), "v{version} gate");
                // Formats 1–5 had no text analysis: analyzer 1, every page's language unknown.
                let analysis = &idx.header.analysis;
                assert_eq!(
                    u64::from(analysis.version),
                    expected.get("analyzer").and_then(Value::as_u64).unwrap_or(1),
                    "v{version} analyzer"
                );
                let langs: Vec<&str> = expected
                    .get("languages")
                    .and_then(Value::as_array)
                    .map_or(vec!["und"], |a| a.iter().filter_map(Value::as_str).collect());
                assert_eq!(analysis.langs, langs, "v{version} languages");
                // The stored offsets still quote the site's canonical text.
                let site = dir.join("site");
                let opts = needle::doc::extract::ExtractOptions::default();
                for doc in needle::build::site::extract_site(&site, &opts).expect("walk").documents() {
                    let p = idx.header.pages.iter().position(|p| p.path == doc.path).expect("page in index") as u32;
                    for c in idx.header.chunks.iter().filter(|c| c.page == p) {
                        assert_eq!(needle::doc::text::slice_utf16(&doc.text, c.from as usize, c.to as usize), Some(c.content.as_str()));
                    }
                }
                // Formats 1–3 cite every chunk by `#char=`; 4 records each chunk's locator.
                let mut kinds = serde_json::Map::new();
                for c in &idx.header.chunks {
                    let n = kinds.get(c.locator.kind()).and_then(Value::as_u64).unwrap_or(0);
                    kinds.insert(c.locator.kind().to_string(), Value::from(n + 1));
                }
                let want = expected.get("locators").cloned().unwrap_or_else(|| serde_json::json!({ "text": idx.header.chunks.len() }));
                assert_eq!(Value::Object(kinds), want, "v{version} locators");
                // The same question finds the same page, lexically and with the model it names.
                let q = expected["query"].as_str().expect("query");
                let want = expected["top_page"].as_str().expect("top_page");
                let bm25 = search::search(
                    &idx,
                    q,
                    None,
                    &SearchOptions { mode: Mode::Bm25, k: 3, cut: None, max_chunks: 4, ..Default::default() },
                );
                assert_eq!(bm25.hits.first().map(|h| h.page.as_str()), Some(want), "v{version} bm25");
                idx.check_model(&int8_model().stamp, "compat").expect("the compat index names the int8 model");
                let v = int8_model().embedder().expect("embedder").query(q).expect("embed");
                let dense = search::search(
                    &idx,
                    q,
                    Some(&v),
                    &SearchOptions { mode: Mode::Dense, k: 3, cut: None, max_chunks: 4, ..Default::default() },
                );
                assert_eq!(dense.hits.first().map(|h| h.page.as_str()), Some(want), "v{version} dense");
                let d = dense.hits.first().map(|h| h.distance).unwrap_or(f32::NAN);
                let want_d = expected["top_distance"].as_f64().expect("top_distance") as f32;
                assert!((d - want_d).abs() < 1e-3, "v{version}: distance {d} vs {want_d} when written");
            }
            Err(e) => {
                // A retired version is refused, naming the file and the version.
                let msg = e.to_string();
                assert!(msg.contains(&format!("compat v{version}")) && msg.contains(&format!("version {version}")), "{msg}");
            }
        }
    }
}

/// A models folder holding these files (by name in the folder ← source path).
fn model_dir(files: &[(&str, Vec<u8>)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes).expect("write model file");
    }
    dir
}

#[test]
fn a_wrong_model_or_tokenizer_file_is_refused_naming_the_file() {
    let real = ModelFiles::locate().expect("model");
    // The fixture index was built with the int8 form.
    let int8 = std::fs::read(real.dir.join(needle::model::INT8_FILE)).expect("int8");
    let fp32 = std::fs::read(&real.fp32).expect("fp32");
    let tok = std::fs::read(&real.tokenizer).expect("tokenizer");
    let index = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compat/v1");
    let run = |models: &Path, args: &[&str]| {
        let o = Command::new(NEEDLE).args(args).env("NEEDLE_MODEL_DIR", models).output().expect("run needle");
        (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let query = ["query", index.to_str().expect("utf-8"), "Which types are Send and Sync?"];

    // Sanity: the real files answer.
    let good = model_dir(&[("minilm-int8.onnx", int8.clone()), ("tokenizer.json", tok.clone())]);
    let (ok, out, err) = run(good.path(), &query);
    assert!(ok && out.contains("send-and-sync.html"), "{out}{err}");

    // Another model's weights under the int8 name: refused, both files named, nothing printed.
    let other = model_dir(&[("minilm-int8.onnx", fp32), ("tokenizer.json", tok.clone())]);
    let (ok, out, err) = run(other.path(), &query);
    assert!(!ok && out.is_empty(), "{out}");
    assert!(
        err.contains("minilm-int8.onnx does not match the index")
            && err.contains("compat/v1")
            && err.contains("vectors of two models never mix"),
        "{err}"
    );

    // A tokenizer from another model (one vocabulary entry differs).
    let mut other_tok = String::from_utf8(tok.clone()).expect("utf-8");
    other_tok = other_tok.replacen("\"[unused0]\"", "\"[unusedX]\"", 1);
    let retok = model_dir(&[("minilm-int8.onnx", int8.clone()), ("tokenizer.json", other_tok.into_bytes())]);
    let (ok, out, err) = run(retok.path(), &query);
    assert!(!ok && out.is_empty(), "{out}");
    assert!(err.contains("tokenizer.json does not match the index") && err.contains("tokenizer"), "{err}");

    // A corrupt model file: a build names it and stops before writing anything.
    let site = site_of(&["casts.html"]);
    let out_dir = site.path().join("out");
    let corrupt = model_dir(&[("minilm-int8.onnx", int8[..int8.len() / 3].to_vec()), ("tokenizer.json", tok)]);
    let (ok, _, err) = run(corrupt.path(), &["build", site.path().to_str().expect("utf-8"), "--out", out_dir.to_str().expect("utf-8")]);
    assert!(!ok, "a build with a corrupt model fails");
    assert!(err.contains("minilm-int8.onnx: cannot load"), "{err}");
    assert_eq!(err.matches("reading ONNX").count(), 1, "the reason is said once: {err}");
    assert!(!out_dir.join(INDEX_FILE).exists(), "no index is written with a corrupt model");
}

#[test]
fn a_site_built_in_parts_and_merged_is_byte_identical_to_one_build() {
    // Real pages, a copy of one under another name (skipped in its favour, whichever part each
    // lands in), a binary page (failed) and a redirect stub (skipped).
    let site = site_of(&["casts.html", "coercions.html", "phantom-data.html", "dropck.html", "intro.html", "leaking.html", "arc.html"]);
    let s = site.path();
    std::fs::copy(nomicon("intro.html"), s.join("index.html")).expect("copy");
    std::fs::write(s.join("broken.html"), b"<html>\0\0\0binary</html>").expect("write");
    let work = tempfile::tempdir().expect("temp dir");
    let (w, n) = (work.path(), 3);
    build::build(s, &w.join("single"), model(), &opts()).expect("one build");
    let mut parts = Vec::new();
    for i in 1..=n {
        let part = format!("{i}/{n}").parse().expect("a part");
        let dir = w.join(format!("part{i}"));
        build::build(s, &dir, model(), &BuildOptions { part: Some(part), ..opts() }).expect("a part");
        assert!(!dir.join(INDEX_FILE).exists(), "a part is never written as a whole index");
        parts.push(dir);
    }
    let models = [model().files.clone()];
    let (merged, report) = build::part::merge(&parts, &w.join("merged"), None, &models).expect("merge");
    let single = std::fs::read(w.join("single").join(INDEX_FILE)).expect("read");
    assert_eq!(report.parts, 3);
    assert!(merged == single, "the merged index is byte-identical to one build's ({} vs {} bytes)", merged.len(), single.len());
    let idx = read_index(&w.join("merged")).expect("read back");
    assert!(matches!(page(&idx, "index.html").map(|p| &p.status), Some(PageStatus::Skipped { .. })));
    assert!(matches!(page(&idx, "broken.html").map(|p| &p.status), Some(PageStatus::Failed { .. })));

    // Incomplete, repeated, or from another build: refused by name.
    let err = |paths: &[PathBuf]| build::part::merge(paths, &w.join("x"), None, &models).expect_err("refused").to_string();
    assert!(err(&parts[..2]).contains("part 3 of 3 is missing"), "{}", err(&parts[..2]));
    assert!(err(&[parts[0].clone(), parts[0].clone(), parts[2].clone()]).contains("part 1 is given twice"));
    let other = w.join("other");
    let c = BuildOptions {
        chunk: ChunkConfig { target_chars: 300, ..ChunkConfig::default() },
        part: Some("2/3".parse().expect("a part")),
        ..opts()
    };
    build::build(s, &other, model(), &c).expect("a part of another build");
    let e = err(&[parts[0].clone(), other, parts[2].clone()]);
    assert!(e.contains("the chunking and gate settings: not the same as in") && e.contains("different builds"), "{e}");
}
