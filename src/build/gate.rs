//! The gate an index chooses for itself, with no labelled questions: `needle build` measures
//! the site against needle's background questions (`background.txt`, everyday and programming
//! questions across many ecosystems, none about any particular site) and sets the cut where
//! only [`BACKGROUND_ANSWERED`] of them would still be answered. A site whose text lies near
//! everything (long, general chunks) gets a lower cut, a small or narrow site a higher one.
//! Each question is scored as the search would gate it: the closest chunk the gate walks
//! (`SearchResult::walked`), plus
//! the foreign-word penalty ([`crate::query::index::Gate::Auto`]), so the penalty's effect on
//! the background is part of the choice.
//!
//! The two constants were set on the fixture's question set only (EVAL.md reports every set);
//! the cut itself is chosen per site, from the site.

use crate::embed::Embedder;
use crate::query::index::{Gate, Index};
use crate::query::search::{self, Mode, SearchOptions};
use crate::Error;
use rayon::prelude::*;

/// needle's background questions, one per line (`#` starts a comment).
pub const BACKGROUND: &str = include_str!("background.txt");

/// Share of the background questions the chosen cut lets answer.
pub const BACKGROUND_ANSWERED: f32 = 0.05;

/// How much closer a query with two or more foreign words must come (half of it for one).
pub const FOREIGN_PENALTY: f32 = 0.3;

/// The background questions.
pub fn background() -> Vec<&'static str> {
    BACKGROUND.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect()
}

/// Sets `index`'s gate to [`Gate::Auto`] with the cut this site's text calls for. An index
/// with no chunks keeps its cut (there is nothing to measure against).
pub fn choose(index: &mut Index, embedder: &Embedder) -> Result<(), Error> {
    let questions = background();
    let vectors: Vec<_> = questions.par_iter().map(|q| embedder.query(q)).collect::<Result<_, _>>()?;
    let depth = index.header.settings.gate_depth as usize;
    let opts = SearchOptions { mode: Mode::Hybrid, k: depth, cut: Some(f32::NEG_INFINITY), max_chunks: 0, ..Default::default() };
    let mut scores: Vec<f32> = questions
        .iter()
        .zip(&vectors)
        .filter_map(|(q, v)| {
            let r = search::search(index, q, Some(v), &opts);
            let closest = r.walked.iter().filter_map(|&i| r.hits.get(i)).map(|h| h.distance).filter(|d| d.is_finite()).reduce(f32::min)?;
            Some(closest + FOREIGN_PENALTY * r.foreign.len().min(2) as f32 / 2.0)
        })
        .collect();
    if scores.is_empty() {
        return Ok(());
    }
    scores.sort_by(f32::total_cmp);
    // Questions scoring strictly under the cut are answered: the one at this position is the
    // first that is not.
    let at = ((BACKGROUND_ANSWERED * scores.len() as f32) as usize).min(scores.len() - 1);
    index.header.settings.cut = scores[at];
    index.header.settings.gate = Gate::Auto { foreign_penalty: FOREIGN_PENALTY, background_answered: BACKGROUND_ANSWERED };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_background_is_a_list_of_distinct_questions() {
        let qs = background();
        assert!(qs.len() >= 200, "{} questions", qs.len());
        assert!(qs.iter().all(|q| q.ends_with('?')), "one question per line");
        let distinct: std::collections::HashSet<_> = qs.iter().map(|q| q.to_lowercase()).collect();
        assert_eq!(distinct.len(), qs.len(), "no question twice");
    }
}
