//! Okapi BM25 over the chunks' embedded text (header + content), its terms made by the
//! analyzer of each page's language (`query::analyze`).
//! Invariants: idf = ln(1 + (N − n + 0.5)/(n + 0.5)) is never negative; postings are sorted by
//! chunk, and scoring visits only the query's postings.

use crate::query::analyze::Analyzer;
use crate::query::lexicon::Plan;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

pub const K1: f32 = 1.2;
pub const B: f32 = 0.75;

/// The terms of `s` as English is analyzed (`Analyzer::default`): lowercased words, not
/// stemmed, so ASCII text tokenizes exactly like `[a-z0-9]+`.
pub fn tokenize(s: &str) -> Vec<String> {
    Analyzer::default().terms(s)
}

/// Where `text`'s words whose terms (as `analyzer` makes them) are among `terms` are:
/// `(from, to)` in UTF-16 units, in order, overlapping ranges merged (a Chinese word is two
/// overlapping pairs of characters). The widget marks these in a result, so marking and
/// ranking agree on what a word is.
pub fn marks(analyzer: &Analyzer, text: &str, terms: &[String]) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    if terms.is_empty() {
        return out;
    }
    let (mut byte, mut unit) = (0usize, 0usize);
    for t in analyzer.tokens(text) {
        if !terms.contains(&t.term) {
            continue;
        }
        let (from, to) = t.at;
        // Tokens come in order of their start; a pair of characters may begin inside the last.
        let start = if from >= byte {
            unit + crate::doc::text::utf16_len(&text[byte..from])
        } else {
            unit - crate::doc::text::utf16_len(&text[from..byte])
        };
        let end = start + crate::doc::text::utf16_len(&text[from..to]);
        match out.last_mut() {
            Some(last) if start as u32 <= last.1 => last.1 = last.1.max(end as u32),
            _ => out.push((start as u32, end as u32)),
        }
        (byte, unit) = (to, end);
    }
    out
}

/// The forms a site may write `word` in: the word, the bases left when one English inflection
/// (-s, -es, -ies, -ed, -ied, -ing) comes off (with a final "e" or a doubled consonant put
/// back), and each base with each inflection put on. Ranking matches tokens exactly; the gate
/// asks whether the site knows a reader's word in any form, so "corrupts", "mutating" and
/// "bumping" are the site's "corrupt", "mutate" and "bump" (`search::foreign_words`). Sorted,
/// distinct; a base is at least three characters.
pub fn forms(word: &str) -> Vec<String> {
    let strip = |suffix: &str| word.strip_suffix(suffix).filter(|b| b.chars().count() >= 3);
    let mut bases = vec![word.to_string()];
    for (suffix, put) in [("ies", "y"), ("ied", "y"), ("es", ""), ("s", "")] {
        if let Some(b) = strip(suffix).filter(|b| suffix != "s" || !b.ends_with('s')) {
            bases.push(format!("{b}{put}"));
        }
    }
    for suffix in ["ed", "ing"] {
        if let Some(b) = strip(suffix) {
            bases.push(b.to_string());
            bases.push(format!("{b}e"));
            let mut cs = b.chars().rev();
            if let (Some(x), Some(y)) = (cs.next(), cs.next()) {
                if x == y && is_consonant(x) {
                    bases.push(b[..b.len() - x.len_utf8()].to_string());
                }
            }
        }
    }
    let mut out = Vec::new();
    for b in bases {
        let stem = b.strip_suffix('e').unwrap_or(&b);
        out.extend([format!("{b}s"), format!("{b}es"), format!("{stem}ed"), format!("{stem}ing")]);
        if let Some(y) = b.strip_suffix('y') {
            out.extend([format!("{y}ies"), format!("{y}ied")]);
        }
        if let Some(c) = b.chars().last().filter(|&c| is_consonant(c) && !"wxy".contains(c)) {
            out.extend([format!("{b}{c}ed"), format!("{b}{c}ing")]);
        }
        out.push(b);
    }
    out.sort_unstable();
    out.dedup();
    out
}

fn is_consonant(c: char) -> bool {
    c.is_ascii_alphabetic() && !"aeiou".contains(c)
}

/// English words too common to be worth marking in a result: the widget highlights a query's
/// terms, and "is", "not" or "the" lit on every line point at nothing. Ranking does not use the
/// list (idf already discounts such words, and a query may hinge on one: "not `Send`"). Sorted.
pub const STOP_WORDS: &[&str] = &[
    "a", "about", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can", "could", "did", "do",
    "does", "doesn", "don", "for", "from", "get", "got", "had", "has", "have", "he", "her", "him", "his", "how", "i", "if", "in", "into",
    "is", "isn", "it", "its", "just", "me", "my", "no", "not", "of", "on", "one", "or", "our", "out", "she", "should", "so", "some",
    "such", "t", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "too", "up", "us", "use",
    "using", "very", "was", "we", "were", "what", "when", "where", "which", "who", "why", "will", "with", "would", "you", "your",
];

