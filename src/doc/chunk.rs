//! Canonical text → chunks with exact offsets.
//!
//! Every chunk is a contiguous byte range of `Document::text`, found in the document rather than
//! accumulated: `content` is that range and `from..to` are its UTF-16 offsets, so
//! `text::slice_utf16(&doc.text, from, to) == Some(content)` holds by construction. The embedded
//! `text` is `content`, or for the contextual strategies (E, F) a header line plus `content`.
//!
//! The pipeline, for every strategy:
//!
//! 1. **Pieces.** A/B cut blindly every `target_chars` characters; C–F pack blocks into pieces of
//!    at most `target_chars` characters, one section group at a time (a heading always starts a
//!    new piece and travels with the text under it), splitting a block that alone exceeds the
//!    target at sentence, then word, then char boundaries. Such a block is cut anyway, so its
//!    first sentences (lines, in code) fill the piece in front of it rather than leave that
//!    piece short: "Examples:" travels with the start of its example.
//! 2. **Window.** A piece whose embedded text exceeds `max_tokens` word-pieces is split again
//!    (block, sentence, line, word, char boundaries, coarsest first) and counted in
//!    [`ChunkStats::split_for_window`]; its parts keep the piece's header.
//! 3. **Overlap** (B, D, F). The previous chunk's tail is prepended, shrunk if it would push the
//!    chunk over the window: overlap is a convenience and never causes a split.
//!
//! No piece's content is ever only heading text (a heading-only piece is glued to what follows
//! it, and a heading at the very end of a page belongs to no chunk), and no content starts or
//! ends with whitespace.

use std::collections::HashMap;
use std::fmt;
use std::ops::AddAssign;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::doc::locator::{Locator, Source};
use crate::doc::text::{self, Block, BlockKind, Document};

/// How a page is cut into chunks. See the module documentation; E is the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Strategy {
    /// Blind cuts every `target_chars` characters.
    #[serde(alias = "a")]
    A,
    /// A plus the previous chunk's last `overlap_chars` characters.
    #[serde(alias = "b")]
    B,
    /// Structure-aware: blocks packed up to `target_chars`, headings start chunks.
    #[serde(alias = "c")]
    C,
    /// C plus overlap extended back to a word boundary.
    #[serde(alias = "d")]
    D,
    /// C plus a contextual header `[title > section]` that is embedded but not quoted.
    #[serde(alias = "e")]
    E,
    /// E plus overlap.
    #[serde(alias = "f")]
    F,
}

impl Strategy {
    pub const ALL: [Strategy; 6] = [Strategy::A, Strategy::B, Strategy::C, Strategy::D, Strategy::E, Strategy::F];

    /// Whether chunk boundaries follow the document's blocks (C–F) or are blind (A, B).
    fn structured(self) -> bool {
        !matches!(self, Strategy::A | Strategy::B)
    }

    /// Whether the embedded text carries the `[title > section]` header.
    fn contextual(self) -> bool {
        matches!(self, Strategy::E | Strategy::F)
    }

    fn overlap(self) -> Option<OverlapRule> {
        match self {
            Strategy::B => Some(OverlapRule::Chars),
            Strategy::D | Strategy::F => Some(OverlapRule::Words),
            _ => None,
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Strategy::A => "A",
            Strategy::B => "B",
            Strategy::C => "C",
            Strategy::D => "D",
            Strategy::E => "E",
            Strategy::F => "F",
        };
        f.write_str(s)
    }
}

impl FromStr for Strategy {
    type Err = ChunkError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Strategy::ALL
            .into_iter()
            .find(|st| st.to_string().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| ChunkError::UnknownStrategy(s.to_string()))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    #[error("unknown chunking strategy {0:?} (expected one of A, B, C, D, E, F)")]
    UnknownStrategy(String),
    #[error("target_chars must be at least 1")]
    ZeroTarget,
    #[error("max_tokens = {0} leaves no room for content next to [CLS] and [SEP]")]
    WindowTooSmall(usize),
}

/// Chunking settings. Stored in the index, so a changed setting is visible to readers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ChunkConfig {
    pub strategy: Strategy,
    /// Size of a chunk's content, in characters (Unicode scalar values, not bytes).
    pub target_chars: usize,
    /// Characters of the previous chunk repeated at the start of the next (B, D, F).
    pub overlap_chars: usize,
    /// The encoder window in word-pieces, `[CLS]` and `[SEP]` included. Hard limit.
    pub max_tokens: usize,
}

impl Default for ChunkConfig {
    fn default() -> Self {
        ChunkConfig { strategy: Strategy::E, target_chars: 512, overlap_chars: 64, max_tokens: 256 }
    }
}

