//! What a word is, per language: the one analyzer the builder indexes with and the reader
//! searches with (natively and in the browser), so a query's words and the site's terms are
//! made by the same rule and the marks in a result are the words that matched.
//!
//! Text becomes terms in three steps:
//! 1. **Segmentation.** Unicode word boundaries (UAX #29), each word then split at the
//!    punctuation inside it (apostrophes, periods, underscores: "l'installation" is "l" and
//!    "installation", "x86_64" is "x86" and "64"), so ASCII text gives exactly its
//!    `[A-Za-z0-9]+` runs. Han, kana and Hangul are written without spaces between words: a
//!    run of them becomes its overlapping pairs of characters ("软件包" → "软件", "件包"), as
//!    Lucene's CJK analyzer indexes them, which needs no dictionary in the reader's download;
//!    a lone character is its own term.
//! 2. **Case and accents.** Lowercased; for the languages whose readers commonly type without
//!    accents (French, Spanish, Portuguese, Italian, Catalan, Romanian, Dutch) accents are
//!    folded after stemming ("écrit" and "ecrit" meet).
//! 3. **Stemming.** The Snowball stemmer of the word's language where Snowball has one
//!    (German, French, Spanish, Russian, Hungarian, …): "Paketen" and "Paket" are one term.
//!    English is not stemmed: its words match exactly, and the gate knows their inflections
//!    (`bm25::forms`), as every English index before the analyzer did.
//!
//! The stemmers are the feature `stemmers` (in every native build and the full browser engine):
//! a lexical core built without them refuses an index with pages in a stemmed language
//! ([`Analysis::validate`]), and the bundle of such a site ships the lexical core with them.
//!
//! Invariants: the analyzer of a version and a language is a pure function of the text (an
//! index records both, [`Analysis`], and a reader of another analyzer version refuses it);
//! version 1 is the rule of every index written before languages were told apart (format 5 and
//! older): alphanumeric runs, lowercased, in every language, kept so those indexes search as
//! they were built.

use serde::{Deserialize, Serialize};
use unicode_segmentation::UnicodeSegmentation;

/// The analyzer this needle indexes with.
pub const ANALYZER_VERSION: u32 = 2;
/// The analyzer of indexes written before languages were told apart (format 5 and older).
pub const LEGACY_ANALYZER: u32 = 1;
/// The language of a page whose language is not known: plain segmentation, no stemming.
pub const UNDETERMINED: &str = "und";

/// How an index's text was analyzed: the analyzer version and each page's language. A reader
/// analyzes a query with the same version (and refuses an index of a version it does not know).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Analysis {
    pub version: u32,
    /// The site's languages (BCP 47 primary subtags, lowercase: "en", "de", "zh"; "und" for
    /// unknown), distinct, in order of first page.
    pub langs: Vec<String>,
    /// Per page (as `Header::pages`), its language: an index into `langs`.
    pub page_lang: Vec<u16>,
}

impl Analysis {
    /// The analysis of an index written before languages were told apart: every page "und",
    /// analyzed by version 1.
    pub fn legacy(pages: usize) -> Analysis {
        Analysis { version: LEGACY_ANALYZER, langs: vec![UNDETERMINED.into()], page_lang: vec![0; pages] }
    }