/// idf of a term found in `df` of `n` chunks: ln(1 + (N − n + 0.5)/(n + 0.5)).
pub(crate) fn idf(n: usize, df: usize) -> f32 {
    let (n, df) = (n as f32, df as f32);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// One posting's share of a chunk's score: a term of weight `idf` found `tf` times in a chunk
/// of `dl` tokens, where chunks have `avgdl` tokens on average.
pub(crate) fn score(idf: f32, tf: u32, dl: u32, avgdl: f32) -> f32 {
    let (tf, dl, avgdl) = (tf as f32, dl as f32, avgdl.max(f32::MIN_POSITIVE));
    idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * dl / avgdl))
}

/// A query's scores per chunk as they add up. Chunk numbers are dense (0..chunks), so a flat
/// table beats hashing (as in `fuse::rrf`): a query with common words touches most chunks of a
/// large site.
pub(crate) struct Scores(Vec<Option<f32>>);

impl Scores {
    /// Scores for a site of `chunks` chunks, none touched.
    pub(crate) fn new(chunks: usize) -> Scores {
        Scores(vec![None; chunks])
    }

    /// Adds one posting's share to `chunk`'s score (a chunk past the count is ignored).
    pub(crate) fn add(&mut self, chunk: u32, share: f32) {
        if let Some(score) = self.0.get_mut(chunk as usize) {
            *score.get_or_insert(0.0) += share;
        }
    }

    /// The touched chunks as a ranking: best first, ties by chunk (a total order, so an
    /// unstable sort is deterministic).
    pub(crate) fn ranked(self) -> Vec<(usize, f32)> {
        let mut ranked: Vec<(usize, f32)> = self.0.into_iter().enumerate().filter_map(|(c, s)| Some((c, s?))).collect();
        ranked.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked
    }
}

/// The statistics BM25 needs, as stored in the index.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Bm25 {
    /// Sorted vocabulary; `postings[i]` belongs to `terms[i]`.
    pub terms: Vec<String>,
    /// (chunk, term frequency), sorted by chunk.
    pub postings: Vec<Vec<(u32, u32)>>,
    /// Token count of each chunk's embedded text.
    pub doc_len: Vec<u32>,
}

impl Bm25 {
    /// The statistics of `texts` analyzed as English ([`tokenize`]).
    pub fn build<'a>(texts: impl IntoIterator<Item = &'a str>) -> Self {
        Bm25::from_terms(texts.into_iter().map(tokenize))
    }

    /// The statistics of chunks given as their terms, in order.
    pub fn from_terms(chunks: impl IntoIterator<Item = Vec<String>>) -> Self {
        let mut map: HashMap<String, Vec<(u32, u32)>> = HashMap::new();
        let mut doc_len = Vec::new();
        for (i, toks) in chunks.into_iter().enumerate() {
            doc_len.push(toks.len() as u32);
            let mut tf: HashMap<String, u32> = HashMap::new();
            for t in toks {
                *tf.entry(t).or_default() += 1;
            }
            for (t, f) in tf {
                map.entry(t).or_default().push((i as u32, f));
            }
        }
        let mut entries: Vec<_> = map.into_iter().collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let (terms, mut postings): (Vec<_>, Vec<_>) = entries.into_iter().unzip();
        for p in &mut postings {
            p.sort_unstable();
        }
        Bm25 { terms, postings, doc_len }
    }

    pub fn len(&self) -> usize {
        self.doc_len.len()
    }

    pub fn is_empty(&self) -> bool {
        self.doc_len.is_empty()
    }

    /// The mean token count of a chunk, as every score uses it.
    pub fn avgdl(&self) -> f32 {
        if self.doc_len.is_empty() {
            return 0.0;
        }
        self.doc_len.iter().map(|&l| l as f64).sum::<f64>() as f32 / self.doc_len.len() as f32
    }

    /// Scores of every chunk that shares a term with the query, best first (ties by chunk), its
    /// words matched as a search box matches them ([`Plan`]: a word, the terms the last word
    /// begins while typed, a typo's nearest terms). A query word repeated counts once per
    /// occurrence, as in the classic formula's sum.
    pub fn rank(&self, query: &str) -> Vec<(usize, f32)> {
        self.rank_plan(&Plan::new(self, &Analyzer::default(), query))
    }

    /// The ranking of [`Bm25::rank`] for a query already planned over this vocabulary.
    pub fn rank_plan(&self, plan: &Plan) -> Vec<(usize, f32)> {
        rank_plan(plan, self.doc_len.len(), self.avgdl(), |term, visit| self.visit_postings(term, visit))
    }

    /// Calls `visit(chunk, tf, chunk length)` for each posting of `term`, in chunk order (none
    /// when the site does not hold it): the `postings` of [`rank_plan`] and [`coverage`].
    pub(crate) fn visit_postings(&self, term: &str, visit: &mut dyn FnMut(u32, u32, u32)) {
        let Ok(t) = self.terms.binary_search_by(|x| x.as_str().cmp(term)) else { return };
        for &(chunk, tf) in &self.postings[t] {
            visit(chunk, tf, self.doc_len.get(chunk as usize).copied().unwrap_or(0));
        }
    }

    /// Checks the structure read from an index: every posting points at a chunk.
    pub fn validate(&self) -> Result<(), String> {
        if self.terms.len() != self.postings.len() {
            return Err(format!("{} terms but {} posting lists", self.terms.len(), self.postings.len()));
        }
        if !self.terms.windows(2).all(|w| w[0] < w[1]) {
            return Err("vocabulary is not sorted".into());
        }
        let n = self.doc_len.len() as u32;
        if self.postings.iter().flatten().any(|&(d, _)| d >= n) {
            return Err("a posting names a chunk that does not exist".into());
        }
        Ok(())
    }
}

