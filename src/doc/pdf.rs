//! PDF → canonical text, page by page (lopdf: text of each page's content stream, and the
//! outline).
//!
//! The rule:
//! 1. Each page's text as lopdf extracts it, in lines.
//! 2. **Running headers and footers** are left out: a page's first (last) line when, with each
//!    run of digits read as one, it opens (closes) at least [`RUNNING_MIN_PAGES`] pages, or
//!    two when it holds a number (`Chapter 4: Function reference 9`, `Shared MIME-info
//!    Database`, a lone page number). Where lopdf gives a page as one line, the longest run of
//!    leading (trailing) words that opens (closes) at least half the pages goes instead.
//! 3. Ligatures (U+FB00–FB06) spelled out, a word cut by a line-end hyphen (`declara- tions`)
//!    joined, whitespace collapsed.
//! 4. **Headings** are the outline's entries (bookmarks): an entry's title found in its page's
//!    text (from where the previous one was found) becomes a heading block there, and the
//!    section path of the text after it; a page starts in the section of the last entry before
//!    it. Without an outline there are no headings.
//! 5. The pages' texts are joined by `"\n\n"` in page order (a page with no text adds an empty
//!    range), and [`Source::Pdf`] records each page's range, so a chunk is cited
//!    `file.pdf#page=N` and never spans two pages (the chunker cuts each page on its own).
//!
//! A PDF that is encrypted (needs a password), cannot be parsed, or has no text on any page
//! (scanned) is an error saying so; a single page that fails or has no text is left empty.
//! The title is the document information's `Title`, else the file name.

use std::collections::HashMap;

use crate::doc::locator::Source;
use crate::doc::text::{collapse_spaces, Block, BlockKind, Document};

/// How many pages a line must open (or close) to count as a running header (footer); two
/// suffice for a line with a number in it, as a page number is.
pub const RUNNING_MIN_PAGES: usize = 3;
/// The longest running header or footer looked for in a page without line breaks, in words.
const RUNNING_MAX_WORDS: usize = 8;

/// The document of the PDF `path` from its bytes; `Err` gives the reason it has none.
pub fn pdf_document(path: &str, bytes: &[u8]) -> Result<Document, String> {
    // lopdf is a parser of hostile input written in safe Rust, but a panic in it must cost this
    // file only.
    let loaded = std::panic::catch_unwind(|| read(bytes)).map_err(|_| "the PDF parser failed on this file (a panic)".to_string())??;
    let Loaded { title, pages, outline } = loaded;
    if pages.iter().all(|p| p.trim().is_empty()) {
        return Err(format!("no text layer (a scanned PDF?): none of its {} pages has text", pages.len()));
    }
    let pages: Vec<String> = without_running_lines(&pages).iter().map(|p| clean(p)).collect();
    let title = title.filter(|t| !t.is_empty()).unwrap_or_else(|| super::extract::file_stem(path));
    Ok(assemble(path, title, &pages, &outline))
}

struct Loaded {
    title: Option<String>,
    pages: Vec<String>,
    /// (level ≥ 1, title, 1-based page) in outline order.
    outline: Vec<(usize, String, usize)>,
}

fn read(bytes: &[u8]) -> Result<Loaded, String> {
    let doc = match lopdf::Document::load_mem(bytes) {
        Ok(doc) => doc,
        Err(lopdf::Error::InvalidPassword) => return Err("encrypted: it needs a password".into()),
        Err(e) => return Err(format!("not a readable PDF: {e}")),
    };
    // lopdf opens a file it cannot decrypt "successfully", with no pages.
    if doc.is_encrypted() {
        return Err("encrypted: it needs a password".into());
    }
    let numbers: Vec<u32> = doc.get_pages().keys().copied().collect();
    if numbers.is_empty() {
        return Err("no pages".into());
    }
    let pages = numbers.iter().map(|&n| doc.extract_text(&[n]).unwrap_or_default()).collect();
    let outline = doc
        .get_toc()
        .map(|toc| toc.toc.into_iter().map(|e| (e.level.max(1), collapse_spaces(&e.title), e.page)).collect())
        .unwrap_or_default();
    let title = doc
        .trailer
        .get(b"Info")
        .and_then(|info| doc.dereference(info))
        .and_then(|(_, info)| info.as_dict())
        .and_then(|info| info.get(b"Title"))
        .ok()
        .and_then(|t| lopdf::decode_text_string(t).ok())
        .map(|t| collapse_spaces(&t));
    Ok(Loaded { title, pages, outline })
}

