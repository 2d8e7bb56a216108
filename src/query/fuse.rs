//! Reciprocal rank fusion: score(d) = Σ over rankings of 1 / (K + rank(d)), ranks 1-based.
//! A chunk absent from a ranking contributes nothing for it. Ties break by chunk number, so
//! the fused order is deterministic on every platform.

pub const K: f32 = 60.0;

/// Fuses rankings (each a list of chunk numbers, best first) into one, best first.
pub fn rrf(rankings: &[&[usize]]) -> Vec<(usize, f32)> {
    // Chunk numbers are dense (0..chunks), so a flat score table beats hashing.
    let Some(len) = rankings.iter().flat_map(|r| r.iter()).max().map(|&m| m + 1) else {
        return Vec::new();
    };
    let mut scores: Vec<Option<f32>> = vec![None; len];
    for ranking in rankings {
        for (i, &doc) in ranking.iter().enumerate() {
            *scores[doc].get_or_insert(0.0) += 1.0 / (K + (i + 1) as f32);
        }
    }
    let mut fused: Vec<(usize, f32)> = scores.into_iter().enumerate().filter_map(|(doc, s)| Some((doc, s?))).collect();
    // A total order (score, then chunk number), so an unstable sort is deterministic.
    fused.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    fused
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_beats_a_single_first_place() {
        // 7 is second in both; 1 is first in one ranking and absent from the other.
        let fused = rrf(&[&[1, 7, 3], &[9, 7, 3]]);
        assert_eq!(fused[0].0, 7);
        assert!((fused[0].1 - 2.0 / 62.0).abs() < 1e-7);
        assert_eq!(fused[1].0, 3);
        assert_eq!(fused[2].0, 1, "ties (1 and 9, each 1/61) break by chunk number");
        assert_eq!(fused[3].0, 9);
    }

    #[test]
    fn empty_rankings_fuse_to_nothing() {
        assert!(rrf(&[&[], &[]]).is_empty());
    }
}