/// BM25 over a plan's words among `n` chunks of mean length `avgdl`: `postings(term, visit)`
/// calls `visit(chunk, tf, chunk length)` for each of the term's postings in chunk order (a
/// whole index and the pieces of one give the same calls). A word that reaches one term at
/// weight 1 adds its postings' shares as classic BM25 does; a word that reaches several adds,
/// per chunk, the best of their weighted shares.
pub(crate) fn rank_plan(plan: &Plan, n: usize, avgdl: f32, postings: impl Fn(&str, &mut dyn FnMut(u32, u32, u32))) -> Vec<(usize, f32)> {
    let mut scores = Scores::new(n);
    for word in plan.scored() {
        if let [t] = word.terms.as_slice() {
            if t.weight == 1.0 {
                let idf = idf(n, t.df);
                postings(&t.text, &mut |chunk, tf, dl| scores.add(chunk, score(idf, tf, dl, avgdl)));
                continue;
            }
        }
        // The word's best share per chunk, added in chunk order (a flat table, as `Scores`).
        let mut best: Vec<f32> = vec![0.0; n];
        for t in &word.terms {
            let idf = idf(n, t.df);
            postings(&t.text, &mut |chunk, tf, dl| {
                if let Some(b) = best.get_mut(chunk as usize) {
                    *b = b.max(t.weight * score(idf, tf, dl, avgdl));
                }
            });
        }
        for (chunk, share) in best.into_iter().enumerate().filter(|&(_, s)| s > 0.0) {
            scores.add(chunk as u32, share);
        }
    }
    scores.ranked()
}

