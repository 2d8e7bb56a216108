//! Citations, the prompt, and the reverse step from `[n]` to links.
//! Invariants: a citation quotes the chunk's `content` (never the embedded header) and links
//! to its range by the document's own locator (`page#char=from,to` in UTF-16 units of the
//! page's canonical text, `#page=`, `#t=`, `#row=`: [`crate::doc::locator`]); the prompt hands the
//! model numbered sources without URLs, so the model can only write `[n]`, and needle attaches
//! the documents afterwards.

use crate::doc::locator::Locator;
use crate::query::index::{ChunkEntry, PageEntry};
use crate::query::search::{Entries, SearchResult};
use serde::{Deserialize, Serialize};

pub const INSTRUCTIONS: &str =
    "Answer using ONLY the numbered sources below. Cite every claim as [n]. If the sources do not contain the answer, say so and stop.";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Citation {
    /// 1-based: what the model writes as `[n]`.
    pub index: usize,
    pub document_id: String,
    pub document_name: String,
    /// `text`, `pdf`, `media` or `csv` ([`Locator::kind`]).
    pub kind: String,
    pub locator_label: String,
    /// The cited range's own URL ([`chunk_url`]).
    pub url: String,
    pub quote: String,
    pub cosine_distance: f32,
}

/// `page#char=from,to`.
pub fn char_url(page: &str, from: usize, to: usize) -> String {
    format!("{page}#{}", Locator::Char.fragment(from, to))
}

/// The URL that cites a chunk, by its document's standard: `page.html#char=from,to`,
/// `file.pdf#page=N`, `clip.webm#t=start,end`, `table.csv#row=a-b` ([`crate::doc::locator`]).
pub fn chunk_url(page: &PageEntry, c: &ChunkEntry) -> String {
    format!("{}#{}", page.path, c.locator.fragment(c.from as usize, c.to as usize))
}

/// Where a reader following the citation lands: the cited URL itself, except for a media file
/// played on a page (`host`), where it is that page at `#media=<file>&t=start,end`, which the
/// landing script reads to seek the page's player and show the cue.
pub fn chunk_link(page: &PageEntry, c: &ChunkEntry) -> String {
    match c.locator {
        Locator::Time { .. } if !page.host.is_empty() => {
            format!("{}#media={}&{}", page.host, encode_component(&page.path), c.locator.fragment(c.from as usize, c.to as usize))
        }
        _ => chunk_url(page, c),
    }
}

/// What names the place in a document for a reader: the section, and the page, time range or
/// rows (`Install > Linux, page 4`); `chars a–b` when a page of text has no section.
pub fn locator_label(c: &ChunkEntry) -> String {
    match (c.section.is_empty(), c.locator.label()) {
        (true, None) => format!("chars {}–{}", c.from, c.to),
        (false, None) => c.section.clone(),
        (true, Some(l)) => l,
        (false, Some(l)) => format!("{}, {l}", c.section),
    }
}

