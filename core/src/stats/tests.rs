//! The acceptance tests of the bootstrap: exact edge cases, coverage on simulated data,
//! the null and shifted paired tests, and bit-identical output across thread counts.

use super::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn ids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("ex{i}")).collect()
}

fn config(n: usize, values: Vec<f64>) -> ConfigValues {
    ConfigValues::new(ids(n), [("m", values.into_iter().map(Some).collect())])
}

fn normals(rng: &mut ChaCha20Rng, n: usize, mean: f64, sd: f64) -> Vec<f64> {
    // Box-Muller; only the distribution matters here.
    (0..n)
        .map(|_| {
            let (u1, u2): (f64, f64) = (rng.random(), rng.random());
            mean + sd * (-2.0 * (1.0 - u1).ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
        })
        .collect()
}

#[test]
fn a_constant_metric_has_a_zero_width_interval() {
    let boot = Bootstrap::default();
    for method in [CiMethod::Percentile, CiMethod::Bca] {
        let est = estimate_config(&boot, "d", &config(100, vec![0.75; 100]), method);
        assert_eq!(est[0].mean, 0.75);
        assert_eq!(
            est[0].ci,
            Interval {
                low: 0.75,
                high: 0.75
            },
            "{method:?}"
        );
    }
}

#[test]
fn the_percentile_interval_covers_the_true_mean_about_95_percent_of_the_time() {
    let boot = Bootstrap {
        resamples: 1000,
        seed: 42,
    };
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let n = 200;
    let trials = 1000;
    let covered = (0..trials)
        .filter(|k| {
            let x = normals(&mut rng, n, 0.3, 1.0);
            let est = estimate_config(
                &boot,
                &format!("sim{k}"),
                &config(n, x),
                CiMethod::Percentile,
            );
            est[0].ci.contains(0.3)
        })
        .count();
    let share = covered as f64 / trials as f64;
    assert!((0.93..=0.97).contains(&share), "coverage {share}");
}

#[test]
fn paired_tests_null_self_and_shifted() {
    let boot = Bootstrap {
        resamples: 2000,
        seed: 42,
    };
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    let n = 200;
    // Independent same-mean noise around a shared per-example signal: p ~ U(0, 1).
    let ps: Vec<f64> = (0..200)
        .map(|k| {
            let signal = normals(&mut rng, n, 0.5, 0.2);
            let noisy = |rng: &mut ChaCha20Rng| {
                let e = normals(rng, n, 0.0, 0.1);
                signal
                    .iter()
                    .zip(e)
                    .map(|(s, e)| s + e)
                    .collect::<Vec<f64>>()
            };
            let (a, b) = (noisy(&mut rng), noisy(&mut rng));
            let cmp = compare_configs(
                &boot,
                &format!("null{k}"),
                &config(n, a),
                &config(n, b),
                CiMethod::Percentile,
            );
            cmp[0].diff.test.p_value
        })
        .collect();
    let mean_p = ps.iter().sum::<f64>() / ps.len() as f64;
    let small = ps.iter().filter(|&&p| p < 0.05).count() as f64 / ps.len() as f64;
    assert!((0.42..=0.58).contains(&mean_p), "mean p {mean_p}");
    assert!(small <= 0.10, "share of p < 0.05: {small}");

    // Against itself Δ* ≡ 0: #{Δ* ≤ 0} = #{Δ* ≥ 0} = B, so the binding formula gives
    // p = min(1, 2B/B) = 1, and the interval is [0, 0].
    let x = normals(&mut rng, n, 0.5, 0.2);
    let same = compare_configs(
        &boot,
        "d",
        &config(n, x.clone()),
        &config(n, x.clone()),
        CiMethod::Percentile,
    );
    assert_eq!(same[0].diff.diff, 0.0);
    assert_eq!(same[0].diff.test.p_value, 1.0);
    assert_eq!((same[0].diff.test.p_le, same[0].diff.test.p_ge), (1.0, 1.0));
    assert_eq!(
        same[0].diff.ci,
        Interval {
            low: 0.0,
            high: 0.0
        }
    );

    // A shifted copy with its own noise.
    let e = normals(&mut rng, n, 0.0, 0.1);
    let shifted: Vec<f64> = x.iter().zip(e).map(|(x, e)| x + 0.1 + e).collect();
    let cmp = compare_configs(
        &boot,
        "d",
        &config(n, shifted),
        &config(n, x),
        CiMethod::Percentile,
    );
    assert!(cmp[0].diff.test.p_value < 1e-3, "{:?}", cmp[0]);
    assert!(cmp[0].diff.ci.low > 0.0);
}

#[test]
fn comparisons_pair_examples_by_id_and_skip_missing_values() {
    let boot = Bootstrap {
        resamples: 500,
        seed: 1,
    };
    let a = ConfigValues::new(ids(4), [("m", vec![Some(1.0), Some(2.0), None, Some(4.0)])]);
    // b lists the same examples in another order.
    let b = ConfigValues::new(
        vec!["ex3".into(), "ex2".into(), "ex1".into(), "ex0".into()],
        [("m", vec![Some(4.0), Some(3.0), Some(2.0), Some(1.0)])],
    );
    let cmp = compare_configs(&boot, "d", &a, &b, CiMethod::Percentile);
    assert_eq!(cmp[0].diff.n, 3);
    assert_eq!(cmp[0].diff.diff, 0.0);
    assert_eq!(cmp[0].diff.test.p_value, 1.0);
    let est = estimate_config(&boot, "d", &a, CiMethod::Percentile);
    assert_eq!((est[0].n, est[0].mean), (3, 7.0 / 3.0));
}

#[test]
fn the_same_seed_gives_identical_bits_on_any_thread_count() {
    let boot = Bootstrap {
        resamples: 3001,
        seed: 42,
    };
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let n = 257;
    let metrics: Vec<(String, Vec<Option<f64>>)> = (0..19)
        .map(|m| {
            (
                format!("m{m:02}"),
                normals(&mut rng, n, 0.0, 1.0)
                    .into_iter()
                    .map(Some)
                    .collect(),
            )
        })
        .collect();
    let a = ConfigValues::new(ids(n), metrics.clone());
    let b = ConfigValues::new(
        ids(n),
        metrics
            .into_iter()
            .map(|(k, v)| (k, v.into_iter().map(|x| x.map(|x| x * 0.5)).collect())),
    );
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let est = estimate_config(&boot, "d", &a, CiMethod::Bca);
            let cmp = compare_configs(&boot, "d", &a, &b, CiMethod::Percentile);
            let mut bits: Vec<u64> = Vec::new();
            for e in est {
                bits.extend([e.mean, e.ci.low, e.ci.high].map(f64::to_bits));
            }
            for c in cmp {
                let d = c.diff;
                bits.extend([d.diff, d.ci.low, d.ci.high, d.test.p_value].map(f64::to_bits));
            }
            bits
        })
    };
    let one = run(1);
    assert_eq!(one, run(4));
    assert_eq!(one, run(3));
    assert_eq!(one, run(1));
}
