//! Where a citation points inside a document: the locator of each kind of document a site
//! ships, and the units (PDF pages, caption cues, table rows) a document's canonical text is
//! made of.
//!
//! Every document has one canonical text and every chunk a `from..to` in it, whatever its kind
//! (`canonical[from..to] == content` holds for all of them). The locator is what a reader's
//! link can point at for that kind:
//!
//! | kind    | document                        | link                          | standard               |
//! |---------|---------------------------------|-------------------------------|------------------------|
//! | `text`  | HTML, Markdown, text page       | `page.html#char=from,to`      | needle's own, in UTF-16 |
//! | `pdf`   | a PDF, its pages' texts joined  | `file.pdf#page=N`             | PDF Open Parameters    |
//! | `media` | the caption cues of a video/audio | `clip.webm#t=start,end`     | W3C Media Fragments    |
//! | `csv`   | a CSV's data records, one a line | `table.csv#row=a-b`          | RFC 7111               |
//!
//! A PDF chunk never spans a page break (the chunker cuts each page on its own), so it has one
//! page; a media chunk runs from its first cue's start to its last cue's end; a CSV chunk names
//! its first and last record by RFC 7111's row number, in which the header line is row 1.

use serde::{Deserialize, Serialize};
use std::ops::Range;

/// How a chunk is cited, beyond its `from..to` in the canonical text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Locator {
    /// A page of text: `#char=from,to`.
    #[default]
    Char,
    /// A PDF page, 1-based.
    Page(u32),
    /// A time range of a media file, in milliseconds.
    Time { start_ms: u32, end_ms: u32 },
    /// RFC 7111 rows of a CSV file (the header line is row 1), inclusive.
    Rows { first: u32, last: u32 },
}

impl Locator {
    /// The document kind this locator belongs to: `text`, `pdf`, `media` or `csv`.
    pub fn kind(&self) -> &'static str {
        match self {
            Locator::Char => "text",
            Locator::Page(_) => "pdf",
            Locator::Time { .. } => "media",
            Locator::Rows { .. } => "csv",
        }
    }

    /// The URL fragment (without `#`) that cites a chunk at `from..to`.
    pub fn fragment(&self, from: usize, to: usize) -> String {
        match *self {
            Locator::Char => format!("char={from},{to}"),
            Locator::Page(n) => format!("page={n}"),
            Locator::Time { start_ms, end_ms } => format!("t={},{}", seconds(start_ms), seconds(end_ms)),
            Locator::Rows { first, last } if first == last => format!("row={first}"),
            Locator::Rows { first, last } => format!("row={first}-{last}"),
        }
    }

    /// What a reader is shown for it: `page 12`, `1:02.5–1:10`, `rows 5–9`; `None` for text
    /// (a page's section names the place better than character offsets).
    pub fn label(&self) -> Option<String> {
        match *self {
            Locator::Char => None,
            Locator::Page(n) => Some(format!("page {n}")),
            Locator::Time { start_ms, end_ms } => Some(format!("{}–{}", clock(start_ms), clock(end_ms))),
            Locator::Rows { first, last } if first == last => Some(format!("row {first}")),
            Locator::Rows { first, last } => Some(format!("rows {first}–{last}")),
        }
    }
}

/// Milliseconds as Media Fragments' NPT seconds: `12`, `12.5`, `12.345`.
pub fn seconds(ms: u32) -> String {
    let (s, frac) = (ms / 1000, ms % 1000);
    if frac == 0 {
        return s.to_string();
    }
    let f = format!("{frac:03}");
    format!("{s}.{}", f.trim_end_matches('0'))
}

/// Milliseconds as a player shows them: `0:12`, `1:02.5`, `1:02:03`.
pub fn clock(ms: u32) -> String {
    let total = ms / 1000;
    let (h, m, s) = (total / 3600, total / 60 % 60, total % 60);
    let tenths = ms % 1000 / 100;
    let frac = if tenths == 0 { String::new() } else { format!(".{tenths}") };
    if h > 0 {
        format!("{h}:{m:02}:{s:02}{frac}")
    } else {
        format!("{m}:{s:02}{frac}")
    }
}

/// What a document's canonical text is made of. Ranges are byte ranges of `Document::text`,
/// in order and non-overlapping.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Source {
    /// A page of text (HTML, Markdown, `.txt`).
    #[default]
    Page,
    /// A PDF: the range of each page's text, page 1 first (an empty range for a page with no
    /// text, such as a scanned one).
    Pdf { pages: Vec<Range<usize>> },
    /// Caption cues of a media file; `host` is the page whose player shows it, if any.
    Media { cues: Vec<Cue>, host: Option<String> },
    /// A CSV's data records, one line of the text each, with their RFC 7111 row numbers.
    Table { rows: Vec<(Range<usize>, u32)> },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Cue {
    pub range: Range<usize>,
    pub start_ms: u32,
    pub end_ms: u32,
}

