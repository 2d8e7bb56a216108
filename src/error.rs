//! The library's error type. Every variant names the input it is about.
//!
//! A variant that wraps a lower-level error (`cause`) writes it into its own message and does
//! not also return it from `source()`: a report that walks the chain (anyhow's `{:#}`, as the
//! CLI prints) then says each reason once. The crate's other error enums follow the same rule.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {cause}")]
    Io { path: PathBuf, cause: std::io::Error },
    #[cfg(feature = "embed")]
    #[error(transparent)]
    Embed(#[from] crate::embed::EmbedError),
    /// A model or tokenizer file that does not load (corrupt, truncated, another format).
    #[cfg(feature = "embed")]
    #[error("{path}: cannot load: {cause}")]
    Load { path: PathBuf, cause: crate::embed::EmbedError },
    #[error(transparent)]
    Index(#[from] crate::query::index::IndexError),
    #[cfg(feature = "native")]
    #[error(transparent)]
    Model(#[from] crate::model::ModelError),
    #[cfg(feature = "extract")]
    #[error(transparent)]
    Extract(#[from] crate::doc::extract::ExtractError),
    #[cfg(feature = "native")]
    #[error(transparent)]
    Part(#[from] crate::build::part::PartError),
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, cause: std::io::Error) -> Self {
        Error::Io { path: path.into(), cause }
    }
}
