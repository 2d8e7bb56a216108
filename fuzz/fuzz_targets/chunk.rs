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
//! Asserts every invariant of `check` in `src/chunk.rs` (the unit and property tests' checker,
//! copied here because it is private to the test module): UTF-16 `from..to` slices the text to
//! exactly `content`; contents are non-empty, trimmed and never only heading text; every chunk
//! fits `max_tokens`; `text = header + "\n" + content` (headers only for E and F); sections
//! are blocks' sections; C/E respect the target; chunks are in document order and overlap only
//! for overlap strategies; no non-heading character is lost (A/B: no heading character before
//! the last content either); C–F cut inside a block only when that block does not fit; nothing
//! dropped; determinism.
#![no_main]

use libfuzzer_sys::fuzz_target;
use needle::chunk::{chunk_document, Chunk, ChunkConfig, ChunkStats, Strategy};
use needle::text::{self, Block, BlockKind, Document};

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
    Document { path: "fuzz.html".into(), title, text, blocks }
}

fn collapse_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn join_section(section: &[String]) -> String {
    section.iter().map(|s| collapse_ws(s)).filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" > ")
}

fn embed_text(header: &str, content: &str) -> String {
    if header.is_empty() {
        content.to_string()
    } else {
        format!("{header}\n{content}")
    }
}

fn structured(s: Strategy) -> bool {
    !matches!(s, Strategy::A | Strategy::B)
}

fn overlaps(s: Strategy) -> bool {
    matches!(s, Strategy::B | Strategy::D | Strategy::F)
}

fn block_at(d: &Document, pos: usize) -> Option<(usize, &Block)> {
    d.blocks.iter().enumerate().find(|(_, b)| b.start <= pos && pos < b.end)
}

fn is_heading(b: &Block) -> bool {
    matches!(b.kind, Heading(_))
}

/// `check` of `src/chunk.rs`'s tests, verbatim but for the private helpers.
fn check(d: &Document, c: &ChunkConfig, chunks: &[Chunk], stats: &ChunkStats, count: &mut dyn FnMut(&str) -> usize) -> Result<(), String> {
    let t = &d.text;
    let target = c.target_chars.max(1);
    if stats.chunks != chunks.len() {
        return Err(format!("stats say {} chunks, got {}", stats.chunks, chunks.len()));
    }
    if stats.dropped_chars != 0 {
        return Err(format!("{} chars dropped", stats.dropped_chars));
    }
    let mut covered = vec![false; t.len()];
    let mut ranges = Vec::new();
    for (i, ch) in chunks.iter().enumerate() {
        if text::slice_utf16(t, ch.from, ch.to) != Some(ch.content.as_str()) {
            return Err(format!("chunk {i}: slice {}..{} is not its content {:?}", ch.from, ch.to, ch.content));
        }
        let (Some(a), Some(b)) = (text::utf16_to_byte(t, ch.from), text::utf16_to_byte(t, ch.to)) else {
            return Err(format!("chunk {i}: offsets off char boundaries"));
        };
        if ch.content.is_empty() || ch.content.trim() != ch.content {
            return Err(format!("chunk {i}: content empty or untrimmed: {:?}", ch.content));
        }
        let has_content =
            t[a..b].char_indices().any(|(o, x)| !x.is_whitespace() && !block_at(d, a + o).is_some_and(|(_, bl)| is_heading(bl)));
        if !has_content {
            return Err(format!("chunk {i}: only heading text: {:?}", ch.content));
        }
        let n = count(&ch.text);
        if n > c.max_tokens {
            return Err(format!("chunk {i}: {n} tokens > {}", c.max_tokens));
        }
        if ch.text.get(ch.header_len..) != Some(ch.content.as_str()) {
            return Err(format!("chunk {i}: text[header_len..] is not the content"));
        }
        if matches!(c.strategy, Strategy::E | Strategy::F) {
            let h = &ch.text[..ch.header_len];
            if !(h.is_empty() || (h.starts_with('[') && h.ends_with("]\n"))) {
                return Err(format!("chunk {i}: malformed header {h:?}"));
            }
        } else if ch.header_len != 0 || ch.text != ch.content {
            return Err(format!("chunk {i}: {} must not have a header", c.strategy));
        }
        let sections: Vec<String> = d.blocks.iter().map(|b| join_section(&b.section)).collect();
        if !ch.section.is_empty() && !sections.contains(&ch.section) {
            return Err(format!("chunk {i}: section {:?} is no block's", ch.section));
        }
        if matches!(c.strategy, Strategy::C | Strategy::E) && ch.content.chars().count() > target {
            return Err(format!("chunk {i}: {} chars > target {target}", ch.content.chars().count()));
        }
        covered[a..b].iter_mut().for_each(|x| *x = true);
        ranges.push((a, b));
    }
    for (i, w) in ranges.windows(2).enumerate() {
        let ((a0, b0), (a1, b1)) = (w[0], w[1]);
        if !(a1 >= a0 && b1 > b0) {
            return Err(format!("chunks {i} and {} out of order", i + 1));
        }
        if !overlaps(c.strategy) && a1 < b0 {
            return Err(format!("chunks {i} and {} overlap without an overlap strategy", i + 1));
        }
    }
    for (p, x) in t.char_indices() {
        if x.is_whitespace() || covered[p] {
            continue;
        }
        if block_at(d, p).is_none_or(|(_, b)| !is_heading(b)) {
            return Err(format!("char {x:?} at byte {p} is in no chunk"));
        }
    }
    if !structured(c.strategy) && stats.split_for_window == 0 {
        let last = t
            .char_indices()
            .filter(|&(p, x)| !x.is_whitespace() && block_at(d, p).is_none_or(|(_, b)| !is_heading(b)))
            .map(|(p, _)| p)
            .next_back();
        for (p, x) in t.char_indices() {
            if !x.is_whitespace() && last.is_some_and(|l| p < l) && !covered[p] {
                return Err(format!("heading char {x:?} at byte {p} is in no chunk"));
            }
        }
    }
    if structured(c.strategy) {
        for (i, ch) in chunks.iter().enumerate() {
            let (a, b) = ranges[i];
            let overlapped = i > 0 && a < ranges[i - 1].1;
            let bounds = if overlapped { vec![b] } else { vec![a, b] };
            for pos in bounds {
                let Some((k, bl)) = block_at(d, pos) else { continue };
                if pos == bl.start {
                    continue;
                }
                if is_heading(bl) {
                    return Err(format!("chunk {i}: boundary {pos} inside heading {k}"));
                }
                let mut first = k;
                while first > 0 && is_heading(&d.blocks[first - 1]) {
                    first -= 1;
                }
                let ext = &t[d.blocks[first].start..bl.end];
                let too_big = ext.chars().count() > target
                    || count(&embed_text(&ch.text[..ch.header_len.saturating_sub(1)], ext)) > c.max_tokens;
                if !too_big {
                    return Err(format!("chunk {i}: boundary {pos} inside block {k} {:?}, which fits", &t[bl.start..bl.end]));
                }
            }
        }
    }
    Ok(())
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