/// The share of a planned query's words each of `chunks` holds, each word weighted by its idf
/// among `n` chunks (a word reaching several terms by its heaviest, as weighted when matched; a
/// word the site does not hold by the idf of a term in no chunk, the most a word weighs): 1
/// when a chunk holds every word, less as it misses words, rare ones most. The lexical gate's
/// evidence (`Settings::lexical_cuts`). `postings` is as in [`rank_plan`].
pub(crate) fn coverage(plan: &Plan, n: usize, chunks: &[usize], postings: impl Fn(&str, &mut dyn FnMut(u32, u32, u32))) -> Vec<f32> {
    let at: HashMap<usize, usize> = chunks.iter().enumerate().map(|(i, &c)| (c, i)).collect();
    let mut held = vec![0f32; chunks.len()];
    let mut total = 0f32;
    for word in &plan.words {
        let weight = word.terms.iter().map(|t| t.weight * idf(n, t.df)).reduce(f32::max).unwrap_or_else(|| idf(n, 0));
        total += weight;
        let mut seen = vec![false; chunks.len()];
        for t in &word.terms {
            postings(&t.text, &mut |chunk, _, _| {
                if let Some(&i) = at.get(&(chunk as usize)) {
                    seen[i] = true;
                }
            });
        }
        for (h, s) in held.iter_mut().zip(seen) {
            if s {
                *h += weight;
            }
        }
    }
    held.into_iter().map(|h| if total > 0.0 { h / total } else { 0.0 }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_s_forms_reach_the_site_s_inflection_of_it() {
        for (word, site) in [
            ("corrupts", "corrupt"),
            ("mutating", "mutate"),
            ("bumping", "bumped"),
            ("stopped", "stop"),
            ("running", "run"),
            ("studies", "study"),
            ("deadlocks", "deadlock"),
            ("reverting", "reverted"),
            ("uses", "using"),
            ("copied", "copies"),
        ] {
            assert!(forms(word).iter().any(|f| f == site), "{word} -> {site}: {:?}", forms(word));
        }
        // A name with no inflection to take off keeps its whole self in every form.
        for name in ["tokio", "pyo3", "miri"] {
            assert!(forms(name).iter().all(|f| f.starts_with(name)), "{name}: {:?}", forms(name));
        }
        // No base is shorter than three characters: "uses" has the base "use", not "us".
        let uses = forms("uses");
        assert!(uses.contains(&"use".to_string()) && !uses.iter().any(|f| f == "us" || f == "uss"), "{uses:?}");
        assert!(forms("café").contains(&"cafés".to_string()), "non-ASCII words keep their characters");
    }

    #[test]
    fn ascii_tokenizes_like_the_reference_regex() {
        assert_eq!(tokenize("Hello, World! x86_64 isn't 3.14"), ["hello", "world", "x86", "64", "isn", "t", "3", "14"]);
    }

    #[test]
    fn unicode_words_are_lowercased_and_kept() {
        // Chinese and Japanese text is indexed as its overlapping pairs of characters.
        assert_eq!(tokenize("Café ÉTÉ 日本語—テスト"), ["café", "été", "日本", "本語", "テス", "スト"]);
    }

    #[test]
    fn scores_match_the_formula_by_hand() {
        let docs = ["the cat sat", "the dog", "cat cat cat dog"];
        let bm = Bm25::build(docs.iter().copied());
        let ranked = bm.rank("cat");
        // N = 3, n = 2: idf = ln(1 + 1.5/2.5)
        let idf = (1.0f32 + 1.5 / 2.5).ln();
        let avgdl = (3.0 + 2.0 + 4.0) / 3.0;
        let s = |tf: f32, dl: f32| idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / avgdl));
        assert_eq!(ranked.len(), 2);
        assert_eq!(ranked[0].0, 2);
        assert!((ranked[0].1 - s(3.0, 4.0)).abs() < 1e-6);
        assert!((ranked[1].1 - s(1.0, 3.0)).abs() < 1e-6);
    }

    #[test]
    fn unknown_terms_and_empty_queries_rank_nothing() {
        let bm = Bm25::build(["alpha beta"].iter().copied());
        assert!(bm.rank("gamma").is_empty());
        assert!(bm.rank("").is_empty());
        assert!(bm.rank("!!! 🙂").is_empty());
        assert!(bm.validate().is_ok());
    }

    #[test]
    fn stop_words_are_sorted() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]), "STOP_WORDS is sorted (binary search)");
    }

    #[test]
    fn marks_are_the_tokens_bm25_matched_in_utf16_units() {
        let terms = vec!["drop".to_string(), "café".to_string()];
        let en = Analyzer::default();
        // "😀" is two UTF-16 units; "Dropped" and "undrop" are other tokens.
        assert_eq!(marks(&en, "😀 DROP café, Dropped undrop drop", &terms), [(3, 7), (8, 12), (29, 33)]);
        assert!(marks(&en, "drop", &[]).is_empty());
        // A Chinese word's overlapping pairs mark one range; a stemmed German word is marked whole.
        let zh = Analyzer::new(crate::query::analyze::ANALYZER_VERSION, "zh");
        assert_eq!(marks(&zh, "用软件包管理", &["软件".into(), "件包".into()]), [(1, 4)]);
        let de = Analyzer::new(crate::query::analyze::ANALYZER_VERSION, "de");
        assert_eq!(marks(&de, "Die Paketen.", &[de.term("Paket")]), [(4, 11)]);
    }

    #[test]
    fn coverage_is_the_idf_weighted_share_of_the_query_s_words_a_chunk_holds() {
        let bm = Bm25::build(["apt installs packages", "apt removes packages", "a cat"].iter().copied());
        let plan = Plan::new(&bm, &Analyzer::default(), "apt installs zebras ");
        let cov = coverage(&plan, bm.len(), &[0, 1, 2], |term, visit| bm.visit_postings(term, visit));
        let (apt, installs, zebras) = (idf(3, 2), idf(3, 1), idf(3, 0));
        let total = apt + installs + zebras;
        assert!((cov[0] - (apt + installs) / total).abs() < 1e-6, "{cov:?}");
        assert!((cov[1] - apt / total).abs() < 1e-6, "{cov:?}");
        assert_eq!(cov[2], 0.0);
    }

    #[test]
    fn idf_is_positive_even_for_terms_in_every_chunk() {
        let bm = Bm25::build(["a", "a", "a"].iter().copied());
        assert!(idf(bm.len(), 3) > 0.0);
    }
}