    /// The analysis of pages whose languages are `page_langs` (one tag per page).
    pub fn of<'a>(page_langs: impl IntoIterator<Item = &'a str>) -> Analysis {
        let mut langs: Vec<String> = Vec::new();
        let page_lang = page_langs
            .into_iter()
            .map(|l| {
                let l = primary(l);
                match langs.iter().position(|x| *x == l) {
                    Some(i) => i as u16,
                    None => {
                        langs.push(l);
                        (langs.len() - 1) as u16
                    }
                }
            })
            .collect();
        Analysis { version: ANALYZER_VERSION, langs, page_lang }
    }

    /// The language of page `page` ("und" past the end).
    pub fn lang_of(&self, page: usize) -> &str {
        self.page_lang.get(page).and_then(|&i| self.langs.get(i as usize)).map_or(UNDETERMINED, String::as_str)
    }

    /// The site's main language: the one most pages are in (ties: the first).
    pub fn main_lang(&self) -> &str {
        let mut counts = vec![0usize; self.langs.len()];
        for &l in &self.page_lang {
            if let Some(c) = counts.get_mut(l as usize) {
                *c += 1;
            }
        }
        let best = counts.iter().enumerate().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0))).map_or(0, |(i, _)| i);
        self.langs.get(best).map_or(UNDETERMINED, String::as_str)
    }

    /// The language a reader asking in `lang` searches: `lang` when the site has pages in it,
    /// else (none given, or one the site is not written in) the site's main language.
    pub fn reader_lang(&self, lang: Option<&str>) -> &str {
        match lang.map(primary) {
            Some(l) => self.langs.iter().find(|x| **x == l).map_or_else(|| self.main_lang(), String::as_str),
            None => self.main_lang(),
        }
    }

    /// The analyzer of `lang` at this analysis's version.
    pub fn analyzer(&self, lang: &str) -> Analyzer {
        Analyzer::new(self.version, lang)
    }

    /// Checks what was read from an index: a version this reader analyzes, a language per page.
    pub fn validate(&self, pages: usize) -> Result<(), String> {
        if self.version != ANALYZER_VERSION && self.version != LEGACY_ANALYZER {
            return Err(format!(
                "built with text analyzer version {}, this needle analyzes with version {ANALYZER_VERSION}; rebuild the index with this needle",
                self.version
            ));
        }
        if self.page_lang.len() != pages {
            return Err(format!("{} page languages for {pages} pages", self.page_lang.len()));
        }
        if self.page_lang.iter().any(|&l| l as usize >= self.langs.len()) {
            return Err("a page's language is not among the index's languages".into());
        }
        if !cfg!(feature = "stemmers") && self.stems() {
            return Err(format!(
                "its pages in {} are stemmed (Snowball), and this build of needle has no stemmers (the lexical core for sites in other languages); rebuild the bundle with this needle",
                self.langs.iter().filter(|l| stems(l)).cloned().collect::<Vec<_>>().join(", ")
            ));
        }
        Ok(())
    }

    /// Whether some page's language is stemmed (the analyzer needs the stemmers).
    pub fn stems(&self) -> bool {
        self.version == ANALYZER_VERSION && self.langs.iter().any(|l| stems(l))
    }
}

/// The primary language subtag of a BCP 47 tag, lowercase ("de-DE" → "de", "zh_Hans" → "zh");
/// "und" for an empty or malformed tag.
pub fn primary(tag: &str) -> String {
    let p = tag.trim().split(['-', '_']).next().unwrap_or("").to_ascii_lowercase();
    if (2..=3).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_lowercase()) {
        p
    } else {
        UNDETERMINED.into()
    }
}

/// The languages Snowball stems, by primary subtag.
const STEMMED: &[&str] =
    &["ar", "da", "de", "el", "es", "fi", "fr", "hu", "it", "nb", "nl", "nn", "no", "pt", "ro", "ru", "sv", "ta", "tr"];

/// Whether the analyzer stems `lang` (a primary subtag).
pub fn stems(lang: &str) -> bool {
    STEMMED.contains(&lang)
}

/// The Snowball stemmer of `lang`, one of [`STEMMED`].
#[cfg(feature = "stemmers")]
fn snowball(lang: &str) -> Option<rust_stemmers::Stemmer> {
    use rust_stemmers::Algorithm::*;
    let algorithm = match lang {
        "ar" => Arabic,
        "da" => Danish,
        "nl" => Dutch,
        "fi" => Finnish,
        "fr" => French,
        "de" => German,
        "el" => Greek,
        "hu" => Hungarian,
        "it" => Italian,
        "nb" | "nn" | "no" => Norwegian,
        "pt" => Portuguese,
        "ro" => Romanian,
        "ru" => Russian,
        "es" => Spanish,
        "sv" => Swedish,
        "ta" => Tamil,
        "tr" => Turkish,
        _ => return None,
    };
    Some(rust_stemmers::Stemmer::create(algorithm))
}

/// Without the stemmers no language is stemmed (and an index that needs them is refused).
#[cfg(not(feature = "stemmers"))]
fn snowball(_lang: &str) -> Option<Stemmer> {
    None
}

#[cfg(feature = "stemmers")]
use rust_stemmers::Stemmer;

/// What stems a word: nothing, in a build without the stemmers.
#[cfg(not(feature = "stemmers"))]
enum Stemmer {}

