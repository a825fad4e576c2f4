//! Correlations between two metrics over the same examples (the encoder sensitivity
//! table: Semantic-F1 under one encoder against another): Pearson's r, and Spearman's rho
//! as Pearson's r of the ranks, ties given their average rank (as SciPy does).

/// Pearson's r of paired values; `None` with fewer than two pairs or a constant side.
pub fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    let n = x.len().min(y.len());
    if n < 2 {
        return None;
    }
    let mean = |v: &[f64]| v[..n].iter().sum::<f64>() / n as f64;
    let (mx, my) = (mean(x), mean(y));
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for i in 0..n {
        let (dx, dy) = (x[i] - mx, y[i] - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    (sxx > 0.0 && syy > 0.0).then(|| (sxy / (sxx * syy).sqrt()).clamp(-1.0, 1.0))
}

/// The 1-based ranks of `v`, tied values sharing the average of their ranks.
pub fn average_ranks(v: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut ranks = vec![0.0; v.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && v[order[j + 1]] == v[order[i]] {
            j += 1;
        }
        // Positions i..=j (0-based) hold one value: ranks i+1..=j+1, averaged.
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            ranks[k] = rank;
        }
        i = j + 1;
    }
    ranks
}

/// Spearman's rho of paired values: Pearson's r of their average ranks.
pub fn spearman(x: &[f64], y: &[f64]) -> Option<f64> {
    let n = x.len().min(y.len());
    pearson(&average_ranks(&x[..n]), &average_ranks(&y[..n]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pearson_and_spearman_match_scipy() {
        // Computed independently in Python with the textbook formulas (what SciPy computes).
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let y = [2.0, 1.0, 4.0, 3.0, 7.0, 5.0];
        assert!((pearson(&x, &y).unwrap() - 0.7917946548886297).abs() < 1e-12);
        assert!((spearman(&x, &y).unwrap() - 0.8285714285714287).abs() < 1e-12);
        // Ties take their average rank.
        assert_eq!(
            average_ranks(&[3.0, 1.0, 3.0, 2.0]),
            vec![3.5, 1.0, 3.5, 2.0]
        );
        let t = [1.0, 2.0, 2.0, 3.0];
        let u = [1.0, 3.0, 2.0, 4.0];
        assert!((spearman(&t, &u).unwrap() - 0.9486832980505138).abs() < 1e-12);
        // A monotone but not linear relation: rho 1, r below 1.
        let sq: Vec<f64> = x.iter().map(|v| v * v * v).collect();
        assert!((spearman(&x, &sq).unwrap() - 1.0).abs() < 1e-12);
        assert!(pearson(&x, &sq).unwrap() < 1.0);
        assert_eq!(pearson(&[1.0, 1.0], &[2.0, 3.0]), None);
        assert_eq!(pearson(&[1.0], &[2.0]), None);
    }
}