/// Step 1 for one page.
fn clean(raw: &str) -> String {
    let mut spelled = String::with_capacity(raw.len());
    for c in raw.chars() {
        match c {
            '\u{FB00}' => spelled.push_str("ff"),
            '\u{FB01}' => spelled.push_str("fi"),
            '\u{FB02}' => spelled.push_str("fl"),
            '\u{FB03}' => spelled.push_str("ffi"),
            '\u{FB04}' => spelled.push_str("ffl"),
            '\u{FB05}' | '\u{FB06}' => spelled.push_str("st"),
            _ => spelled.push(c),
        }
    }
    let words: Vec<&str> = spelled.split_whitespace().collect();
    let mut out = String::with_capacity(spelled.len());
    let mut glue = false;
    for (i, w) in words.iter().enumerate() {
        if !out.is_empty() && !glue {
            out.push(' ');
        }
        // `declara-` `tions`: a letter and a hyphen, then a word starting in lower case.
        let stem = w.strip_suffix('-').filter(|s| s.chars().count() > 1 && s.chars().last().is_some_and(char::is_alphabetic));
        glue = stem.is_some() && words.get(i + 1).and_then(|n| n.chars().next()).is_some_and(char::is_lowercase);
        out.push_str(if glue { stem.unwrap_or(w) } else { w });
    }
    out
}

/// Step 2: every page (its raw text, lines as lopdf gives them) without its running header
/// and footer lines.
fn without_running_lines(pages: &[String]) -> Vec<String> {
    let lines: Vec<Vec<&str>> = pages.iter().map(|p| p.lines().map(str::trim).filter(|l| !l.is_empty()).collect()).collect();
    let key = |line: &str| line.split_whitespace().map(digits_as_one).collect::<Vec<_>>().join(" ");
    let mut firsts: HashMap<String, usize> = HashMap::new();
    let mut lasts: HashMap<String, usize> = HashMap::new();
    for ls in &lines {
        if let (Some(first), Some(last)) = (ls.first(), ls.last()) {
            *firsts.entry(key(first)).or_default() += 1;
            *lasts.entry(key(last)).or_default() += 1;
        }
    }
    let running = |counts: &HashMap<String, usize>, line: &str| {
        let k = key(line);
        let n = counts.get(&k).copied().unwrap_or(0);
        let numbered = k.split(' ').any(|w| w.contains('#') || is_roman(w));
        n >= RUNNING_MIN_PAGES || (n >= 2 && numbered)
    };
    let pages: Vec<String> = lines
        .iter()
        .map(|ls| {
            let mut ls = ls.as_slice();
            // A page that is only its header keeps it.
            if ls.len() > 1 && running(&firsts, ls[0]) {
                ls = &ls[1..];
            }
            if ls.len() > 1 && running(&lasts, ls[ls.len() - 1]) {
                ls = &ls[..ls.len() - 1];
            }
            ls.join("\n")
        })
        .collect();
    without_running_words(&pages)
}

/// Step 2 where the text has no line breaks to go by: the longest run of at most
/// [`RUNNING_MAX_WORDS`] leading (trailing) words that, digits read as one, opens (closes) at
/// least half the pages and [`RUNNING_MIN_PAGES`].
fn without_running_words(pages: &[String]) -> Vec<String> {
    let words: Vec<Vec<&str>> = pages.iter().map(|p| p.split_whitespace().collect()).collect();
    let key = |ws: &[&str]| ws.iter().map(|w| digits_as_one(w)).collect::<Vec<_>>().join(" ");
    let mut prefixes: HashMap<String, usize> = HashMap::new();
    let mut suffixes: HashMap<String, usize> = HashMap::new();
    for ws in &words {
        for k in 1..=RUNNING_MAX_WORDS.min(ws.len()) {
            *prefixes.entry(key(&ws[..k])).or_default() += 1;
            *suffixes.entry(key(&ws[ws.len() - k..])).or_default() += 1;
        }
    }
    let min = pages.len().div_ceil(2).max(RUNNING_MIN_PAGES);
    let shared = |counts: &HashMap<String, usize>, ws: &[&str]| counts.get(&key(ws)).is_some_and(|&n| n >= min);
    pages
        .iter()
        .zip(&words)
        .map(|(page, ws)| {
            let head = (1..=RUNNING_MAX_WORDS.min(ws.len().saturating_sub(1))).rev().find(|&k| shared(&prefixes, &ws[..k])).unwrap_or(0);
            let rest = &ws[head..];
            let tail = (1..=RUNNING_MAX_WORDS.min(rest.len().saturating_sub(1)))
                .rev()
                .find(|&k| shared(&suffixes, &rest[rest.len() - k..]))
                .unwrap_or(0);
            if head == 0 && tail == 0 {
                page.clone() // keeps its lines for the line-end hyphens
            } else {
                rest[..rest.len() - tail].join(" ")
            }
        })
        .collect()
}

/// `i`, `iv`, `xii`: a front-matter page number.
fn is_roman(w: &str) -> bool {
    !w.is_empty() && w.len() <= 5 && w.chars().all(|c| matches!(c, 'i' | 'v' | 'x'))
}

