//! What a query needs, without the model: the index (read from bytes), BM25, reciprocal rank
//! fusion, the cosine gate and citations. Nothing here depends on tract or the tokenizer, so
//! this layer alone is the lexical core (`--no-default-features`); the query vector, when
//! there is one, comes from `embed`.

pub mod analyze;
pub mod bm25;
pub mod cite;
pub mod fuse;
pub mod index;
pub mod lexicon;
pub mod pieces;
pub mod search;
