//! How a query's words find the site's vocabulary, as a search box is used: a word matches
//! its own term; the last word, while it is still being typed, also matches the terms it
//! begins (as Pagefind matches it); a word the site does not hold matches the site's terms
//! within a small edit distance (a typo); and a word the site holds only in another inflected
//! form ([`bm25::forms`]) is known to the site but ranks nothing. Words are the analyzer's
//! (`query::analyze`): a query is analyzed as the site's text in the reader's language, so a
//! German reader's "Paketen" is the site's "Paket", and a Chinese query's pairs of characters
//! are the site's.
//!
//! The [`Plan`] is what BM25 scores (`Source::lexical`), what the gate asks about words the
//! site does not know (`search::SearchResult::foreign`), what the result says it matched
//! (`corrected`, `unknown`) and what a hit marks. It is made from any [`Vocabulary`]: a whole
//! index's sorted term list or the lexical pieces a reader fetched (`query::pieces`, whose
//! `needs` fetches what a plan reads), so both make the same plan for the same site.
//!
//! Invariants: a site term the query holds whole, other than a last word still being typed,
//! scores exactly as classic BM25 (weight 1: a query of such words ranks as before the search
//! box); a word's terms are scored as one disjunction (a chunk takes the best of them, never
//! their sum), so a word counts once however many terms it reaches; a typo's
//! candidates share the word's first character (or are the word with its first two characters
//! swapped), so a reader of an index in pieces fetches the pieces of one letter at most.

use crate::query::analyze::{self, Analyzer};
use crate::query::bm25;

/// Expansions of the last word kept, the most frequent first: a two-letter prefix of a large
/// site reaches thousands of terms, and the rare ones rank nothing a reader looks for.
pub const MAX_EXPANSIONS: usize = 64;
/// The shortest last word expanded as a prefix, in characters.
pub const MIN_PREFIX: usize = 2;
/// The shortest word corrected as a typo, in characters (a dropped letter of a five-letter word).
pub const MIN_TYPO: usize = 4;
/// A typo's weight per edit: a corrected word at one edit scores 0.7 of the term it reached.
pub const TYPO_DISCOUNT: f32 = 0.3;
/// Candidates kept for a typo (those at the least distance, the most frequent first).
pub const MAX_CORRECTIONS: usize = 4;

/// Where a plan reads the site's terms: a whole index or the pieces of one.
pub trait Vocabulary {
    /// In how many chunks the site holds `term`; `None` when it never uses it.
    fn df(&self, term: &str) -> Option<usize>;
    /// Calls `each(term, df)` for every site term that begins with `prefix`, in term order.
    fn with_prefix(&self, prefix: &str, each: &mut dyn FnMut(&str, usize));
}

/// How a query word met the site's vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// The site holds the word itself.
    Exact,
    /// The last word, still being typed: the site holds terms it begins, not the word itself.
    Prefix,
    /// The site holds neither the word nor a term it begins (if it is the last), but terms
    /// within a small edit distance of it.
    Typo,
    /// The site holds the word only in another inflected form: known, but it ranks nothing.
    Inflected,
    /// The site holds the word in no form and nothing near it.
    Unknown,
}

/// A site term a query word reaches, with the weight its BM25 score counts at.
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    pub text: String,
    pub weight: f32,
    /// Chunks holding the term.
    pub df: usize,
}

/// One word of the query (its term as the analyzer makes it), where it stands in the query, and
/// the terms it reaches.
#[derive(Debug, Clone, PartialEq)]
pub struct Word {
    pub token: String,
    /// Byte range of the word in the query as typed.
    pub at: (usize, usize),
    pub how: How,
    /// The terms scored for this word (empty for `Inflected` and `Unknown`).
    pub terms: Vec<Term>,
    /// The site holds the word in some inflected form, itself included ([`bm25::forms`]; a
    /// stemmed word's inflections are its stem).
    pub in_site: bool,
}

/// A query's words as they met the site's vocabulary.
///
/// Every query ranks by the words' terms, prefixes and typos included. What the query is told
/// depends on how it reads ([`Plan::keywords`]): a keyword query is read as typed into a search
/// box (a corrected word is the site's, the model reads the corrected text, the result says
/// what it read), a question as written (a word the site holds in no form is unknown, even one
/// an edit away from a site term: an out-of-domain question's "tock" or "serde" is not the
/// site's "took" or "serve", and the gate's foreign words stay those of the words as written).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub words: Vec<Word>,
    /// The query reads as keywords rather than a question: no question mark, at most four
    /// words besides stop words, and no question word followed by a stop word first ("how do",
    /// "what is"; a title such as "why aliasing matters" is keywords).
    pub keywords: bool,
    /// The analyzer stems: a term is a stem ("paketquell"), not a word a reader would be shown.
    pub stemmed: bool,
}

