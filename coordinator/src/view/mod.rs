//! `credence view`: a local web page on every example of a finished run, served from
//! either engine's store. `/` lists the run's examples a page at a time (filters and
//! sort in the URL, [`query`]); `/example` shows one example of one model in every mode
//! ([`example`]); `/afc` and `/afc/claim` do the same for a run's fact-checking claims
//! ([`afc`]). Pages are rendered here as HTML with their style and a few lines of
//! script inline ([`page`]): nothing is fetched, so it works offline. Every query reads
//! one page or one example ([`credence_infra::store::browse`]), so a run of any size
//! opens at once.
//!
//! ```no_run
//! # async fn f(store: std::sync::Arc<dyn credence_infra::store::browse::ExampleBrowser>) -> anyhow::Result<()> {
//! let viewer = credence::view::Viewer::open(store, "demo").await?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8321").await?;
//! axum::serve(listener, credence::view::router(std::sync::Arc::new(viewer))).await?;
//! # Ok(()) }
//! ```

pub mod afc;
mod diff;
mod example;
mod list;
mod lookup;
mod page;
pub mod query;

use axum::extract::State;
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use credence_core::sweep::SweepSpec;
use credence_infra::store::browse::ExampleBrowser;
use credence_nlp::Nlp;
use query::{ListState, PER_PAGE};
use serde::Deserialize;
use std::sync::Arc;

pub use list::list_href;

/// A run being viewed: its store, its recorded sweep, the parser (for boundary words
/// and the self-repair prompt) and the encoders with cached embeddings.
pub struct Viewer {
    /// The store.
    pub store: Arc<dyn ExampleBrowser>,
    /// The run id.
    pub run: String,
    /// Its recorded sweep.
    pub spec: SweepSpec,
    /// The sweep's parser, or why it could not be loaded.
    pub nlp: Result<Arc<Nlp>, String>,
    /// Encoders with cached embeddings (the per-claim best reference match).
    pub encoders: Vec<String>,
}

impl Viewer {
    /// Reads what the pages need once: the run's sweep, the encoders, and its parser
    /// (a missing parser only leaves the boundary words and self-repair answers out).
    pub async fn open(store: Arc<dyn ExampleBrowser>, run: &str) -> anyhow::Result<Viewer> {
        use anyhow::Context;
        let spec = store
            .run_sweep(run)
            .await
            .with_context(|| format!("reading run {run:?}"))?;
        let encoders = store
            .encoder_fingerprints()
            .await
            .context("listing the embedding cache's encoders")?;
        let analyzed = store
            .refresh_statistics()
            .await
            .context("refreshing the planner's statistics")?;
        if !analyzed.is_empty() {
            tracing::info!(tables = ?analyzed, "refreshed stale planner statistics");
        }
        let dir =
            credence_worker::embed::locate(credence_nlp::PIPELINE_NAME, spec.nlp.path.as_deref());
        let nlp = tokio::task::spawn_blocking(move || {
            Nlp::load(&dir)
                .map(Arc::new)
                .map_err(|e| format!("{}: {e}", dir.display()))
        })
        .await
        .context("loading the parser")?;
        if let Err(e) = &nlp {
            tracing::warn!(error = %e, "the parser could not be loaded: boundary words and self-repair answers are left out");
        }
        Ok(Viewer {
            store,
            run: run.to_string(),
            spec,
            nlp,
            encoders,
        })
    }
}

/// The view's routes over `viewer`.
pub fn router(viewer: Arc<Viewer>) -> Router {
    Router::new()
        .route("/", get(list_page))
        .route("/example", get(example_page))
        .route("/afc", get(afc_list_page))
        .route("/afc/claim", get(afc_claim_page))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such page: try /") })
        .with_state(viewer)
}

fn html(body: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

fn error(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        format!(
            "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>credence view: error</title></head>\
             <body><p id=\"error\">{}</p><p><a href=\"/\">the list</a></p></body></html>",
            page::esc(message)
        ),
    )
        .into_response()
}

