//! GPTQ (Frantar et al., "GPTQ: Accurate Post-Training Quantization for Generative Pre-trained
//! Transformers", ICLR 2023) for the linear weights of a calibrated grouped form: each weight's
//! columns (input features) are quantized one after the other, and the rounding error of each
//! is spread over the columns not yet quantized, weighted by the inverse of `H = Σ xᵀx`, the
//! Gram matrix of that layer's inputs on calibration text. Round-to-nearest minimises the error
//! of each weight; GPTQ minimises the error of the layer's output on inputs like the
//! calibration ones, which is what the embedding sees.
//!
//! Calibration: [`CALIBRATION`], frozen text shipped in the crate (so the converted file, and
//! every index's model stamp, are reproducible), run through the fp32 graph by tract with the
//! inputs of every linear layer as extra outputs. Each layer is quantized against the fp32
//! activations of the layers before it (not the sequential variant), one layer per task.

use rayon::prelude::*;
use tokenizers::Tokenizer;
use tract_onnx::prelude::*;

use super::{build_onnx, choose_scale, Arch, Precision, Weights};
use crate::embed::MAX_TOKENS;

/// The calibration passages (`calibration.txt`; lines starting with `#` are its provenance).
pub(crate) const CALIBRATION: &str = include_str!("calibration.txt");

/// Added to `H`'s diagonal, as a share of its mean (the reference implementation's 1 %).
const DAMP: f64 = 0.01;

/// The four distinct inputs of an encoder layer's linear weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Input {
    /// The layer's input: query, key and value.
    Hidden,
    /// The merged attention context: the attention output.
    Context,
    /// The attention block's output: the feed-forward input layer.
    Attended,
    /// The GELU activations: the feed-forward output layer.
    Activation,
}

impl Input {
    pub(crate) const ALL: [Input; 4] = [Input::Hidden, Input::Context, Input::Attended, Input::Activation];

    /// The graph node (named by `build_onnx`) whose output is this input in layer `l`.
    fn node(self, l: usize) -> String {
        match self {
            Input::Hidden if l == 0 => "emb.norm.out".to_string(),
            Input::Hidden => format!("layer{}.out_norm.out", l - 1),
            Input::Context => format!("layer{l}.context_merged"),
            Input::Attended => format!("layer{l}.attn_norm.out"),
            Input::Activation => format!("layer{l}.gelu.out"),
        }
    }

    fn width(self, a: Arch) -> usize {
        if self == Input::Activation {
            a.ffn
        } else {
            a.hidden
        }
    }
}

/// `H = Σ xᵀx` of every layer's four inputs over the calibration passages: `[layer][input]`,
/// each row-major `n × n` (f64 sums of f32 products).
pub(crate) fn hessians(w: &Weights, tokenizer_json: &[u8]) -> Result<Vec<Vec<Vec<f64>>>, String> {
    let mut tokenizer = Tokenizer::from_bytes(tokenizer_json).map_err(|e| format!("tokenizer: {e}"))?;
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(Some(tokenizers::TruncationParams { max_length: MAX_TOKENS, ..Default::default() }))
        .map_err(|e| format!("tokenizer: {e}"))?;

    let proto = build_onnx(w, Precision::Fp32);
    let err = |e: TractError| format!("calibration graph: {e:#}");
    let mut model = tract_onnx::onnx().model_for_proto_model(&proto).map_err(err)?;
    let seq = model.sym(super::SEQ_SYMBOL);
    model.set_input_fact(0, InferenceFact::dt_shape(i64::datum_type(), tvec!(1.to_dim(), seq.to_dim()))).map_err(err)?;
    let names: Vec<String> = (0..w.arch.layers).flat_map(|l| Input::ALL.map(|i| i.node(l))).collect();
    model.select_outputs_by_name(&names).map_err(err)?;
    let plan = model.into_optimized().and_then(|m| m.into_runnable()).map_err(err)?;

    let mut sums: Vec<Vec<Vec<f64>>> =
        (0..w.arch.layers).map(|_| Input::ALL.iter().map(|i| vec![0f64; i.width(w.arch).pow(2)]).collect()).collect();
    for text in calibration_texts() {
        let enc = tokenizer.encode_fast(text, true).map_err(|e| format!("tokenizer: {e}"))?;
        let ids: Vec<i64> = enc.get_ids().iter().map(|&i| i64::from(i)).collect();
        let input = Tensor::from_shape(&[1, ids.len()], &ids).map_err(err)?;
        let outputs = plan.run(tvec!(input.into())).map_err(err)?;
        for (k, out) in outputs.iter().enumerate() {
            let (l, i) = (k / Input::ALL.len(), Input::ALL[k % Input::ALL.len()]);
            let n = i.width(w.arch);
            let x = out.to_plain_array_view::<f32>().map_err(err)?;
            let x = x.to_shape((ids.len(), n)).map_err(|e| format!("calibration output {}: {e}", i.node(l)))?;
            let g = x.t().dot(&x);
            for (acc, v) in sums[l][k % Input::ALL.len()].iter_mut().zip(g.iter()) {
                *acc += f64::from(*v);
            }
        }
    }
    Ok(sums)
}

