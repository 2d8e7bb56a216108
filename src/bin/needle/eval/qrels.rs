//! Question sets: `qrels.jsonl` (`{"id","page","needle","q_doc","q_ticket"}`, each question
//! asked twice) and `ood.jsonl` (`{"id","query","kind"}`, queries the site does not answer),
//! and their validation against the site's canonical text.
//! Invariants: a question is only scored once its needle occurs exactly once in the site's
//! canonical text, outside a heading; matching always goes through
//! [`needle::doc::text::normalize_for_match`], the one rule the independent scorer also applies.

use super::EvalError;
use needle::doc::text::{normalize_for_match, BlockKind, Document};
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Question {
    pub id: String,
    /// The page that answers it (relative to the site root); informative, checked loosely.
    #[serde(default)]
    pub page: Option<String>,
    /// A verbatim sentence of the page that answers the question.
    pub needle: String,
    /// The question in the documentation's own words.
    pub q_doc: String,
    /// The question as a user's support ticket would put it.
    pub q_ticket: String,
}

impl Question {
    pub fn needle_norm(&self) -> String {
        normalize_for_match(&self.needle)
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct OodQuery {
    pub id: String,
    pub query: String,
    #[serde(default)]
    pub kind: Option<String>,
}

/// How a query is put: the two phrasings of a question, or an out-of-domain query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phrasing {
    Doc,
    Ticket,
    Ood,
}

impl Phrasing {
    pub fn name(self) -> &'static str {
        match self {
            Phrasing::Doc => "doc",
            Phrasing::Ticket => "ticket",
            Phrasing::Ood => "ood",
        }
    }
}

/// One query to run: in-domain queries point at their question.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// The question's (or OOD query's) id.
    pub id: String,
    pub phrasing: Phrasing,
    pub text: String,
    /// Index into the question list; `None` for out-of-domain queries.
    pub question: Option<usize>,
}

/// Every query of the question set, doc phrasings first then ticket phrasings (each in file
/// order), then the out-of-domain queries.
pub fn queries(questions: &[Question], ood: &[OodQuery]) -> Vec<Query> {
    let mut out = Vec::with_capacity(questions.len() * 2 + ood.len());
    for phrasing in [Phrasing::Doc, Phrasing::Ticket] {
        for (i, q) in questions.iter().enumerate() {
            let text = if phrasing == Phrasing::Doc { &q.q_doc } else { &q.q_ticket };
            out.push(Query { id: q.id.clone(), phrasing, text: text.clone(), question: Some(i) });
        }
    }
    out.extend(ood.iter().map(|o| Query { id: o.id.clone(), phrasing: Phrasing::Ood, text: o.query.clone(), question: None }));
    out
}

fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>, EvalError> {
    let text = std::fs::read_to_string(path).map_err(|e| EvalError::io(path, e))?;
    parse_jsonl(&text, &path.display().to_string())
}

fn parse_jsonl<T: for<'de> Deserialize<'de>>(text: &str, file: &str) -> Result<Vec<T>, EvalError> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let item = serde_json::from_str(line).map_err(|e| EvalError::Invalid(format!("{file}:{}: {e}", n + 1)))?;
        out.push(item);
    }
    Ok(out)
}

/// Reads and checks the shape of a qrels file: ids unique, needles and phrasings non-empty.
pub fn load_questions(path: &Path) -> Result<Vec<Question>, EvalError> {
    let questions: Vec<Question> = read_jsonl(path)?;
    check_questions(&questions, &path.display().to_string())?;
    Ok(questions)
}

#[cfg(test)]
fn parse_questions(text: &str, file: &str) -> Result<Vec<Question>, EvalError> {
    let questions: Vec<Question> = parse_jsonl(text, file)?;
    check_questions(&questions, file)?;
    Ok(questions)
}

fn check_questions(questions: &[Question], file: &str) -> Result<(), EvalError> {
    let mut problems = Vec::new();
    if questions.is_empty() {
        problems.push("no questions".to_string());
    }
    let mut seen = std::collections::HashSet::new();
    for q in questions {
        if !seen.insert(q.id.as_str()) {
            problems.push(format!("{}: the id is used twice", q.id));
        }
        if q.needle_norm().is_empty() {
            problems.push(format!("{}: the needle is empty", q.id));
        }
        if q.q_doc.trim().is_empty() || q.q_ticket.trim().is_empty() {
            problems.push(format!("{}: a phrasing (q_doc or q_ticket) is empty", q.id));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(EvalError::Qrels { file: file.to_string(), problems })
    }
}

pub fn load_ood(path: &Path) -> Result<Vec<OodQuery>, EvalError> {
    let ood: Vec<OodQuery> = read_jsonl(path)?;
    let mut seen = std::collections::HashSet::new();
    let mut problems = Vec::new();
    for o in &ood {
        if !seen.insert(o.id.as_str()) {
            problems.push(format!("{}: the id is used twice", o.id));
        }
        if o.query.trim().is_empty() {
            problems.push(format!("{}: the query is empty", o.id));
        }
    }
    if problems.is_empty() {
        Ok(ood)
    } else {
        Err(EvalError::Qrels { file: path.display().to_string(), problems })
    }
}

/// What validation found that does not stop the evaluation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Validation {
    /// Questions whose `page` names another page than the one holding the needle.
    pub warnings: Vec<String>,
}

