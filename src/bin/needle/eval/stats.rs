//! The statistics of `needle eval`: Wilson score intervals for a proportion and the exact
//! two-sided sign test for paired comparisons.
//! Invariants: every function is total (n = 0 gives the widest answer, never NaN); the sign
//! test only looks at discordant pairs, ties carry no information about which side is better.

/// The 97.5 % quantile of the standard normal distribution: a 95 % two-sided interval.
pub const Z95: f64 = 1.959964;

/// Wilson score interval for `successes` out of `n` at the normal quantile `z`. With `n == 0`
/// nothing is known: the interval is [0, 1].
pub fn wilson(successes: usize, n: usize, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let n_f = n as f64;
    let p = successes.min(n) as f64 / n_f;
    let z2 = z * z;
    let denom = 1.0 + z2 / n_f;
    let centre = (p + z2 / (2.0 * n_f)) / denom;
    let half = z * (p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f)).sqrt() / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// Exact two-sided sign test: the probability, under "both sides are equally likely to win a
/// discordant pair", of a split at least as lopsided as `wins` : `losses`. No discordant pair
/// gives 1.
pub fn sign_test(wins: usize, losses: usize) -> f64 {
    let n = wins + losses;
    if n == 0 {
        return 1.0;
    }
    let k = wins.min(losses);
    // Σ_{i ≤ k} C(n, i) / 2^n. Directly while 2^n is a finite f64 (exact for the small n of
    // question sets), in log space beyond.
    if n <= 1000 {
        let (mut c, mut sum) = (1.0f64, 1.0f64);
        for i in 1..=k {
            c = c * (n - i + 1) as f64 / i as f64;
            sum += c;
        }
        return (2.0 * sum / 2f64.powi(n as i32)).min(1.0);
    }
    let ln2n = n as f64 * std::f64::consts::LN_2;
    let (mut ln_c, mut tail) = (0.0f64, (-ln2n).exp());
    for i in 1..=k {
        ln_c += ((n - i + 1) as f64).ln() - (i as f64).ln();
        tail += (ln_c - ln2n).exp();
    }
    (2.0 * tail).min(1.0)
}

/// Wins, losses and the sign test of configuration `a` against `b` on the same queries
/// (`a[i]` and `b[i]` say whether each answered query i).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Paired {
    /// Queries `a` answers and `b` does not.
    pub wins: usize,
    /// Queries `b` answers and `a` does not.
    pub losses: usize,
    /// Queries both answer.
    pub both: usize,
    pub n: usize,
    /// Two-sided exact sign test on the `wins + losses` discordant pairs.
    pub p: f64,
}

impl Paired {
    pub fn of(a: &[bool], b: &[bool]) -> Paired {
        let n = a.len().min(b.len());
        let (mut wins, mut losses, mut both) = (0, 0, 0);
        for (&x, &y) in a.iter().zip(b) {
            match (x, y) {
                (true, false) => wins += 1,
                (false, true) => losses += 1,
                (true, true) => both += 1,
                (false, false) => {}
            }
        }
        Paired { wins, losses, both, n, p: sign_test(wins, losses) }
    }

    /// Difference of the two recalls, `a − b`.
    pub fn delta(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            (self.wins as f64 - self.losses as f64) / self.n as f64
        }
    }

    /// `a` is significantly worse than `b` at level `alpha`.
    pub fn significantly_worse(&self, alpha: f64) -> bool {
        self.losses > self.wins && self.p < alpha
    }
}

/// The q-quantile (0 ≤ q ≤ 1) of `values` by linear interpolation between order statistics;
/// `None` when empty.
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let pos = q.clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    Some(v[lo] + (v[hi] - v[lo]) * (pos - lo as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn wilson_matches_independently_computed_values() {
        // Values from the closed form evaluated in Python with z = 1.959964.
        let cases = [
            (0, 10, 0.0, 0.2775328030),
            (5, 10, 0.2365930890, 0.7634069110),
            (10, 10, 0.7224671970, 1.0),
            (41, 48, 0.7283282336, 0.9275175071),
            (1, 1, 0.2065493118, 1.0),
        ];
        for (s, n, lo, hi) in cases {
            let (l, h) = wilson(s, n, Z95);
            assert!(close(l, lo) && close(h, hi), "{s}/{n}: got [{l}, {h}], want [{lo}, {hi}]");
        }
    }

    #[test]
    fn wilson_is_total_and_contains_the_estimate() {
        assert_eq!(wilson(0, 0, Z95), (0.0, 1.0));
        for n in 1..60 {
            for s in 0..=n {
                let (l, h) = wilson(s, n, Z95);
                let p = s as f64 / n as f64;
                assert!((0.0..=1.0).contains(&l) && (0.0..=1.0).contains(&h));
                assert!(l <= p + 1e-12 && p <= h + 1e-12, "{s}/{n}");
            }
        }
    }

    #[test]
    fn the_sign_test_matches_exact_binomial_values() {
        assert_eq!(sign_test(8, 1), 0.0390625);
        assert_eq!(sign_test(1, 8), 0.0390625);
        assert_eq!(sign_test(0, 0), 1.0);
        assert_eq!(sign_test(5, 5), 1.0);
        assert!(close(sign_test(10, 0), 0.001953125));
        assert!(close(sign_test(3, 12), 0.03515625));
        assert!(close(sign_test(30, 10), 0.0022214337732293643));
        assert!(close(sign_test(1, 0), 1.0));
    }

    #[test]
    fn the_sign_test_survives_large_samples() {
        // Exact values from Python's integer arithmetic (math.comb); the first is computed
        // directly, the others in log space.
        let rel = |a: f64, b: f64| ((a - b) / b).abs();
        assert!(rel(sign_test(600, 400), 2.7284641560660184e-10) < 1e-9);
        assert!(rel(sign_test(1060, 940), 0.007777118901978714) < 1e-9);
        assert!(rel(sign_test(6000, 4000), 1.7404316412268784e-89) < 1e-9);
        assert_eq!(sign_test(5000, 5000), 1.0);
    }

    #[test]
    fn paired_counts_only_discordant_pairs() {
        let a = [true, true, false, true, false, true, true, true, true, true, true, true];
        let b = [false, false, false, true, true, false, false, false, false, false, true, false];
        let p = Paired::of(&a, &b);
        assert_eq!((p.wins, p.losses, p.both, p.n), (8, 1, 2, 12));
        assert_eq!(p.p, 0.0390625);
        assert!(close(p.delta(), 7.0 / 12.0));
        let q = Paired::of(&b, &a);
        assert!(q.significantly_worse(0.05) && !p.significantly_worse(0.05));
    }

    #[test]
    fn quantiles_interpolate() {
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(quantile(&[3.0, 1.0, 2.0], 0.5), Some(2.0));
        assert_eq!(quantile(&[1.0, 2.0], 0.5), Some(1.5));
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 1.0), Some(4.0));
    }
}