/// The texts run for calibration: every passage of [`CALIBRATION`] whole (long inputs, like
/// chunks) and each of its sentences alone (short ones, like queries, where `[CLS]` and `[SEP]`
/// weigh as much as the words).
fn calibration_texts() -> impl Iterator<Item = &'static str> {
    let passages = || CALIBRATION.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty());
    passages().chain(passages().flat_map(|p| p.split_inclusive(". ").map(str::trim)).filter(|s| !s.is_empty()))
}

/// Lower-triangular `L` with `L Lᵀ = a` (`n × n`, row-major), or `None` if `a` is not
/// positive definite.
fn cholesky(a: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut l = vec![0f64; n * n];
    for i in 0..n {
        for j in 0..=i {
            let dot: f64 = (0..j).map(|k| l[i * n + k] * l[j * n + k]).sum();
            if i == j {
                let d = a[i * n + i] - dot;
                if d <= 0.0 || !d.is_finite() {
                    return None;
                }
                l[i * n + i] = d.sqrt();
            } else {
                l[i * n + j] = (a[i * n + j] - dot) / l[j * n + j];
            }
        }
    }
    Some(l)
}

/// The upper-triangular `U` with `Uᵀ U = H⁻¹`, damped until `H` factors.
fn inverse_factor(h: &[f64], n: usize) -> Vec<f64> {
    let mean = (0..n).map(|i| h[i * n + i]).sum::<f64>() / n as f64;
    let mut damp = DAMP;
    // Damping by up to 10⁶ × the mean diagonal factors any finite H; one that still does not
    // (NaN or infinite activations) gets the identity, which makes GPTQ plain rounding.
    for _ in 0..9 {
        let mut hd = h.to_vec();
        for i in 0..n {
            hd[i * n + i] += damp * mean.max(1e-12);
        }
        if let Some(l) = cholesky(&hd, n) {
            // L⁻¹ by forward substitution, column by column (lower triangular).
            let mut li = vec![0f64; n * n];
            for c in 0..n {
                li[c * n + c] = 1.0 / l[c * n + c];
                for r in c + 1..n {
                    let s: f64 = (c..r).map(|k| l[r * n + k] * li[k * n + c]).sum();
                    li[r * n + c] = -s / l[r * n + r];
                }
            }
            // H⁻¹ = L⁻ᵀ L⁻¹: entry (i, j) sums over k ≥ max(i, j).
            let mut hinv = vec![0f64; n * n];
            for i in 0..n {
                for j in 0..=i {
                    let s: f64 = (i..n).map(|k| li[k * n + i] * li[k * n + j]).sum();
                    hinv[i * n + j] = s;
                    hinv[j * n + i] = s;
                }
            }
            if let Some(m) = cholesky(&hinv, n) {
                // U = Mᵀ.
                let mut u = vec![0f64; n * n];
                for i in 0..n {
                    for j in i..n {
                        u[i * n + j] = m[j * n + i];
                    }
                }
                return u;
            }
        }
        damp *= 10.0;
    }
    (0..n * n).map(|k| if k % (n + 1) == 0 { 1.0 } else { 0.0 }).collect()
}