/// Checks every needle against the site's canonical text: it must occur exactly once (pages
/// with identical text count once, as the index holds them once) and not only inside a
/// heading. Every problem is reported, each naming its question.
pub fn validate(questions: &[Question], docs: &[Document], file: &str) -> Result<Validation, EvalError> {
    let pages = distinct_pages(docs);
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
    for q in questions {
        let needle = q.needle_norm();
        let mut found: Vec<(&DistinctPage, usize)> = Vec::new();
        for page in &pages {
            let n = count_overlapping(&page.norm, &needle);
            if n > 0 {
                found.push((page, n));
            }
        }
        let total: usize = found.iter().map(|(_, n)| n).sum();
        match found.as_slice() {
            [] => problems.push(format!("{}: the needle occurs nowhere in the site's canonical text", q.id)),
            [(page, 1)] => {
                if page.in_heading(&needle) {
                    problems.push(format!(
                        "{}: the needle occurs only inside a heading of {}; a heading is never quoted alone, choose a sentence of the body",
                        q.id, page.paths[0]
                    ));
                } else if let Some(want) = &q.page {
                    if !page.paths.iter().any(|p| p == want) {
                        warnings.push(format!("{}: the needle is on {}, the question names {want}", q.id, page.paths.join(" = ")));
                    }
                }
            }
            _ => {
                let places: Vec<String> = found.iter().map(|(p, n)| format!("{} ×{n}", p.paths[0])).collect();
                problems.push(format!("{}: the needle occurs {total} times ({}); it must name exactly one place", q.id, places.join(", ")));
            }
        }
    }
    if problems.is_empty() {
        Ok(Validation { warnings })
    } else {
        Err(EvalError::Qrels { file: file.to_string(), problems })
    }
}

struct DistinctPage<'a> {
    /// Every path with this text (mdBook's index.html repeats the first chapter).
    paths: Vec<&'a str>,
    doc: &'a Document,
    norm: String,
}

impl DistinctPage<'_> {
    /// The one occurrence lies inside a heading block. Blocks are separated by whitespace in
    /// the canonical text, so a heading's normalised text is a substring of the page's: if it
    /// holds the needle, that is the page's only occurrence.
    fn in_heading(&self, needle: &str) -> bool {
        self.doc
            .blocks
            .iter()
            .filter(|b| matches!(b.kind, BlockKind::Heading(_)))
            .any(|b| self.doc.text.get(b.start..b.end).is_some_and(|t| normalize_for_match(t).contains(needle)))
    }
}

fn distinct_pages(docs: &[Document]) -> Vec<DistinctPage<'_>> {
    let mut pages: Vec<DistinctPage> = Vec::new();
    let mut by_text: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for doc in docs {
        match by_text.get(doc.text.as_str()) {
            Some(&i) => {
                // Name the page as the index does: a chapter rather than the index.html copying it.
                let paths = &mut pages[i].paths;
                if needle::doc::extract::is_index_page(paths[0]) && !needle::doc::extract::is_index_page(&doc.path) {
                    paths.insert(0, &doc.path);
                } else {
                    paths.push(&doc.path);
                }
            }
            None => {
                by_text.insert(&doc.text, pages.len());
                pages.push(DistinctPage { paths: vec![&doc.path], doc, norm: normalize_for_match(&doc.text) });
            }
        }
    }
    pages
}

