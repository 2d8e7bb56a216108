//! needle: search for static documentation sites, built natively and queried natively or in
//! WebAssembly. Modules in reading order: `extract` (page → canonical text), `chunk` (canonical
//! text → chunks with exact offsets), `embed` (chunks → vectors), `bm25`, `fuse`, `index` (the
//! on-disk format), `search` (hybrid retrieval + gate), `cite` (citations, prompt, `[n]` links),
//! `eval` (measuring retrieval).

pub mod bm25;
pub mod chunk;
pub mod cite;
pub mod embed;
pub mod error;
pub mod fuse;
pub mod index;
pub mod search;
pub mod text;

#[cfg(feature = "native")]
pub mod build;
#[cfg(feature = "native")]
pub mod bundle;
#[cfg(feature = "native")]
pub mod eval;
#[cfg(feature = "native")]
pub mod extract;
#[cfg(feature = "native")]
pub mod model;
#[cfg(feature = "native")]
pub mod serve;
#[cfg(target_arch = "wasm32")]
pub mod wasm;

pub use error::Error;

/// Version of the whole chunk → embed → index pipeline. Bump when any stage changes what it
/// writes; an index built by another pipeline version is rebuilt, never mixed.
pub const PIPELINE_VERSION: u32 = 2;
