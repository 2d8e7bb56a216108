//! Caption tracks (WebVTT) → the canonical text of a media file: one line per cue, each cue a
//! block that knows its time range, so a chunk of consecutive cues is cited as
//! `clip.webm#t=start,end` ([`crate::doc::locator`]).
//!
//! The rule: a cue's text is its payload with tags (`<v Name>`, `<c.x>`, `<i>`, `<00:01.000>`)
//! removed, the character references `&amp; &lt; &gt; &quot; &apos; &nbsp; &lrm; &rlm;` and
//! numeric ones decoded, and whitespace collapsed (line breaks inside a cue become spaces).
//! Empty cues are left out; `NOTE`, `STYLE` and `REGION` blocks are not cues. A file that does
//! not start with `WEBVTT` (after an optional byte-order mark) or holds no cue with text is an
//! error naming the reason. Where the cues sit in the page (`<video>`/`<audio>` with a
//! `<track>`, or a `.vtt` next to a media file of the same name) is the site walk's business.

use crate::doc::locator::{Cue, Source};
use crate::doc::text::{collapse_spaces, Block, BlockKind, Document};

/// Extensions (lowercase) of media files a `.vtt` of the same name captions.
pub const MEDIA_EXTENSIONS: &[&str] = &["webm", "mp4", "m4v", "ogv", "mov", "mp3", "m4a", "ogg", "oga", "opus", "wav", "flac"];

/// One parsed cue.
#[derive(Debug, Clone, PartialEq)]
pub struct VttCue {
    pub start_ms: u32,
    pub end_ms: u32,
    pub text: String,
}

/// Parses a WebVTT file; `Err` says why it is not one.
pub fn parse_vtt(source: &str) -> Result<Vec<VttCue>, String> {
    let source = source.strip_prefix('\u{feff}').unwrap_or(source);
    let normalized = source.replace("\r\n", "\n").replace('\r', "\n");
    let mut blocks = normalized.split("\n\n").map(|b| b.trim_matches('\n')).filter(|b| !b.is_empty());
    let first = blocks.next().unwrap_or_default();
    let signature = first.lines().next().unwrap_or_default();
    if !(signature == "WEBVTT" || signature.starts_with("WEBVTT ") || signature.starts_with("WEBVTT\t")) {
        return Err("not a WebVTT file (no WEBVTT line at the start)".into());
    }
    let mut cues = Vec::new();
    for block in blocks {
        let mut lines = block.lines();
        let Some(mut line) = lines.next() else { continue };
        if line.starts_with("NOTE") || line.starts_with("STYLE") || line.starts_with("REGION") {
            continue;
        }
        if !line.contains("-->") {
            // The cue's identifier.
            match lines.next() {
                Some(l) => line = l,
                None => continue,
            }
        }
        let Some((start, rest)) = line.split_once("-->") else { continue };
        let end = rest.split_whitespace().next().unwrap_or_default();
        let (Some(start_ms), Some(end_ms)) = (timestamp(start.trim()), timestamp(end)) else {
            return Err(format!("bad cue timing line {line:?}"));
        };
        let payload: Vec<&str> = lines.collect();
        let text = collapse_spaces(&decode_references(&strip_tags(&payload.join("\n"))));
        if !text.is_empty() {
            cues.push(VttCue { start_ms, end_ms: end_ms.max(start_ms), text });
        }
    }
    if cues.is_empty() {
        return Err("no cue with text".into());
    }
    Ok(cues)
}

/// `[hh:]mm:ss.ttt` → milliseconds.
fn timestamp(s: &str) -> Option<u32> {
    let (clock, frac) = s.split_once('.')?;
    if frac.len() != 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let parts: Vec<&str> = clock.split(':').collect();
    let num = |p: &str| (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())).then(|| p.parse::<u32>().ok()).flatten();
    let (h, m, sec) = match parts.as_slice() {
        [m, s] => (0, num(m)?, num(s)?),
        [h, m, s] => (num(h)?, num(m)?, num(s)?),
        _ => return None,
    };
    if m > 59 || sec > 59 {
        return None;
    }
    let ms = u64::from(h) * 3_600_000 + u64::from(m) * 60_000 + u64::from(sec) * 1000 + u64::from(frac.parse::<u32>().ok()?);
    u32::try_from(ms).ok()
}

