//! A small valid index (built in code, see `common::tiny`) with byte edits from the input, its
//! checksum recomputed: the structural checks refuse it or it reads, and whatever reads can be
//! searched, cited and written back without a panic.
//!
//! Input: 3-byte edits `(offset u16 LE, value)`; offsets wrap into the bytes after the version
//! field, up to the checksum. A trailing 1–2 bytes give a cut: that many bytes (u16 LE, wrapped)
//! are removed from the end of the body, desynchronising the header length and vector count.
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use needle::query::index::Index;
use std::sync::LazyLock;

static TINY: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let bytes = common::tiny().to_bytes().expect("tiny index writes");
    // Regenerates the index_reader seed (see README.md).
    if let Some(path) = std::env::var_os("NEEDLE_FUZZ_WRITE_TINY") {
        std::fs::write(path, &bytes).expect("write the tiny index");
    }
    bytes
});

fuzz_target!(|data: &[u8]| {
    let mut bytes = TINY.clone();
    let body_end = bytes.len() - 40;
    let span = body_end - 12;
    let mut edits = data.chunks_exact(3);
    for e in &mut edits {
        let at = 12 + u16::from_le_bytes([e[0], e[1]]) as usize % span;
        bytes[at] = e[2];
    }
    let tail = edits.remainder();
    if !tail.is_empty() {
        let n = u16::from_le_bytes([tail[0], tail.get(1).copied().unwrap_or(0)]) as usize % (span + 1);
        bytes.drain(body_end - n..body_end);
    }
    common::reseal(&mut bytes);
    if let Ok(idx) = Index::from_bytes(&bytes, "fuzz") {
        common::use_index(&idx);
    }
});