/// GPTQ of one PyTorch linear weight `w` (`[out, inp]`, row-major) against `h` (`inp × inp`):
/// `bits`-bit codes and one f16 scale per group of `group` inputs, in the layout of
/// `quantize_groups` (codes `[out, inp]`, scales `[out, inp / group]`).
pub(crate) fn gptq(w: &[f32], out: usize, inp: usize, h: &[f64], group: usize, bits: u32) -> (Vec<i8>, Vec<f16>) {
    let mut h = h.to_vec();
    let mut w: Vec<f64> = w.iter().map(|&v| f64::from(v)).collect();
    // An input that is always zero carries nothing: its weights are zero, its H row unit.
    for i in 0..inp {
        if h[i * inp + i] == 0.0 {
            h[i * inp + i] = 1.0;
            for r in 0..out {
                w[r * inp + i] = 0.0;
            }
        }
    }
    // Scales per group from the weights as they are ("static groups"), so that the columns can
    // then be taken in any order: the inputs with the most energy first ("act order"), while
    // the most columns are left to absorb their error.
    let groups = inp / group;
    let mut scales = vec![f16::ONE; out * groups];
    let mut buf = vec![0f32; group];
    for r in 0..out {
        for g in 0..groups {
            for (b, v) in buf.iter_mut().zip(&w[r * inp + g * group..r * inp + (g + 1) * group]) {
                *b = *v as f32;
            }
            scales[r * groups + g] = choose_scale(&buf, bits);
        }
    }
    let mut perm: Vec<usize> = (0..inp).collect();
    perm.sort_by(|&a, &b| h[b * inp + b].total_cmp(&h[a * inp + a]).then(a.cmp(&b)));
    let hp: Vec<f64> = (0..inp * inp).map(|k| h[perm[k / inp] * inp + perm[k % inp]]).collect();
    let u = inverse_factor(&hp, inp);
    let (qmin, qmax) = (-(1i32 << (bits - 1)) as f64, ((1i32 << (bits - 1)) - 1) as f64);
    let mut codes = vec![0i8; out * inp];
    let mut row = vec![0f64; inp];
    for r in 0..out {
        for (x, &p) in row.iter_mut().zip(&perm) {
            *x = w[r * inp + p];
        }
        for i in 0..inp {
            let col = perm[i];
            let s = f64::from(scales[r * groups + col / group].to_f32());
            let q = (row[i] / s).round().clamp(qmin, qmax);
            codes[r * inp + col] = q as i8;
            let err = (row[i] - q * s) / u[i * inp + i];
            for (x, uij) in row[i + 1..].iter_mut().zip(&u[i * inp + i + 1..(i + 1) * inp]) {
                *x -= err * uij;
            }
        }
    }
    (codes, scales)
}

/// Codes and f16 group scales of linear weights, by the name `build_onnx` gives each.
pub(crate) type Quantized = std::collections::HashMap<String, (Vec<i8>, Vec<f16>)>;

