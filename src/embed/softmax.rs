//! The attention softmax, as a tract op that replaces tract's own `Softmax` in the optimised
//! plan (see `Embedder::from_bytes`).
//!
//! Why: each layer's softmax runs over `12 × S` rows of `S` scores, and `S` is whatever the
//! text tokenizes to. tract's f32 softmax calls three SIMD kernels per row (max, exp-sum,
//! scale), each built for a row length that is a multiple of its width (64 with AVX-512), so
//! a row of 115 goes through scratch copies three times. Measured with a per-node timer on a
//! 115-word-piece passage (BENCHMARKS.md): the six softmaxes took 11.3 ms of a 47.7 ms run,
//! more than the two feed-forward matmuls. This op does the same arithmetic in one pass per
//! row over a plain slice, whatever its length, in portable code the compiler vectorises (SSE2,
//! or AVX2 / AVX-512 picked at run time, natively; simd128 in WebAssembly): no fused
//! multiply-add, no lookup tables, so every target gets the same bits.
//!
//! `exp` is Cephes' `expf` (Cody–Waite reduction by ln 2, a degree-6 polynomial on
//! [−ln 2 / 2, ln 2 / 2]; relative error under 2.5 × 10⁻⁷, tested), evaluated only at
//! `x − max ≤ 0`.

use tract_onnx::prelude::*;
use tract_onnx::tract_core::internal::*;

/// Softmax over the last axis of an f32 tensor.
#[derive(Debug, Clone, Default, Hash, PartialEq, Eq)]
pub struct LastAxisSoftmax;

impl Op for LastAxisSoftmax {
    fn name(&self) -> StaticName {
        "needle.LastAxisSoftmax".into()
    }
    op_as_typed_op!();
}

impl EvalOp for LastAxisSoftmax {
    fn eval(&self, _ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        let input = args_1!(inputs);
        let mut t = input.into_tensor();
        let row = *t.shape().last().context("softmax of a scalar")?;
        if row > 0 {
            // A tract tensor is always laid out with natural strides: the last axis is contiguous.
            let mut plain = t.try_as_plain_ram_mut()?;
            for r in plain.as_slice_mut::<f32>()?.chunks_exact_mut(row) {
                softmax_in_place(r);
            }
        }
        Ok(tvec!(t.into_tvalue()))
    }
    op_out_of_plan!();
}

impl TypedOp for LastAxisSoftmax {
    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        ensure!(inputs[0].datum_type == f32::datum_type(), "LastAxisSoftmax takes f32, got {:?}", inputs[0].datum_type);
        Ok(tvec!(f32::fact(inputs[0].shape.clone())))
    }
    as_op!();
}

/// Replaces every f32 softmax over the last axis in `model` by [`LastAxisSoftmax`]; returns how
/// many it replaced.
pub fn substitute(model: &mut TypedModel) -> TractResult<usize> {
    use tract_onnx::tract_core::ops::nn::{Softmax, SoftmaxKind};
    let mut replaced = 0;
    for id in 0..model.nodes().len() {
        let node = &model.nodes()[id];
        let Some(sm) = node.op_as::<Softmax>() else { continue };
        let Some(&input) = node.inputs.first() else { continue };
        let fact = model.outlet_fact(input)?;
        let over_last_axis = fact.rank().checked_sub(1).is_some_and(|last| sm.axes.as_slice() == [last]);
        if sm.kind == SoftmaxKind::Softmax && fact.datum_type == f32::datum_type() && over_last_axis {
            model.node_mut(id).op = Box::new(LastAxisSoftmax);
            replaced += 1;
        }
    }
    Ok(replaced)
}

const LANES: usize = 8;

/// `row ← softmax(row)`.
fn softmax_in_place(row: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F, checked on the line above.
            return unsafe { softmax_avx512(row) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked on the line above.
            return unsafe { softmax_avx2(row) };
        }
    }
    softmax_portable(row)
}

/// The same code compiled for wider vectors. Only separate multiplies and adds, no FMA, so the
/// result has the same bits as the portable build.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn softmax_avx512(row: &mut [f32]) {
    softmax_portable(row)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn softmax_avx2(row: &mut [f32]) {
    softmax_portable(row)
}

