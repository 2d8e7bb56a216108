//! Arbitrary bytes as a page: HTML, Markdown and plain text, through the public extraction API;
//! and as a PDF, a CSV table and WebVTT captions, which must extract or fail with a reason and
//! chunk with exact offsets and a locator of their kind.
//!
//! Asserts, for every page that extracts (rule of `src/doc/extract.rs`, steps 3–9):
//! - no panic, whatever the bytes (binary, bad encodings, BOMs, deep nesting);
//! - every block's byte range is non-empty, in bounds and on char boundaries of the canonical
//!   text, and converts to UTF-16 offsets that slice back to the same string;
//! - the blocks tile the text: the first starts at 0, the last ends at its end, and consecutive
//!   blocks are separated by exactly "\n\n" (rule step 7);
//! - every block is trimmed of the browser's whitespace; a Text or Heading block holds no
//!   "\n\n"; heading levels are 1–6; a heading's section path ends with its own text (step 8);
//!   plain text has no sections;
//! - the page chunks (default config, strategy E) into chunks whose UTF-16 range slices the
//!   canonical text to exactly their content.
//!
//! An input starting with `sel:` carries a user content selector up to its first NUL byte
//! (a NUL also ends the page part, which is otherwise refused as binary): arbitrary CSS must be
//! refused with an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use needle::doc::chunk::{self, ChunkConfig};
use needle::doc::extract::{extract_file, ExtractOptions, Extracted, SourceFile, SourceKind};
use needle::doc::locator::Source;
use needle::doc::media;
use needle::doc::text::{self, BlockKind, Document};

fn is_browser_ws(c: char) -> bool {
    c.is_ascii_whitespace()
}

fn check(doc: &Document, kind: SourceKind) {
    let t = &doc.text;
    assert!(!doc.blocks.is_empty(), "a page has blocks");
    assert!(!t.is_empty(), "a page has text");
    assert_eq!(doc.blocks[0].start, 0, "the first block starts the text");
    assert_eq!(doc.blocks.last().map(|b| b.end), Some(t.len()), "the last block ends the text");
    for (i, b) in doc.blocks.iter().enumerate() {
        assert!(b.start < b.end && b.end <= t.len(), "block {i} {}..{} out of 0..{}", b.start, b.end, t.len());
        assert!(t.is_char_boundary(b.start) && t.is_char_boundary(b.end), "block {i} off char boundaries");
        let s = &t[b.start..b.end];
        let (from, to) = (text::byte_to_utf16(t, b.start).unwrap(), text::byte_to_utf16(t, b.end).unwrap());
        assert_eq!(text::slice_utf16(t, from, to), Some(s), "block {i}: UTF-16 round trip");
        assert_eq!(s.trim_matches(is_browser_ws), s, "block {i} untrimmed: {s:?}");
        match b.kind {
            BlockKind::Heading(n) => {
                assert!((1..=6).contains(&n), "heading level {n}");
                assert!(!s.contains("\n\n"), "heading {i} holds a blank line");
                assert_eq!(b.section.last().map(String::as_str), Some(s.replace('\n', " ").as_str()), "heading {i} section");
            }
            BlockKind::Text => assert!(!s.contains("\n\n"), "text block {i} holds a blank line: {s:?}"),
            BlockKind::Code => {}
        }
        if kind == SourceKind::Text {
            assert!(b.section.is_empty() && b.kind == BlockKind::Text, "plain text block {i}");
        }
        if let Some(next) = doc.blocks.get(i + 1) {
            assert_eq!(t.get(b.end..next.start), Some("\n\n"), "blocks {i} and {} not separated by a blank line", i + 1);
        }
    }
    check_chunks(doc);
}

/// Extraction feeds the chunker: its offsets must hold on real extracted documents too, and
/// every chunk of a PDF, media or table document is located by its kind's units.
fn check_chunks(doc: &Document) {
    let t = &doc.text;
    let mut count = |s: &str| s.chars().count() / 2 + 2;
    let (chunks, stats) = chunk::chunk_document(doc, &ChunkConfig::default(), &mut count);
    assert_eq!(stats.chunks, chunks.len());
    for (i, c) in chunks.iter().enumerate() {
        assert_eq!(text::slice_utf16(t, c.from, c.to), Some(c.content.as_str()), "chunk {i} {}..{}", c.from, c.to);
        assert_eq!(c.text.get(c.header_len..), Some(c.content.as_str()), "chunk {i}: text = header + content");
        let want = match doc.source {
            Source::Page => "text",
            Source::Pdf { .. } => "pdf",
            Source::Media { .. } => "media",
            Source::Table { .. } => "csv",
        };
        assert_eq!(c.locator.kind(), want, "chunk {i}: {:?}", c.locator);
    }
}

fuzz_target!(|data: &[u8]| {
    let mut opts = ExtractOptions::default();
    let mut page = data;
    if let Some(rest) = data.strip_prefix(b"sel:") {
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        opts.selector = Some(String::from_utf8_lossy(&rest[..end]).into_owned());
        page = rest.get(end + 1..).unwrap_or_default();
    }
    for (kind, name) in [(SourceKind::Html, "page.html"), (SourceKind::Markdown, "page.md"), (SourceKind::Text, "page.txt")] {
        let src = SourceFile { rel_path: format!("fuzz/{name}"), abs_path: name.into(), kind };
        match extract_file(&src, page, &opts) {
            Ok(Extracted::Page(doc)) => {
                assert_eq!(doc.path, src.rel_path);
                check(&doc, kind);
            }
            Ok(Extracted::Skipped(reason)) => assert!(!reason.is_empty()),
            Err(e) => {
                let _ = e.to_string();
            }
        }
    }
    for (kind, name) in [(SourceKind::Pdf, "doc.pdf"), (SourceKind::Csv, "table.csv")] {
        let src = SourceFile { rel_path: format!("fuzz/{name}"), abs_path: name.into(), kind };
        match extract_file(&src, page, &opts) {
            Ok(Extracted::Page(doc)) => check_chunks(&doc),
            Ok(Extracted::Skipped(reason)) => assert!(!reason.is_empty()),
            Err(e) => assert!(e.to_string().starts_with(&src.rel_path), "{e}"),
        }
    }
    if let Ok(cues) = std::str::from_utf8(page).map_err(|_| String::new()).and_then(media::parse_vtt) {
        check_chunks(&media::media_document("fuzz/clip.webm", "clip", &cues, None, &[]));
    }
});
