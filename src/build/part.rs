//! Builds spread over many machines: `needle build SITE --part i/N` embeds only its share of
//! the pages into a partial index, and `needle merge` combines the N parts into the index one
//! build makes, byte for byte.
//!
//! Invariants: a page belongs to part `1 + (first 8 bytes of sha256(path)) mod N`, a split
//! that needs no coordination and does not move when other pages come or go. Every part reads
//! and extracts *every* page (cheap next to embedding), so the decisions that look across pages
//! (a page with the same text as another is skipped in its favour) come out the same in every
//! part; it keeps, chunks and embeds only its own. A partial index is an ordinary index file
//! named `index.part-I-of-N.needle`, so no tool takes it for a whole one (they read
//! `index.needle`). The merge refuses parts of different builds (stamp, settings, site), a
//! missing or repeated part, and two parts that disagree about a page.

use crate::build::{skipped_page, write_index, LoadedModel};
use crate::model::ModelFiles;
use crate::query::index::{self, Gate, Header, Index, PageEntry, PageStatus, INDEX_FILE};
use crate::Error;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum PartError {
    #[error("--part {spec}: {reason} (write it as I/N with 1 <= I <= N, e.g. 2/8)")]
    Spec { spec: String, reason: String },
    #[error("{path}: not a partial index (no index.part-I-of-N.needle in it)")]
    NotAPart { path: PathBuf },
    #[error("{path}: more than one partial index in this folder ({names}); name the files")]
    Ambiguous { path: PathBuf, names: String },
    #[error("the parts are of {first} and {other} parts; merge the parts of one build")]
    Count { first: u32, other: u32 },
    #[error("part {part} of {of} is missing{}", if given.is_empty() { String::new() } else { format!(" (given: {given})") })]
    Missing { part: u32, of: u32, given: String },
    #[error("part {part} is given twice: {a} and {b}")]
    Twice { part: u32, a: PathBuf, b: PathBuf },
    #[error("{path}: {what}: not the same as in {first}; the parts come from different builds")]
    Mismatch { path: PathBuf, first: PathBuf, what: &'static str },
    #[error("{path}: page {page} is also in {other}, and they disagree")]
    Page { path: PathBuf, page: String, other: PathBuf },
    #[error(
        "the parts were built with model {model} ({sha}), which is not in the model folder: the merge chooses the index's gate with it"
    )]
    Model { model: String, sha: String },
}

/// One share of a build: part `index` (1-based) of `of`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    pub index: u32,
    pub of: u32,
}

impl std::str::FromStr for Part {
    type Err = PartError;

    fn from_str(spec: &str) -> Result<Part, PartError> {
        let bad = |reason: &str| PartError::Spec { spec: spec.to_string(), reason: reason.to_string() };
        let (i, n) = spec.split_once('/').ok_or_else(|| bad("no `/`"))?;
        let (index, of) = (
            i.trim().parse::<u32>().map_err(|_| bad("I is not a number"))?,
            n.trim().parse::<u32>().map_err(|_| bad("N is not a number"))?,
        );
        if of == 0 || index == 0 || index > of {
            return Err(bad("out of range"));
        }
        Ok(Part { index, of })
    }
}

impl Part {
    /// The file a part's index is written to, in its output folder.
    pub fn file_name(&self) -> String {
        format!("index.part-{}-of-{}.needle", self.index, self.of)
    }

    /// Whether the page at `path` (relative to the site) is this part's to embed.
    pub fn owns(&self, path: &str) -> bool {
        let digest = Sha256::digest(path.as_bytes());
        let mut head = [0u8; 8];
        head.copy_from_slice(&digest[..8]);
        (u64::from_be_bytes(head) % u64::from(self.of)) as u32 + 1 == self.index
    }

    /// The part a file name says it holds, if it is a part's name.
    fn of_file_name(name: &str) -> Option<Part> {
        let rest = name.strip_prefix("index.part-")?.strip_suffix(".needle")?;
        let (i, n) = rest.split_once("-of-")?;
        format!("{i}/{n}").parse().ok()
    }
}

