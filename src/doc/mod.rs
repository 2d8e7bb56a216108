//! Documents: a page's canonical text and its chunks. `canonical` (the canonical text rule),
//! `text` and `chunk` are pure functions of their input and compile everywhere, the browser's
//! lexical core included; `extract` reads files and parses HTML (feature `extract`, part of
//! `native`).

pub mod canonical;
pub mod chunk;
#[cfg(feature = "extract")]
pub mod extract;
#[cfg(feature = "extract")]
pub mod lang;
pub mod locator;
#[cfg(feature = "extract")]
pub mod media;
#[cfg(feature = "extract")]
pub mod pdf;
#[cfg(feature = "extract")]
pub mod table;
pub mod text;
