//! Sentence embeddings with all-MiniLM-L6-v2 run by tract: word-piece tokens (at most
//! `MAX_TOKENS`, special tokens included), mean-pooled over the sequence, L2-normalised.
//! Works on bytes (no I/O) so the same code runs natively and in WebAssembly.
//!
//! The model is an ONNX graph as written by `needle model convert` (see `model`): input
//! `input_ids` int64 `[1, S]`, output `[1, DIM]` already pooled and normalised. One text per
//! run: the graph has no attention mask, so texts are never padded or batched together
//! (batch 1 was also the fastest per text on tract).

use crate::query::index::{sha256_hex, ModelStamp};
use crate::query::search::QueryVector;
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};
use tract_onnx::prelude::*;

mod linear;
pub mod pack;
mod softmax;

pub const MODEL_NAME: &str = "all-MiniLM-L6-v2";
pub const DIM: usize = 384;
/// The encoder's window in word-pieces, `[CLS]` and `[SEP]` included.
pub const MAX_TOKENS: usize = 256;

/// What an index records of this model, given the sha256 (hex) of the ONNX file and of
/// `tokenizer.json`: the one place a [`ModelStamp`] is made.
pub fn model_stamp(model_sha256: String, tokenizer_sha256: String) -> ModelStamp {
    ModelStamp { name: MODEL_NAME.to_string(), dim: DIM as u32, model_sha256, tokenizer_sha256 }
}

/// The stamp of a model given as bytes: the ONNX file and `tokenizer.json`.
pub fn stamp_of(model: &[u8], tokenizer_json: &[u8]) -> ModelStamp {
    model_stamp(sha256_hex(model), sha256_hex(tokenizer_json))
}

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("model: {0}")]
    Model(String),
    /// Token ids given to [`Embedder::embed_ids`] that the model cannot take.
    #[error("input: {0}")]
    Input(String),
}

/// `{:#}`: tract's errors are anyhow chains, and the alternate form keeps every cause
/// ("running: Evaluating #12 Gather: index out of bounds"), not only the outermost one.
fn model_err(context: &str, e: impl std::fmt::Display) -> EmbedError {
    EmbedError::Model(format!("{context}: {e:#}"))
}

type Plan = TypedRunnableModel;

pub struct Embedder {
    /// Truncates at `MAX_TOKENS`, never pads: what the model sees.
    tokenizer: Tokenizer,
    /// Same tokenizer without truncation, for `token_count`, which must see the whole text.
    counter: Tokenizer,
    plan: Arc<Plan>,
    vocab_size: usize,
    /// How many of the graph's softmax ops run as `softmax::LastAxisSoftmax`.
    #[cfg_attr(not(test), allow(dead_code))]
    fast_softmax: usize,
    /// How many of the graph's weight matmuls run as `linear::Linear` (all 36 in WebAssembly,
    /// none natively).
    #[cfg_attr(not(test), allow(dead_code))]
    own_linear: usize,
}

// The build shares one Embedder (one optimised plan) between its rayon threads; keep that possible.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Embedder>();
};

impl Embedder {
    /// Loads an ONNX model (as written by `needle model convert`) and a `tokenizer.json`.
    pub fn from_bytes(model: &[u8], tokenizer_json: &[u8]) -> Result<Self, EmbedError> {
        // In WebAssembly tract's f32 matmul tile spills registers on x86-64; natively its AVX and
        // NEON kernels beat the portable form of needle's (see `linear`).
        Self::load(model, tokenizer_json, cfg!(target_arch = "wasm32"))
    }

