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
//!
//! The model reads English only, so for each other language of the site that has background
//! questions written in it (`background/LANG.txt`) the gate is lexical: a query's evidence is
//! the share of its words, weighted by idf, the best chunk the gate walks holds
//! (`search::lexical_evidence`), and the cut is set the same way, where only
//! [`BACKGROUND_ANSWERED`] of that language's background questions would be answered. A
//! language without them states no answer (its readers get results).

use crate::embed::Embedder;
use crate::query::index::{Gate, Index};
use crate::query::search::{self, Mode, SearchOptions};
use crate::Error;
use rayon::prelude::*;

/// needle's background questions, one per line (`#` starts a comment).
pub const BACKGROUND: &str = include_str!("background.txt");

/// needle's background questions written natively in other languages (the same questions):
/// the lexical gate's background for sites in those languages.
const BACKGROUNDS: &[(&str, &str)] = &[
    ("de", include_str!("background/de.txt")),
    ("es", include_str!("background/es.txt")),
    ("fr", include_str!("background/fr.txt")),
    ("ja", include_str!("background/ja.txt")),
    ("zh", include_str!("background/zh.txt")),
];

/// Share of the background questions the chosen cut lets answer.
pub const BACKGROUND_ANSWERED: f32 = 0.05;

/// How much closer a query with two or more foreign words must come (half of it for one).
pub const FOREIGN_PENALTY: f32 = 0.3;

/// The background questions.
pub fn background() -> Vec<&'static str> {
    questions(BACKGROUND)
}

/// The background questions written in `lang` (a primary subtag), if needle has them.
pub fn background_in(lang: &str) -> Option<Vec<&'static str>> {
    BACKGROUNDS.iter().find(|(l, _)| *l == lang).map(|(_, text)| questions(text))
}

fn questions(text: &'static str) -> Vec<&'static str> {
    text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect()
}

/// The lexical gate's cut for each language of `index` the model does not read and needle has
/// background questions in: the evidence (`search::lexical_evidence`) above which only
/// [`BACKGROUND_ANSWERED`] of them would be answered.
pub fn lexical_cuts(index: &Index) -> Vec<(String, f32)> {
    let langs = index.header.analysis.langs.iter().filter(|l| !search::model_reads(l));
    langs
        .filter_map(|lang| {
            let questions = background_in(lang)?;
            let mut scores: Vec<f32> = questions.par_iter().map(|q| search::lexical_evidence(index, q, lang)).collect();
            scores.sort_by(|a, b| b.total_cmp(a));
            // Questions scoring strictly above the cut are answered: the one at this position is
            // the first that is not.
            let at = ((BACKGROUND_ANSWERED * scores.len() as f32) as usize).min(scores.len().checked_sub(1)?);
            Some((lang.clone(), scores[at]))
        })
        .collect()
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
    index.header.settings.lexical_cuts = lexical_cuts(index);
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
        // Each language's list is the same questions, written in it.
        for (lang, _) in BACKGROUNDS {
            let theirs = background_in(lang).expect("listed");
            assert_eq!(theirs.len(), qs.len(), "{lang}: one question for each English one");
            assert!(theirs.iter().all(|q| q.ends_with(['?', '？'])), "{lang}: one question per line");
            let distinct: std::collections::HashSet<_> = theirs.iter().map(|q| q.to_lowercase()).collect();
            assert_eq!(distinct.len(), theirs.len(), "{lang}: no question twice");
        }
    }
}
