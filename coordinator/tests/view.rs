//! `credence view` over a synthetic finished run (`common::synthetic`, no model): the
//! list's filters, sort and pages against the figures the run was written with, the URL's
//! mistakes answered with what is wrong, and text from datasets and models escaped. The
//! view in a real browser over the demo run is in `embedded_run.rs`.

mod common;

use common::synthetic::{self, RUN, SCRIPT_CLAIM};
use credence::view::{router, Viewer};
use credence_core::domain::Mode;
use credence_infra::store::browse::ExampleBrowser;
use std::sync::Arc;

const N: usize = 120;

/// Serves a synthetic run of 2 models x 1 dataset x `N` examples in SQLite; returns the
/// base URL.
async fn serve(dir: &std::path::Path) -> String {
    let store = synthetic::write(&dir.join("synthetic.db"), 2, 1, N)
        .await
        .expect("writing the synthetic run");
    serve_store(Arc::new(store)).await
}

async fn serve_store(store: Arc<dyn ExampleBrowser>) -> String {
    let viewer = Viewer::open(store, RUN).await.expect("opening the view");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router(Arc::new(viewer))).await });
    format!("http://{addr}")
}

async fn get(url: &str) -> (u16, String) {
    let r = reqwest::get(url).await.expect("the view answers");
    (r.status().as_u16(), r.text().await.unwrap())
}

fn count(html: &str) -> usize {
    let at = html.find("id=\"count\">").expect("the count") + "id=\"count\">".len();
    html[at..].split(' ').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn filters_sort_and_pages_follow_the_url() {
    let dir = tempfile::tempdir().unwrap();
    filters_sort_and_pages(&serve(dir.path()).await).await;
}

/// A database of its own on the local PostgreSQL (`CREDENCE_TEST_PG_URL`, default
/// postgres://postgres@127.0.0.1:5432/test), dropped at the end.
struct PgDb {
    admin: String,
    name: String,
}

impl PgDb {
    fn create() -> Option<PgDb> {
        let admin = std::env::var("CREDENCE_TEST_PG_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        if std::net::TcpStream::connect("127.0.0.1:5432").is_err() {
            return common::skip::skip(
                "PostgreSQL is not on 127.0.0.1:5432 (scripts/setup --services)",
            );
        }
        let name = format!(
            "view_t_{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        let out = std::process::Command::new("psql")
            .arg(&admin)
            .args([
                "-v",
                "ON_ERROR_STOP=1",
                "-Atqc",
                &format!("CREATE DATABASE {name}"),
            ])
            .output()
            .expect("psql is installed with PostgreSQL");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(PgDb { admin, name })
    }

    fn url(&self) -> String {
        let base = self
            .admin
            .rsplit_once('/')
            .map_or(self.admin.as_str(), |(b, _)| b);
        format!("{base}/{}", self.name)
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        let _ = std::process::Command::new("psql")
            .arg(&self.admin)
            .args([
                "-Atqc",
                &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
            ])
            .output();
    }
}

/// The same pages from the distributed engine's store: every statement of the view
/// runs on PostgreSQL too.
#[tokio::test]
async fn the_view_reads_postgresql_the_same() {
    let Some(db) = PgDb::create() else { return };
    let store = credence_infra::store::postgres::PgStore::connect(&db.url(), 4)
        .await
        .expect("connecting to the test database");
    let dir = tempfile::tempdir().unwrap();
    synthetic::write_into(&store, dir.path(), 2, 1, N)
        .await
        .expect("writing the synthetic run");
    let base = serve_store(Arc::new(store)).await;
    filters_sort_and_pages(&base).await;
    escaped(&base).await;
}

async fn filters_sort_and_pages(base: &str) {
    let (status, all) = get(&format!("{base}/")).await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(count(&all), 2 * N);
    assert_eq!(common::listed_rows(&all).len(), 50);
    assert_eq!(common::listed_rows(&all)[0], "model-0/ex00000");
    let (_, page3) = get(&format!("{base}/?page=3")).await;
    assert_eq!(common::listed_rows(&page3)[0], "model-0/ex00100");
    assert!(page3.contains("rel=\"prev\""));

    // A check in one mode: the figures the run was written with.
    let (_, non_atomic) = get(&format!(
        "{base}/?model=model-1&mode=repair&check=non_atomic"
    ))
    .await;
    assert_eq!(
        count(&non_atomic),
        synthetic::non_atomic_count(N, Mode::Repair)
    );
    assert!(common::listed_rows(&non_atomic)
        .iter()
        .all(|r| r.starts_with("model-1/")));

    // Sorted by a mode's Semantic-F1, descending: the first row has the highest.
    let (status, sorted) = get(&format!(
        "{base}/?model=model-0&sort=semantic_f1.base&dir=desc"
    ))
    .await;
    assert_eq!(status, 200, "{sorted}");
    let first = common::listed_rows(&sorted)[0].clone();
    assert_ne!(first, common::listed_rows(&all)[0]);
    let sf1 = |html: &str| -> Vec<f64> {
        html.split("<td class=\"first\" data-metric=\"semantic_f1\">")
            .skip(1)
            .step_by(4) // base is the first of the four modes' groups
            .map(|s| s[..s.find('<').unwrap()].parse().unwrap())
            .collect()
    };
    let values = sf1(&sorted);
    assert!(values.windows(2).all(|w| w[0] >= w[1]), "{values:?}");

    // "Worse than base" leaves only rows where some mode fell.
    let (status, worse) = get(&format!("{base}/?worse=semantic_f1&mode=repair")).await;
    assert_eq!(status, 200);
    assert!(count(&worse) > 0 && count(&worse) < 2 * N);

    // An example page from a row, with its neighbours in the list.
    let (status, page) = get(&format!(
        "{base}/example?ds=data-0&md=model-0&id=ex00001&at=1&model=model-0"
    ))
    .await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("rel=\"prev\"") && page.contains("rel=\"next\""));
    assert!(page.contains("id=ex00002&amp;at=2"), "{page}");
    assert_eq!(page.matches("class=\"mode\" data-mode=").count(), 4);
    assert!(page.contains("<b>split</b> claim 1"));
}

#[tokio::test]
async fn mistakes_in_the_url_are_answered_with_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let base = serve(dir.path()).await;
    for (query, says) in [
        ("/?mode=fix", "mode=\"fix\""),
        (
            "/?model=gpt",
            "the run has no such model (it has model-0, model-1)",
        ),
        (
            "/?check=atomic",
            "check=\"atomic\": expected one of non_atomic",
        ),
        ("/?sort=semantic_f1.fix", "sort=\"semantic_f1.fix\""),
        ("/?sort=nonsense.base", "\"nonsense\" is not a metric"),
        ("/?dir=up", "dir=\"up\": expected asc or desc"),
        ("/example?ds=data-0", "ds=DATASET&amp;md=MODEL&amp;id=ID"),
    ] {
        let (status, body) = get(&format!("{base}{query}")).await;
        let body = body.replace("&quot;", "\"");
        assert_eq!(status, 400, "{query}: {body}");
        assert!(body.contains(says), "{query}: {body}");
    }
    let (status, body) = get(&format!("{base}/example?ds=data-0&md=model-0&id=nope")).await;
    let body = body.replace("&quot;", "\"");
    assert_eq!(status, 404);
    assert!(
        body.contains("no output of model \"model-0\" for example \"nope\""),
        "{body}"
    );
}