async fn list_page(State(viewer): State<Arc<Viewer>>, uri: Uri) -> Response {
    let state = match ListState::parse(uri.query()) {
        Ok(s) => s,
        Err(e) => return error(StatusCode::BAD_REQUEST, &e),
    };
    let query = match state.query(
        &viewer.run,
        &viewer.spec,
        (state.page() - 1) * PER_PAGE,
        PER_PAGE,
    ) {
        Ok(q) => q,
        Err(e) => return error(StatusCode::BAD_REQUEST, &e),
    };
    match viewer.store.example_page(&query).await {
        Ok(rows) => html(list::render(&viewer.run, &viewer.spec, &state, &rows)),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

/// Which example (`ds`, `md`, `id`) and its row in the list (`at`).
#[derive(Deserialize)]
struct ExampleKey {
    ds: String,
    md: String,
    id: String,
    at: Option<u64>,
}

async fn example_page(State(viewer): State<Arc<Viewer>>, uri: Uri) -> Response {
    let raw = uri.query().unwrap_or("");
    let key: ExampleKey = match serde_urlencoded::from_str(raw) {
        Ok(k) => k,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("an example's address needs ds=DATASET&md=MODEL&id=ID: {e}"),
            )
        }
    };
    let state = match ListState::parse(Some(raw)) {
        Ok(s) => s,
        Err(e) => return error(StatusCode::BAD_REQUEST, &e),
    };
    let stored = viewer
        .store
        .stored_example(&viewer.run, &key.ds, &key.md, &key.id)
        .await;
    match stored {
        Ok(Some(ex)) => match example::render(&viewer, &ex, &state, key.at).await {
            Ok(page) => html(page),
            Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e),
        },
        Ok(None) => error(
            StatusCode::NOT_FOUND,
            &format!(
                "run {:?} has no output of model {:?} for example {:?} of dataset {:?}",
                viewer.run, key.md, key.id, key.ds
            ),
        ),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

/// The page of a run without `[afc]` asked for its AFC pages.
fn no_afc(viewer: &Viewer) -> Response {
    error(
        StatusCode::NOT_FOUND,
        &format!(
            "run {:?} has no [afc]: no claims were fact-checked",
            viewer.run
        ),
    )
}

async fn afc_list_page(State(viewer): State<Arc<Viewer>>, uri: Uri) -> Response {
    let Some(afc) = &viewer.spec.afc else {
        return no_afc(&viewer);
    };
    let state = match afc::AfcState::parse(uri.query()) {
        Ok(s) => s,
        Err(e) => return error(StatusCode::BAD_REQUEST, &e),
    };
    let query = match state.query(&viewer.run, afc) {
        Ok(q) => q,
        Err(e) => return error(StatusCode::BAD_REQUEST, &e),
    };
    match viewer.store.afc_page(&query).await {
        Ok(rows) => html(afc::render_list(&viewer.run, afc, &state, &rows)),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

/// Which claim (`ds`, `dec`, `id`).
#[derive(Deserialize)]
struct ClaimKey {
    ds: String,
    dec: String,
    id: String,
}

async fn afc_claim_page(State(viewer): State<Arc<Viewer>>, uri: Uri) -> Response {
    if viewer.spec.afc.is_none() {
        return no_afc(&viewer);
    }
    let raw = uri.query().unwrap_or("");
    let key: ClaimKey = match serde_urlencoded::from_str(raw) {
        Ok(k) => k,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("a claim's address needs ds=DATASET&dec=DECOMPOSER&id=ID: {e}"),
            )
        }
    };
    let state = match afc::AfcState::parse(Some(raw)) {
        Ok(s) => s,
        Err(e) => return error(StatusCode::BAD_REQUEST, &e),
    };
    match viewer
        .store
        .afc_claim(&viewer.run, &key.ds, &key.dec, &key.id)
        .await
    {
        Ok(Some(claim)) => html(afc::render_claim(&viewer.run, &claim, &state)),
        Ok(None) => error(
            StatusCode::NOT_FOUND,
            &format!(
                "run {:?} has no judgement of claim {:?} of AFC dataset {:?} by decomposer {:?}",
                viewer.run, key.id, key.ds, key.dec
            ),
        ),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

/// Serves `viewer` on `listener` until Ctrl-C.
pub async fn serve(viewer: Viewer, listener: tokio::net::TcpListener) -> anyhow::Result<()> {
    axum::serve(listener, router(Arc::new(viewer)))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
