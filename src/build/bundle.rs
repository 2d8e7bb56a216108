//! The browser bundle: everything a static site needs to search in its readers' browsers,
//! written next to the index (`SITE/needle/` by default).
//! Invariants: every file except `needle.js`, `widget.js`, `needle-sw.js` and `manifest.json` has a
//! content-hashed name (`stem.<16 hex of sha256>.ext`), so a CDN or the Cache API may keep it
//! forever; `manifest.json` is written last and names only files that exist; the model is the
//! very file the index was built with (its sha256 is what the index stamps and what the
//! browser checks); stale hashed files of earlier bundles are removed. A large site's index is
//! shipped in pieces (`Layout`): a folder `pieces.<16 hex of its head>/` holding the head and
//! the pieces a reader fetches on demand (`query::pieces`), instead of the index and vectors
//! files; the folder's name is a content hash like the files'.

use super::assets::{self, Asset, Engine, Www};
use super::pieces::{PieceConfig, PiecePlan};
use crate::query::index::{sha256_hex, Index, IndexError};
use crate::query::pieces::HEAD_FILE;
use serde::Serialize;
use std::borrow::Cow;
use std::path::{Path, PathBuf};

/// Bump when the manifest's fields change.
pub const MANIFEST_VERSION: u32 = 1;
pub const MANIFEST_FILE: &str = "manifest.json";

/// The relaxed-SIMD engine's file name: an earlier bundle's copy goes even when this binary
/// carries none (`needle.js` picks that build where the browser validates relaxed SIMD).
const WASM_RELAXED: &str = "needle_core_relaxed_bg.wasm";

#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("{what} not found at {path}")]
    Missing { what: &'static str, path: PathBuf },
    #[error(
        "this needle binary carries no WebAssembly engine (it was compiled before pkg/ was built); \
         build it with `./build.sh cli`, which builds pkg/ first"
    )]
    NoEngine,
    #[error("{path}: {cause}")]
    Io { path: PathBuf, cause: std::io::Error },
    #[error(transparent)]
    Index(#[from] IndexError),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BundleError + '_ {
    move |cause| BundleError::Io { path: path.to_path_buf(), cause }
}

/// A site with at least this many chunks is shipped in pieces by [`Layout::auto`]: about 10 MB of
/// index, which a reader would otherwise fetch whole (3 MB or more before a first answer) while
/// its pieces answer a first query with well under 1 MB. Below it one file is fewer requests,
/// and every later query is answered with no network at all.
pub const PIECES_FROM_CHUNKS: usize = 10_000;

/// How the bundle ships the index.
#[derive(Debug, Clone, PartialEq)]
pub enum Layout {
    /// The lexical index and the vectors, two files each fetched whole.
    Whole,
    /// A head and pieces fetched on demand; a query probes `nprobe` inverted lists.
    Pieces { config: PieceConfig, nprobe: usize },
}