impl ChunkConfig {
    /// Rejects settings that cannot produce sensible chunks. [`chunk_document`] itself accepts
    /// anything (it treats `target_chars = 0` as 1), so this is for validating user input.
    pub fn validate(&self) -> Result<(), ChunkError> {
        if self.target_chars == 0 {
            return Err(ChunkError::ZeroTarget);
        }
        // [CLS] + one piece + [SEP].
        if self.max_tokens < 3 {
            return Err(ChunkError::WindowTooSmall(self.max_tokens));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    /// What is embedded: `content`, or for E and F `header + "\n" + content`.
    pub text: String,
    /// What is quoted: exactly `doc.text[from..to]` (UTF-16 offsets).
    pub content: String,
    /// Section path of the chunk's first block, `"A > B > C"`; may be empty. Filled for every
    /// strategy (it is display metadata), embedded only by E and F.
    pub section: String,
    /// UTF-16 offsets into the canonical text.
    pub from: usize,
    pub to: usize,
    /// Bytes of `text` before `content`: the header and its `"\n"` separator, so
    /// `text[header_len..] == content`. 0 when there is no header.
    pub header_len: usize,
    /// How the chunk is cited beyond `from..to`: its PDF page, time range or rows.
    pub locator: Locator,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkStats {
    pub chunks: usize,
    /// Pieces whose embedded text exceeded `max_tokens` and were split further.
    pub split_for_window: usize,
    /// Content characters that could not fit the window even alone (with the header already cut
    /// to nothing). Always 0 unless `max_tokens` is degenerate (see [`ChunkConfig::validate`]);
    /// counted rather than emitted, because an over-window chunk would be truncated silently.
    pub dropped_chars: usize,
}

impl AddAssign for ChunkStats {
    fn add_assign(&mut self, o: Self) {
        self.chunks += o.chunks;
        self.split_for_window += o.split_for_window;
        self.dropped_chars += o.dropped_chars;
    }
}

/// The contextual header: `[{title} > {section}]`, or `[{title}]` when the section is empty
/// (`[{section}]` when the title is empty, `""` when both are). Whitespace runs collapse to
/// one space so a header is always one line.
pub fn header(title: &str, section: &str) -> String {
    let title = text::collapse_spaces(title);
    let mut section = text::collapse_spaces(section);
    // The title is usually the page's h1, which also opens every section path: say it once.
    if !title.is_empty() {
        if section == title {
            section.clear();
        } else if let Some(rest) = section.strip_prefix(&format!("{title} > ")) {
            section = rest.to_string();
        }
    }
    match (title.is_empty(), section.is_empty()) {
        (true, true) => String::new(),
        (false, true) => format!("[{title}]"),
        (true, false) => format!("[{section}]"),
        (false, false) => format!("[{title} > {section}]"),
    }
}

/// Cuts a document into chunks. `count_tokens` returns the word-piece count of a text as the
/// encoder sees it, `[CLS]` and `[SEP]` included. Total: never panics on malformed blocks (they
/// are clamped to the text and to char boundaries; a document with no blocks is treated as one
/// text block).
///
/// Each chunk's [`Locator`] comes from the document's [`Source`]: a PDF is cut page by page
/// (each page's text and blocks on their own, offsets then moved to the whole text), so no
/// chunk spans a page break; a media or table document is cut as one text and each chunk named
/// by the cues or rows it covers.
pub fn chunk_document(doc: &Document, cfg: &ChunkConfig, count_tokens: &mut dyn FnMut(&str) -> usize) -> (Vec<Chunk>, ChunkStats) {
    let Source::Pdf { pages } = &doc.source else {
        let (mut chunks, stats) = chunk_text(doc, cfg, count_tokens);
        if doc.source != Source::Page {
            // Chunk starts only grow (overlap reaches back into the previous chunk, never
            // before its start), so one pass over the text finds every byte start.
            let (mut byte, mut unit) = (0usize, 0usize);
            for c in &mut chunks {
                if c.from < unit {
                    (byte, unit) = (0, 0);
                }
                for ch in doc.text[byte..].chars() {
                    if unit >= c.from {
                        break;
                    }
                    unit += ch.len_utf16();
                    byte += ch.len_utf8();
                }
                c.locator = doc.source.locate(byte, byte + c.content.len());
            }
        }
        return (chunks, stats);
    };
    let mut chunks = Vec::new();
    let mut stats = ChunkStats::default();
    for (n, range) in pages.iter().enumerate() {
        let Some(page_text) = doc.text.get(range.clone()) else { continue };
        let blocks = doc
            .blocks
            .iter()
            .filter(|b| b.start >= range.start && b.end <= range.end)
            .map(|b| Block { start: b.start - range.start, end: b.end - range.start, ..b.clone() })
            .collect();
        if page_text.trim().is_empty() {
            continue;
        }
        let page = Document {
            path: doc.path.clone(),
            title: doc.title.clone(),
            text: page_text.to_string(),
            blocks,
            lang: doc.lang.clone(),
            source: Source::Page,
        };
        let (page_chunks, page_stats) = chunk_text(&page, cfg, count_tokens);
        let shift = text::utf16_len(&doc.text[..range.start]);
        chunks.extend(page_chunks.into_iter().map(|c| Chunk {
            from: c.from + shift,
            to: c.to + shift,
            locator: Locator::Page(n as u32 + 1),
            ..c
        }));
        stats += page_stats;
    }
    stats.chunks = chunks.len();
    (chunks, stats)
}

/// [`chunk_document`] for one text, every chunk located by `#char=`.
fn chunk_text(doc: &Document, cfg: &ChunkConfig, count_tokens: &mut dyn FnMut(&str) -> usize) -> (Vec<Chunk>, ChunkStats) {
    let layout = Layout::new(doc);
    let target = cfg.target_chars.max(1);
    let mut stats = ChunkStats::default();
    // Phase 1: pieces of at most `target` characters (A/B: blind, so exactly that many).
    let pieces = if cfg.strategy.structured() { packed_pieces(&layout, target) } else { blind_pieces(&layout, target) };
    let cores = window_cores(&layout, &doc.title, pieces, cfg, count_tokens, &mut stats);
    let chunks = overlap_and_cite(layout.text, cores, cfg, count_tokens);
    stats.chunks = chunks.len();
    (chunks, stats)
}

/// Phase 2, the encoder window: each piece with its header (contextual strategies; one per
/// section, at most half the window), split again where header + content exceed the window.
fn window_cores(
    layout: &Layout<'_>,
    title: &str,
    pieces: Vec<Piece>,
    cfg: &ChunkConfig,
    count_tokens: &mut dyn FnMut(&str) -> usize,
    stats: &mut ChunkStats,
) -> Vec<Core> {
    let (text, max_tokens) = (layout.text, cfg.max_tokens);
    let mut headers: HashMap<String, String> = HashMap::new();
    let mut cores: Vec<Core> = Vec::with_capacity(pieces.len());
    for piece in pieces {
        let section = join_section(layout.section_at(piece.start));
        let hdr = if cfg.strategy.contextual() {
            // The header may use at most half the window, so content always has room.
            match headers.get(&section) {
                Some(h) => h.clone(),
                None => {
                    let h = fitted_header(title, &section, max_tokens / 2, count_tokens);
                    headers.insert(section.clone(), h.clone());
                    h
                }
            }
        } else {
            String::new()
        };
        let mut fits = |a: usize, b: usize| count_tokens(&embed_text(&hdr, &text[a..b])) <= max_tokens;
        if fits(piece.start, piece.end) {
            cores.push(Core { start: piece.start, end: piece.end, group_start: piece.group_start, section, header: hdr });
            continue;
        }
        stats.split_for_window += 1;
        let mut parts = Vec::new();
        split(layout, piece.start, piece.end, &WINDOW_LEVELS, true, &|_, end| end, &mut fits, &mut parts, &mut stats.dropped_chars);
        for (i, (a, b)) in parts.into_iter().enumerate() {
            cores.push(Core { start: a, end: b, group_start: piece.group_start && i == 0, section: section.clone(), header: hdr.clone() });
        }
    }
    cores
}

/// Phase 3: the overlap (B, D, F), then each chunk's content found in `text` and its UTF-16
/// offsets, and the text to embed.
fn overlap_and_cite(text: &str, cores: Vec<Core>, cfg: &ChunkConfig, count_tokens: &mut dyn FnMut(&str) -> usize) -> Vec<Chunk> {
    let rule = if cfg.overlap_chars > 0 { cfg.strategy.overlap() } else { None };
    let mut chunks = Vec::with_capacity(cores.len());
    let mut prev: Option<(usize, usize)> = None;
    let mut from_units = Utf16Cursor::new(text);
    let mut to_units = Utf16Cursor::new(text);
    for core in cores {
        let mut start = core.start;
        if let (Some(rule), Some((pf, pt))) = (rule, prev) {
            // D/F: a section boundary is a natural break; text of the previous section in
            // front of a heading would only blur the chunk.
            if !(rule == OverlapRule::Words && core.group_start) {
                let hdr = &core.header;
                let mut fits = |a: usize| count_tokens(&embed_text(hdr, &text[a..core.end])) <= cfg.max_tokens;
                start = overlap_start(text, rule, pf, pt, core.start, cfg.overlap_chars, &mut fits);
            }
        }
        let (Some(content), Some(from), Some(to)) = (text.get(start..core.end), from_units.at(start), to_units.at(core.end)) else {
            // Unreachable: every position is a char boundary by construction.
            debug_assert!(false, "chunk range {start}..{} is not on char boundaries", core.end);
            continue;
        };
        let header_len = if core.header.is_empty() { 0 } else { core.header.len() + 1 };
        chunks.push(Chunk {
            text: embed_text(&core.header, content),
            content: content.to_string(),
            section: core.section,
            from,
            to,
            header_len,
            locator: Locator::Char,
        });
        prev = Some((start, core.end));
    }
    chunks
}

// ---------------------------------------------------------------------------------------------
// Layout: the document's blocks, sanitised.

/// A block clamped to the text, on char boundaries, trimmed, non-empty, non-overlapping.
#[derive(Debug, Clone, Copy)]
struct Span<'a> {
    start: usize,
    end: usize,
    kind: BlockKind,
    section: &'a [String],
}

struct Layout<'a> {
    text: &'a str,
    spans: Vec<Span<'a>>,
}

impl<'a> Layout<'a> {
    fn new(doc: &'a Document) -> Self {
        let text = doc.text.as_str();
        let len = text.len();
        let mut blocks: Vec<&Block> = doc.blocks.iter().collect();
        // The extractor emits blocks in order; sorting is a cheap guard for other producers.
        blocks.sort_by_key(|b| b.start);
        let mut spans = Vec::with_capacity(blocks.len());
        let mut floor = 0;
        for b in blocks {
            let mut s = b.start.max(floor).min(len);
            let mut e = b.end.min(len);
            // Terminate: `len` and 0 are always char boundaries.
            while !text.is_char_boundary(s) {
                s += 1;
            }
            while !text.is_char_boundary(e) {
                e -= 1;
            }
            if s >= e {
                continue;
            }
            let (s, e) = trim_range(text, s, e);
            if s >= e {
                continue;
            }
            spans.push(Span { start: s, end: e, kind: b.kind, section: &b.section });
            floor = e;
        }
        if doc.blocks.is_empty() {
            // A page without structure still has text worth finding.
            let (s, e) = trim_range(text, 0, len);
            if s < e {
                spans.push(Span { start: s, end: e, kind: BlockKind::Text, section: &[] });
            }
        }
        Layout { text, spans }
    }

