//! The one rule for tests that need something outside the checkout (a model folder, a
//! corpus in `../shared/data`, PostgreSQL and RabbitMQ): under CI its absence fails the
//! test; elsewhere the test is skipped with a printed reason. Every crate's tests include
//! this file with `#[path]`, so the rule is spelled once; `scripts/test` exports
//! `CI=true`.

// Each test binary compiles this module and uses only some of it.
#![allow(dead_code)]

/// Whether the tests run under CI: `CI` set to anything but empty, `0` or `false`
/// (GitHub Actions and GitLab set `true`, others `1`).
pub fn in_ci() -> bool {
    ci_value(std::env::var("CI").ok().as_deref())
}

/// Whether a value of `CI` means CI.
pub fn ci_value(value: Option<&str>) -> bool {
    !matches!(value.map(str::trim), None | Some("" | "0" | "false"))
}

/// Something the test needs is missing: panics with `reason` under CI; elsewhere prints
/// it and returns `None`, so that a test writes `let Some(x) = … else { return };`.
pub fn skip<T>(reason: &str) -> Option<T> {
    assert!(!in_ci(), "{reason}");
    eprintln!("skipping: {reason}");
    None
}

/// The shared data sets: `$CREDENCE_SHARED_DATA`, else `../shared/data` beside the
/// workspace (every crate of which sits one folder below its root).
pub fn shared_data() -> std::path::PathBuf {
    std::env::var_os("CREDENCE_SHARED_DATA")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data")
        })
}

/// The corpus folder `name` of the shared data sets, or `None` (skip) outside CI when
/// it is missing.
pub fn corpus(name: &str) -> Option<std::path::PathBuf> {
    let dir = shared_data().join(name);
    if dir.is_dir() {
        return Some(dir);
    }
    skip(&format!("corpus {} not found", dir.display()))
}