#[cfg(not(feature = "stemmers"))]
impl Stemmer {
    fn stem<'a>(&self, _word: &'a str) -> std::borrow::Cow<'a, str> {
        match *self {}
    }
}

/// A word of a text as the analyzer reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    /// Byte range in the text analyzed.
    pub at: (usize, usize),
    /// The word lowercased (and accent-folded where the language folds), not stemmed: what a
    /// prefix is matched with while the reader is still typing it.
    pub norm: String,
    /// The term: `norm` stemmed where the language has a stemmer. What the index holds.
    pub term: String,
}

/// The analyzer of one language at one version (module documentation).
pub struct Analyzer {
    version: u32,
    stemmer: Option<Stemmer>,
    fold: bool,
}

impl std::fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Analyzer")
            .field("version", &self.version)
            .field("stems", &self.stemmer.is_some())
            .field("fold", &self.fold)
            .finish()
    }
}

impl Default for Analyzer {
    /// English at the current version (no stemming, no folding).
    fn default() -> Analyzer {
        Analyzer::new(ANALYZER_VERSION, "en")
    }
}

impl Analyzer {
    /// The analyzer of `lang` (a BCP 47 tag) at `version`. A language without a Snowball
    /// stemmer gets segmentation and case folding only.
    pub fn new(version: u32, lang: &str) -> Analyzer {
        let lang = primary(lang);
        if version == LEGACY_ANALYZER {
            return Analyzer { version, stemmer: None, fold: false };
        }
        let fold = matches!(lang.as_str(), "fr" | "es" | "pt" | "it" | "ca" | "ro" | "nl");
        Analyzer { version, stemmer: snowball(&lang), fold }
    }

    /// Whether this analyzer stems (its terms are not the words as written).
    pub fn stems(&self) -> bool {
        self.stemmer.is_some()
    }

    /// The terms of `text`, in order (what BM25 counts).
    pub fn terms(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.each(text, &mut |t| out.push(t.term));
        out
    }

    /// The tokens of `text`, in order.
    pub fn tokens(&self, text: &str) -> Vec<Token> {
        let mut out = Vec::new();
        self.each(text, &mut |t| out.push(t));
        out
    }

    /// The term of one word as typed (its first token's term; "" when it has none).
    pub fn term(&self, word: &str) -> String {
        self.tokens(word).into_iter().next().map(|t| t.term).unwrap_or_default()
    }

    fn each(&self, text: &str, out: &mut dyn FnMut(Token)) {
        if self.version == LEGACY_ANALYZER {
            for (at, w) in legacy_words(text) {
                let norm = w.to_lowercase();
                out(Token { at: (at, at + w.len()), term: norm.clone(), norm });
            }
            return;
        }
        let mut cjk: Vec<(usize, char)> = Vec::new();
        for (start, segment) in text.split_word_bound_indices() {
            let mut word_from: Option<usize> = None;
            for (i, c) in segment.char_indices() {
                let at = start + i;
                if is_cjk(c) {
                    if let Some(from) = word_from.take() {
                        self.word(text, from, at, out);
                    }
                    cjk.push((at, c));
                    continue;
                }
                flush_cjk(text, &mut cjk, out);
                if splits_words(c) {
                    if let Some(from) = word_from.take() {
                        self.word(text, from, at, out);
                    }
                } else if word_from.is_none() && c.is_alphanumeric() {
                    word_from = Some(at);
                }
            }
            if let Some(from) = word_from {
                self.word(text, from, start + segment.len(), out);
            }
        }
        flush_cjk(text, &mut cjk, out);
    }

    /// One word of a script with spaces, `text[from..to]`.
    fn word(&self, text: &str, from: usize, to: usize, out: &mut dyn FnMut(Token)) {
        let raw = &text[from..to];
        let lower: String = raw.chars().filter(|&c| !is_invisible(c)).flat_map(char::to_lowercase).collect();
        let stemmed = match &self.stemmer {
            Some(s) => s.stem(&lower).into_owned(),
            None => lower.clone(),
        };
        let (norm, term) = if self.fold { (fold(&lower), fold(&stemmed)) } else { (lower, stemmed) };
        out(Token { at: (from, to), norm, term });
    }
}