    fn span_at(&self, pos: usize) -> Option<&Span<'a>> {
        let i = self.spans.partition_point(|s| s.start <= pos);
        let sp = self.spans.get(i.checked_sub(1)?)?;
        (pos < sp.end).then_some(sp)
    }

    fn is_heading_at(&self, pos: usize) -> bool {
        self.span_at(pos).is_some_and(|s| matches!(s.kind, BlockKind::Heading(_)))
    }

    fn is_block_end(&self, pos: usize) -> bool {
        // Spans are sorted and disjoint, so their ends are sorted too.
        self.spans.binary_search_by_key(&pos, |s| s.end).is_ok()
    }

    /// Section of the block containing `pos`, else of the last block before it.
    fn section_at(&self, pos: usize) -> &'a [String] {
        let i = self.spans.partition_point(|s| s.start <= pos);
        i.checked_sub(1).and_then(|i| self.spans.get(i)).map_or(&[], |s| s.section)
    }

    /// The first *content* char in `from..to` — not whitespace, not inside a heading — as its
    /// byte range. A range without one must not become a chunk.
    fn first_content(&self, from: usize, to: usize) -> Option<(usize, usize)> {
        self.text[from..to]
            .char_indices()
            .map(|(o, c)| (from + o, c))
            .find(|&(p, c)| !c.is_whitespace() && !self.is_heading_at(p))
            .map(|(p, c)| (p, p + c.len_utf8()))
    }

    /// Candidate cut positions `p` with `min <= p <= to` (and `p > from`), each with the
    /// coarsest boundary kind it is. `lines` distinguishes line breaks from word breaks (the
    /// window pass does; the target pass treats a bare line break as a word break).
    fn cuts(&self, from: usize, to: usize, min: usize, lines: bool) -> Vec<(usize, Level)> {
        let mut out = Vec::new();
        let mut prev: Option<char> = None;
        for (o, c) in self.text[from..].char_indices() {
            let p = from + o;
            if p > to {
                break;
            }
            if let Some(c0) = prev {
                if p >= min {
                    out.push((p, self.level_at(p, c0, Some(c), lines)));
                }
            }
            prev = Some(c);
        }
        if to == self.text.len() && to >= min {
            if let Some(c0) = prev {
                out.push((to, self.level_at(to, c0, None, lines)));
            }
        }
        out
    }

    /// What kind of boundary lies at `p`, between `c0` and `c1`.
    ///
    /// Sentences end at `.`, `?`, `!` followed by whitespace (so `3.14` and `a.b` are not
    /// breaks, though `e.g. x` is: a cheap splitter, and a wrong sentence break only costs a
    /// slightly worse cut), and right after the full-width `。`, `？`, `！`, which CJK text
    /// does not follow with a space. In code blocks every line break ends a "sentence".
    fn level_at(&self, p: usize, c0: char, c1: Option<char>, lines: bool) -> Level {
        if self.is_block_end(p) {
            return Level::Block;
        }
        let ws_next = c1.is_none_or(char::is_whitespace);
        if (matches!(c0, '.' | '?' | '!') && ws_next) || matches!(c0, '。' | '？' | '！') {
            return Level::Sentence;
        }
        if c1 == Some('\n') {
            if self.span_at(p).is_some_and(|s| s.kind == BlockKind::Code) {
                return Level::Sentence;
            }
            if lines {
                return Level::Line;
            }
        }
        if !c0.is_whitespace() && ws_next {
            return Level::Word;
        }
        Level::Char
    }
}

// ---------------------------------------------------------------------------------------------
// Phase 1.

struct Piece {
    start: usize,
    end: usize,
    /// First piece of a section group (C–F): no overlap is carried into it.
    group_start: bool,
}

struct Core {
    start: usize,
    end: usize,
    group_start: bool,
    section: String,
    header: String,
}

/// A/B: every `target` characters, trimmed. A piece that is only heading text is glued to the
/// next piece (so the heading still reaches the index); a trailing one is dropped.
fn blind_pieces(layout: &Layout<'_>, target: usize) -> Vec<Piece> {
    let text = layout.text;
    let mut raw = Vec::new();
    let (mut start, mut n) = (0usize, 0usize);
    for (i, _) in text.char_indices() {
        if n == target {
            raw.push((start, i));
            start = i;
            n = 0;
        }
        n += 1;
    }
    if start < text.len() {
        raw.push((start, text.len()));
    }
    let mut out = Vec::new();
    let mut pending: Option<usize> = None;
    for (a, b) in raw {
        let (a, b) = trim_range(text, a, b);
        if a >= b {
            continue;
        }
        let a = pending.take().unwrap_or(a);
        if layout.first_content(a, b).is_some() {
            out.push(Piece { start: a, end: b, group_start: false });
        } else {
            pending = Some(a);
        }
    }
    out
}

