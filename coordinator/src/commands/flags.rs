//! Parsers of the number flags, run by clap while it reads the command line: a value that
//! would panic later (`Duration::from_secs_f64` of `inf` or `1e20`) or mean nothing
//! (`NaN`, a negative wait, a fraction above one) is refused there, with the flag's name
//! and exit status 2, before anything starts.

use std::time::Duration;

/// The longest wait a flag may ask for (30 days): a larger one is a typo, not a plan.
pub const MAX_SECONDS: f64 = 30.0 * 86_400.0;

/// A number of seconds, `0` included (`--grace 0`: return the job at once).
pub fn seconds(value: &str) -> Result<Duration, String> {
    let secs = number(value)?;
    if !(0.0..=MAX_SECONDS).contains(&secs) {
        return Err(format!(
            "expected seconds between 0 and {MAX_SECONDS}, got {value}"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A number of seconds above zero (an interval: zero would spin).
pub fn positive_seconds(value: &str) -> Result<Duration, String> {
    let wait = seconds(value)?;
    if wait.is_zero() {
        return Err(format!(
            "expected seconds above 0 and at most {MAX_SECONDS}, got {value}"
        ));
    }
    Ok(wait)
}

/// A fraction between 0 and 1 (a threshold or a score).
pub fn fraction(value: &str) -> Result<f64, String> {
    let x = number(value)?;
    if !(0.0..=1.0).contains(&x) {
        return Err(format!("expected a number between 0 and 1, got {value}"));
    }
    Ok(x)
}

/// A finite number (`NaN` and the infinities parse as `f64` but are none).
fn number(value: &str) -> Result<f64, String> {
    match value.trim().parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => Err(format!("expected a finite number, got {value:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_and_fractions_are_checked() {
        assert_eq!(seconds("0"), Ok(Duration::ZERO));
        assert_eq!(seconds("60"), Ok(Duration::from_secs(60)));
        for bad in ["inf", "-inf", "NaN", "-1", "1e20", "2592001", "", "soon"] {
            assert!(seconds(bad).is_err(), "{bad}");
        }
        assert!(positive_seconds("0").is_err());
        assert_eq!(positive_seconds("0.05"), Ok(Duration::from_millis(50)));
        assert_eq!(fraction("0.9"), Ok(0.9));
        for bad in ["1.01", "-0.1", "NaN", "inf"] {
            assert!(fraction(bad).is_err(), "{bad}");
        }
    }
}
