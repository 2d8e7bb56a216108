//! A site folder → its documents: every file extracted (in parallel, in path order), then the
//! media files its pages play with a captions track. The one walk the builder and
//! `needle eval` share, so a question is checked against exactly the documents the index holds.
//!
//! A media file gets one document. A page's player names it first (its title is the page's,
//! its section the heading above the player, and citations lead readers to the player); a
//! standalone `.vtt` next to a media file of the same name gives it a document only when no
//! page plays it, and is otherwise skipped with the page named. A captions file that cannot
//! be read or parsed fails the media file's document, never the page.

use std::collections::HashMap;
use std::path::Path;

use rayon::prelude::*;

use crate::doc::extract::{self, Discovered, ExtractError, ExtractOptions, Extracted, Player, SourceFile, SourceKind};

/// What became of a site's files.
pub struct Site {
    /// The walk: what it left out (`excluded`) and could not read (`unreadable`).
    pub discovered: Discovered,
    /// One entry per file in path order, then one per media file a page plays: the path the
    /// outcome is reported under, and the outcome. A document's own path may differ from the
    /// file's (a standalone `.vtt` gives its media file's document).
    pub results: Vec<(String, Result<Extracted, ExtractError>)>,
}

impl Site {
    /// The documents extracted, in order.
    pub fn documents(self) -> impl Iterator<Item = crate::doc::text::Document> {
        self.results.into_iter().filter_map(|(_, r)| match r {
            Ok(Extracted::Page(doc)) => Some(doc),
            _ => None,
        })
    }
}

/// Walks and extracts `site` (module documentation).
pub fn extract_site(site: &Path, opts: &ExtractOptions) -> Result<Site, ExtractError> {
    let discovered = extract::discover(site, opts)?;
    let extracted: Vec<(Result<Extracted, ExtractError>, Vec<Player>)> = discovered
        .files
        .par_iter()
        .map(|src| match extract::read_page(src, opts) {
            Err(e) => (Err(e), Vec::new()),
            Ok(bytes) => {
                let players = players_of(src, &bytes, opts);
                (extract::extract_file(src, &bytes, opts), players)
            }
        })
        .collect();

    let mut hosted: Vec<(String, Result<Extracted, ExtractError>)> = Vec::new();
    let mut played_by: HashMap<String, String> = HashMap::new();
    for (res, players) in &extracted {
        let Ok(Extracted::Page(host)) = res else { continue };
        for player in players {
            if played_by.contains_key(&player.media) {
                continue;
            }
            played_by.insert(player.media.clone(), host.path.clone());
            let src = SourceFile { rel_path: player.captions.clone(), abs_path: site.join(&player.captions), kind: SourceKind::Captions };
            let doc = extract::read_page(&src, opts)
                .map_err(|e| ExtractError::Invalid { path: player.media.clone(), reason: format!("captions {e}") })
                .and_then(|bytes| extract::hosted_media_document(host, player, &bytes));
            hosted.push((player.media.clone(), doc.map(Extracted::Page)));
        }
    }
    let mut results: Vec<(String, Result<Extracted, ExtractError>)> = discovered
        .files
        .iter()
        .zip(extracted)
        .map(|(src, (res, _))| {
            let res = match res {
                Ok(Extracted::Page(doc)) if src.kind == SourceKind::Captions && played_by.contains_key(&doc.path) => {
                    Ok(Extracted::Skipped(format!("captions of {}, indexed with its player on {}", doc.path, played_by[&doc.path])))
                }
                other => other,
            };
            (src.rel_path.clone(), res)
        })
        .collect();
    results.extend(hosted);
    Ok(Site { discovered, results })
}

/// The captioned players of an HTML page (only pages that mention `<track` are parsed again).
fn players_of(src: &SourceFile, bytes: &[u8], opts: &ExtractOptions) -> Vec<Player> {
    if src.kind != SourceKind::Html || !bytes.windows(6).any(|w| w.eq_ignore_ascii_case(b"<track")) {
        return Vec::new();
    }
    match extract::decode(&src.rel_path, bytes, src.kind) {
        Ok(html) => extract::players(&src.rel_path, &html, opts),
        Err(_) => Vec::new(),
    }
}