impl Source {
    /// The locator of the text at bytes `start..end` (a chunk's content). A PDF range is taken
    /// to lie in one page (the chunker guarantees it); a media or table range covers every cue
    /// or row it touches. Falls back to [`Locator::Char`] when it touches none.
    ///
    /// Units are in text order and disjoint, so the ones a range touches are found by binary
    /// search: a table of 100,000 rows costs a chunk microseconds, not a scan.
    pub fn locate(&self, start: usize, end: usize) -> Locator {
        /// The units of `units` (each with its range) that `start..end` touches.
        fn touched<T>(units: &[T], range: impl Fn(&T) -> &Range<usize>, start: usize, end: usize) -> &[T] {
            let first = units.partition_point(|u| range(u).end <= start);
            let rest = &units[first..];
            &rest[..rest.partition_point(|u| range(u).start < end)]
        }
        match self {
            Source::Page => Locator::Char,
            Source::Pdf { pages } => pages
                .iter()
                .position(|r| r.start <= start && start < r.end.max(r.start + 1))
                .map_or(Locator::Char, |i| Locator::Page(i as u32 + 1)),
            Source::Media { cues, .. } => {
                let hit = touched(cues, |c| &c.range, start, end);
                let (Some(lo), Some(hi)) = (hit.iter().map(|c| c.start_ms).min(), hit.iter().map(|c| c.end_ms).max()) else {
                    return Locator::Char;
                };
                Locator::Time { start_ms: lo, end_ms: hi }
            }
            Source::Table { rows } => match touched(rows, |(r, _)| r, start, end) {
                [] => Locator::Char,
                hit => Locator::Rows { first: hit[0].1, last: hit[hit.len() - 1].1 },
            },
        }
    }

    /// The page whose player plays a media document.
    pub fn host(&self) -> Option<&str> {
        match self {
            Source::Media { host, .. } => host.as_deref(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_follow_each_standard() {
        assert_eq!(Locator::Char.fragment(3, 9), "char=3,9");
        assert_eq!(Locator::Page(12).fragment(0, 5), "page=12");
        assert_eq!(Locator::Time { start_ms: 12_500, end_ms: 18_000 }.fragment(0, 1), "t=12.5,18");
        assert_eq!(Locator::Time { start_ms: 62_345, end_ms: 70_010 }.fragment(0, 1), "t=62.345,70.01");
        assert_eq!(Locator::Rows { first: 5, last: 9 }.fragment(0, 1), "row=5-9");
        assert_eq!(Locator::Rows { first: 4, last: 4 }.fragment(0, 1), "row=4");
    }

    #[test]
    fn labels_read_as_a_player_and_a_viewer_show_them() {
        assert_eq!(Locator::Char.label(), None);
        assert_eq!(Locator::Time { start_ms: 62_500, end_ms: 70_000 }.label().as_deref(), Some("1:02.5–1:10"));
        assert_eq!(Locator::Time { start_ms: 3_723_000, end_ms: 3_724_000 }.label().as_deref(), Some("1:02:03–1:02:04"));
        assert_eq!(Locator::Rows { first: 5, last: 9 }.label().as_deref(), Some("rows 5–9"));
    }

    #[test]
    fn a_range_is_located_by_the_units_it_touches() {
        let media = Source::Media {
            cues: vec![
                Cue { range: 0..5, start_ms: 1_000, end_ms: 2_000 },
                Cue { range: 7..12, start_ms: 2_000, end_ms: 4_000 },
                Cue { range: 14..20, start_ms: 4_500, end_ms: 6_000 },
            ],
            host: None,
        };
        assert_eq!(media.locate(3, 10), Locator::Time { start_ms: 1_000, end_ms: 4_000 });
        assert_eq!(media.locate(14, 20), Locator::Time { start_ms: 4_500, end_ms: 6_000 });
        let table = Source::Table { rows: vec![(0..4, 2), (5..9, 3), (10..14, 5)] };
        assert_eq!(table.locate(5, 14), Locator::Rows { first: 3, last: 5 });
        let pdf = Source::Pdf { pages: vec![0..10, 12..12, 14..30] };
        assert_eq!(pdf.locate(14, 20), Locator::Page(3));
        assert_eq!(Source::Page.locate(0, 3), Locator::Char);
    }
}
