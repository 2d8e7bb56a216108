//! Documents: a page's canonical text and its chunks. `text` and `chunk` are pure functions
//! of their input and compile everywhere; `extract` reads files and parses HTML (feature `extract`, part of `native`).

pub mod chunk;
#[cfg(feature = "extract")]
pub mod extract;
pub mod text;
