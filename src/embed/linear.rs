//! The encoder's weight matmuls (`x · W` with a constant `W`), as a tract op with its own
//! WebAssembly SIMD kernel: used in the browser build only (see `Embedder::from_bytes`).
//!
//! Why: in Chromium on x86-64 about three quarters of a 22-word-piece query's embedding went to
//! tract's wasm 8×8 f32 tile. Each step of `k` of that tile needs at least 19 live v128 values
//! (16 accumulators, two weight vectors, one broadcast), more than the 16 XMM registers V8
//! allocates from on x86-64, so the tile spills. This op's 4×8 tile needs 11 (8 accumulators,
//! two weight vectors, one broadcast): the shape of XNNPACK's wasm SIMD GEMMs. Measured in
//! BENCHMARKS.md (same page, same token ids, against onnxruntime-web). On ARM64 (32 vector
//! registers) tract's tile would fit; this op has not been measured there. Natively tract's own
//! AVX / NEON kernels stay in use; the portable form of the tile below is what the native unit
//! tests check against tract's matmul.
//!
//! Layout: `W` (`K × N`, row-major) is packed once, at load, into panels of [`NR`] columns: panel
//! `p` holds `W[k][NR·p .. NR·p + NR]` for `k = 0..K`, contiguous, zero-padded past `N`. The
//! graph's bias `Add` after each matmul stays its own node (`S × N` additions, next to the
//! matmul's `S × N × K` multiply-adds).

use std::sync::Arc;

use tract_onnx::prelude::*;
use tract_onnx::tract_core::internal::*;

/// Columns per panel: two v128 of f32.
const NR: usize = 8;
/// Rows of `x` per tile.
const MR: usize = 4;

/// `y = x · W` over the last axis of an f32 `x` (`… × K` → `… × N`).
#[derive(Clone)]
pub struct Linear {
    k: usize,
    n: usize,
    /// `⌈N / NR⌉` panels of `K × NR` values.
    packed: Arc<[f32]>,
}

impl std::fmt::Debug for Linear {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Linear({}×{})", self.k, self.n)
    }
}

impl PartialEq for Linear {
    fn eq(&self, other: &Self) -> bool {
        self.k == other.k && self.n == other.n && self.packed == other.packed
    }
}
impl Eq for Linear {}

impl Linear {
    /// Packs `w` (`k × n`, row-major).
    pub fn new(k: usize, n: usize, w: &[f32]) -> TractResult<Linear> {
        ensure!(k > 0 && n > 0 && w.len() == k * n, "a {k}×{n} weight needs {} values, got {}", k * n, w.len());
        let panels = n.div_ceil(NR);
        let mut packed = vec![0f32; panels * k * NR];
        for (kk, row) in w.chunks_exact(n).enumerate() {
            for (j, &v) in row.iter().enumerate() {
                packed[(j / NR) * k * NR + kk * NR + j % NR] = v;
            }
        }
        Ok(Linear { k, n, packed: packed.into() })
    }

    /// `y[r] = x[r] · W` for each of the `x.len() / K` rows.
    fn run(&self, x: &[f32], y: &mut [f32]) {
        let (k, n) = (self.k, self.n);
        let rows = x.len() / k;
        debug_assert_eq!(y.len(), rows * n);
        let mut tile = [0f32; MR * NR];
        for (p, panel) in self.packed.chunks_exact(k * NR).enumerate() {
            let cols = NR.min(n - p * NR);
            let mut r0 = 0;
            while r0 < rows {
                let mr = MR.min(rows - r0);
                let xs = &x[r0 * k..(r0 + mr) * k];
                match mr {
                    4 => kernel::<4>(xs, k, panel, &mut tile),
                    3 => kernel::<3>(xs, k, panel, &mut tile),
                    2 => kernel::<2>(xs, k, panel, &mut tile),
                    _ => kernel::<1>(xs, k, panel, &mut tile),
                }
                for r in 0..mr {
                    let at = (r0 + r) * n + p * NR;
                    y[at..at + cols].copy_from_slice(&tile[r * NR..r * NR + cols]);
                }
                r0 += mr;
            }
        }
    }
}

