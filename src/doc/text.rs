//! Offsets into canonical text. The unit of `from`/`to` everywhere in needle is the UTF-16 code
//! unit, because that is what the browser's DOM and `String.prototype` count in; Rust strings
//! are sliced by byte, so every conversion goes through this module.

/// UTF-16 length of a string.
pub fn utf16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// Converts a byte offset (which must lie on a char boundary) into a UTF-16 offset.
pub fn byte_to_utf16(s: &str, byte: usize) -> Option<usize> {
    if !s.is_char_boundary(byte) {
        return None;
    }
    Some(utf16_len(&s[..byte]))
}

/// Converts a UTF-16 offset into a byte offset; `None` if it falls inside a surrogate pair or
/// beyond the end.
pub fn utf16_to_byte(s: &str, unit: usize) -> Option<usize> {
    let mut units = 0usize;
    for (b, c) in s.char_indices() {
        if units == unit {
            return Some(b);
        }
        units += c.len_utf16();
        if units > unit {
            return None;
        }
    }
    (units == unit).then_some(s.len())
}

/// `s[from..to]` with UTF-16 offsets.
pub fn slice_utf16(s: &str, from: usize, to: usize) -> Option<&str> {
    let a = utf16_to_byte(s, from)?;
    let b = utf16_to_byte(s, to)?;
    s.get(a..b)
}

/// The whitespace of canonical text: the browser's collapsing set, ASCII only (space, tab, LF,
/// FF, CR). U+00A0 and the other Unicode spaces are ordinary characters (see `extract`).
pub fn is_space(c: char) -> bool {
    c.is_ascii_whitespace()
}

/// Replaces every run of [`is_space`] with one U+0020 and trims both ends: the one whitespace
/// collapsing of canonical text, headings and the embedded header.
pub fn collapse_spaces(s: &str) -> String {
    join_words(s.split(is_space))
}

/// Lowercases and collapses every run of *Unicode* whitespace to one space: the matching rule
/// of the question sets, wider than [`collapse_spaces`] on purpose (a needle typed by a person
/// holds plain spaces where the page may have U+00A0).
pub fn normalize_for_match(s: &str) -> String {
    join_words(s.split(char::is_whitespace)).to_lowercase()
}

fn join_words<'a>(words: impl Iterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for w in words.filter(|w| !w.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_collapsing_keeps_no_break_spaces_and_matching_does_not() {
        assert_eq!(collapse_spaces(" a \t\n b\u{a0}c \r\x0c"), "a b\u{a0}c");
        assert_eq!(normalize_for_match(" A \t\n B\u{a0}C "), "a b c");
    }

    #[test]
    fn utf16_offsets_count_surrogate_pairs_twice() {
        let s = "a日🦀é";
        assert_eq!(utf16_len(s), 1 + 1 + 2 + 1);
        assert_eq!(byte_to_utf16(s, 4), Some(2));
        assert_eq!(utf16_to_byte(s, 4), Some(8));
        assert_eq!(utf16_to_byte(s, 3), None, "inside the crab's surrogate pair");
        assert_eq!(slice_utf16(s, 2, 5), Some("🦀é"));
        assert_eq!(slice_utf16(s, 0, 6), None);
    }

    #[test]
    fn match_normalisation_collapses_and_lowercases() {
        assert_eq!(normalize_for_match("  The\n\tQuick  FOX "), "the quick fox");
    }
}

/// A page reduced to its canonical text (see `extract` for the rule that produces it; the
/// browser rebuilds the same string from the rendered DOM).
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// Path relative to the site root, `/`-separated (`arc-mutex/arc.html`).
    pub path: String,
    pub title: String,
    /// The canonical text: what `#char=from,to` counts in.
    pub text: String,
    /// Blocks in document order; byte ranges into `text`, non-overlapping, separated only by
    /// the separators of the canonical text: a blank line in pages of text and between a PDF's
    /// pages, a line break between cues and between records, a space inside a PDF page (its
    /// outline headings and the text around them).
    pub blocks: Vec<Block>,
    /// What kind of document it is and the units its text is made of (PDF pages, cues, rows):
    /// what its chunks are cited by ([`crate::doc::locator`]).
    pub source: crate::doc::locator::Source,
    /// The language the document declares (`<html lang>`, `xml:lang`, a `content-language`
    /// meta), as written; `None` when it declares none. The build decides the language it is
    /// indexed in (`doc::lang`).
    pub lang: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// Byte offsets into `Document::text`.
    pub start: usize,
    pub end: usize,
    pub kind: BlockKind,
    /// Section path at this block: the texts of the enclosing h1 > h2 > h3 … headings (for a
    /// heading block, including itself).
    pub section: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    Heading(u8),
    /// Paragraphs, list items, table cells, quotes: prose whose whitespace was collapsed.
    Text,
    /// `<pre>` content, kept verbatim.
    Code,
}