/// Emits a run of CJK characters as its overlapping pairs (a lone character as itself).
fn flush_cjk(text: &str, run: &mut Vec<(usize, char)>, out: &mut dyn FnMut(Token)) {
    let end = |&(at, c): &(usize, char)| at + c.len_utf8();
    match run.as_slice() {
        [] => {}
        [one] => {
            let t = text[one.0..end(one)].to_string();
            out(Token { at: (one.0, end(one)), norm: t.clone(), term: t });
        }
        pairs => {
            for w in pairs.windows(2) {
                let t: String = text[w[0].0..end(&w[1])].chars().flat_map(char::to_lowercase).collect();
                out(Token { at: (w[0].0, end(&w[1])), norm: t.clone(), term: t });
            }
        }
    }
    run.clear();
}

/// Han ideographs, kana and Hangul: scripts written without spaces between words (Hangul is
/// spaced, but Lucene's CJK analyzer pairs it too, and so does this one).
pub fn is_cjk(c: char) -> bool {
    cjk_script(c).is_some()
}

/// The scripts the analyzer pairs (`is_cjk`), told apart: what `doc::lang` reads a page's
/// language from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CjkScript {
    Han,
    Kana,
    Hangul,
}

/// The script of `c` among those the analyzer pairs, if it is one of them.
pub fn cjk_script(c: char) -> Option<CjkScript> {
    match c as u32 {
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x31F0..=0x31FF    // Katakana phonetic extensions
        | 0xFF66..=0xFF9F    // halfwidth Katakana
        => Some(CjkScript::Kana),
        0xAC00..=0xD7AF      // Hangul syllables
        | 0x1100..=0x11FF    // Hangul Jamo
        | 0x3130..=0x318F    // Hangul compatibility Jamo
        => Some(CjkScript::Hangul),
        0x3400..=0x4DBF      // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xF900..=0xFAFF    // CJK compatibility ideographs
        | 0x20000..=0x2FA1F  // CJK Extensions B–F, compatibility supplement
        => Some(CjkScript::Han),
        _ => None,
    }
}

/// Characters that end a word inside a Unicode word segment: punctuation a word boundary keeps
/// inside a word (apostrophes, periods, colons, underscores and the like). Marks and joiners
/// stay inside the word ("हिन्दी" is one word).
fn splits_words(c: char) -> bool {
    c.is_whitespace()
        || c.is_ascii_punctuation()
        || c.is_ascii_control()
        || matches!(
            c,
            '\u{2018}'
                | '\u{2019}'
                | '\u{201B}'
                | '\u{00B7}'
                | '\u{0387}'
                | '\u{05F3}'
                | '\u{05F4}'
                | '\u{2024}'
                | '\u{2027}'
                | '\u{FE13}'
                | '\u{FE50}'
                | '\u{FE52}'
                | '\u{FE55}'
                | '\u{FF07}'
                | '\u{FF0C}'
                | '\u{FF0E}'
                | '\u{FF1A}'
                | '\u{FF3F}'
                | '\u{203F}'
                | '\u{2040}'
                | '\u{2054}'
                | '\u{FE33}'
                | '\u{FE34}'
                | '\u{FE4D}'
                | '\u{FE4E}'
                | '\u{FE4F}'
        )
}

/// Format characters that never change a word: soft hyphen, zero-width space and joiners, the
/// word joiner and the byte-order mark.
fn is_invisible(c: char) -> bool {
    matches!(c, '\u{00AD}' | '\u{200B}' | '\u{200C}' | '\u{200D}' | '\u{2060}' | '\u{FEFF}')
}

/// `s` with the accents of Latin letters taken off ("é" → "e", "ç" → "c", "ș" → "s") and
/// combining accents dropped.
pub fn fold(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' | 'ā' | 'ă' | 'ą' => out.push('a'),
            'ç' | 'ć' | 'č' => out.push('c'),
            'è' | 'é' | 'ê' | 'ë' | 'ē' | 'ė' | 'ę' | 'ě' => out.push('e'),
            'ì' | 'í' | 'î' | 'ï' | 'ī' | 'į' => out.push('i'),
            'ñ' | 'ń' | 'ň' => out.push('n'),
            'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' | 'ō' | 'ő' => out.push('o'),
            'ù' | 'ú' | 'û' | 'ü' | 'ū' | 'ů' | 'ű' | 'ų' => out.push('u'),
            'ý' | 'ÿ' => out.push('y'),
            'ș' | 'ş' | 'š' | 'ś' => out.push('s'),
            'ț' | 'ţ' | 'ť' => out.push('t'),
            'ž' | 'ź' | 'ż' => out.push('z'),
            'œ' => out.push_str("oe"),
            'æ' => out.push_str("ae"),
            '\u{0300}'..='\u{036F}' => {}
            c => out.push(c),
        }
    }
    out
}