/// A word with each run of ASCII digits read as `#`: page numbers differ, headers don't.
fn digits_as_one(w: &str) -> String {
    let mut out = String::with_capacity(w.len());
    for c in w.chars() {
        if c.is_ascii_digit() {
            if !out.ends_with('#') {
                out.push('#');
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Steps 4 and 5.
fn assemble(path: &str, title: String, pages: &[String], outline: &[(usize, String, usize)]) -> Document {
    let mut text = String::new();
    let mut blocks = Vec::new();
    let mut ranges = Vec::with_capacity(pages.len());
    // The section path: (level, title) of the open outline entries.
    let mut open: Vec<(usize, String)> = Vec::new();
    let section_of = |open: &[(usize, String)]| open.iter().map(|(_, t)| t.clone()).collect::<Vec<_>>();
    let mut entries = outline.iter().peekable();
    for (i, page) in pages.iter().enumerate() {
        let n = i + 1;
        if i > 0 {
            text.push_str("\n\n");
        }
        let base = text.len();
        text.push_str(page);
        // Entries pointing before this page (or at a page with no text) open their sections.
        while let Some((level, t, _)) = entries.next_if(|e| e.2 < n || (e.2 == n && page.is_empty())) {
            open.retain(|(l, _)| l < level);
            open.push((*level, t.clone()));
        }
        let mut at = 0; // bytes of `page` already given to blocks
        while let Some((level, t, _)) = entries.next_if(|e| e.2 == n) {
            let found = (!t.is_empty()).then(|| page[at..].find(t.as_str())).flatten().map(|p| at + p);
            if let Some(p) = found {
                push_text(&mut blocks, &text, base + at, base + p, section_of(&open));
                open.retain(|(l, _)| l < level);
                open.push((*level, t.clone()));
                let level = u8::try_from((*level).min(6)).unwrap_or(6);
                blocks.push(Block {
                    start: base + p,
                    end: base + p + t.len(),
                    kind: BlockKind::Heading(level),
                    section: section_of(&open),
                });
                at = p + t.len();
            } else {
                open.retain(|(l, _)| l < level);
                open.push((*level, t.clone()));
            }
        }
        push_text(&mut blocks, &text, base + at, base + page.len(), section_of(&open));
        ranges.push(base..text.len());
    }
    Document { path: path.to_string(), title, text, blocks, lang: None, source: Source::Pdf { pages: ranges } }
}

/// A text block over `start..end` of `text`, trimmed; nothing when that is blank.
fn push_text(blocks: &mut Vec<Block>, text: &str, start: usize, end: usize, section: Vec<String>) {
    let slice = &text[start..end];
    let lead = slice.len() - slice.trim_start().len();
    let trail = slice.len() - slice.trim_end().len();
    if start + lead < end - trail {
        blocks.push(Block { start: start + lead, end: end - trail, kind: BlockKind::Text, section });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ligatures_and_line_end_hyphens_are_undone() {
        assert_eq!(clean("the \u{FB01}rst declara-\n tions, see A- B and x- y"), "the first declarations, see A- B and x- y");
    }

    #[test]
    fn running_headers_and_footers_are_left_out() {
        let bodies = ["Alpha opens here.", "Beta follows it.", "Gamma is third.", "Delta is next."];
        let mut pages: Vec<String> = (0..4).map(|n| format!("Shared Spec \n{}\n {} ", bodies[n], n + 1)).collect();
        pages.push("7 \nTitle page without the header".into());
        pages.push("8 \nTwo lines".into());
        let out = without_running_lines(&pages);
        assert_eq!(
            out[..5],
            ["Alpha opens here.", "Beta follows it.", "Gamma is third.", "Delta is next.", "Title page without the header"]
        );
        // One line per page (as lopdf gives some files): the shared leading words and the page
        // number go.
        let flat: Vec<String> = bodies.iter().enumerate().map(|(n, b)| format!("Shared MIME-info Database {b} {}", n + 2)).collect();
        assert_eq!(without_running_lines(&flat), bodies);
    }

    #[test]
    fn outline_entries_become_headings_where_their_title_is_found() {
        let pages =
            vec!["Cover".to_string(), "1 Intro Some words. 1.1 Scope More words.".to_string(), String::new(), "Tail words.".to_string()];
        let outline = vec![(1, "1 Intro".to_string(), 2), (2, "1.1 Scope".to_string(), 2), (1, "2 Next".to_string(), 4)];
        let doc = assemble("m.pdf", "M".into(), &pages, &outline);
        assert_eq!(doc.text, "Cover\n\n1 Intro Some words. 1.1 Scope More words.\n\n\n\nTail words.");
        let at = |s: &str| doc.blocks.iter().find(|b| &doc.text[b.start..b.end] == s).map(|b| (b.kind, b.section.join(" > ")));
        assert_eq!(at("1 Intro"), Some((BlockKind::Heading(1), "1 Intro".into())));
        assert_eq!(at("More words."), Some((BlockKind::Text, "1 Intro > 1.1 Scope".into())));
        // Not found on its page: the section still opens there.
        assert_eq!(at("Tail words."), Some((BlockKind::Text, "2 Next".into())));
        assert_eq!(doc.source, Source::Pdf { pages: vec![0..5, 7..48, 50..50, 52..63] });
    }
}