impl Plan {
    /// Plans `query`, analyzed by `analyzer` (the one the site's terms were made by, in the
    /// reader's language), over `vocabulary`.
    pub fn new(vocabulary: &(impl Vocabulary + ?Sized), analyzer: &Analyzer, query: &str) -> Plan {
        let tokens = analyzer.tokens(query);
        let open = is_open(query);
        let last = tokens.len().wrapping_sub(1);
        let words: Vec<Word> = tokens.into_iter().enumerate().map(|(i, t)| plan_word(vocabulary, analyzer, t, open && i == last)).collect();
        let opens_question = match words.as_slice() {
            [first, second, ..] => QUESTION_WORDS.binary_search(&first.token.as_str()).is_ok() && is_stop_word(&second.token),
            _ => false,
        };
        let keywords = !query.contains(['?', '？']) && !opens_question && words.iter().filter(|w| !is_stop_word(&w.token)).count() <= 4;
        Plan { words, keywords, stemmed: analyzer.stems() }
    }

    /// The words whose terms BM25 scores.
    pub fn scored(&self) -> impl Iterator<Item = &Word> {
        self.words.iter().filter(|w| !w.terms.is_empty())
    }

    /// A keyword query with each corrected word replaced by the site term it most likely meant
    /// (the most frequent at the least distance), lowercased as matched; `None` when no word
    /// was a typo, for a question, or when the terms are stems.
    pub fn corrected(&self, query: &str) -> Option<String> {
        self.replaced(query, |w| w.how == How::Typo).filter(|_| self.keywords && !self.stemmed)
    }

    /// The text the model embeds for `query`: a keyword query as the site's terms it matched,
    /// a misspelt word as corrected and a word still being typed as the most frequent term it
    /// begins (the model reads "patch", not "ppatch", and "cargo target", not "cargo targe": a
    /// short query's vector goes wherever a broken word's pieces take it); any other query as
    /// typed (a question's other words give its typos context).
    pub fn embedded<'q>(&self, query: &'q str) -> std::borrow::Cow<'q, str> {
        if !self.keywords {
            return query.into();
        }
        self.replaced(query, |w| matches!(w.how, How::Typo | How::Prefix)).map_or(query.into(), Into::into)
    }

    /// `query` with each word `which` picks replaced by its first term (the most frequent of
    /// the least distance, or of those it begins); `None` when it picks none.
    fn replaced(&self, query: &str, which: impl Fn(&Word) -> bool) -> Option<String> {
        if !self.words.iter().any(&which) {
            return None;
        }
        let mut out = String::with_capacity(query.len());
        let mut from = 0;
        for w in self.words.iter().filter(|w| which(w)) {
            out.push_str(&query[from..w.at.0]);
            out.push_str(&w.terms[0].text);
            from = w.at.1;
        }
        out.push_str(&query[from..]);
        Some(out)
    }

    /// The words the site does not know (stop words aside), each once, in query order: what a
    /// reader is told when no passage answers. Of a keyword query, the words that reached
    /// nothing; of a question, the words the site holds in no form.
    pub fn unknown(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let unknown = |w: &Word| if self.keywords { w.how == How::Unknown } else { !w.in_site };
        for w in self.words.iter().filter(|w| unknown(w) && !is_stop_word(&w.token)) {
            if !out.contains(&w.token) {
                out.push(w.token.clone());
            }
        }
        out
    }

    /// The site terms worth marking in a result: those the query's words reached, each once,
    /// without stop words and terms in more than half of the `chunks` (they would mark nearly
    /// every line). Marks follow matching: a prefix marks the terms it began, a typo the terms
    /// it was corrected to.
    pub fn marked(&self, chunks: usize) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for w in self.scored().filter(|w| !is_stop_word(&w.token)) {
            for t in w.terms.iter().filter(|t| t.df * 2 <= chunks) {
                if !out.contains(&t.text) {
                    out.push(t.text.clone());
                }
            }
        }
        out
    }

    /// Whether a word of the query reached the site (the stop words aside): a keyword query
    /// that did lists its results without saying the docs do not answer it.
    pub fn matched(&self) -> bool {
        self.words.iter().any(|w| w.how != How::Unknown && !is_stop_word(&w.token))
    }
}