/// Occurrences of `needle` in `hay`, overlapping ones included.
fn count_overlapping(hay: &str, needle: &str) -> usize {
    if needle.is_empty() {
        return 0;
    }
    let mut count = 0;
    let mut from = 0;
    while let Some(i) = hay.get(from..).and_then(|h| h.find(needle)) {
        count += 1;
        let at = from + i;
        // Step one char past the match's start.
        from = at + hay[at..].chars().next().map_or(1, char::len_utf8);
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use needle::doc::text::Block;

    fn doc(path: &str, parts: &[(&str, BlockKind)]) -> Document {
        let mut text = String::new();
        let mut blocks = Vec::new();
        for (t, kind) in parts {
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            let start = text.len();
            text.push_str(t);
            blocks.push(Block { start, end: text.len(), kind: *kind, section: vec![] });
        }
        Document { path: path.into(), title: path.into(), text, blocks, lang: None, source: Default::default() }
    }

    fn q(id: &str, needle: &str) -> Question {
        Question { id: id.into(), page: None, needle: needle.into(), q_doc: "d?".into(), q_ticket: "t?".into() }
    }

    fn site() -> Vec<Document> {
        vec![
            doc("a.html", &[("Drop Check", BlockKind::Heading(1)), ("The  checker\nis conservative.", BlockKind::Text)]),
            doc("b.html", &[("Twice said", BlockKind::Text), ("twice said", BlockKind::Code)]),
            // index.html repeats a chapter: one place, not two.
            doc("index.html", &[("Drop Check", BlockKind::Heading(1)), ("The  checker\nis conservative.", BlockKind::Text)]),
        ]
    }

    #[test]
    fn a_needle_found_once_in_the_body_is_accepted_across_whitespace_and_case() {
        let v = validate(&[q("ok", "the CHECKER is conservative.")], &site(), "q.jsonl").unwrap();
        assert!(v.warnings.is_empty());
    }

    #[test]
    fn every_bad_needle_is_rejected_naming_its_question() {
        let qs = [q("nowhere", "not in the book"), q("twice", "twice said"), q("heading", "drop check"), q("fine", "is conservative")];
        let err = validate(&qs, &site(), "q.jsonl").unwrap_err();
        let EvalError::Qrels { problems, .. } = &err else { panic!("{err}") };
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].starts_with("nowhere: the needle occurs nowhere"));
        assert!(problems[1].starts_with("twice: the needle occurs 2 times (b.html ×2)"));
        assert!(problems[2].starts_with("heading: the needle occurs only inside a heading of a.html"));
        assert!(err.to_string().contains("q.jsonl"));
    }

    #[test]
    fn a_needle_spanning_heading_and_body_is_not_only_in_a_heading() {
        validate(&[q("span", "check the checker")], &site(), "q").unwrap();
    }

    #[test]
    fn a_wrong_page_is_a_warning_not_a_rejection() {
        let mut question = q("moved", "is conservative");
        question.page = Some("c.html".into());
        let v = validate(&[question.clone()], &site(), "q").unwrap();
        assert_eq!(v.warnings, vec!["moved: the needle is on a.html = index.html, the question names c.html".to_string()]);
        let mut reordered = site();
        reordered.swap(0, 2);
        let v = validate(
            &[q("moved", "is conservative")].map(|mut x| {
                x.page = Some("c.html".into());
                x
            }),
            &reordered,
            "q",
        )
        .unwrap();
        assert_eq!(
            v.warnings[0], "moved: the needle is on a.html = index.html, the question names c.html",
            "a chapter is named before index.html"
        );
        question.page = Some("index.html".into());
        assert!(validate(&[question], &site(), "q").unwrap().warnings.is_empty());
    }

    #[test]
    fn overlapping_occurrences_count() {
        assert_eq!(count_overlapping("aaa", "aa"), 2);
        assert_eq!(count_overlapping("héhé", "hé"), 2);
        assert_eq!(count_overlapping("abc", ""), 0);
    }

    #[test]
    fn qrels_parse_with_line_numbers_and_duplicate_ids_are_named() {
        let ok = "{\"id\":\"a\",\"needle\":\"x\",\"q_doc\":\"d\",\"q_ticket\":\"t\"}\n\n";
        assert_eq!(parse_questions(ok, "f").unwrap().len(), 1);
        let err = parse_questions("{\"id\":\"a\"}", "f.jsonl").unwrap_err().to_string();
        assert!(err.starts_with("f.jsonl:1: missing field"), "{err}");
        let dup = format!("{ok}{ok}");
        let err = parse_questions(&dup, "f").unwrap_err().to_string();
        assert!(err.contains("a: the id is used twice"), "{err}");
    }

    #[test]
    fn queries_are_doc_then_ticket_then_ood_with_stable_keys() {
        let qs = [q("q1", "n"), q("q2", "m")];
        let ood = [OodQuery { id: "o1".into(), query: "x".into(), kind: None }];
        let all = queries(&qs, &ood);
        let keys: Vec<(&str, Phrasing)> = all.iter().map(|q| (q.id.as_str(), q.phrasing)).collect();
        assert_eq!(
            keys,
            [("q1", Phrasing::Doc), ("q2", Phrasing::Doc), ("q1", Phrasing::Ticket), ("q2", Phrasing::Ticket), ("o1", Phrasing::Ood)]
        );
        assert_eq!(all[3].question, Some(1));
        assert_eq!(all[4].question, None);
    }
}