/// C–F: one section group at a time (a group starts at a heading that follows content, so
/// consecutive headings stay together with the text under them; a group with no content —
/// headings at the end of a page — yields nothing), packed by [`split`] under the character
/// target.
fn packed_pieces(layout: &Layout<'_>, target: usize) -> Vec<Piece> {
    let spans = &layout.spans;
    let mut groups = Vec::new();
    let (mut first, mut has_content) = (0usize, false);
    for (i, sp) in spans.iter().enumerate() {
        let heading = matches!(sp.kind, BlockKind::Heading(_));
        if heading && has_content {
            groups.push((first, i));
            first = i;
            has_content = false;
        }
        has_content |= !heading;
    }
    if has_content {
        groups.push((first, spans.len()));
    }

    let text = layout.text;
    let mut out = Vec::new();
    for (g0, g1) in groups {
        let (Some(a), Some(b)) = (spans.get(g0), g1.checked_sub(1).and_then(|i| spans.get(i))) else { continue };
        let mut parts = Vec::new();
        let mut unused = 0;
        split(
            layout,
            a.start,
            b.end,
            &TARGET_LEVELS,
            false,
            &|cur, end| advance_chars(text, cur, end, target),
            &mut |x, y| text[x..y].chars().count() <= target,
            &mut parts,
            // A single char always fits a target of at least 1.
            &mut unused,
        );
        out.extend(parts.into_iter().enumerate().map(|(i, (s, e))| Piece { start: s, end: e, group_start: i == 0 }));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The splitter shared by both phases.

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Block,
    Sentence,
    Line,
    Word,
    Char,
}

/// Target pass: paragraphs are never cut while a block boundary will do; then sentences, words,
/// and characters for a giant token (a minified line, a hash).
const TARGET_LEVELS: [Level; 4] = [Level::Block, Level::Sentence, Level::Word, Level::Char];
/// Window pass: as above, with line breaks between sentences and words (tables, lists).
const WINDOW_LEVELS: [Level; 5] = [Level::Block, Level::Sentence, Level::Line, Level::Word, Level::Char];

/// Splits `s..e` into trimmed pieces that satisfy `fits`, greedily: each piece ends at the
/// farthest fitting cut of the coarsest boundary level that has any fitting cut. `reach(cur,
/// end)` bounds where a fitting piece starting at `cur` can end (keeps the target pass linear).
///
/// Every piece contains a content char, so a heading is glued to the text after it. When a
/// heading (run) cannot fit together with even one char of its text, the heading is left out of
/// the content (it stays in the E/F header). A trailing remainder with no content is dropped; a
/// content char that does not fit alone is dropped and counted in `dropped`.
#[allow(clippy::too_many_arguments)]
fn split(
    layout: &Layout<'_>,
    s: usize,
    e: usize,
    levels: &[Level],
    lines: bool,
    reach: &dyn Fn(usize, usize) -> usize,
    fits: &mut dyn FnMut(usize, usize) -> bool,
    out: &mut Vec<(usize, usize)>,
    dropped: &mut usize,
) {
    let text = layout.text;
    let mut cur = skip_ws(text, s, e);
    while cur < e {
        let end = trim_end(text, cur, e);
        let Some((c_start, c_end)) = layout.first_content(cur, end) else { break };
        let upper = reach(cur, end).min(end);
        if upper >= end && fits(cur, end) {
            out.push((cur, end));
            break;
        }
        let cands = layout.cuts(cur, upper, c_end, lines);
        let mut chosen = fill_before_oversized(layout, cur, e, &cands, fits);
        for &level in levels {
            if chosen.is_some() {
                break;
            }
            let at: Vec<usize> = cands.iter().filter(|c| c.1 <= level).map(|c| c.0).collect();
            chosen = farthest_fitting(&at, &mut |p| fits(cur, trim_end(text, cur, p)));
        }
        match chosen {
            Some(p) => {
                out.push((cur, trim_end(text, cur, p)));
                cur = skip_ws(text, p, e);
            }
            // Heading text that cannot share a piece with its first content char.
            None if c_start > cur => cur = c_start,
            None => {
                *dropped += 1;
                cur = skip_ws(text, c_end, e);
            }
        }
    }
}

/// When the piece starting at `cur` would end at a block boundary only because the next block
/// cannot fit a piece even alone, that block is cut at sentences (lines in code) wherever it
/// starts: its first sentences then fill this piece instead of leaving it short. Returns the
/// farthest fitting sentence cut inside that block, or `None` to use the ordinary rule.
fn fill_before_oversized(
    layout: &Layout<'_>,
    cur: usize,
    e: usize,
    cands: &[(usize, Level)],
    fits: &mut dyn FnMut(usize, usize) -> bool,
) -> Option<usize> {
    let text = layout.text;
    let blocks: Vec<usize> = cands.iter().filter(|c| c.1 == Level::Block).map(|c| c.0).collect();
    let pb = farthest_fitting(&blocks, &mut |p| fits(cur, trim_end(text, cur, p)))?;
    let next = skip_ws(text, pb, e);
    let sp = layout.span_at(next).filter(|sp| sp.start == next && !matches!(sp.kind, BlockKind::Heading(_)))?;
    if fits(sp.start, sp.end.min(e)) {
        return None;
    }
    let inside: Vec<usize> = cands.iter().filter(|c| c.0 > sp.start && c.0 < sp.end && c.1 <= Level::Sentence).map(|c| c.0).collect();
    farthest_fitting(&inside, &mut |p| fits(cur, trim_end(text, cur, p)))
}

/// The last position in `at` (ascending) for which `fits` holds, assuming `fits` is monotone
/// (true, then false); the result is always one that was checked to fit. Binary search keeps
/// tokenizer calls logarithmic.
fn farthest_fitting(at: &[usize], fits: &mut dyn FnMut(usize) -> bool) -> Option<usize> {
    let (&first, &last) = (at.first()?, at.last()?);
    if !fits(first) {
        return None;
    }
    if fits(last) {
        return Some(last);
    }
    let (mut lo, mut hi) = (0, at.len() - 1);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(at[mid]) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(at[lo])
}

// ---------------------------------------------------------------------------------------------
// Overlap and headers.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OverlapRule {
    /// B: exactly the last `overlap_chars` characters.
    Chars,
    /// D/F: extended back to the start of the word it cuts.
    Words,
}

/// Where a chunk whose own text starts at `core_start` begins once the previous chunk's
/// (`prev_from..prev_to`) last `n` characters are copied in. Never before `prev_from`, so
/// chunks stay in order; trimmed of leading whitespace. For [`OverlapRule::Words`] a cut word
/// is taken whole, unless that would more than double the overlap (a giant token), in which
/// case the partial word is skipped instead. If the chunk would then exceed the window, the
/// overlap shrinks (to the earliest start that fits; down to none).
fn overlap_start(
    text: &str,
    rule: OverlapRule,
    prev_from: usize,
    prev_to: usize,
    core_start: usize,
    n: usize,
    fits: &mut dyn FnMut(usize) -> bool,
) -> usize {
    let Some(nth) = n.checked_sub(1) else { return core_start };
    let mut ov = text[prev_from..prev_to].char_indices().rev().nth(nth).map_or(prev_from, |(o, _)| prev_from + o);
    if rule == OverlapRule::Words && mid_word(text, ov) {
        let back = text[prev_from..ov]
            .char_indices()
            .rev()
            .find(|(_, c)| c.is_whitespace())
            .map_or(prev_from, |(o, c)| prev_from + o + c.len_utf8());
        ov = if text[back..ov].chars().count() <= n {
            back
        } else {
            text[ov..core_start].find(char::is_whitespace).map_or(core_start, |o| ov + o)
        };
    }
    let ov = skip_ws(text, ov, core_start);
    if ov >= core_start {
        return core_start;
    }
    if fits(ov) {
        return ov;
    }
    // Later starts, at the rule's granularity; the chunk's own start is known to fit.
    let later: Vec<usize> = text[ov..core_start]
        .char_indices()
        .map(|(o, c)| (ov + o, c))
        .filter(|&(p, c)| {
            !c.is_whitespace() && p > ov && (rule == OverlapRule::Chars || text[..p].chars().next_back().is_some_and(char::is_whitespace))
        })
        .map(|(p, _)| p)
        .collect();
    // Earliest fitting, assuming fewer tokens for a later start.
    let (mut lo, mut hi) = (0usize, later.len());
    let mut best = core_start;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if fits(later[mid]) {
            best = later[mid];
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    best
}

/// Whether `pos` falls between two non-whitespace chars.
fn mid_word(text: &str, pos: usize) -> bool {
    let before = text[..pos].chars().next_back();
    let after = text[pos..].chars().next();
    matches!((before, after), (Some(a), Some(b)) if !a.is_whitespace() && !b.is_whitespace())
}

/// The header for a chunk, cut so that it takes at most `budget` tokens (half the window), so a
/// long title or section path can never crowd out content. Cuts in order: the middle of the
/// section path (`[Title > … > Innermost]`), then the tail of the whole header
/// (`[Title > Sect…]`), then the header altogether. Content is never cut for the header.
fn fitted_header(title: &str, section: &str, budget: usize, count: &mut dyn FnMut(&str) -> usize) -> String {
    let full = header(title, section);
    if full.is_empty() || count(&full) <= budget {
        return full;
    }
    if let Some((_, last)) = section.rsplit_once(" > ") {
        let short = header(title, &format!("… > {last}"));
        if count(&short) <= budget {
            return short;
        }
    }
    let Some(inner) = full.strip_prefix('[').and_then(|s| s.strip_suffix(']')) else { return String::new() };
    let make = |k: usize| format!("[{}…]", inner[..k].trim_end());
    let bounds: Vec<usize> = inner.char_indices().map(|(i, _)| i).collect();
    farthest_fitting(&bounds, &mut |k| count(&make(k)) <= budget).map(make).unwrap_or_default()
}

fn embed_text(header: &str, content: &str) -> String {
    if header.is_empty() {
        content.to_string()
    } else {
        format!("{header}\n{content}")
    }
}

fn join_section(section: &[String]) -> String {
    section.iter().map(|s| text::collapse_spaces(s)).filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" > ")
}

// ---------------------------------------------------------------------------------------------
// Small helpers on byte positions (all on char boundaries by construction).

fn trim_range(text: &str, s: usize, e: usize) -> (usize, usize) {
    let s = skip_ws(text, s, e);
    (s, trim_end(text, s, e))
}

fn skip_ws(text: &str, from: usize, to: usize) -> usize {
    to - text[from..to].trim_start().len()
}

fn trim_end(text: &str, from: usize, to: usize) -> usize {
    from + text[from..to].trim_end().len()
}

