//! `credence view` over a synthetic finished run (`common::synthetic`, no model): the
//! list's filters, sort and pages against the figures the run was written with, the URL's
//! mistakes answered with what is wrong, and text from datasets and models escaped. The
//! view in a real browser over the demo run is in `embedded_run.rs`.

mod common;

use common::synthetic::{self, AFC_RUN, RUN, SCRIPT_CLAIM};
use credence::view::{router, Viewer};
use credence_core::domain::Mode;
use credence_infra::store::browse::ExampleBrowser;
use credence_infra::store::Store;
use std::collections::BTreeMap;
use std::sync::Arc;

const N: usize = 120;

/// Claims of the synthetic AFC run.
const AFC_N: usize = 60;

/// Serves a synthetic run of 2 models x 1 dataset x `N` examples in SQLite; returns the
/// base URL.
async fn serve(dir: &std::path::Path) -> String {
    let store = synthetic::write(&dir.join("synthetic.db"), 2, 1, N)
        .await
        .expect("writing the synthetic run");
    serve_store(Arc::new(store)).await
}

async fn serve_store(store: Arc<dyn ExampleBrowser>) -> String {
    serve_run(store, RUN).await
}

async fn serve_run(store: Arc<dyn ExampleBrowser>, run: &str) -> String {
    let viewer = Viewer::open(store, run).await.expect("opening the view");
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
    synthetic::write_afc_into(&store, dir.path(), 2, AFC_N)
        .await
        .expect("writing the synthetic AFC run");
    let store = Arc::new(store);
    let base = serve_store(store.clone()).await;
    filters_sort_and_pages(&base).await;
    escaped(&base).await;
    afc_pages(&serve_run(store.clone(), AFC_RUN).await, store.as_ref()).await;
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

/// The rows of a rendered AFC list page, as `decomposer/claim id`, in order.
fn afc_rows(html: &str) -> Vec<String> {
    html.split("<tr data-id=\"")
        .skip(1)
        .map(|s| {
            let id = &s[..s.find('"').unwrap()];
            let d = s.split("data-decomposer=\"").nth(1).unwrap();
            format!("{}/{id}", &d[..d.find('"').unwrap()])
        })
        .collect()
}

#[tokio::test]
async fn afc_claims_list_filter_and_show_what_the_judge_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = credence_infra::store::sqlite::SqliteStore::open(&dir.path().join("afc.db"))
        .await
        .unwrap();
    synthetic::write_afc_into(&store, dir.path(), 2, AFC_N)
        .await
        .expect("writing the synthetic AFC run");
    let store = Arc::new(store);
    afc_pages(&serve_run(store.clone(), AFC_RUN).await, store.as_ref()).await;
    // A run without [afc] says so.
    synthetic::write_into(store.as_ref(), dir.path(), 1, 1, 3)
        .await
        .unwrap();
    let base = serve_store(store).await;
    let (_, list) = get(&format!("{base}/")).await;
    assert!(!list.contains("id=\"afc-link\""), "{list}");
    let (status, body) = get(&format!("{base}/afc")).await;
    assert_eq!(status, 404);
    assert!(body.contains("has no [afc]"), "{body}");
}

