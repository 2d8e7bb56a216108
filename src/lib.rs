//! needle: search for static documentation sites, built natively and queried natively or in
//! WebAssembly.
//!
//! # Brief overview
//!
//! The crate has three layers, each a folder, and the folder says what it may depend on:
//!
//! - [`doc`]: a page becomes canonical text ([`doc::extract`], native only: it parses HTML)
//!   and the canonical text becomes chunks with exact offsets ([`doc::chunk`]); [`doc::text`]
//!   holds the offsets arithmetic every other layer cites in.
//! - [`query`]: everything a query needs except the model — the index format
//!   ([`query::index`]), BM25, rank fusion, the gate ([`query::search`]) and citations
//!   ([`query::cite`]). It compiles without tract and the tokenizer (`--no-default-features`),
//!   which is the lexical core a browser can download first.
//! - [`embed`] (feature `embed`): the model — word-piece tokenizer and the MiniLM encoder run by
//!   tract; [`model`] and [`build`] (feature `native`) convert and fetch the model, and turn a
//!   site folder into an index and a browser bundle.
//!
//! The browser's entry point is the thin `wasm` module; the `needle` binary
//! (`src/bin/needle/`) is the CLI with its tools (`serve`, `eval`).
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use needle::query::{index::Index, search::{search, SearchOptions}};
//! let index = Index::from_bytes(&std::fs::read("site/needle/index.needle")?, "index.needle")?;
//! // Lexical only (no query vector): ranks by BM25; nothing passes the cosine gate.
//! let result = search(&index, "how do I cite a page?", None, &SearchOptions::default());
//! for hit in &result.hits {
//!     println!("{}#char={},{}  {}", hit.page, hit.from, hit.to, hit.content);
//! }
//! # Ok(()) }
//! ```

pub mod doc;
pub mod error;
pub mod query;

#[cfg(feature = "embed")]
pub mod embed;

#[cfg(feature = "native")]
pub mod build;
#[cfg(feature = "native")]
pub mod model;

#[cfg(target_arch = "wasm32")]
mod wasm;

pub use error::Error;

/// Version of the whole chunk → embed → index pipeline. Bump when any stage changes what it
/// writes; an index built by another pipeline version is rebuilt, never mixed.
pub const PIPELINE_VERSION: u32 = 3;