fn strip_tags(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_tag = false;
    for c in s.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

fn decode_references(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp + 1..];
        let decoded = after.find(';').filter(|&semi| semi <= 10).and_then(|semi| {
            let name = &after[..semi];
            let c = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                "nbsp" => Some('\u{a0}'),
                "lrm" => Some('\u{200e}'),
                "rlm" => Some('\u{200f}'),
                _ => {
                    let n = name.strip_prefix('#')?;
                    let code = match n.strip_prefix(['x', 'X']) {
                        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                        None => n.parse().ok()?,
                    };
                    char::from_u32(code)
                }
            }?;
            Some((c, semi))
        });
        match decoded {
            Some((c, semi)) => {
                out.push(c);
                rest = &after[semi + 1..];
            }
            None => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The document of a media file (`path`, relative to the site root) from its cues: one line
/// per cue. `host` is the page whose player shows it, `section` the heading path above that
/// player (empty for a standalone file).
pub fn media_document(path: &str, title: &str, cues: &[VttCue], host: Option<String>, section: &[String]) -> Document {
    let mut text = String::new();
    let mut blocks = Vec::with_capacity(cues.len());
    let mut units = Vec::with_capacity(cues.len());
    for cue in cues {
        if !text.is_empty() {
            text.push('\n');
        }
        let start = text.len();
        text.push_str(&cue.text);
        blocks.push(Block { start, end: text.len(), kind: BlockKind::Text, section: section.to_vec() });
        units.push(Cue { range: start..text.len(), start_ms: cue.start_ms, end_ms: cue.end_ms });
    }
    Document { path: path.to_string(), title: title.to_string(), text, blocks, lang: None, source: Source::Media { cues: units, host } }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cues_lose_tags_ids_and_notes_and_keep_their_times() {
        let vtt = "\u{feff}WEBVTT - a talk\r\n\r\nNOTE a comment\r\nspanning lines\r\n\r\nintro\r\n00:01.000 --> 00:03.500 align:start\r\n<v Ana>Hello &amp; <i>welcome</i></v>\r\nto the talk\r\n\r\n01:00:02.250 --> 01:00:04.000\r\n<00:00:02.500>Timed &#x263A;\r\n\r\n00:05.000 --> 00:06.000\r\n\r\n";
        let cues = parse_vtt(vtt).unwrap();
        assert_eq!(
            cues,
            vec![
                VttCue { start_ms: 1000, end_ms: 3500, text: "Hello & welcome to the talk".into() },
                VttCue { start_ms: 3_602_250, end_ms: 3_604_000, text: "Timed ☺".into() },
            ]
        );
        let doc = media_document("talk.webm", "talk", &cues, None, &[]);
        assert_eq!(doc.text, "Hello & welcome to the talk\nTimed ☺");
        assert_eq!(doc.source.locate(0, 5), crate::doc::locator::Locator::Time { start_ms: 1000, end_ms: 3500 });
    }

    #[test]
    fn a_file_without_the_signature_or_cues_is_refused() {
        assert!(parse_vtt("1\n00:00:01,000 --> 00:00:02,000\nSRT, not VTT\n").unwrap_err().contains("not a WebVTT"));
        assert_eq!(parse_vtt("WEBVTT\n\nNOTE only a note\n").unwrap_err(), "no cue with text");
        assert!(parse_vtt("WEBVTT\n\n00:01.0 --> 00:02.000\nx\n").unwrap_err().contains("bad cue timing"));
    }
}
