//! Arbitrary bytes → `Index::from_bytes`: refused with an error or read, never a panic.
//!
//! Each input is tried twice: as it is (which exercises the magic, truncation, version and
//! checksum checks: a mutated index almost never has a valid checksum), and with its checksum
//! slot recomputed, so that mutations of a valid seed index reach the postcard header decoder
//! and the structural checks. An index that reads is then searched in every mode, cited, and
//! written back (it must round-trip).
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use needle::query::index::Index;

fuzz_target!(|data: &[u8]| {
    if let Ok(idx) = Index::from_bytes(data, "fuzz") {
        common::use_index(&idx);
    }
    let mut sealed = data.to_vec();
    common::reseal(&mut sealed);
    match Index::from_bytes(&sealed, "fuzz") {
        Ok(idx) => common::use_index(&idx),
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
