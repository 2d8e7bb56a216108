//! Arbitrary text → a well-formed `Document` → `chunk_document` for every strategy A–F.
//!
//! Input layout: 4 config bytes, then UTF-8 (lossy) text split at NUL bytes into segments.
//! The first segment is the page title; each other segment is a block: `#`…`######` then the
//! text makes a heading of that level, a leading `` ` `` a code block, anything else a text
//! block. Blocks are trimmed, empty ones dropped, joined by "\n\n" (the extractor's contract),
//! and get the section path of the open headings, as the extractor builds it.
//!
//! Config bytes: target_chars = 1 + b0 (1–256), overlap_chars = b1 % 64, max_tokens =
//! 8 + b2 % 192, token counter = b3 & 1 (0: chars / 2 + 2, the unit tests' stand-in; 1:
//! whitespace-separated words + 2).
//!
//! Asserts every invariant of `needle::doc::chunk::invariants::check` (the checker the unit and
//! property tests use, built for this crate by needle's `invariants` feature): UTF-16 `from..to` slices the text to
//! exactly `content`; contents are non-empty, trimmed and never only heading text; every chunk
//! fits `max_tokens`; `text = header + "\n" + content` (headers only for E and F); sections
//! are blocks' sections; C/E respect the target; chunks are in document order and overlap only
//! for overlap strategies; no non-heading character is lost (A/B: no heading character before
//! the last content either); C–F cut inside a block only when that block does not fit; nothing
//! dropped; determinism.
#![no_main]

use libfuzzer_sys::fuzz_target;
use needle::doc::chunk::invariants::check;
use needle::doc::chunk::{chunk_document, ChunkConfig, Strategy};
use needle::doc::text::{Block, BlockKind, Document};

use BlockKind::Heading;

fn chars_count(s: &str) -> usize {
    s.chars().count() / 2 + 2
}

fn words_count(s: &str) -> usize {
    s.split_whitespace().count() + 2
}

fn document(data: &str) -> Document {
    let mut segments = data.split('\0');
    let title = segments.next().unwrap_or_default().to_string();
    let mut text = String::new();
    let mut blocks = Vec::new();
    let mut open: Vec<(u8, String)> = Vec::new();
    for seg in segments {
        let hashes = seg.bytes().take_while(|&b| b == b'#').count();
        let (kind, body) = if (1..=6).contains(&hashes) {
            (Heading(hashes as u8), &seg[hashes..])
        } else if let Some(code) = seg.strip_prefix('`') {
            (BlockKind::Code, code)
        } else {
            (BlockKind::Text, seg)
        };
        let body = body.trim();
        if body.is_empty() {
            continue;
        }
        if let Heading(n) = kind {
            open.retain(|(l, _)| *l < n);
            open.push((n, body.replace('\n', " ")));
        }
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        let start = text.len();
        text.push_str(body);
        blocks.push(Block { start, end: text.len(), kind, section: open.iter().map(|(_, s)| s.clone()).collect() });
    }
    Document { path: "fuzz.html".into(), title, text, blocks, lang: None, source: Default::default() }
}

fuzz_target!(|data: &[u8]| {
    let Some((cfg_bytes, rest)) = data.split_first_chunk::<4>() else { return };
    let d = document(&String::from_utf8_lossy(rest));
    let count: fn(&str) -> usize = if cfg_bytes[3] & 1 == 0 { chars_count } else { words_count };
    for strategy in Strategy::ALL {
        let c = ChunkConfig {
            strategy,
            target_chars: 1 + cfg_bytes[0] as usize,
            overlap_chars: (cfg_bytes[1] % 64) as usize,
            max_tokens: 8 + (cfg_bytes[2] % 192) as usize,
        };
        let (chunks, stats) = chunk_document(&d, &c, &mut { count });
        if let Err(e) = check(&d, &c, &chunks, &stats, &mut { count }) {
            panic!("{e}\nconfig {c:?}\ndoc {d:?}\nchunks {chunks:#?}");
        }
        assert!((chunks.clone(), stats) == chunk_document(&d, &c, &mut { count }), "{strategy}: not deterministic");
    }
});