/// Words that open an English question. Sorted.
const QUESTION_WORDS: &[&str] =
    &["are", "can", "could", "did", "do", "does", "how", "is", "should", "what", "when", "where", "which", "who", "why", "will", "would"];

fn is_stop_word(token: &str) -> bool {
    bm25::STOP_WORDS.binary_search(&token).is_ok()
}

/// Whether the query ends inside its last word (no space or punctuation after it): the reader
/// may still be typing it.
pub fn is_open(query: &str) -> bool {
    query.chars().next_back().is_some_and(char::is_alphanumeric)
}

fn plan_word(vocabulary: &(impl Vocabulary + ?Sized), analyzer: &Analyzer, t: analyze::Token, open: bool) -> Word {
    let analyze::Token { at, norm, term: token } = t;
    let mut terms: Vec<Term> = vocabulary.df(&token).map(|df| Term { text: token.clone(), weight: 1.0, df }).into_iter().collect();
    let exact = !terms.is_empty();
    // A word being typed is matched as typed, not stemmed (a stem of half a word is no stem); a
    // lone Chinese or Japanese character begins the pairs of characters the site holds.
    if open && (norm.chars().count() >= MIN_PREFIX || norm.chars().next().is_some_and(analyze::is_cjk)) {
        terms.extend(expansions(vocabulary, &norm).into_iter().filter(|t| t.text != token));
    }
    let in_site = exact || (!analyzer.stems() && bm25::forms(&token).iter().any(|f| vocabulary.df(f).is_some()));
    let how = match (exact, terms.is_empty()) {
        (true, _) => How::Exact,
        (false, false) => How::Prefix,
        (false, true) if in_site => How::Inflected,
        (false, true) => {
            terms = corrections(vocabulary, &token);
            if terms.is_empty() {
                How::Unknown
            } else {
                How::Typo
            }
        }
    };
    Word { token, at, how, terms, in_site }
}

/// The site terms `prefix` begins, other than itself: the [`MAX_EXPANSIONS`] most frequent
/// (ties in term order), each weighted by the share of it the reader has typed (Pagefind's
/// rule: "overrid" counts 0.875 toward "override", 0.7 toward "overriding").
fn expansions(vocabulary: &(impl Vocabulary + ?Sized), prefix: &str) -> Vec<Term> {
    let typed = prefix.chars().count() as f32;
    let mut found: Vec<Term> = Vec::new();
    vocabulary.with_prefix(prefix, &mut |t, df| {
        if t != prefix {
            found.push(Term { text: t.to_string(), weight: typed / t.chars().count() as f32, df });
        }
    });
    most_frequent(found, MAX_EXPANSIONS)
}

/// The `max` most frequent of `terms`, ties in term order. (One sort for expansions and
/// corrections: each sort instantiated is kilobytes of the reader's download.)
fn most_frequent(mut terms: Vec<Term>, max: usize) -> Vec<Term> {
    terms.sort_by(|a, b| b.df.cmp(&a.df).then_with(|| a.text.cmp(&b.text)));
    terms.truncate(max);
    terms
}

/// The site terms within one edit of `word` (two from eight characters on; an edit is an
/// insertion, deletion, substitution or swap of adjacent characters) that share its first
/// character, or are it with the first two swapped: those at the least distance, the
/// [`MAX_CORRECTIONS`] most frequent (ties in term order), weighted down per edit.
fn corrections(vocabulary: &(impl Vocabulary + ?Sized), word: &str) -> Vec<Term> {
    if !may_be_typo(word) {
        return Vec::new();
    }
    let chars: Vec<char> = word.chars().collect();
    let most = if chars.len() >= 8 { 2 } else { 1 };
    let mut found: Vec<(usize, Term)> = Vec::new();
    vocabulary.with_prefix(&word[..chars[0].len_utf8()], &mut |t, df| {
        if let Some(d) = edits_within(&chars, t, most) {
            found.push((d, Term { text: t.to_string(), weight: 1.0 - TYPO_DISCOUNT * d as f32, df }));
        }
    });
    let swapped: String = [chars[1], chars[0]].iter().chain(&chars[2..]).collect();
    if let Some(df) = vocabulary.df(&swapped).filter(|_| chars[0] != chars[1]) {
        found.push((1, Term { text: swapped, weight: 1.0 - TYPO_DISCOUNT, df }));
    }
    let Some(least) = found.iter().map(|f| f.0).min() else { return Vec::new() };
    most_frequent(found.into_iter().filter(|f| f.0 == least).map(|f| f.1).collect(), MAX_CORRECTIONS)
}

