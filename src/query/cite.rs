//! Citations, the prompt, and the reverse step from `[n]` to links.
//! Invariants: a citation quotes the chunk's `content` (never the embedded header) and links
//! to `page#char=from,to` in UTF-16 units of the page's canonical text; the prompt hands the
//! model numbered sources without URLs, so the model can only write `[n]`, and needle attaches
//! the documents afterwards.

use crate::query::index::Index;
use crate::query::search::SearchResult;
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
    pub locator_label: String,
    pub url: String,
    pub quote: String,
    pub cosine_distance: f32,
}

/// `page#char=from,to`.
pub fn char_url(page: &str, from: usize, to: usize) -> String {
    format!("{page}#char={from},{to}")
}

/// One citation per hit kept by the gate, in gate order.
pub fn citations(index: &Index, result: &SearchResult) -> Vec<Citation> {
    result
        .answer
        .iter()
        .filter_map(|&i| result.hits.get(i))
        .enumerate()
        .map(|(n, hit)| {
            let chunk = index.header.chunks.get(hit.chunk);
            let title =
                chunk.and_then(|c| index.header.pages.get(c.page as usize)).map(|p| p.title.clone()).unwrap_or_else(|| hit.page.clone());
            let section = chunk.map(|c| c.section.clone()).unwrap_or_default();
            Citation {
                index: n + 1,
                document_id: hit.page.clone(),
                document_name: title,
                locator_label: if section.is_empty() { format!("chars {}–{}", hit.from, hit.to) } else { section },
                url: char_url(&hit.page, hit.from, hit.to),
                quote: hit.content.clone(),
                cosine_distance: hit.distance,
            }
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
