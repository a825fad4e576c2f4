//! How fast `credence view` answers on a paper-size run (issue 35: the first page and an
//! example page each in < 200 ms), not a test: a synthetic finished run of 4 models x 4
//! datasets x 4 modes x 550 examples (35,200 result rows, every metric and stage time,
//! written through the `Store` API like a real run; `tests/common/synthetic.rs`) in a
//! SQLite file, served in-process, and each page requested over HTTP: once cold (the
//! first request after the view opened), then 20 times, printing the median and the
//! slowest.
//!
//! ```sh
//! cargo bench --profile dev -p credence --bench view
//! CREDENCE_VIEW_BENCH_DB=/tmp/view-35200.db cargo bench --profile dev -p credence --bench view  # keep and reuse the store
//! ```

// The tests use more of it than the bench does.
#[allow(dead_code)]
#[path = "../tests/common/synthetic.rs"]
mod synthetic;

use credence::view::{router, Viewer};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MODELS: usize = 4;
const DATASETS: usize = 4;
const EXAMPLES: usize = 550;
const REPEATS: usize = 20;

async fn timed(client: &reqwest::Client, url: &str) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let r = client.get(url).send().await?;
    let status = r.status();
    let body = r.text().await?;
    let took = start.elapsed();
    anyhow::ensure!(status.is_success(), "{url}: {status}: {body}");
    Ok(took)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn bench() -> anyhow::Result<()> {
    let keep = std::env::var_os("CREDENCE_VIEW_BENCH_DB").map(std::path::PathBuf::from);
    let dir = tempfile::tempdir()?;
    let db = keep.clone().unwrap_or_else(|| dir.path().join("view.db"));
    let store = if db.exists() {
        println!("reusing {}", db.display());
        credence_infra::store::sqlite::SqliteStore::open(&db).await?
    } else {
        let start = Instant::now();
        let store = synthetic::write(&db, MODELS, DATASETS, EXAMPLES).await?;
        println!(
            "wrote {} result rows to {} in {:.1} s",
            MODELS * DATASETS * 4 * EXAMPLES,
            db.display(),
            start.elapsed().as_secs_f64()
        );
        store
    };
    let open = Instant::now();
    let viewer = Viewer::open(Arc::new(store), synthetic::RUN).await?;
    println!("view opened in {:.0} ms", ms(open.elapsed()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, router(Arc::new(viewer))).await });
    let client = reqwest::Client::new();
    let pages = [
        ("first page", "/".to_string()),
        (
            "sorted by repair's Semantic-F1",
            "/?sort=semantic_f1.repair&dir=desc".to_string(),
        ),
        (
            "non-atomic in repair, one dataset",
            "/?dataset=data-2&mode=repair&check=non_atomic".to_string(),
        ),
        (
            "worse than base on Semantic-F1",
            "/?worse=semantic_f1".to_string(),
        ),
        ("page 100", "/?page=100".to_string()),
        (
            "example page",
            "/example?ds=data-3&md=model-2&id=ex00321&at=5".to_string(),
        ),
    ];
    println!(
        "{:<36} {:>9} {:>9} {:>9}",
        "page", "cold ms", "median", "slowest"
    );
    for (name, path) in &pages {
        let url = format!("{base}{path}");
        let cold = timed(&client, &url).await?;
        let mut times = Vec::with_capacity(REPEATS);
        for _ in 0..REPEATS {
            times.push(timed(&client, &url).await?);
        }
        times.sort();
        println!(
            "{name:<36} {:>9.1} {:>9.1} {:>9.1}",
            ms(cold),
            ms(times[REPEATS / 2]),
            ms(times[REPEATS - 1])
        );
    }
    if keep.is_none() {
        drop(dir);
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    tokio::runtime::Runtime::new()?.block_on(bench())
}
