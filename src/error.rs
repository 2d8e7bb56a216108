//! The library's error type. Every variant names the input it is about.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Embed(#[from] crate::embed::EmbedError),
    /// A model or tokenizer file that does not load (corrupt, truncated, another format).
    #[error("{path}: cannot load: {source}")]
    Load { path: PathBuf, source: crate::embed::EmbedError },
    #[error(transparent)]
    Index(#[from] crate::index::IndexError),
    #[cfg(feature = "native")]
    #[error(transparent)]
    Model(#[from] crate::model::ModelError),
    #[cfg(feature = "native")]
    #[error(transparent)]
    Extract(#[from] crate::extract::ExtractError),
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}