#[inline(always)]
fn softmax_portable(row: &mut [f32]) {
    if row.is_empty() {
        return;
    }
    // Row maximum, eight running maxima so it vectorises.
    let mut m = [f32::NEG_INFINITY; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for c in &mut chunks {
        for i in 0..LANES {
            m[i] = if c[i] > m[i] { c[i] } else { m[i] };
        }
    }
    let mut max = chunks.remainder().iter().fold(f32::NEG_INFINITY, |a, &b| if b > a { b } else { a });
    for v in m {
        max = if v > max { v } else { max };
    }
    // exp(x − max) in place: a plain map, which the compiler vectorises as a loop.
    for x in row.iter_mut() {
        *x = exp_nonpositive(*x - max);
    }
    // Their sum, eight partial sums (a single running sum is a serial chain the compiler may
    // not reorder); the order is fixed, so every target gets the same bits.
    let mut s = [0f32; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for c in &mut chunks {
        for i in 0..LANES {
            s[i] += c[i];
        }
    }
    let tail: f32 = chunks.remainder().iter().sum();
    let sum = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7])) + tail;
    let inv = 1.0 / sum;
    for x in row.iter_mut() {
        *x *= inv;
    }
}

/// `e^x` for `x ≤ 0` (0 below −87.3, where `e^x` leaves the normal f32 range). Branch-free,
/// so a loop over it vectorises.
#[inline(always)]
fn exp_nonpositive(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split in two so that k · LN2_HI is exact for the k that occur.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Adding 1.5 · 2²³ rounds to the nearest integer and leaves it in the low mantissa bits.
    const ROUND: f32 = 12_582_912.0;
    const FLOOR: f32 = -87.3;
    let xc = if x > FLOOR { x } else { FLOOR };
    let t = xc * LOG2E + ROUND;
    let k = t - ROUND;
    let r = (xc - k * LN2_HI) - k * LN2_LO;
    let mut p = 1.987_569_1e-4;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let y = (p * r) * r + r + 1.0;
    // 2^k from k's bits: k ∈ [−126, 0], so k + 127 is a valid biased exponent.
    let ki = t.to_bits().wrapping_sub(ROUND.to_bits());
    let scale = f32::from_bits(ki.wrapping_add(127) << 23);
    if x >= FLOOR {
        y * scale
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(row: &[f32]) -> Vec<f64> {
        let max = row.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(f64::from(b)));
        let e: Vec<f64> = row.iter().map(|&x| (f64::from(x) - max).exp()).collect();
        let s: f64 = e.iter().sum();
        e.iter().map(|v| v / s).collect()
    }

    #[test]
    fn exp_is_within_two_ulp_over_its_range() {
        let mut x = 0f32;
        let mut worst = 0f64;
        while x > -87.0 {
            let want = f64::from(x).exp();
            let got = f64::from(exp_nonpositive(x));
            worst = worst.max((got - want).abs() / want);
            x -= 0.000_37;
        }
        assert!(worst < 2.5e-7, "worst relative error {worst}");
        assert_eq!(exp_nonpositive(0.0), 1.0);
        assert_eq!(exp_nonpositive(-100.0), 0.0);
        assert_eq!(exp_nonpositive(f32::NEG_INFINITY), 0.0);
    }

    /// The AVX-512 and AVX2 builds of the row kernel give the portable build's bits.
    #[test]
    fn every_build_of_the_kernel_gives_the_same_bits() {
        for len in [1, 7, 8, 9, 22, 115, 256] {
            let row: Vec<f32> = (0..len).map(|i| ((i * 7919) % 1000) as f32 / 50.0 - 10.0).collect();
            let mut want = row.clone();
            softmax_portable(&mut want);
            let mut got = row.clone();
            softmax_in_place(&mut got);
            assert_eq!(
                got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "len {len}"
            );
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                let mut avx2 = row.clone();
                // SAFETY: the CPU has AVX2, checked on the line above.
                unsafe { softmax_avx2(&mut avx2) };
                assert_eq!(
                    avx2.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "avx2, len {len}"
                );
            }
        }
    }

    #[test]
    fn rows_of_every_length_match_a_double_precision_softmax() {
        let mut seed = 0x9e37_79b9_u32;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            (seed as f32 / u32::MAX as f32) * 40.0 - 20.0
        };
        for len in 1..=300 {
            let mut row: Vec<f32> = (0..len).map(|_| next()).collect();
            let want = reference(&row);
            softmax_in_place(&mut row);
            for (i, (g, w)) in row.iter().zip(&want).enumerate() {
                assert!((f64::from(*g) - w).abs() <= 1e-6 * w.max(1e-30) + 1e-12, "len {len}, [{i}]: {g} vs {w}");
            }
        }
        // Equal scores share the mass; one huge score takes it all.
        let mut flat = vec![3.0f32; 7];
        softmax_in_place(&mut flat);
        assert!(flat.iter().all(|v| (v - 1.0 / 7.0).abs() < 1e-7));
        let mut peak = vec![0.0f32, 500.0, 0.0];
        softmax_in_place(&mut peak);
        assert_eq!(peak, [0.0, 1.0, 0.0]);
    }
}