/// A partial index found at `path`: the file itself, or the one part file in that folder.
fn find_part(path: &Path) -> Result<(PathBuf, Part), Error> {
    let named = |p: &Path| p.file_name().and_then(|n| n.to_str()).and_then(Part::of_file_name);
    if path.is_file() {
        return named(path).map(|part| (path.to_path_buf(), part)).ok_or_else(|| PartError::NotAPart { path: path.into() }.into());
    }
    let entries = std::fs::read_dir(path).map_err(|e| Error::io(path, e))?;
    let mut found: Vec<(PathBuf, Part)> = entries.flatten().filter_map(|e| named(&e.path()).map(|part| (e.path(), part))).collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    match found.len() {
        0 => Err(PartError::NotAPart { path: path.into() }.into()),
        1 => Ok(found.remove(0)),
        _ => {
            let names =
                found.iter().filter_map(|(p, _)| p.file_name()).map(|n| n.to_string_lossy().into_owned()).collect::<Vec<_>>().join(", ");
            Err(PartError::Ambiguous { path: path.into(), names }.into())
        }
    }
}

/// What a merge combined.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct MergeReport {
    /// The model file the parts' vectors came from (what the browser bundle must ship).
    pub model_sha256: String,
    pub parts: usize,
    pub pages_ok: usize,
    pub chunks: usize,
    pub index_bytes: usize,
}