#[tokio::test]
async fn text_from_datasets_and_models_is_escaped() {
    let dir = tempfile::tempdir().unwrap();
    escaped(&serve(dir.path()).await).await;
}

async fn escaped(base: &str) {
    let (_, list) = get(&format!("{base}/")).await;
    assert!(list.contains("Ada said &lt;b&gt;hello&lt;/b&gt;"), "{list}");
    let (status, page) = get(&format!("{base}/example?ds=data-0&md=model-0&id=ex00000")).await;
    assert_eq!(status, 200, "{page}");
    // The claim, the reference and the source as text, never as markup: the page's one
    // script is its own.
    assert!(
        page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"),
        "{page}"
    );
    assert!(
        page.contains("&lt;script&gt;alert(&#39;r&#39;)&lt;/script&gt;"),
        "{page}"
    );
    assert!(page.contains("&lt;b&gt;hello&lt;/b&gt;"), "{page}");
    assert!(!page.contains(SCRIPT_CLAIM));
    assert_eq!(page.matches("<script").count(), 1, "{page}");
    assert!(!page.contains("<b>hello"));
}

/// A page on the view's own origin that opens an example in a frame, presses `j` there,
/// then `k`, and writes where each key led into its body.
const KEYS_PAGE: &str = r#"<!DOCTYPE html><html><body>
<iframe id="f" width="1200" height="800" src="/example?ds=data-0&md=model-0&id=ex00001&at=1"></iframe>
<script>
var f = document.getElementById('f'), step = 0;
function press(key) {
  f.contentDocument.dispatchEvent(new KeyboardEvent('keydown', {key: key, bubbles: true}));
}
f.onload = function () {
  step += 1;
  var at = f.contentWindow.location.search;
  if (step === 1) { press('j'); }
  else if (step === 2) { document.body.setAttribute('data-after-j', at); press('k'); }
  else if (step === 3) { document.body.setAttribute('data-after-k', at); press('u'); }
  else { document.body.setAttribute('data-after-u', f.contentWindow.location.pathname + at); }
};
</script></body></html>"#;

/// In headless Chromium, `j` on an example page opens the list's next example, `k` the
/// previous one and `u` the list.
#[tokio::test]
async fn keys_move_between_examples_in_a_browser() {
    let dir = tempfile::tempdir().unwrap();
    let store = synthetic::write(&dir.path().join("synthetic.db"), 2, 1, N)
        .await
        .expect("writing the synthetic run");
    let viewer = Viewer::open(Arc::new(store), RUN)
        .await
        .expect("opening the view");
    let app = router(Arc::new(viewer)).route(
        "/keys",
        axum::routing::get(|| async { axum::response::Html(KEYS_PAGE) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let out = tokio::process::Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=20000",
            "--dump-dom",
        ])
        .arg(format!("http://{addr}/keys"))
        .output()
        .await
        .expect("chromium is installed by scripts/setup");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains("data-after-j=\"?ds=data-0&amp;md=model-0&amp;id=ex00002&amp;at=2\""),
        "{dom}"
    );
    assert!(
        dom.contains("data-after-k=\"?ds=data-0&amp;md=model-0&amp;id=ex00001&amp;at=1\""),
        "{dom}"
    );
    assert!(dom.contains("data-after-u=\"/\""), "{dom}");
}