/// GPTQ of every linear weight of `w`, keyed by the name `build_onnx` gives it
/// (`layer{l}.{query|key|value|attn_out|ffn_in|ffn_out}`), one weight per task.
pub(crate) fn quantize_linears(w: &Weights, tokenizer_json: &[u8], group: usize, bits: u32) -> Result<Quantized, String> {
    let h = hessians(w, tokenizer_json)?;
    let mut jobs = Vec::new();
    for (l, layer) in w.layers.iter().enumerate() {
        for (name, lin, input) in [
            ("query", &layer.query, Input::Hidden),
            ("key", &layer.key, Input::Hidden),
            ("value", &layer.value, Input::Hidden),
            ("attn_out", &layer.attn_out, Input::Context),
            ("ffn_in", &layer.ffn_in, Input::Attended),
            ("ffn_out", &layer.ffn_out, Input::Activation),
        ] {
            let k = Input::ALL.iter().position(|i| *i == input).unwrap_or(0);
            jobs.push((format!("layer{l}.{name}"), lin, &h[l][k]));
        }
    }
    Ok(jobs.into_par_iter().map(|(name, lin, h)| (name, gptq(&lin.weight, lin.n_out, lin.n_in, h, group, bits))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inverse_factor_inverts() {
        let n = 5;
        // A positive definite matrix: Aᵀ A + I.
        let a: Vec<f64> = (0..n * n).map(|k| ((k * 7 + 3) % 11) as f64 / 5.0 - 1.0).collect();
        let mut h = vec![0f64; n * n];
        for i in 0..n {
            for j in 0..n {
                h[i * n + j] = (0..n).map(|k| a[k * n + i] * a[k * n + j]).sum::<f64>() + if i == j { 1.0 } else { 0.0 };
            }
        }
        let u = inverse_factor(&h, n);
        // (Uᵀ U) H ≈ I, up to the 1 % damping.
        let mean = (0..n).map(|i| h[i * n + i]).sum::<f64>() / n as f64;
        let hd: Vec<f64> = (0..n * n).map(|k| h[k] + if k % (n + 1) == 0 { DAMP * mean } else { 0.0 }).collect();
        for i in 0..n {
            for j in 0..n {
                let prod: f64 = (0..n).map(|k| (0..n).map(|m| u[m * n + i] * u[m * n + k]).sum::<f64>() * hd[k * n + j]).sum();
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((prod - want).abs() < 1e-9, "({i}, {j}): {prod}");
            }
        }
    }

    #[test]
    fn an_unfactorable_h_falls_back_to_rounding() {
        let u = inverse_factor(&[f64::NAN, 0.0, 0.0, 1.0], 2);
        assert_eq!(u, vec![1.0, 0.0, 0.0, 1.0]);
    }

    #[test]
    fn the_captured_inputs_are_nodes_of_the_graph() {
        let w = super::super::tests::tiny_weights(1);
        let proto = build_onnx(&w, Precision::Fp32);
        let outputs: Vec<&str> = proto.graph.iter().flat_map(|g| &g.node).flat_map(|n| n.output.iter().map(String::as_str)).collect();
        for l in 0..w.arch.layers {
            for i in Input::ALL {
                assert!(outputs.contains(&i.node(l).as_str()), "{} is not a node output", i.node(l));
            }
        }
    }

    #[test]
    fn gptq_beats_rounding_on_correlated_inputs() {
        // Inputs whose features are strongly correlated: the case GPTQ is for.
        let (out, inp, n) = (6, 16, 200);
        let mut seed = 1u64;
        let mut rnd = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 40) as f64 / (1u64 << 24) as f64) * 2.0 - 1.0
        };
        let w: Vec<f32> = (0..out * inp).map(|_| rnd() as f32).collect();
        let xs: Vec<Vec<f64>> = (0..n)
            .map(|_| {
                let base = rnd();
                (0..inp).map(|_| base + 0.2 * rnd()).collect()
            })
            .collect();
        let mut h = vec![0f64; inp * inp];
        for x in &xs {
            for i in 0..inp {
                for j in 0..inp {
                    h[i * inp + j] += x[i] * x[j];
                }
            }
        }
        let out_err = |codes: &[i8], scales: &[f16]| -> f64 {
            xs.iter()
                .map(|x| {
                    (0..out)
                        .map(|r| {
                            let y: f64 = (0..inp).map(|i| f64::from(w[r * inp + i]) * x[i]).sum();
                            let yq: f64 =
                                (0..inp).map(|i| f64::from(codes[r * inp + i]) * f64::from(scales[r * 2 + i / 8].to_f32()) * x[i]).sum();
                            (y - yq).powi(2)
                        })
                        .sum::<f64>()
                })
                .sum()
        };
        let (qr, sr) = super::super::quantize_groups(&w, out, inp, 8, 3);
        let (qg, sg) = gptq(&w, out, inp, &h, 8, 3);
        let (rtn, ours) = (out_err(&qr, &sr), out_err(&qg, &sg));
        assert!(ours < 0.5 * rtn, "GPTQ output error {ours} vs rounding {rtn}");
        assert!(qg.iter().all(|c| (-4..=3).contains(c)));
    }
}