/// Percent-encodes what would end or split a fragment parameter (`%`, `&`, `#`, `=`, `+`,
/// whitespace); `decodeURIComponent` reverses it.
fn encode_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '%' | '&' | '#' | '=' | '+') || c.is_whitespace() {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// One citation per hit kept by the gate, in gate order.
pub fn citations(index: &(impl Entries + ?Sized), result: &SearchResult) -> Vec<Citation> {
    result
        .answer
        .iter()
        .filter_map(|&i| result.hits.get(i))
        .filter_map(|hit| Some((hit, index.entry(hit.chunk)?)))
        .enumerate()
        .map(|(n, (hit, (page, c)))| Citation {
            index: n + 1,
            document_id: page.path.clone(),
            document_name: page.title.clone(),
            kind: c.locator.kind().to_string(),
            locator_label: locator_label(c),
            url: chunk_url(page, c),
            quote: hit.content.clone(),
            cosine_distance: hit.distance,
        })
        .collect()
}

/// The prompt for any LLM: instructions, numbered sources (name, locator, quote), question.
pub fn build_prompt(question: &str, citations: &[Citation]) -> String {
    let mut p = String::from(INSTRUCTIONS);
    p.push_str("\n\n");
    if citations.is_empty() {
        p.push_str("(no sources)\n\n");
    }
    for c in citations {
        p.push_str(&format!("[{}] {} — {}\n{}\n\n", c.index, c.document_name, c.locator_label, c.quote));
    }
    p.push_str("Question: ");
    p.push_str(question.trim());
    p.push('\n');
    p
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LinkedAnswer {
    /// The answer with every valid `[n]` turned into a Markdown link `[n](url)`.
    pub markdown: String,
    /// Source numbers cited that exist, in order of first use.
    pub cited: Vec<usize>,
    /// `[n]` markers that name no source: the model invented them.
    pub unknown: Vec<usize>,
}

/// Turns the model's `[n]` markers (also `[n, m]` and `[n][m]`) into links to the cited
/// ranges, and flags numbers that name no source. Brackets that are not citations (`[x]`,
/// `[]`, numbers with other text) are left alone.
pub fn link_answer(answer: &str, citations: &[Citation]) -> LinkedAnswer {
    let mut out = String::with_capacity(answer.len());
    let (mut cited, mut unknown) = (Vec::new(), Vec::new());
    let mut rest = answer;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else {
            out.push_str(&rest[open..]);
            rest = "";
            break;
        };
        let inner = &after[..close];
        let numbers: Option<Vec<usize>> = inner.split(',').map(|p| p.trim().parse::<usize>().ok()).collect();
        match numbers.filter(|n| !n.is_empty()) {
            Some(numbers) => {
                let links: Vec<String> = numbers
                    .iter()
                    .map(|&n| match citations.iter().find(|c| c.index == n) {
                        Some(c) => {
                            if !cited.contains(&n) {
                                cited.push(n);
                            }
                            format!("[{n}]({})", c.url)
                        }
                        None => {
                            if !unknown.contains(&n) {
                                unknown.push(n);
                            }
                            format!("[{n}?]")
                        }
                    })
                    .collect();
                out.push_str(&links.join(" "));
            }
            None => {
                out.push('[');
                out.push_str(inner);
                out.push(']');
            }
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    LinkedAnswer { markdown: out, cited, unknown }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(n: usize) -> Citation {
        Citation {
            index: n,
            document_id: format!("p{n}.html"),
            document_name: format!("Page {n}"),
            kind: "text".into(),
            locator_label: "Sec".into(),
            url: char_url(&format!("p{n}.html"), 10 * n, 10 * n + 5),
            quote: format!("quote {n}"),
            cosine_distance: 0.3,
        }
    }

    #[test]
    fn markers_become_links_and_invented_ones_are_flagged() {
        let l = link_answer("A [1]. B [2, 7]. C [x] and [] and [3][1].", &[c(1), c(2), c(3)]);
        assert_eq!(
            l.markdown,
            "A [1](p1.html#char=10,15). B [2](p2.html#char=20,25) [7?]. C [x] and [] and [3](p3.html#char=30,35)[1](p1.html#char=10,15)."
        );
        assert_eq!(l.cited, vec![1, 2, 3]);
        assert_eq!(l.unknown, vec![7]);
    }

    #[test]
    fn an_unclosed_bracket_is_kept_verbatim() {
        assert_eq!(link_answer("see [1", &[c(1)]).markdown, "see [1");
    }

    #[test]
    fn the_prompt_numbers_sources_and_carries_no_urls() {
        let p = build_prompt(" why? ", &[c(1), c(2)]);
        assert!(p.starts_with(INSTRUCTIONS));
        assert!(p.contains("[1] Page 1 — Sec\nquote 1\n\n[2] Page 2 — Sec\nquote 2\n\nQuestion: why?\n"));
        assert!(!p.contains("#char="));
    }
}