    fn load(model: &[u8], tokenizer_json: &[u8], own_linear: bool) -> Result<Self, EmbedError> {
        let mut counter = Tokenizer::from_bytes(tokenizer_json).map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        // The shipped tokenizer.json truncates at 128 and pads to 128: neither matches the
        // model's 256 window, and padding would change the mean (the graph has no mask).
        counter.with_padding(None);
        counter.with_truncation(None).map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        let mut tokenizer = counter.clone();
        tokenizer
            .with_truncation(Some(TruncationParams {
                direction: TruncationDirection::Right,
                max_length: MAX_TOKENS,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
            }))
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        let vocab_size = tokenizer.get_vocab_size(true);

        let onnx = tract_onnx::onnx();
        let mut reader = model;
        let mut proto = onnx.proto_model_for_read(&mut reader).map_err(|e| model_err("reading ONNX", e))?;
        // The packed form (`pack`) carries 4-bit codes two to a byte: expand them first.
        pack::unpack(&mut proto).map_err(|e| model_err("unpacking", e))?;
        let inference = onnx.model_for_proto_model(&proto).map_err(|e| model_err("reading ONNX", e))?;
        drop(proto);
        // Use the graph's own sequence symbol so the input fact and the graph's shapes agree.
        let seq = inference.sym("S");
        let mut typed = inference
            .with_input_fact(0, InferenceFact::dt_shape(i64::datum_type(), tvec!(1.to_dim(), seq.to_dim())))
            .and_then(|m| m.into_typed())
            .map_err(|e| model_err("preparing the graph", e))?;
        let own_linear = if own_linear { linear::substitute(&mut typed).map_err(|e| model_err("preparing the graph", e))? } else { 0 };
        let mut optimized = typed.into_optimized().map_err(|e| model_err("preparing the graph", e))?;
        // tract's softmax is slow on rows whose length is not a multiple of its SIMD width,
        // which is nearly every text: see `softmax`.
        let fast_softmax = softmax::substitute(&mut optimized).map_err(|e| model_err("preparing the graph", e))?;
        let plan = optimized.into_runnable().map_err(|e| model_err("preparing the graph", e))?;
        let emb = Embedder { tokenizer, counter, plan, vocab_size, fast_softmax, own_linear };
        // Fail at load, not at the first query, if the graph is not a DIM-wide sentence encoder.
        let probe = emb.embed_ids(&[101, 102])?;
        if probe.len() != DIM {
            return Err(EmbedError::Model(format!("the graph outputs {} values, expected {DIM}", probe.len())));
        }
        Ok(emb)
    }

    /// Number of word-pieces the model sees for `text`, `[CLS]` and `[SEP]` included, before
    /// truncation.
    pub fn token_count(&self, text: &str) -> Result<usize, EmbedError> {
        let enc = self.counter.encode_fast(text, true).map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        Ok(enc.len())
    }

    /// The token ids the model sees for `text`: `[CLS]`, word-pieces, `[SEP]`, at most `MAX_TOKENS`.
    pub fn tokenize(&self, text: &str) -> Result<Vec<i64>, EmbedError> {
        let enc = self.tokenizer.encode_fast(text, true).map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        Ok(enc.get_ids().iter().map(|&id| i64::from(id)).collect())
    }

    /// The L2-normalised embedding of `text` (truncated to `MAX_TOKENS`).
    pub fn embed(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let ids = self.tokenize(text)?;
        self.embed_ids(&ids)
    }

    /// `text` as a query: its embedding and the words of it that the vocabulary does not hold
    /// whole (the gate's foreign-word signal, `query::search::foreign_words`).
    pub fn query(&self, text: &str) -> Result<QueryVector, EmbedError> {
        let vector = self.embed(text)?;
        let mut unknown_to_model: Vec<String> = Vec::new();
        for w in crate::query::bm25::tokenize(text) {
            if self.tokenizer.token_to_id(&w).is_none() && !unknown_to_model.contains(&w) {
                unknown_to_model.push(w);
            }
        }
        Ok(QueryVector { vector, unknown_to_model })
    }