/// Whether a word the site does not hold is corrected as a typo: at least [`MIN_TYPO`]
/// characters, not a number.
pub fn may_be_typo(word: &str) -> bool {
    word.chars().count() >= MIN_TYPO && !word.chars().all(|c| c.is_ascii_digit())
}

/// The optimal string alignment distance of `a` and `b` (insertions, deletions, substitutions
/// and swaps of adjacent characters) when it is at most `most`, else `None`.
fn edits_within(a: &[char], b: &str, most: usize) -> Option<usize> {
    // Most terms of a letter differ in length by more than `most`: counted before any allocation.
    if a.len().abs_diff(b.chars().count()) > most {
        return None;
    }
    let b: Vec<char> = b.chars().collect();
    // Row-major (a.len() + 1) × (b.len() + 1) table of prefix distances.
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for (j, cell) in d[..w].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        d[i * w] = i;
        for j in 1..w {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut e = (d[(i - 1) * w + j] + 1).min(d[i * w + j - 1] + 1).min(d[(i - 1) * w + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                e = e.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = e;
        }
        if d[i * w..(i + 1) * w].iter().all(|&e| e > most) {
            return None;
        }
    }
    Some(d[a.len() * w + b.len()]).filter(|&e| e <= most)
}

impl Vocabulary for bm25::Bm25 {
    fn df(&self, term: &str) -> Option<usize> {
        self.terms.binary_search_by(|t| t.as_str().cmp(term)).ok().map(|i| self.postings[i].len())
    }

    fn with_prefix(&self, prefix: &str, each: &mut dyn FnMut(&str, usize)) {
        let from = self.terms.partition_point(|t| t.as_str() < prefix);
        for (t, p) in self.terms[from..].iter().zip(&self.postings[from..]).take_while(|(t, _)| t.starts_with(prefix)) {
            each(t, p.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site() -> bm25::Bm25 {
        bm25::Bm25::build(
            [
                "Overriding dependencies with the patch section",
                "override a dependency path",
                "workspaces share one lock file",
                "a workspace member",
                "build scripts run before the build",
                "the build is reproducible",
                "corrupt data",
            ]
            .iter()
            .copied(),
        )
    }

    fn how(plan: &Plan) -> Vec<(&str, How)> {
        plan.words.iter().map(|w| (w.token.as_str(), w.how)).collect()
    }

    #[test]
    fn the_last_word_while_typed_matches_the_terms_it_begins() {
        let bm = site();
        let plan = Plan::new(&bm, &Analyzer::default(), "overrid");
        assert_eq!(how(&plan), [("overrid", How::Prefix)]);
        let terms: Vec<(&str, f32)> = plan.words[0].terms.iter().map(|t| (t.text.as_str(), t.weight)).collect();
        assert_eq!(terms, [("override", 7.0 / 8.0), ("overriding", 0.7)]);
        // A space, a question mark or any punctuation after it ends the word: "overrid" is then
        // a form of the site's "overriding" ("-ing" put on), "workspac" of "workspaces".
        assert_eq!(how(&Plan::new(&bm, &Analyzer::default(), "overrid ")), [("overrid", How::Inflected)]);
        assert_eq!(how(&Plan::new(&bm, &Analyzer::default(), "workspac?")), [("workspac", How::Inflected)]);
        // An exact last word keeps its own weight and reaches the longer terms below it.
        let plan = Plan::new(&bm, &Analyzer::default(), "workspace");
        assert_eq!(plan.words[0].how, How::Exact);
        assert_eq!(plan.words[0].terms.iter().map(|t| t.text.as_str()).collect::<Vec<_>>(), ["workspace", "workspaces"]);
        assert_eq!(plan.words[0].terms[0].weight, 1.0);
        // One letter is not a prefix worth expanding.
        assert_eq!(how(&Plan::new(&bm, &Analyzer::default(), "w")), [("w", How::Unknown)]);
    }

    #[test]
    fn a_misspelt_word_reaches_the_site_terms_one_edit_away() {
        let bm = site();
        let plan = Plan::new(&bm, &Analyzer::default(), "overide dependancy path");
        assert_eq!(how(&plan), [("overide", How::Typo), ("dependancy", How::Typo), ("path", How::Exact)]);
        assert_eq!(plan.words[0].terms[0].text, "override");
        assert!((plan.words[0].terms[0].weight - 0.7).abs() < 1e-6);
        assert_eq!(plan.corrected("Overide dependancy path"), Some("override dependency path".to_string()));
        // Swapped, dropped and doubled letters; a swap of the first two letters too.
        for (typo, site) in [("worksapces ", "workspaces"), ("buld ", "build"), ("scriptts ", "scripts"), ("ubild ", "build")] {
            let plan = Plan::new(&bm, &Analyzer::default(), typo);
            assert_eq!(plan.words[0].how, How::Typo, "{typo}");
            assert_eq!(plan.words[0].terms[0].text, site, "{typo}");
        }
        // Short words, numbers, words of another first letter and far words are not corrected.
        for far in ["bld ", "2024 ", "verride ", "tokio ", "zzzzzzzz "] {
            assert_eq!(Plan::new(&bm, &Analyzer::default(), far).words[0].how, How::Unknown, "{far}");
        }
        assert_eq!(Plan::new(&bm, &Analyzer::default(), "path").corrected("path"), None);
    }

    #[test]
    fn a_word_the_site_holds_in_another_form_is_known_but_ranks_nothing() {
        let bm = site();
        let plan = Plan::new(&bm, &Analyzer::default(), "corrupts tokio, the zzz");
        assert_eq!(how(&plan), [("corrupts", How::Inflected), ("tokio", How::Unknown), ("the", How::Exact), ("zzz", How::Unknown)]);
        assert_eq!(plan.unknown(), ["tokio", "zzz"]);
        assert_eq!(plan.scored().count(), 1);
        // A question's word the site holds in no form is unknown even when it is an edit away
        // from a site term, and nothing in a question is shown corrected.
        let q = "how do I write a driver for the buld system?";
        let plan = Plan::new(&bm, &Analyzer::default(), q);
        assert_eq!((plan.words[8].how, plan.unknown().contains(&"buld".to_string()), plan.corrected(q)), (How::Typo, true, None));
    }

    #[test]
    fn marks_follow_what_the_words_reached_without_stop_words_or_ubiquitous_terms() {
        let bm = site();
        let plan = Plan::new(&bm, &Analyzer::default(), "the buld workspac");
        assert_eq!(plan.marked(bm.len()), ["build", "workspace", "workspaces"]);
        // "the" is a stop word; with two chunks only, a term in both is ubiquitous.
        let two = bm25::Bm25::build(["the build", "the build again"].iter().copied());
        assert!(Plan::new(&two, &Analyzer::default(), "the build").marked(two.len()).is_empty());
    }

    #[test]
    fn the_model_reads_a_keyword_query_as_corrected_and_a_question_as_typed() {
        let bm = site();
        assert_eq!(Plan::new(&bm, &Analyzer::default(), "overide dependancy").embedded("overide dependancy"), "override dependency");
        let q = "how do I overide a dependancy?";
        assert_eq!(Plan::new(&bm, &Analyzer::default(), q).embedded(q), q);
        assert_eq!(Plan::new(&bm, &Analyzer::default(), "patch").embedded("patch"), "patch");
        // The word being typed is read as the most frequent term it begins.
        assert_eq!(Plan::new(&bm, &Analyzer::default(), "buld scr").embedded("buld scr"), "build scripts");
    }

    #[test]
    fn keyword_queries_are_short_and_ask_no_question() {
        let bm = site();
        for q in [
            "patch",
            "build scripts",
            "The patch section",
            "overide dependancy path",
            "why aliasing matters",
            "cargo rerun-if-changed path",
        ] {
            assert!(Plan::new(&bm, &Analyzer::default(), q).keywords, "{q}");
        }
        for q in
            ["how do I patch", "patch?", "why does the build fail", "what is a workspace", "the build script runs before my crate compiles"]
        {
            assert!(!Plan::new(&bm, &Analyzer::default(), q).keywords, "{q}");
        }
    }

    #[test]
    fn edit_distance_counts_an_adjacent_swap_once() {
        let d = |a: &str, b: &str, most| edits_within(&a.chars().collect::<Vec<_>>(), b, most);
        assert_eq!(d("worksapces", "workspaces", 2), Some(1));
        assert_eq!(d("buld", "build", 1), Some(1));
        assert_eq!(d("dependancy", "dependency", 1), Some(1));
        assert_eq!(d("kitten", "sitting", 2), None);
        assert_eq!(d("kitten", "sitting", 3), Some(3));
        assert_eq!(d("café", "cafe", 1), Some(1));
        assert_eq!(d("same", "same", 0), Some(0));
    }
}