/// The AFC pages of the synthetic AFC run served at `base`, against the run's results
/// read through the store's own reader (`Store::afc_results`, the report's).
async fn afc_pages(base: &str, store: &dyn Store) {
    use credence_core::afc::AfcSetting;
    let stored = store.afc_results(AFC_RUN).await.unwrap();
    // (decomposer, claim) -> setting -> right?
    type Key = (String, String);
    type Right = BTreeMap<AfcSetting, bool>;
    let mut right: BTreeMap<Key, Right> = BTreeMap::new();
    let mut verdicts: BTreeMap<(String, String), Vec<_>> = BTreeMap::new();
    for r in &stored {
        let key = (r.model.clone(), r.example_id.clone());
        right
            .entry(key.clone())
            .or_default()
            .insert(r.setting, r.verdict == r.gold);
        verdicts.entry(key).or_default().push(r.verdict);
    }
    assert_eq!(right.len(), 2 * AFC_N);
    let matching = |f: &dyn Fn(&Key, &Right) -> bool| right.iter().filter(|(k, s)| f(k, s)).count();

    let (status, list) = get(&format!("{base}/")).await;
    assert_eq!(status, 200, "{list}");
    assert!(list.contains("id=\"afc-link\""), "{list}");
    let (status, all) = get(&format!("{base}/afc")).await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(count(&all), 2 * AFC_N);
    let rows = afc_rows(&all);
    assert_eq!(rows.len(), 50);
    assert_eq!(rows[..2], ["dec-0/c0000", "dec-0/c0001"]);
    assert_eq!(all.matches("data-verdict=").count(), 50 * 3);
    let (_, page3) = get(&format!("{base}/afc?page=3")).await;
    assert_eq!(afc_rows(&page3)[0], "dec-1/c0040");
    assert!(page3.contains("rel=\"prev\"") && !page3.contains("rel=\"next\""));

    for (query, want) in [
        (
            "wrong=credence",
            matching(&|_, s| !s[&AfcSetting::Credence]),
        ),
        (
            "wrong=credence&right=none&decomposer=dec-1",
            matching(&|k, s| k.0 == "dec-1" && !s[&AfcSetting::Credence] && s[&AfcSetting::None]),
        ),
        (
            "right=factscore&dataset=claims",
            matching(&|_, s| s[&AfcSetting::Factscore]),
        ),
        (
            "disagree=1",
            verdicts
                .values()
                .filter(|v| v.iter().any(|x| *x != v[0]))
                .count(),
        ),
    ] {
        let (status, page) = get(&format!("{base}/afc?{query}")).await;
        assert_eq!(status, 200, "{query}: {page}");
        assert!(want > 0 && want < 2 * AFC_N, "{query}: {want}");
        assert_eq!(count(&page), want, "{query}");
        assert_eq!(afc_rows(&page).len(), want.min(50), "{query}");
    }
    // Past the last page: no rows, the count still right.
    let (_, past) = get(&format!("{base}/afc?wrong=credence&page=9")).await;
    assert_eq!(count(&past), matching(&|_, s| !s[&AfcSetting::Credence]));
    assert!(past.contains("id=\"empty\""));

    // A claim: its evidence, each setting's judged claims, the fallback, the answer
    // without a label, the other decomposer, and the way back to the list's page.
    let (status, claim) = get(&format!(
        "{base}/afc/claim?ds=claims&dec=dec-0&id=c0001&wrong=credence&page=2"
    ))
    .await;
    assert_eq!(status, 200, "{claim}");
    assert_eq!(claim.matches("class=\"mode\" data-setting=").count(), 3);
    assert!(claim.contains("id=\"gold\">REFUTE<"), "{claim}");
    assert!(claim.contains("Evidence one for claim 1 &lt;b&gt;bold&lt;/b&gt;."));
    assert!(
        claim.contains("empty decomposition: judged whole"),
        "{claim}"
    );
    assert!(claim.contains("Part 2 of claim 1 (factscore)."));
    assert!(claim.contains("dec=dec-1&amp;id=c0001"), "{claim}");
    assert!(
        claim.contains("href=\"/afc?wrong=credence&amp;page=2\""),
        "{claim}"
    );
    let (_, unparsable) = get(&format!("{base}/afc/claim?ds=claims&dec=dec-1&id=c0002")).await;
    assert!(
        unparsable.contains("no label in the answer"),
        "{unparsable}"
    );
    let (_, script) = get(&format!("{base}/afc/claim?ds=claims&dec=dec-0&id=c0000")).await;
    assert!(script
        .contains("Masks &lt;script&gt;alert(&#39;c&#39;)&lt;/script&gt; &amp; reduce spread."));
    assert_eq!(script.matches("<script>").count(), 1, "only the page's own");

    for (query, status, says) in [
        (
            "/afc?wrong=all",
            400,
            "wrong=\"all\": expected one of the run's settings (none, factscore, credence)",
        ),
        (
            "/afc?decomposer=gpt",
            400,
            "the run has no such decomposer (it has dec-0, dec-1)",
        ),
        (
            "/afc?dataset=fever",
            400,
            "no such AFC dataset (it has claims)",
        ),
        (
            "/afc?disagree=yes",
            400,
            "disagree=\"yes\": expected 1 or 0",
        ),
        (
            "/afc/claim?ds=claims",
            400,
            "ds=DATASET&amp;dec=DECOMPOSER&amp;id=ID",
        ),
        (
            "/afc/claim?ds=claims&dec=dec-0&id=nope",
            404,
            "no judgement of claim \"nope\"",
        ),
    ] {
        let (got, body) = get(&format!("{base}{query}")).await;
        let body = body.replace("&quot;", "\"").replace("&#39;", "'");
        assert_eq!(got, status, "{query}: {body}");
        assert!(body.contains(says), "{query}: {body}");
    }
}