    /// The L2-normalised embedding of already tokenized ids (1 to `MAX_TOKENS` of them).
    pub fn embed_ids(&self, ids: &[i64]) -> Result<Vec<f32>, EmbedError> {
        if ids.is_empty() || ids.len() > MAX_TOKENS {
            return Err(EmbedError::Input(format!("{} token ids, expected 1 to {MAX_TOKENS}", ids.len())));
        }
        // An out-of-vocabulary id would index past the embedding table inside the graph.
        if let Some(bad) = ids.iter().find(|&&id| id < 0 || id as u64 >= self.vocab_size as u64) {
            return Err(EmbedError::Input(format!("token id {bad} outside the vocabulary of {}", self.vocab_size)));
        }
        let input = Tensor::from_shape(&[1, ids.len()], ids).map_err(|e| model_err("input", e))?;
        let out = self.plan.run(tvec!(input.into())).map_err(|e| model_err("running", e))?;
        let first = out.first().ok_or_else(|| EmbedError::Model("the graph has no output".into()))?;
        let v = first.to_plain_array_view::<f32>().map_err(|e| model_err("output", e))?;
        Ok(v.iter().copied().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_hashes_bytes() {
        let s = stamp_of(b"abc", b"");
        assert_eq!(s.model_sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(s.tokenizer_sha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!((s.name.as_str(), s.dim), (MODEL_NAME, DIM as u32));
    }

    use crate::query::search::cosine_distance;

    /// tract's own plan for the shipped model, none of needle's ops in it.
    fn plain_tract_plan(model: &[u8]) -> Arc<Plan> {
        let mut reader = model;
        let mut proto = tract_onnx::onnx().proto_model_for_read(&mut reader).expect("onnx");
        pack::unpack(&mut proto).expect("unpack");
        let inference = tract_onnx::onnx().model_for_proto_model(&proto).expect("onnx");
        let seq = inference.sym("S");
        inference
            .with_input_fact(0, InferenceFact::dt_shape(i64::datum_type(), tvec!(1.to_dim(), seq.to_dim())))
            .and_then(|m| m.into_optimized())
            .and_then(|m| m.into_runnable())
            .expect("plain plan")
    }

    /// `emb`'s embeddings of two queries and a 256-word-piece passage against `plain`'s.
    fn assert_same_embeddings(emb: &Embedder, plain: &Arc<Plan>, what: &str) {
        let long = "A longer passage about unsafe code and its invariants. ".repeat(30);
        for text in ["Which types are Send and Sync?", "ok", &long] {
            let ids = emb.tokenize(text).expect("tokenize");
            let ours = emb.embed_ids(&ids).expect("embed");
            let input = Tensor::from_shape(&[1, ids.len()], &ids).expect("input");
            let out = plain.run(tvec!(input.into())).expect("run");
            let theirs: Vec<f32> = out[0].to_plain_array_view::<f32>().expect("view").iter().copied().collect();
            let d = cosine_distance(&ours, &theirs);
            assert!(d < 1e-6, "{} tokens: cosine distance {d} from tract's own {what}", ids.len());
        }
    }

    fn shipped_model() -> (Vec<u8>, Vec<u8>) {
        let files = crate::model::ModelFiles::locate().expect("the model (./build.sh model)");
        (std::fs::read(&files.model).expect("model file"), std::fs::read(&files.tokenizer).expect("tokenizer file"))
    }

    /// The shipped model's six attention softmaxes all run as `LastAxisSoftmax` (a tract
    /// upgrade that renamed or reshaped its softmax would otherwise silently bring back the
    /// slow path), and the embedding still matches the plain tract plan's.
    #[test]
    fn the_shipped_model_runs_every_softmax_through_the_row_kernel() {
        let (model, tok) = shipped_model();
        let emb = Embedder::from_bytes(&model, &tok).expect("load");
        assert_eq!(emb.fast_softmax, 6);
        assert_eq!(emb.own_linear, if cfg!(target_arch = "wasm32") { 36 } else { 0 });
        assert_same_embeddings(&emb, &plain_tract_plan(&model), "softmax");
    }

    /// The WebAssembly plan: all 36 weight matmuls (Q, K, V, attention output, both
    /// feed-forward layers, in six layers) run as `linear::Linear`, here through its portable
    /// tile, and the embeddings match tract's own matmuls.
    #[test]
    fn the_shipped_model_runs_every_weight_matmul_through_needles_tile() {
        let (model, tok) = shipped_model();
        let emb = Embedder::load(&model, &tok, true).expect("load");
        assert_eq!((emb.own_linear, emb.fast_softmax), (36, 6));
        assert_same_embeddings(&emb, &plain_tract_plan(&model), "matmuls");
    }

    #[test]
    fn bad_bytes_give_errors_not_panics() {
        assert!(matches!(Embedder::from_bytes(b"not onnx", b"{}"), Err(EmbedError::Tokenizer(_))));
    }
}