/// One `R × NR` tile: `tile[r][j] = Σ_k x[r][k] · panel[k][j]`.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[inline(always)]
fn kernel<const R: usize>(x: &[f32], k: usize, panel: &[f32], tile: &mut [f32; MR * NR]) {
    use std::arch::wasm32::*;
    assert!(R <= MR && x.len() >= R * k && panel.len() >= k * NR);
    // SAFETY: every pointer below stays inside the slices, whose lengths the assert checks;
    // v128_load / v128_store / v128_load32_splat have no alignment requirement.
    unsafe {
        let zero = f32x4_splat(0.0);
        let mut acc = [[zero, zero]; R];
        let xp = x.as_ptr();
        let mut wp = panel.as_ptr();
        for kk in 0..k {
            let w0 = v128_load(wp as *const v128);
            let w1 = v128_load(wp.add(4) as *const v128);
            wp = wp.add(NR);
            for (r, a) in acc.iter_mut().enumerate() {
                let s = v128_load32_splat(xp.add(r * k + kk) as *const u32);
                a[0] = madd(a[0], s, w0);
                a[1] = madd(a[1], s, w1);
            }
        }
        let t = tile.as_mut_ptr();
        for (r, a) in acc.iter().enumerate() {
            v128_store(t.add(r * NR) as *mut v128, a[0]);
            v128_store(t.add(r * NR + 4) as *mut v128, a[1]);
        }
    }
}

/// `acc + a · b`, fused where the build has relaxed SIMD.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[inline(always)]
fn madd(acc: std::arch::wasm32::v128, a: std::arch::wasm32::v128, b: std::arch::wasm32::v128) -> std::arch::wasm32::v128 {
    #[cfg(target_feature = "relaxed-simd")]
    {
        std::arch::wasm32::f32x4_relaxed_madd(a, b, acc)
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    {
        std::arch::wasm32::f32x4_add(acc, std::arch::wasm32::f32x4_mul(a, b))
    }
}

/// The same tile in portable code (native builds: the unit tests, and any target without SIMD).
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
fn kernel<const R: usize>(x: &[f32], k: usize, panel: &[f32], tile: &mut [f32; MR * NR]) {
    let mut acc = [[0f32; NR]; R];
    for (kk, w) in panel.chunks_exact(NR).take(k).enumerate() {
        for (r, a) in acc.iter_mut().enumerate() {
            let s = x[r * k + kk];
            for (aj, wj) in a.iter_mut().zip(w) {
                *aj += s * wj;
            }
        }
    }
    for (r, a) in acc.iter().enumerate() {
        tile[r * NR..r * NR + NR].copy_from_slice(a);
    }
}

impl Op for Linear {
    fn name(&self) -> StaticName {
        "needle.Linear".into()
    }
    op_as_typed_op!();
}

impl EvalOp for Linear {
    fn eval(&self, _ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let input = args_1!(inputs);
        let shape = input.shape();
        ensure!(shape.last() == Some(&self.k), "Linear({}×{}) got an input of shape {shape:?}", self.k, self.n);
        let mut out_shape: TVec<usize> = shape.into();
        if let Some(last) = out_shape.last_mut() {
            *last = self.n;
        }
        let x = input.to_plain_array_view::<f32>()?;
        let x = x.as_slice().context("Linear input is not contiguous")?;
        let mut y = Tensor::zero::<f32>(&out_shape)?;
        {
            let mut plain = y.try_as_plain_ram_mut()?;
            self.run(x, plain.as_slice_mut::<f32>()?);
        }
        Ok(tvec!(y.into_tvalue()))
    }
    op_out_of_plan!();
}

impl TypedOp for Linear {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        let fact = inputs[0];
        ensure!(fact.datum_type == f32::datum_type(), "Linear takes f32, got {:?}", fact.datum_type);
        ensure!(fact.shape.last() == Some(&self.k.to_dim()), "Linear({}×{}) got {:?}", self.k, self.n, fact.shape);
        let mut shape: TVec<TDim> = fact.shape.iter().cloned().collect();
        if let Some(last) = shape.last_mut() {
            *last = self.n.to_dim();
        }
        Ok(tvec!(f32::fact(shape)))
    }
    as_op!();
}