/// Version 1's words: the alphanumeric runs of `s` with their byte offsets.
fn legacy_words(s: &str) -> impl Iterator<Item = (usize, &str)> {
    s.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(move |w| (w.as_ptr() as usize - s.as_ptr() as usize, w))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(lang: &str, text: &str) -> Vec<String> {
        Analyzer::new(ANALYZER_VERSION, lang).terms(text)
    }

    #[test]
    fn ascii_text_is_its_alphanumeric_runs_in_every_language_without_a_stemmer() {
        let text = "Hello, World! x86_64 isn't 3.14 e.g. foo::bar_baz";
        let legacy = Analyzer::new(LEGACY_ANALYZER, "en").terms(text);
        assert_eq!(legacy, ["hello", "world", "x86", "64", "isn", "t", "3", "14", "e", "g", "foo", "bar", "baz"]);
        for lang in ["en", "und", "ja", "xx"] {
            assert_eq!(terms(lang, text), legacy, "{lang}");
        }
    }

    #[test]
    fn chinese_and_japanese_are_indexed_as_overlapping_pairs() {
        assert_eq!(terms("zh", "使用软件包管理器"), ["使用", "用软", "软件", "件包", "包管", "管理", "理器"]);
        // A lone character between others is itself; Latin words inside CJK text are words.
        assert_eq!(terms("zh", "用 apt 安装"), ["用", "apt", "安装"]);
        assert_eq!(terms("ja", "Debianのパッケージ"), ["debian", "のパ", "パッ", "ッケ", "ケー", "ージ"]);
        // Offsets are byte ranges of the text.
        let t = Analyzer::new(ANALYZER_VERSION, "zh").tokens("安装apt");
        assert_eq!(t[0].at, (0, 6));
        assert_eq!(t[1].at, (6, 9));
    }

    #[test]
    fn german_inflections_meet_at_their_stem() {
        let de = Analyzer::new(ANALYZER_VERSION, "de");
        assert_eq!(de.term("Paketen"), de.term("Paket"));
        assert_eq!(de.term("Installationen"), de.term("Installation"));
        assert_eq!(de.term("Größe"), de.term("grösse"));
        // The norm is the word as typed, lowercased: what a prefix matches with.
        assert_eq!(de.tokens("Paketen")[0].norm, "paketen");
    }

    #[test]
    fn french_elision_and_accents() {
        assert_eq!(
            terms("fr", "l'installation"),
            terms("fr", "installation").into_iter().fold(vec!["l".to_string()], |mut v, t| {
                v.push(t);
                v
            })
        );
        assert_eq!(terms("fr", "écrit"), terms("fr", "ecrit"));
    }

    #[test]
    fn marks_and_invisible_characters_stay_inside_words() {
        assert_eq!(terms("hi", "हिन्दी भाषा"), ["हिन्दी", "भाषा"]);
        assert_eq!(terms("de", "Konfigu\u{00AD}ration"), terms("de", "Konfiguration"));
    }

    #[test]
    fn tags_reduce_to_their_primary_language() {
        assert_eq!(primary("de-DE"), "de");
        assert_eq!(primary("zh_Hans_CN"), "zh");
        assert_eq!(primary("EN"), "en");
        assert_eq!(primary(""), "und");
        assert_eq!(primary("x"), "und");
        let a = Analysis::of(["de-DE", "en", "de"]);
        assert_eq!(a.langs, ["de", "en"]);
        assert_eq!(a.page_lang, [0, 1, 0]);
        assert_eq!(a.main_lang(), "de");
        assert!(a.validate(3).is_ok());
        assert!(a.validate(2).is_err());
        assert!(Analysis { version: 9, ..a }.validate(3).is_err());
    }
}