/// Merges the partial indexes at `paths` (files, or folders holding one) into `out_dir`'s
/// `index.needle`; returns its bytes. The index records `site` as its site folder, else the one
/// the parts name (parts copied away from their site, as CI artifacts are, name none that
/// exists; parts that name two different existing folders are refused). An index that chooses
/// its own gate ([`crate::build::gate`]) chooses it here, over the whole site, with the model
/// among `models` that the parts were built with.
pub fn merge(paths: &[PathBuf], out_dir: &Path, site: Option<&Path>, models: &[ModelFiles]) -> Result<(Vec<u8>, MergeReport), Error> {
    let mut parts: BTreeMap<u32, (PathBuf, Index)> = BTreeMap::new();
    let mut of = None;
    for path in paths {
        let (file, part) = find_part(path)?;
        match of {
            None => of = Some(part.of),
            Some(n) if n != part.of => return Err(PartError::Count { first: n, other: part.of }.into()),
            Some(_) => {}
        }
        if let Some((a, _)) = parts.get(&part.index) {
            return Err(PartError::Twice { part: part.index, a: a.clone(), b: file }.into());
        }
        let index = crate::build::read_index(&file)?;
        parts.insert(part.index, (file, index));
    }
    let of = of.ok_or_else(|| PartError::Missing { part: 1, of: 1, given: String::new() })?;
    if let Some(missing) = (1..=of).find(|i| !parts.contains_key(i)) {
        let given = parts.keys().map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
        return Err(PartError::Missing { part: missing, of, given }.into());
    }

    // One build: the same stamp, settings and site everywhere.
    let (first_file, first) = parts.values().next().map(|(f, i)| (f.clone(), i.header.clone())).ok_or(PartError::Missing {
        part: 1,
        of,
        given: String::new(),
    })?;
    let site_of = |file: &Path, header: &Header| header.site_folder(file).and_then(|s| s.canonicalize().ok());
    let named = site_of(&first_file, &first);
    for (file, index) in parts.values() {
        let h = &index.header;
        let differs = if h.stamp != first.stamp {
            Some("the model stamp, pipeline or extractor version")
        } else if h.settings != first.settings {
            Some("the chunking and gate settings")
        } else if site.is_none() && matches!((site_of(file, h), &named), (Some(a), Some(b)) if a != *b) {
            Some("the site folder")
        } else {
            None
        };
        if let Some(what) = differs {
            return Err(PartError::Mismatch { path: file.clone(), first: first_file.clone(), what }.into());
        }
    }

    // Pages in the order one build writes them: pages with chunks or a failure, by path, then
    // the skipped ones, by path (every part lists the same skipped pages).
    let mut listed: BTreeMap<String, (usize, &PageEntry, &Path)> = BTreeMap::new();
    let mut skipped: BTreeMap<(String, String), &PageEntry> = BTreeMap::new();
    for (file, index) in parts.values() {
        for (p, page) in index.header.pages.iter().enumerate() {
            // A page left out before it was read (excluded, a copy, a redirect): the entries
            // that close one build's list.
            let left_out = match &page.status {
                PageStatus::Skipped { reason } if *page == skipped_page(page.path.clone(), reason.clone()) => Some(reason),
                _ => None,
            };
            if let Some(reason) = left_out {
                skipped.insert((page.path.clone(), reason.clone()), page);
            } else if let Some((_, other, other_file)) = listed.get(&page.path) {
                if *other != page {
                    return Err(PartError::Page { path: file.clone(), page: page.path.clone(), other: other_file.to_path_buf() }.into());
                }
            } else {
                listed.insert(page.path.clone(), (p, page, file.as_path()));
            }
        }
    }
    // Each part's chunks by page, once (a part's chunks are in page order, but nothing here
    // needs to rely on it).
    let mut by_file: BTreeMap<&Path, (&Index, Vec<Vec<usize>>)> = BTreeMap::new();
    for (file, index) in parts.values() {
        let mut of_page = vec![Vec::new(); index.header.pages.len()];
        for (c, chunk) in index.header.chunks.iter().enumerate() {
            if let Some(list) = of_page.get_mut(chunk.page as usize) {
                list.push(c);
            }
        }
        by_file.insert(file.as_path(), (index, of_page));
    }
    let mut pages: Vec<PageEntry> = Vec::with_capacity(listed.len() + skipped.len());
    let mut langs: Vec<String> = Vec::with_capacity(listed.len() + skipped.len());
    let mut chunks = Vec::new();
    let mut vectors = Vec::new();
    for (old, page, file) in listed.values() {
        let new = pages.len() as u32;
        if let Some((index, of_page)) = by_file.get(file) {
            for &c in &of_page[*old] {
                chunks.push(index::ChunkEntry { page: new, ..index.header.chunks[c].clone() });
                vectors.extend_from_slice(index.vector(c));
            }
            langs.push(index.header.analysis.lang_of(*old).to_string());
        } else {
            langs.push(crate::query::analyze::UNDETERMINED.to_string());
        }
        pages.push((*page).clone());
    }
    langs.extend(skipped.values().map(|_| crate::query::analyze::UNDETERMINED.to_string()));
    pages.extend(skipped.into_values().cloned());
    let analysis = crate::query::analyze::Analysis::of(langs.iter().map(String::as_str));
    let bm25 = index::bm25_of(&chunks, &analysis);
    let mut merged = Index::new(Header { pages, chunks, bm25, analysis, ..first }, vectors);
    if matches!(merged.header.settings.gate, Gate::Auto { .. }) {
        let stamp = &merged.header.stamp.model;
        let model = models
            .iter()
            .filter(|f| f.stamp().is_ok_and(|s| s == *stamp))
            .find_map(|f| LoadedModel::load(f).ok())
            .ok_or_else(|| PartError::Model { model: stamp.name.clone(), sha: stamp.model_sha256.clone() })?;
        crate::build::gate::choose(&mut merged, &model.embedder()?)?;
    }
    let site = site.map(Path::to_path_buf).or(named);
    let bytes = write_index(&mut merged, out_dir, INDEX_FILE, site.as_deref())?;
    let report = MergeReport {
        model_sha256: merged.header.stamp.model.model_sha256.clone(),
        parts: parts.len(),
        pages_ok: merged.header.pages.iter().filter(|p| p.status == PageStatus::Ok).count(),
        chunks: merged.header.chunks.len(),
        index_bytes: bytes.len(),
    };
    Ok((bytes, report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_every_page_has_exactly_one_part() {
        assert_eq!("2/8".parse::<Part>().ok(), Some(Part { index: 2, of: 8 }));
        for bad in ["0/3", "4/3", "1/0", "x/2", "3"] {
            assert!(bad.parse::<Part>().is_err(), "{bad}");
        }
        let parts: Vec<Part> = (1..=5).map(|i| Part { index: i, of: 5 }).collect();
        let mut sizes = [0; 5];
        for n in 0..500 {
            let path = format!("chapter-{n}/page.html");
            let owners: Vec<&Part> = parts.iter().filter(|p| p.owns(&path)).collect();
            assert_eq!(owners.len(), 1, "{path}");
            sizes[owners[0].index as usize - 1] += 1;
        }
        assert!(sizes.iter().all(|&s| s > 60), "a roughly even split: {sizes:?}");
        assert_eq!(Part::of_file_name(&Part { index: 3, of: 7 }.file_name()), Some(Part { index: 3, of: 7 }));
        assert_eq!(Part::of_file_name("index.needle"), None);
    }
}