/// The position `n` chars after `from`, or `limit` if the text ends first.
fn advance_chars(text: &str, from: usize, limit: usize, n: usize) -> usize {
    text[from..limit].char_indices().nth(n).map_or(limit, |(o, _)| from + o)
}

/// Byte → UTF-16 offsets for non-decreasing positions, counted from the text itself in one
/// pass (the offsets are the text's, not a sum of chunk lengths).
struct Utf16Cursor<'a> {
    text: &'a str,
    byte: usize,
    units: usize,
}

impl<'a> Utf16Cursor<'a> {
    fn new(text: &'a str) -> Self {
        Utf16Cursor { text, byte: 0, units: 0 }
    }

    fn at(&mut self, byte: usize) -> Option<usize> {
        if byte < self.byte {
            // Not reached (positions only grow), but stay correct if it were.
            return text::byte_to_utf16(self.text, byte);
        }
        self.units += text::utf16_len(self.text.get(self.byte..byte)?);
        self.byte = byte;
        Some(self.units)
    }
}

/// The chunker's invariants as one checker, for the unit and property tests here and for the
/// `chunk` fuzz target (`--features invariants`): rules 1–3 of the module documentation, the
/// header, sections, target size, document order, coverage, and where C–F may cut a block.
#[cfg(any(test, feature = "invariants"))]
pub mod invariants {
    use super::{Chunk, ChunkConfig, ChunkStats, Strategy};
    use crate::doc::text::{self, Block, BlockKind::Heading, Document};

    fn block_at(d: &Document, pos: usize) -> Option<(usize, &Block)> {
        d.blocks.iter().enumerate().find(|(_, b)| b.start <= pos && pos < b.end)
    }

    fn is_heading(b: &Block) -> bool {
        matches!(b.kind, Heading(_))
    }