impl Layout {
    /// In pieces from [`PIECES_FROM_CHUNKS`] chunks on (with `config` and `nprobe`), else whole.
    pub fn auto(chunks: usize, config: PieceConfig, nprobe: usize) -> Layout {
        if chunks >= PIECES_FROM_CHUNKS {
            Layout::Pieces { config, nprobe }
        } else {
            Layout::Whole
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct BundleFile {
    /// The role (`wasm`, `model`, …) as the manifest names it.
    pub role: String,
    /// File name inside the bundle folder.
    pub name: String,
    pub bytes: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct BundleReport {
    pub files: Vec<BundleFile>,
    pub total_bytes: u64,
    /// Stale hashed files of an earlier bundle that were removed.
    pub removed: Vec<String>,
    /// The index in pieces, when the layout says so: folder, piece count and bytes.
    pub pieces: Option<PiecesReport>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct PiecesReport {
    pub folder: String,
    /// Files in the folder, the head included.
    pub files: usize,
    pub bytes: u64,
    pub head_bytes: u64,
    pub lists: usize,
    pub nprobe: usize,
}

#[derive(Serialize)]
struct Manifest<'a> {
    version: u32,
    /// Role → file name, relative to the manifest.
    files: std::collections::BTreeMap<&'a str, String>,
    /// Role → size in bytes (for download progress).
    sizes: std::collections::BTreeMap<&'a str, u64>,
    /// The site root relative to the bundle folder: where `page` paths start.
    #[serde(rename = "siteRoot")]
    site_root: &'a str,
    /// The folder of an index in pieces (`files.head` is its head), relative to the manifest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pieces: Option<String>,
    model: ManifestModel<'a>,
    chunks: usize,
    pages: usize,
}

#[derive(Serialize)]
struct ManifestModel<'a> {
    name: &'a str,
    sha256: &'a str,
}

/// One page as the landing highlight checks it: is the rendered page still the indexed one?
#[derive(Serialize)]
struct PageInfo<'a> {
    title: &'a str,
    /// sha256 (hex) of the canonical text.
    hash: &'a str,
    /// UTF-16 length of the canonical text.
    len: u32,
}

/// `stem.<16 hex>.ext` for `name` with these contents.
pub(crate) fn hashed_name(name: &str, bytes: &[u8]) -> String {
    let hash = &sha256_hex(bytes)[..16];
    match name.rsplit_once('.') {
        Some((stem, ext)) => format!("{stem}.{hash}.{ext}"),
        None => format!("{name}.{hash}"),
    }
}

/// Writes the browser bundle into `out_dir`: the JavaScript API, the widget, the worker, the
/// WebAssembly engine (all embedded in this binary), the model and tokenizer, the index and
/// `manifest.json`.
pub fn write_bundle(
    out_dir: &Path,
    index_bytes: &[u8],
    model: &Path,
    tokenizer: &Path,
    layout: &Layout,
) -> Result<BundleReport, BundleError> {
    let engine = assets::ENGINE.ok_or(BundleError::NoEngine)?;
    write_bundle_with(out_dir, index_bytes, model, tokenizer, layout, &engine, &assets::WWW)
}

/// `write_bundle` with the given engine and JavaScript files.
pub(crate) fn write_bundle_with(
    out_dir: &Path,
    index_bytes: &[u8],
    model: &Path,
    tokenizer: &Path,
    layout: &Layout,
    engine: &Engine,
    www: &Www,
) -> Result<BundleReport, BundleError> {
    let index = Index::from_bytes(index_bytes, "index")?;
    for (what, path) in [("the model", model), ("the tokenizer", tokenizer)] {
        if !path.is_file() {
            return Err(BundleError::Missing { what, path: path.to_path_buf() });
        }
    }
    std::fs::create_dir_all(out_dir).map_err(io(out_dir))?;
    let read = |p: &Path| std::fs::read(p).map_err(io(p));

    let mut pages = std::collections::BTreeMap::new();
    for p in &index.header.pages {
        if !p.content_hash.is_empty() {
            pages.insert(p.path.as_str(), PageInfo { title: &p.title, hash: &p.content_hash, len: p.text_len });
        }
    }
    let pages_json = serde_json::to_vec(&pages).expect("pages serialise");

    let model_bytes = read(model)?;
    let model_sha = sha256_hex(&model_bytes);
    let model_ext = model.extension().and_then(|e| e.to_str()).unwrap_or("onnx");
    // (role, name before hashing, bytes): what the binary embeds is borrowed, not copied.
    let embedded = |role, a: &Asset| (role, a.name.to_string(), Cow::Borrowed(a.bytes));
    let mut hashed: Vec<(&str, String, Cow<[u8]>)> = vec![
        embedded("wasm", &engine.wasm),
        embedded("glue", &engine.glue),
        embedded("worker", &www.worker),
        embedded("highlight", &www.highlight),
        // The stemmers add a fifth to the lexical core (31 KB brotli): only a site with pages in a
        // stemmed language ships them.
        embedded("lexical", if index.header.analysis.stems() { &engine.lexical_stem } else { &engine.lexical }),
        embedded("lexicalGlue", &engine.lexical_glue),
        embedded("css", &www.css),
        ("model", format!("model.{model_ext}"), Cow::Owned(model_bytes)),
        ("tokenizer", "tokenizer.json".into(), Cow::Owned(read(tokenizer)?)),
        ("pages", "pages.json".into(), Cow::Owned(pages_json)),
    ];
    let mut report = BundleReport::default();
    let mut files = std::collections::BTreeMap::new();
    let mut sizes = std::collections::BTreeMap::new();
    let mut keep = std::collections::HashSet::new();
    let mut pieces_folder = None;
    match layout {
        Layout::Whole => {
            // The browser's copy of the index in two files: what a lexical answer reads, and the
            // vectors, fetched with the model (query::index, "Split for the browser").
            let (lexical_index, vectors) = index.to_split_bytes()?;
            hashed.push(("index", "index.needle".into(), Cow::Owned(lexical_index)));
            hashed.push(("vectors", "vectors.bin".into(), Cow::Owned(vectors)));
        }
        Layout::Pieces { config, nprobe } => {
            let plan = PiecePlan::new(&index, config);
            let written = super::pieces::write(&index, &plan, *nprobe)?;
            let head = written.iter().find(|(n, _)| n == HEAD_FILE).map(|(_, b)| b.as_slice()).unwrap_or_default();
            let folder = hashed_name("pieces", head);
            let (dir, tmp) = (out_dir.join(&folder), out_dir.join(format!("{folder}.tmp-bundle")));
            if !dir.join(HEAD_FILE).is_file() {
                // Written whole into a temporary folder, then renamed: a reader never sees half.
                let _ = std::fs::remove_dir_all(&tmp);
                std::fs::create_dir_all(&tmp).map_err(io(&tmp))?;
                for (name, bytes) in &written {
                    let path = tmp.join(name);
                    std::fs::write(&path, bytes).map_err(io(&path))?;
                }
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::rename(&tmp, &dir).map_err(io(&dir))?;
            }
            let bytes: u64 = written.iter().map(|(_, b)| b.len() as u64).sum();
            report.pieces = Some(PiecesReport {
                folder: folder.clone(),
                files: written.len(),
                bytes,
                head_bytes: head.len() as u64,
                lists: plan.lists.len(),
                nprobe: (*nprobe).clamp(1, plan.lists.len().max(1)),
            });
            report.total_bytes += bytes;
            files.insert("head", format!("{folder}/{HEAD_FILE}"));
            sizes.insert("head", head.len() as u64);
            keep.insert(folder.clone());
            pieces_folder = Some(format!("{folder}/"));
        }
    }
    if let Some(relaxed) = &engine.wasm_relaxed {
        hashed.push(embedded("wasmRelaxed", relaxed));
    }
    // Fixed names: what a site links to, and the service worker (its URL must stay put).
    let fixed = [embedded("api", &www.api), embedded("widget", &www.widget), embedded("sw", &www.sw)];

    for (role, name, bytes) in
        hashed.iter().map(|(r, n, b)| (*r, hashed_name(n, b), b)).chain(fixed.iter().map(|(r, n, b)| (*r, n.clone(), b)))
    {
        let path = out_dir.join(&name);
        // Same name = same bytes for hashed files; skip rewriting a large model or wasm.
        let unchanged =
            std::fs::metadata(&path).map(|m| m.len() == bytes.len() as u64).unwrap_or(false) && !matches!(role, "api" | "widget" | "sw");
        if !unchanged {
            write_atomic(&path, bytes)?;
        }
        report.files.push(BundleFile { role: role.into(), name: name.clone(), bytes: bytes.len() as u64 });
        report.total_bytes += bytes.len() as u64;
        sizes.insert(role, bytes.len() as u64);
        keep.insert(name.clone());
        files.insert(role, name);
    }

    let manifest = Manifest {
        version: MANIFEST_VERSION,
        files,
        sizes,
        site_root: "../",
        pieces: pieces_folder,
        model: ManifestModel { name: &index.header.stamp.model.name, sha256: &model_sha },
        chunks: index.header.chunks.len(),
        pages: index.header.pages.len(),
    };
    let manifest_bytes = serde_json::to_vec_pretty(&manifest).expect("manifest serialises");
    write_atomic(&out_dir.join(MANIFEST_FILE), &manifest_bytes)?;

    // Drop earlier bundles' hashed files (their stems are ours, their hashes are not current).
    // (The relaxed engine's stem counts even when this bundle has none: an old one goes.)
    // (The index, vectors and pieces too: a bundle that changed layout drops the other one.)
    let stems: Vec<String> = hashed
        .iter()
        .map(|(_, n, _)| n.as_str())
        .chain([WASM_RELAXED, "index.needle", "vectors.bin", "pieces.x"])
        .map(|n| n.rsplit_once('.').map(|(s, _)| s.to_string()).unwrap_or_default())
        .collect();
    for entry in std::fs::read_dir(out_dir).map_err(io(out_dir))?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if keep.contains(&name) || !is_hashed_name(Path::new(&name)) {
            continue;
        }
        if stems.iter().any(|s| name.starts_with(&format!("{s}."))) {
            let path = entry.path();
            if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) }.map_err(io(&path))?;
            report.removed.push(name);
        }
    }
    Ok(report)
}

