//! The browser bundle: everything a static site needs to search in its readers' browsers,
//! written next to the index (`SITE/needle/` by default).
//! Invariants: every file except `needle.js`, `widget.js`, `needle-sw.js` and `manifest.json` has a
//! content-hashed name (`stem.<16 hex of sha256>.ext`), so a CDN or the Cache API may keep it
//! forever; `manifest.json` is written last and names only files that exist; the model is the
//! very file the index was built with (its sha256 is what the index stamps and what the
//! browser checks); stale hashed files of earlier bundles are removed.

use super::assets::{self, Asset, Engine, Www};
use crate::query::index::{sha256_hex, Index, IndexError};
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
pub fn write_bundle(out_dir: &Path, index_bytes: &[u8], model: &Path, tokenizer: &Path) -> Result<BundleReport, BundleError> {
    let engine = assets::ENGINE.ok_or(BundleError::NoEngine)?;
    write_bundle_with(out_dir, index_bytes, model, tokenizer, &engine, &assets::WWW)
}

/// `write_bundle` with the given engine and JavaScript files.
pub(crate) fn write_bundle_with(
    out_dir: &Path,
    index_bytes: &[u8],
    model: &Path,
    tokenizer: &Path,
    engine: &Engine,
    www: &Www,
) -> Result<BundleReport, BundleError> {
    let index = Index::from_bytes(index_bytes, "index")?;
    let (lexical_index, vectors) = index.to_split_bytes()?;
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
        embedded("lexical", &engine.lexical),
        embedded("lexicalGlue", &engine.lexical_glue),
        embedded("css", &www.css),
        ("model", format!("model.{model_ext}"), Cow::Owned(model_bytes)),
        ("tokenizer", "tokenizer.json".into(), Cow::Owned(read(tokenizer)?)),
        // The browser's copy of the index in two files: what a lexical answer reads, and the
        // vectors, fetched with the model (query::index, "Split for the browser").
        ("index", "index.needle".into(), Cow::Owned(lexical_index)),
        ("vectors", "vectors.bin".into(), Cow::Owned(vectors)),
        ("pages", "pages.json".into(), Cow::Owned(pages_json)),
    ];
    if let Some(relaxed) = &engine.wasm_relaxed {
        hashed.push(embedded("wasmRelaxed", relaxed));
    }
    // Fixed names: what a site links to, and the service worker (its URL must stay put).
    let fixed = [embedded("api", &www.api), embedded("widget", &www.widget), embedded("sw", &www.sw)];

    let mut report = BundleReport::default();
    let mut files = std::collections::BTreeMap::new();
    let mut sizes = std::collections::BTreeMap::new();
    let mut keep = std::collections::HashSet::new();
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
        model: ManifestModel { name: &index.header.stamp.model.name, sha256: &model_sha },
        chunks: index.header.chunks.len(),
        pages: index.header.pages.len(),
    };
    let manifest_bytes = serde_json::to_vec_pretty(&manifest).expect("manifest serialises");
    write_atomic(&out_dir.join(MANIFEST_FILE), &manifest_bytes)?;

    // Drop earlier bundles' hashed files (their stems are ours, their hashes are not current).
    // (The relaxed engine's stem counts even when this bundle has none: an old one goes.)
    let stems: Vec<String> = hashed
        .iter()
        .map(|(_, n, _)| n.as_str())
        .chain([WASM_RELAXED])
        .map(|n| n.rsplit_once('.').map(|(s, _)| s.to_string()).unwrap_or_default())
        .collect();
    for entry in std::fs::read_dir(out_dir).map_err(io(out_dir))?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if keep.contains(&name) || !is_hashed_name(Path::new(&name)) {
            continue;
        }
        if stems.iter().any(|s| name.starts_with(&format!("{s}."))) {
            std::fs::remove_file(entry.path()).map_err(io(&entry.path()))?;
            report.removed.push(name);
        }
    }
    Ok(report)
}

/// `name.0123456789abcdef.ext`: a content-hashed name (as the bundle writes), cacheable forever.
pub fn is_hashed_name(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.split('.').any(|part| part.len() == 16 && part.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()))
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

        write_bundle_with(&out, &bytes, &model, &tok, &engine(true), &assets::WWW).unwrap();
        let relaxed = manifest()["files"]["wasmRelaxed"].as_str().expect("wasmRelaxed in the manifest").to_string();
        assert_eq!(relaxed, hashed_name(WASM_RELAXED, b"relaxed"));
        assert_eq!(std::fs::read(out.join(&relaxed)).unwrap(), b"relaxed");
        assert_eq!(manifest()["files"]["wasm"].as_str(), Some(hashed_name("needle_core_bg.wasm", b"baseline").as_str()));
        assert_eq!(std::fs::read(out.join("widget.js")).unwrap(), assets::WWW.widget.bytes, "the embedded widget is written");

        let report = write_bundle_with(&out, &bytes, &model, &tok, &engine(false), &assets::WWW).unwrap();
        assert!(manifest()["files"].get("wasmRelaxed").is_none());
        assert_eq!(report.removed, vec![relaxed.clone()]);
        assert!(!out.join(&relaxed).exists());
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
            &engine(false),
            &assets::WWW,
        )
        .unwrap_err();
        assert!(err.to_string().contains("/nowhere/m.onnx"), "{err}");
    }
}