    /// Every invariant the module promises, for a well-formed document (blocks trimmed and
    /// separated by "\n\n"); `Err` names the first one broken.
    pub fn check(
        d: &Document,
        c: &ChunkConfig,
        chunks: &[Chunk],
        stats: &ChunkStats,
        count: &mut dyn FnMut(&str) -> usize,
    ) -> Result<(), String> {
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
            // Rule 1: found in the document.
            if text::slice_utf16(t, ch.from, ch.to) != Some(ch.content.as_str()) {
                return Err(format!("chunk {i}: slice {}..{} is not its content {:?}", ch.from, ch.to, ch.content));
            }
            let (Some(a), Some(b)) = (text::utf16_to_byte(t, ch.from), text::utf16_to_byte(t, ch.to)) else {
                return Err(format!("chunk {i}: offsets off char boundaries"));
            };
            // Rule 3.
            if ch.content.is_empty() || ch.content.trim() != ch.content {
                return Err(format!("chunk {i}: content empty or untrimmed: {:?}", ch.content));
            }
            let has_content =
                t[a..b].char_indices().any(|(o, x)| !x.is_whitespace() && !block_at(d, a + o).is_some_and(|(_, bl)| is_heading(bl)));
            if !has_content {
                return Err(format!("chunk {i}: only heading text: {:?}", ch.content));
            }
            // Rule 2.
            let n = count(&ch.text);
            if n > c.max_tokens {
                return Err(format!("chunk {i}: {n} tokens > {}", c.max_tokens));
            }
            // Text = header + content.
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
            let sections: Vec<String> = d.blocks.iter().map(|b| super::join_section(&b.section)).collect();
            if !ch.section.is_empty() && !sections.contains(&ch.section) {
                return Err(format!("chunk {i}: section {:?} is no block's", ch.section));
            }
            if matches!(c.strategy, Strategy::C | Strategy::E) && ch.content.chars().count() > target {
                return Err(format!("chunk {i}: {} chars > target {target}", ch.content.chars().count()));
            }
            covered[a..b].iter_mut().for_each(|x| *x = true);
            ranges.push((a, b));
        }
        // Document order.
        for (i, w) in ranges.windows(2).enumerate() {
            let ((a0, b0), (a1, b1)) = (w[0], w[1]);
            if !(a1 >= a0 && b1 > b0) {
                return Err(format!("chunks {i} and {} out of order", i + 1));
            }
            if c.strategy.overlap().is_none() && a1 < b0 {
                return Err(format!("chunks {i} and {} overlap without an overlap strategy", i + 1));
            }
        }
        // Nothing lost: every non-whitespace char of a non-heading block.
        for (p, x) in t.char_indices() {
            if x.is_whitespace() || covered[p] {
                continue;
            }
            if block_at(d, p).is_none_or(|(_, b)| !is_heading(b)) {
                return Err(format!("char {x:?} at byte {p} is in no chunk"));
            }
        }
        // A/B, not split for the window: headings too, up to the last content char.
        if !c.strategy.structured() && stats.split_for_window == 0 {
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
        // C–F: a boundary falls inside a block only if that block (with the headings glued in
        // front of it) alone exceeds the target or the window.
        if c.strategy.structured() {
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
                        || count(&super::embed_text(&ch.text[..ch.header_len.saturating_sub(1)], ext)) > c.max_tokens;
                    if !too_big {
                        return Err(format!("chunk {i}: boundary {pos} inside block {k} {:?}, which fits", &t[bl.start..bl.end]));
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::invariants::check;
    use super::{chunk_document, header, Chunk, ChunkConfig, ChunkError, ChunkStats, Strategy};
    use crate::doc::locator::{Locator, Source};
    use crate::doc::text::{self, Block, BlockKind, Document};

    use BlockKind::{Code, Heading, Text};

    /// Deterministic stand-in for the tokenizer: roughly two chars per piece, plus `[CLS]`/`[SEP]`.
    fn fake(s: &str) -> usize {
        s.chars().count() / 2 + 2
    }

    /// A document from `(kind, text, section)` blocks, joined by the canonical "\n\n".
    fn doc(title: &str, blocks: &[(BlockKind, &str, &[&str])]) -> Document {
        let mut text = String::new();
        let mut out = Vec::new();
        for (kind, t, sec) in blocks {
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            let start = text.len();
            text.push_str(t);
            out.push(Block { start, end: text.len(), kind: *kind, section: sec.iter().map(|s| s.to_string()).collect() });
        }
        Document { path: "p.html".into(), title: title.into(), text, blocks: out, lang: None, source: Default::default() }
    }

    fn cfg(strategy: Strategy, target_chars: usize, overlap_chars: usize, max_tokens: usize) -> ChunkConfig {
        ChunkConfig { strategy, target_chars, overlap_chars, max_tokens }
    }

    fn run(d: &Document, c: &ChunkConfig) -> (Vec<Chunk>, ChunkStats) {
        let (chunks, stats) = chunk_document(d, c, &mut fake);
        if let Err(e) = check(d, c, &chunks, &stats, &mut fake) {
            panic!("{e}\nconfig {c:?}\ndoc {d:?}\nchunks {chunks:#?}");
        }
        (chunks, stats)
    }

    fn contents(chunks: &[Chunk]) -> Vec<&str> {
        chunks.iter().map(|c| c.content.as_str()).collect()
    }

    // --- API -------------------------------------------------------------------------------

    #[test]
    fn strategy_parses_case_insensitively_and_round_trips() {
        for s in Strategy::ALL {
            assert_eq!(s.to_string().parse::<Strategy>(), Ok(s));
            assert_eq!(s.to_string().to_lowercase().parse::<Strategy>(), Ok(s));
            let json = serde_json::to_string(&s).expect("serialise");
            assert_eq!(json, format!("\"{s}\""));
            assert_eq!(serde_json::from_str::<Strategy>(&json).expect("deserialise"), s);
        }
        assert_eq!(serde_json::from_str::<Strategy>("\"e\"").expect("lowercase alias"), Strategy::E);
        assert_eq!("G".parse::<Strategy>(), Err(ChunkError::UnknownStrategy("G".into())));
    }

    #[test]
    fn a_pdf_is_cut_page_by_page_and_each_chunk_names_its_page() {
        let first = "Words on the first page run on. ".repeat(12);
        let first = first.trim_end();
        let text = format!("{first}\n\n\n\nLast page.");
        let (p1, p3) = (0..first.len(), first.len() + 4..text.len());
        let block = |r: &std::ops::Range<usize>| Block { start: r.start, end: r.end, kind: Text, section: vec!["S".into()] };
        let doc = Document {
            path: "m.pdf".into(),
            title: "M".into(),
            blocks: vec![block(&p1), block(&p3)],
            lang: None,
            source: Source::Pdf { pages: vec![p1.clone(), first.len() + 2..first.len() + 2, p3.clone()] },
            text,
        };
        // Overlap (F) must not carry the first page's tail onto the last.
        let (chunks, stats) = chunk_document(&doc, &cfg(Strategy::F, 100, 40, 256), &mut |s: &str| s.split_whitespace().count() + 2);
        assert_eq!(stats.chunks, chunks.len());
        for c in &chunks {
            assert_eq!(text::slice_utf16(&doc.text, c.from, c.to), Some(c.content.as_str()));
            let Locator::Page(n) = c.locator else { panic!("{:?}", c.locator) };
            assert!(n == 1 || n == 3, "{n}");
            assert_eq!(c.content.contains("Last page."), n == 3);
        }
        assert_eq!(chunks.last().map(|c| c.content.as_str()), Some("Last page."));
    }

    #[test]
    fn config_defaults_and_partial_serde() {
        let d = ChunkConfig::default();
        assert_eq!(d, cfg(Strategy::E, 512, 64, 256));
        let partial: ChunkConfig = serde_json::from_str(r#"{"strategy":"C","max_tokens":128}"#).expect("partial config");
        assert_eq!(partial, cfg(Strategy::C, 512, 64, 128));
        let back: ChunkConfig = serde_json::from_str(&serde_json::to_string(&d).expect("ser")).expect("de");
        assert_eq!(back, d);
        assert!(d.validate().is_ok());
        assert_eq!(cfg(Strategy::A, 0, 0, 256).validate(), Err(ChunkError::ZeroTarget));
        assert_eq!(cfg(Strategy::A, 10, 0, 2).validate(), Err(ChunkError::WindowTooSmall(2)));
    }

    #[test]
    fn header_format() {
        assert_eq!(header("Guide", "Install > Linux"), "[Guide > Install > Linux]");
        assert_eq!(header("Guide", ""), "[Guide]");
        assert_eq!(header("", "Install"), "[Install]");
        assert_eq!(header("", ""), "");
        assert_eq!(header("  The\nGuide ", ""), "[The Guide]");
        assert_eq!(header("Guide", "Guide > Install"), "[Guide > Install]", "the h1 is said once");
        assert_eq!(header("Guide", "Guide"), "[Guide]");
        assert_eq!(header("Guide", "Guidebook > Install"), "[Guide > Guidebook > Install]");
    }

    // --- degenerate documents -------------------------------------------------------------------

    #[test]
    fn empty_and_blank_documents_have_no_chunks() {
        let empty = doc("T", &[]);
        let blank = Document { text: " \n\n\t ".into(), ..doc("T", &[]) };
        let headings = doc("T", &[(Heading(1), "One", &["One"]), (Heading(2), "Two", &["One", "Two"])]);
        for s in Strategy::ALL {
            for d in [&empty, &blank, &headings] {
                let (chunks, stats) = run(d, &cfg(s, 512, 64, 256));
                assert!(chunks.is_empty(), "{s}: {chunks:?}");
                assert_eq!(stats, ChunkStats::default());
            }
        }
    }

    #[test]
    fn document_without_blocks_is_one_text_block() {
        let d = Document { text: "  Just text. More text.  ".into(), ..doc("T", &[]) };
        for s in Strategy::ALL {
            let (chunks, _) = chunk_document(&d, &cfg(s, 512, 64, 256), &mut fake);
            assert_eq!(contents(&chunks), ["Just text. More text."], "{s}");
            assert_eq!((chunks[0].from, chunks[0].to), (2, 23));
        }
    }

    #[test]
    fn malformed_blocks_do_not_panic() {
        let mut d = doc("T", &[(Text, "héllo wörld", &[]), (Text, "日本語のテキスト", &[])]);
        // Mid-char, reversed, out of range and overlapping ranges.
        d.blocks.push(Block { start: 2, end: 3, kind: Text, section: vec![] });
        d.blocks.push(Block { start: 9, end: 4, kind: Code, section: vec![] });
        d.blocks.push(Block { start: 5, end: 10_000, kind: Heading(1), section: vec![] });
        d.blocks.push(Block { start: 10_000, end: 20_000, kind: Text, section: vec![] });
        for s in Strategy::ALL {
            let (chunks, _) = chunk_document(&d, &cfg(s, 4, 2, 9), &mut fake);
            for c in &chunks {
                assert_eq!(text::slice_utf16(&d.text, c.from, c.to), Some(c.content.as_str()));
                assert!(fake(&c.text) <= 9);
            }
        }
    }

    #[test]
    fn trailing_heading_belongs_to_no_chunk() {
        let d = doc("T", &[(Text, "Body text.", &[]), (Heading(2), "Epilogue", &["Epilogue"])]);
        for s in [Strategy::C, Strategy::D, Strategy::E, Strategy::F] {
            let (chunks, _) = run(&d, &cfg(s, 512, 64, 256));
            assert_eq!(contents(&chunks), ["Body text."], "{s}");
        }
        // Blind cuts that happen to isolate the heading drop it too.
        let (chunks, _) = run(&d, &cfg(Strategy::A, 10, 0, 256));
        assert_eq!(contents(&chunks), ["Body text."]);
    }

    // --- A and B --------------------------------------------------------------------------------

    #[test]
    fn a_cuts_every_n_chars_not_bytes() {
        let d = doc("T", &[(Text, "日本語テキスト🦀éa", &[])]);
        let (chunks, _) = run(&d, &cfg(Strategy::A, 4, 0, 256));
        assert_eq!(contents(&chunks), ["日本語テ", "キスト🦀", "éa"]);
        // UTF-16: the crab counts twice.
        assert_eq!(chunks.iter().map(|c| (c.from, c.to)).collect::<Vec<_>>(), [(0, 4), (4, 9), (9, 11)]);
    }

    #[test]
    fn a_trims_and_glues_heading_only_pieces_forward() {
        let d = doc("T", &[(Heading(1), "Title", &["Title"]), (Text, "ab cd ef", &["Title"])]);
        // Pieces of 6 chars: "Title\n" (heading only) → glued to the next.
        let (chunks, _) = run(&d, &cfg(Strategy::A, 6, 0, 256));
        assert_eq!(contents(&chunks), ["Title\n\nab cd", "ef"]);
        assert_eq!(chunks[0].section, "Title");
    }

    #[test]
    fn b_copies_the_previous_chunks_tail() {
        let d = doc("T", &[(Text, "abcdefghij klmnopqrst", &[])]);
        // Blind pieces: "abcdefghij", " klmnopqrs" (trimmed), "t".
        let (chunks, _) = run(&d, &cfg(Strategy::B, 10, 3, 256));
        assert_eq!(contents(&chunks), ["abcdefghij", "hij klmnopqrs", "qrst"]);
        assert_eq!(chunks[1].from, 7, "moved back 3 chars into chunk 0");
    }

    // --- C and D --------------------------------------------------------------------------------

    #[test]
    fn c_packs_blocks_and_headings_start_chunks() {
        let d =
            doc("T", &[(Text, "Intro.", &[]), (Text, "Second.", &[]), (Heading(2), "Usage", &["Usage"]), (Text, "Call it.", &["Usage"])]);
        let (chunks, _) = run(&d, &cfg(Strategy::C, 100, 0, 256));
        assert_eq!(contents(&chunks), ["Intro.\n\nSecond.", "Usage\n\nCall it."]);
        assert_eq!(chunks[1].section, "Usage");
        assert_eq!(chunks[1].text, chunks[1].content, "C has no header");
    }

    #[test]
    fn c_splits_long_paragraphs_at_sentences_then_words() {
        let d = doc("T", &[(Text, "One two three. Four five? Six! Seven eight nine ten eleven twelve.", &[])]);
        let (chunks, _) = run(&d, &cfg(Strategy::C, 20, 0, 256));
        assert_eq!(contents(&chunks), ["One two three.", "Four five? Six!", "Seven eight nine ten", "eleven twelve."]);
    }

    #[test]
    fn c_keeps_small_blocks_whole_next_to_big_ones() {
        let d = doc("T", &[(Text, "Small.", &[]), (Text, "Big one here. And more of it.", &[]), (Text, "Tail.", &[])]);
        let (chunks, _) = run(&d, &cfg(Strategy::C, 16, 0, 256));
        assert_eq!(contents(&chunks), ["Small.", "Big one here.", "And more of it.", "Tail."]);
    }

    #[test]
    fn c_fills_a_piece_with_the_start_of_a_block_too_big_to_fit_alone() {
        let d = doc("T", &[(Text, "Examples:", &[]), (Code, "fn a() {}\nfn b() {}\nfn c() {}", &[]), (Text, "Tail.", &[])]);
        let (chunks, _) = run(&d, &cfg(Strategy::C, 24, 0, 256));
        assert_eq!(contents(&chunks), ["Examples:\n\nfn a() {}", "fn b() {}\nfn c() {}", "Tail."]);
        // A block that fits alone is never cut to fill the piece before it.
        let d = doc("T", &[(Text, "Examples:", &[]), (Code, "fn a() {}\nfn b() {}", &[])]);
        let (chunks, _) = run(&d, &cfg(Strategy::C, 24, 0, 256));
        assert_eq!(contents(&chunks), ["Examples:", "fn a() {}\nfn b() {}"]);
    }

    #[test]
    fn c_splits_code_at_lines_and_cjk_at_full_stops() {
        let d = doc("T", &[(Code, "fn a() {}\nfn b() {}\nfn c() {}", &[]), (Text, "日本語です。次の文です。", &[])]);
        let (chunks, _) = run(&d, &cfg(Strategy::C, 20, 0, 256));
        assert_eq!(contents(&chunks), ["fn a() {}\nfn b() {}", "fn c() {}", "日本語です。次の文です。"]);
        let (chunks, _) = run(&d, &cfg(Strategy::C, 8, 0, 256));
        assert!(contents(&chunks).ends_with(&["日本語です。", "次の文です。"]), "{chunks:?}");
    }

    #[test]
    fn c_giant_token_is_cut_at_chars() {
        let blob: String = "x🦀".repeat(300);
        let d = doc("T", &[(Code, &blob, &[])]);
        let (chunks, stats) = run(&d, &cfg(Strategy::C, 100, 0, 256));
        assert_eq!(chunks.len(), 6);
        assert!(chunks.iter().all(|c| c.content.chars().count() == 100));
        assert_eq!(stats.split_for_window, 0);
    }

    #[test]
    fn heading_stays_with_its_text_even_when_the_text_must_split() {
        let d = doc("T", &[(Heading(2), "Setup", &["Setup"]), (Text, "First part here. Second part here.", &["Setup"])]);
        let (chunks, _) = run(&d, &cfg(Strategy::C, 24, 0, 256));
        assert_eq!(contents(&chunks), ["Setup\n\nFirst part here.", "Second part here."]);
        assert!(chunks.iter().all(|c| c.section == "Setup"));
    }

    #[test]
    fn heading_too_long_to_share_a_chunk_is_left_out_of_the_content() {
        let d = doc("T", &[(Heading(2), "A very long heading indeed", &["H"]), (Text, "Body.", &["H"])]);
        let (chunks, _) = run(&d, &cfg(Strategy::C, 10, 0, 256));
        assert_eq!(contents(&chunks), ["Body."]);
    }

    #[test]
    fn d_overlap_extends_back_to_a_word_boundary() {
        let d = doc("T", &[(Text, "Alpha beta gamma. Delta epsilon zeta. Eta theta iota.", &[])]);
        let (c, _) = run(&d, &cfg(Strategy::C, 20, 0, 256));
        assert_eq!(contents(&c), ["Alpha beta gamma.", "Delta epsilon zeta.", "Eta theta iota."]);
        let (chunks, _) = run(&d, &cfg(Strategy::D, 20, 8, 256));
        // The last 8 chars "a gamma." start inside "beta", and "on zeta." inside "epsilon":
        // each is extended back to the whole word.
        assert_eq!(contents(&chunks), ["Alpha beta gamma.", "beta gamma. Delta epsilon zeta.", "epsilon zeta. Eta theta iota."]);
        assert_eq!(chunks[1].from, 6);
    }

    #[test]
    fn d_no_overlap_across_a_heading() {
        let d = doc("T", &[(Text, "Before text.", &[]), (Heading(2), "After", &["After"]), (Text, "After text.", &["After"])]);
        let (chunks, _) = run(&d, &cfg(Strategy::D, 100, 20, 256));
        assert_eq!(contents(&chunks), ["Before text.", "After\n\nAfter text."]);
    }

    #[test]
    fn d_overlap_of_a_giant_token_skips_the_partial_word() {
        let d = doc("T", &[(Text, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa bb cc dd ee ff gg", &[])]);
        let (chunks, _) = run(&d, &cfg(Strategy::D, 33, 4, 256));
        assert_eq!(contents(&chunks), ["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa bb", "bb cc dd ee ff gg"]);
    }

    // --- E and F --------------------------------------------------------------------------------

    fn guide() -> Document {
        doc(
            "Guide",
            &[
                (Heading(1), "Install", &["Install"]),
                (Text, "Run the installer. It takes a minute.", &["Install"]),
                (Heading(2), "Linux", &["Install", "Linux"]),
                (Code, "apt install needle", &["Install", "Linux"]),
                (Text, "Done.", &["Install", "Linux"]),
                (Heading(1), "Trailing", &["Trailing"]),
            ],
        )
    }

    fn chunk(text: &str, content: &str, section: &str, from: usize, to: usize, header_len: usize) -> Chunk {
        Chunk { text: text.into(), content: content.into(), section: section.into(), from, to, header_len, locator: Locator::Char }
    }

    #[test]
    fn e_exact_chunks() {
        let (chunks, stats) = run(&guide(), &cfg(Strategy::E, 60, 0, 256));
        assert_eq!(
            chunks,
            [
                chunk(
                    "[Guide > Install]\nInstall\n\nRun the installer. It takes a minute.",
                    "Install\n\nRun the installer. It takes a minute.",
                    "Install",
                    0,
                    46,
                    18,
                ),
                chunk(
                    "[Guide > Install > Linux]\nLinux\n\napt install needle\n\nDone.",
                    "Linux\n\napt install needle\n\nDone.",
                    "Install > Linux",
                    48,
                    80,
                    26,
                ),
            ]
        );
        assert_eq!(stats, ChunkStats { chunks: 2, split_for_window: 0, dropped_chars: 0 });
    }

    #[test]
    fn e_exact_chunks_small_target() {
        let (chunks, _) = run(&guide(), &cfg(Strategy::E, 30, 64, 256));
        assert_eq!(
            chunks,
            [
                chunk("[Guide > Install]\nInstall\n\nRun the installer.", "Install\n\nRun the installer.", "Install", 0, 27, 18),
                chunk("[Guide > Install]\nIt takes a minute.", "It takes a minute.", "Install", 28, 46, 18),
                chunk(
                    "[Guide > Install > Linux]\nLinux\n\napt install needle",
                    "Linux\n\napt install needle",
                    "Install > Linux",
                    48,
                    73,
                    26,
                ),
                chunk("[Guide > Install > Linux]\nDone.", "Done.", "Install > Linux", 75, 80, 26),
            ]
        );
    }

    #[test]
    fn f_overlaps_within_a_section_only() {
        let (chunks, _) = run(&guide(), &cfg(Strategy::F, 30, 10, 256));
        assert_eq!(
            contents(&chunks),
            ["Install\n\nRun the installer.", "installer. It takes a minute.", "Linux\n\napt install needle", "install needle\n\nDone.",]
        );
        assert!(chunks[1].text.starts_with("[Guide > Install]\ninstaller."));
    }

    #[test]
    fn window_splits_are_counted_and_keep_the_header() {
        let d = doc(
            "Guide",
            &[(Heading(2), "Tables", &["Tables"]), (Text, "| a | b | c |\n| 1 | 2 | 3 |\n| 4 | 5 | 6 |\n| 7 | 8 | 9 |", &["Tables"])],
        );
        // Header "[Guide > Tables]" = 16 chars: 30 tokens leave room for ~38 chars of content.
        let (chunks, stats) = run(&d, &cfg(Strategy::E, 512, 0, 30));
        assert_eq!(stats.split_for_window, 1);
        assert_eq!(contents(&chunks), ["Tables\n\n| a | b | c |\n| 1 | 2 | 3 |", "| 4 | 5 | 6 |\n| 7 | 8 | 9 |"]);
        assert!(chunks.iter().all(|c| c.text.starts_with("[Guide > Tables]\n")));
    }

    #[test]
    fn window_overlap_shrinks_instead_of_splitting() {
        let d = doc("T", &[(Text, "aa bb cc dd ee ff gg hh ii jj kk ll mm nn oo pp", &[])]);
        // Target pieces of ≤ 24 chars fit 14 tokens; 16 chars of overlap would not.
        let (chunks, stats) = run(&d, &cfg(Strategy::D, 24, 16, 15));
        assert_eq!(stats.split_for_window, 0);
        assert!(chunks.len() >= 2);
        assert!(chunks[1].from < chunks[0].to, "some overlap survives");
    }

    #[test]
    fn long_titles_truncate_the_header_never_the_content() {
        let title = "An extraordinarily long page title that goes on and on ".repeat(10);
        let d = doc(
            &title,
            &[(Heading(1), "Deep", &["Part", "Chapter", "Deep"]), (Text, "The body text stays whole.", &["Part", "Chapter", "Deep"])],
        );
        let (chunks, stats) = run(&d, &cfg(Strategy::E, 512, 0, 40));
        assert_eq!(stats.split_for_window, 0);
        assert_eq!(contents(&chunks), ["Deep\n\nThe body text stays whole."]);
        let h = &chunks[0].text[..chunks[0].header_len];
        assert!(h.starts_with("[An extraordinarily") && h.ends_with("…]\n"), "{h:?}");
        assert!(fake(h.trim_end()) <= 20, "the header takes at most half the window");
    }

    #[test]
    fn long_section_paths_lose_their_middle_first() {
        let mid = "Middle ".repeat(20);
        let d = doc("Guide", &[(Text, "Body.", &["Top", mid.trim(), "Leaf"])]);
        let (chunks, _) = run(&d, &cfg(Strategy::E, 512, 0, 40));
        assert_eq!(&chunks[0].text, "[Guide > … > Leaf]\nBody.");
    }

    #[test]
    fn degenerate_window_drops_and_counts_instead_of_overflowing() {
        let d = doc("T", &[(Text, "abc", &[])]);
        // fake("a") = 2, so a 1-token window fits nothing.
        let (chunks, stats) = chunk_document(&d, &cfg(Strategy::C, 512, 0, 1), &mut fake);
        assert!(chunks.is_empty());
        assert_eq!(stats.dropped_chars, 3);
        assert_eq!(stats.split_for_window, 1);
    }

    #[test]
    fn emoji_and_accents_keep_utf16_offsets_exact() {
        let d = doc("Tête", &[(Heading(1), "Café 🦀", &["Café 🦀"]), (Text, "Crabe 🦀 à la crème. Encore un 🦀!", &["Café 🦀"])]);
        for s in Strategy::ALL {
            let (chunks, _) = run(&d, &cfg(s, 12, 5, 256));
            assert!(!chunks.is_empty());
        }
        let (chunks, _) = run(&d, &cfg(Strategy::E, 512, 0, 256));
        assert_eq!(chunks[0].text, "[Tête > Café 🦀]\nCafé 🦀\n\nCrabe 🦀 à la crème. Encore un 🦀!");
        assert_eq!((chunks[0].from, chunks[0].to), (0, text::utf16_len(&d.text)));
    }

    // --- properties ------------------------------------------------------------------------------

    mod props {
        use super::*;
        use proptest::prelude::{prop, prop_assert, proptest, ProptestConfig};
        use proptest::strategy::Strategy as _;

        const ALPHABET: &[char] = &[
            'a', 'b', 'c', 'x', 'Z', '1', ' ', ' ', ' ', ' ', '.', '.', '?', '!', ',', '\n', '\t', '日', '本', '語', '。', '！', '🦀',
            '👍', 'é', 'à', '\u{a0}', '\u{3000}',
        ];

        fn words(max: usize) -> impl proptest::strategy::Strategy<Value = String> {
            prop::collection::vec(prop::sample::select(ALPHABET), 0..max).prop_map(|v| v.into_iter().collect())
        }

        /// A block with no whitespace at all: minified code, hashes, CJK without punctuation.
        fn blob() -> impl proptest::strategy::Strategy<Value = String> {
            prop::collection::vec(prop::sample::select(&['x', '日', '🦀', 'é', ';'][..]), 1..400).prop_map(|v| v.into_iter().collect())
        }

        fn block() -> impl proptest::strategy::Strategy<Value = (BlockKind, String)> {
            proptest::prop_oneof![
                2 => (1u8..=4, words(30)).prop_map(|(l, s)| (Heading(l), s)),
                5 => words(300).prop_map(|s| (Text, s)),
                2 => words(300).prop_map(|s| (Code, s)),
                1 => blob().prop_map(|s| (Code, s)),
            ]
        }

        fn document() -> impl proptest::strategy::Strategy<Value = Document> {
            (words(150), prop::collection::vec((block(), prop::collection::vec(words(60), 0..4)), 0..12)).prop_map(|(title, blocks)| {
                let mut text = String::new();
                let mut out = Vec::new();
                for ((kind, raw), section) in blocks {
                    // The extractor's contract: blocks are trimmed and non-empty.
                    let t = raw.trim();
                    if t.is_empty() {
                        continue;
                    }
                    if !text.is_empty() {
                        text.push_str("\n\n");
                    }
                    let start = text.len();
                    text.push_str(t);
                    out.push(Block { start, end: text.len(), kind, section });
                }
                Document { path: "p".into(), title, text, blocks: out, lang: None, source: Default::default() }
            })
        }

        fn config() -> impl proptest::strategy::Strategy<Value = ChunkConfig> {
            (prop::sample::select(Strategy::ALL.to_vec()), 1usize..300, 0usize..60, 8usize..200).prop_map(|(s, t, o, m)| cfg(s, t, o, m))
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

            #[test]
            fn every_invariant_holds(d in document(), c in config()) {
                let (chunks, stats) = chunk_document(&d, &c, &mut fake);
                let r = check(&d, &c, &chunks, &stats, &mut fake);
                prop_assert!(r.is_ok(), "{:?}\nchunks {:#?}", r, chunks);
            }

            #[test]
            fn every_strategy_on_the_same_document(d in document(), t in 1usize..200, m in 8usize..120) {
                for s in Strategy::ALL {
                    let c = cfg(s, t, t / 4, m);
                    let (chunks, stats) = chunk_document(&d, &c, &mut fake);
                    let r = check(&d, &c, &chunks, &stats, &mut fake);
                    prop_assert!(r.is_ok(), "{}: {:?}\nchunks {:#?}", s, r, chunks);
                }
            }

            #[test]
            fn chunking_is_deterministic(d in document(), c in config()) {
                prop_assert!(chunk_document(&d, &c, &mut fake) == chunk_document(&d, &c, &mut fake));
            }
        }
    }
}