/// `name.0123456789abcdef.ext`, or a file in a folder `pieces.0123456789abcdef`: a
/// content-hashed name (as the bundle writes), cacheable forever.
pub fn is_hashed_name(path: &Path) -> bool {
    let hashed =
        |name: &str| name.split('.').any(|part| part.len() == 16 && part.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    let name = |p: Option<&Path>| p.and_then(Path::file_name).and_then(|n| n.to_str()).unwrap_or("").to_string();
    let folder = name(path.parent());
    hashed(&name(Some(path))) || (folder.starts_with("pieces.") && hashed(&folder))
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), BundleError> {
    let tmp = path.with_extension("tmp-bundle");
    std::fs::write(&tmp, bytes).map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashed_names_keep_stem_and_extension() {
        let n = hashed_name("needle_core_bg.wasm", b"abc");
        assert_eq!(n, "needle_core_bg.ba7816bf8f01cfea.wasm");
        assert!(is_hashed_name(Path::new(&n)));
    }

    fn engine(relaxed: bool) -> Engine {
        Engine {
            glue: Asset { name: "needle_core.js", bytes: b"glue" },
            wasm: Asset { name: "needle_core_bg.wasm", bytes: b"baseline" },
            wasm_relaxed: relaxed.then_some(Asset { name: WASM_RELAXED, bytes: b"relaxed" }),
            lexical_glue: Asset { name: "needle_lexical.js", bytes: b"lexical glue" },
            lexical: Asset { name: "needle_lexical_bg.wasm", bytes: b"lexical" },
            lexical_stem: Asset { name: "needle_lexical_bg.wasm", bytes: b"lexical with stemmers" },
        }
    }

    #[test]
    fn the_relaxed_simd_engine_is_offered_when_built_and_dropped_when_not() {
        let dir = tempfile::tempdir().unwrap();
        let (model, tok) = (dir.path().join("m.onnx"), dir.path().join("t.json"));
        std::fs::write(&model, b"model").unwrap();
        std::fs::write(&tok, b"{}").unwrap();
        let out = dir.path().join("out");
        let bytes = crate::query::index::tests::tiny().to_bytes().unwrap();
        let manifest = || -> serde_json::Value { serde_json::from_slice(&std::fs::read(out.join(MANIFEST_FILE)).unwrap()).unwrap() };

        write_bundle_with(&out, &bytes, &model, &tok, &Layout::Whole, &engine(true), &assets::WWW).unwrap();
        let relaxed = manifest()["files"]["wasmRelaxed"].as_str().expect("wasmRelaxed in the manifest").to_string();
        assert_eq!(relaxed, hashed_name(WASM_RELAXED, b"relaxed"));
        assert_eq!(std::fs::read(out.join(&relaxed)).unwrap(), b"relaxed");
        assert_eq!(manifest()["files"]["wasm"].as_str(), Some(hashed_name("needle_core_bg.wasm", b"baseline").as_str()));
        assert_eq!(std::fs::read(out.join("widget.js")).unwrap(), assets::WWW.widget.bytes, "the embedded widget is written");

        let report = write_bundle_with(&out, &bytes, &model, &tok, &Layout::Whole, &engine(false), &assets::WWW).unwrap();
        assert!(manifest()["files"].get("wasmRelaxed").is_none());
        assert_eq!(report.removed, vec![relaxed.clone()]);
        assert!(!out.join(&relaxed).exists());
    }

    #[test]
    fn an_index_in_pieces_replaces_the_index_files_and_goes_when_the_layout_changes_back() {
        let dir = tempfile::tempdir().unwrap();
        let (model, tok) = (dir.path().join("m.onnx"), dir.path().join("t.json"));
        std::fs::write(&model, b"model").unwrap();
        std::fs::write(&tok, b"{}").unwrap();
        let out = dir.path().join("out");
        let index = crate::query::index::tests::tiny();
        let bytes = index.to_bytes().unwrap();
        let manifest = || -> serde_json::Value { serde_json::from_slice(&std::fs::read(out.join(MANIFEST_FILE)).unwrap()).unwrap() };
        let pieces = Layout::Pieces { config: PieceConfig { lists: 2, ..Default::default() }, nprobe: 2 };

        write_bundle_with(&out, &bytes, &model, &tok, &Layout::Whole, &engine(false), &assets::WWW).unwrap();
        let index_file = manifest()["files"]["index"].as_str().unwrap().to_string();
        let report = write_bundle_with(&out, &bytes, &model, &tok, &pieces, &engine(false), &assets::WWW).unwrap();
        let m = manifest();
        let folder = m["pieces"].as_str().expect("the manifest names the pieces' folder").to_string();
        assert_eq!(m["files"]["head"].as_str(), Some(format!("{folder}{HEAD_FILE}").as_str()));
        assert!(m["files"].get("index").is_none() && m["files"].get("vectors").is_none());
        assert!(report.removed.contains(&index_file), "the whole index's file goes: {:?}", report.removed);
        let p = report.pieces.expect("a pieces report");
        assert_eq!((p.lists, p.nprobe), (2, 2));
        // Head, two lists, and at least one lexical and one content piece, each readable.
        let written: Vec<String> =
            std::fs::read_dir(out.join(&folder)).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        assert_eq!(written.len(), p.files);
        assert!(written.len() >= 5, "{written:?}");
        let mut reader =
            crate::query::pieces::Pieced::from_head(&std::fs::read(out.join(&folder).join(HEAD_FILE)).unwrap(), "head").unwrap();
        for name in written.iter().filter(|n| *n != HEAD_FILE) {
            let id = crate::query::pieces::PieceId::from_file_name(name).unwrap();
            reader.add(id, &std::fs::read(out.join(&folder).join(name)).unwrap(), name).unwrap();
        }
        assert!(is_hashed_name(&out.join(&folder).join("terms-0.needle")), "pieces are served as immutable");
        assert!(!is_hashed_name(Path::new("docs/terms-0.needle")));

        let report = write_bundle_with(&out, &bytes, &model, &tok, &Layout::Whole, &engine(false), &assets::WWW).unwrap();
        assert!(report.removed.contains(&folder.trim_end_matches('/').to_string()), "{:?}", report.removed);
        assert!(!out.join(&folder).exists());
        assert!(manifest()["pieces"].is_null() && manifest()["files"]["index"].is_string());
    }

    #[test]
    fn auto_ships_a_large_index_in_pieces() {
        let c = PieceConfig::default();
        assert_eq!(Layout::auto(PIECES_FROM_CHUNKS - 1, c.clone(), 32), Layout::Whole);
        assert_eq!(Layout::auto(PIECES_FROM_CHUNKS, c.clone(), 32), Layout::Pieces { config: c, nprobe: 32 });
    }

    #[test]
    fn a_missing_model_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = crate::query::index::tests::tiny().to_bytes().unwrap();
        let err = write_bundle_with(
            &dir.path().join("out"),
            &bytes,
            Path::new("/nowhere/m.onnx"),
            Path::new("t.json"),
            &Layout::Whole,
            &engine(false),
            &assets::WWW,
        )
        .unwrap_err();
        assert!(err.to_string().contains("/nowhere/m.onnx"), "{err}");
    }
}