/// Replaces every `x · W` of the typed (not yet decluttered) graph whose `W` is a constant f32
/// matrix, the form `needle model convert` writes for each of the encoder's 36 linear layers
/// (ONNX `MatMul` of `[1, S, K]` by `[K, N]`, which tract types as the einsum `amk,kn->amn`), by
/// [`Linear`]; returns how many it replaced. The bias `Add` after each stays a separate node.
/// Call before `into_optimized`, which would otherwise fold these into its own matmul kernels.
pub fn substitute(model: &mut TypedModel) -> TractResult<usize> {
    use tract_onnx::tract_core::ops::einsum::EinSum;
    let mut replaced = 0;
    for id in 0..model.nodes().len() {
        let node = &model.nodes()[id];
        let Some(einsum) = node.op_as::<EinSum>() else { continue };
        let &[x, w] = node.inputs.as_slice() else { continue };
        if einsum.q_params.is_some() || einsum.axes.to_string() != "amk,kn->amn" {
            continue;
        }
        let (x_fact, w_fact) = (model.outlet_fact(x)?, model.outlet_fact(w)?);
        let Some(weight) = w_fact.konst.as_ref() else { continue };
        if x_fact.datum_type != f32::datum_type() || weight.datum_type() != f32::datum_type() || weight.rank() != 2 {
            continue;
        }
        let (k, n) = (weight.shape()[0], weight.shape()[1]);
        let values = weight.to_plain_array_view::<f32>()?;
        let values = values.as_slice().context("a constant weight that is not contiguous")?;
        let linear = Linear::new(k, n, values)?;
        TypedModelPatch::replace_single_op(model, node, &[x], linear)?.apply(model)?;
        replaced += 1;
    }
    Ok(replaced)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random value in [−1, 1).
    fn value(i: usize) -> f32 {
        let h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17);
        (h >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// Every row count around the 4-row tile and column counts around the 8-column panel,
    /// against a plain f64 sum.
    #[test]
    fn the_tile_matches_a_plain_product_for_every_edge() {
        for k in [1, 7, 32, 384] {
            for n in [1, 5, 8, 13, 24] {
                let w: Vec<f32> = (0..k * n).map(value).collect();
                let lin = Linear::new(k, n, &w).expect("pack");
                for rows in 1..=9 {
                    let x: Vec<f32> = (0..rows * k).map(|i| value(i + 104_729)).collect();
                    let mut y = vec![f32::NAN; rows * n];
                    lin.run(&x, &mut y);
                    for r in 0..rows {
                        for j in 0..n {
                            let want = (0..k).map(|kk| f64::from(x[r * k + kk]) * f64::from(w[kk * n + j])).sum::<f64>();
                            let got = f64::from(y[r * n + j]);
                            assert!(
                                (got - want).abs() <= 1e-5 * (k as f64).sqrt() * (1.0 + want.abs()),
                                "k {k} n {n} rows {rows} [{r}][{j}]: {got} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_weight_of_the_wrong_size_is_an_error() {
        assert!(Linear::new(3, 4, &[0.0; 11]).is_err());
        assert!(Linear::new(0, 4, &[]).is_err());
    }

    /// Through tract: the op's output fact and its eval on a `[1, S, K]` tensor.
    #[test]
    fn the_op_evaluates_a_rank_3_input() {
        let (k, n) = (6, 10);
        let w: Vec<f32> = (0..k * n).map(value).collect();
        let lin = Linear::new(k, n, &w).expect("pack");
        let x = Tensor::from_shape(&[1, 3, k], &(0..3 * k).map(|i| value(i + 31)).collect::<Vec<f32>>()).expect("x");
        let fact = lin.output_facts(&[&f32::fact([1, 3, k])]).expect("facts");
        assert_eq!(fact[0].shape.as_concrete(), Some(&[1, 3, n][..]));
        let y = lin.eval_out_of_plan(tvec!(x.clone().into_tvalue())).expect("eval").expect("out of plan");
        assert_eq!(y[0].shape(), &[1, 3, n]);
        let bad = Tensor::from_shape(&[1, 3, k + 1], &vec![0f32; 3 * (k + 1)]).expect("bad");
        assert!(lin.eval_out_of_plan(tvec!(bad.into_tvalue())).is_err());
    }
}
