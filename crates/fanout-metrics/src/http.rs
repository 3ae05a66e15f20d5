//! The read-only HTTP endpoints: `/metrics` (Prometheus text), `/debug/vars` (expvar
//! JSON) and `/healthz`. Only GET (and HEAD) are routed; nothing here changes state.

use std::future::Future;
use std::io;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use fanout_types::Timestamp;
use tokio::net::TcpListener;

use crate::exposition::{render_expvar, render_prometheus};
use crate::registry::Registry;
use crate::snapshot::Snapshot;
use crate::stats::StatsDir;

/// Where the endpoints read their numbers: the live registry of this process, or the
/// stats files of every proxy (`fanout serve`).
pub trait MetricsSource: Send + Sync + 'static {
    /// The numbers to serve now.
    fn snapshot(&self) -> Snapshot;
}

impl MetricsSource for Registry {
    fn snapshot(&self) -> Snapshot {
        Registry::snapshot(self)
    }
}

impl MetricsSource for StatsDir {
    fn snapshot(&self) -> Snapshot {
        self.snapshot_at(Timestamp::now())
    }
}

/// The HTTP server stopped with an error.
#[derive(Debug, thiserror::Error)]
#[error("the HTTP server failed: {0}")]
pub struct ServeError(pub io::Error);

type Source = Arc<dyn MetricsSource>;

/// The router of the three endpoints over `source`.
pub fn router(source: Arc<dyn MetricsSource>) -> Router {
    Router::new()
        .route("/metrics", get(prometheus_page))
        .route("/debug/vars", get(expvar_page))
        .route("/healthz", get(healthz))
        .with_state(source)
}

async fn prometheus_page(State(source): State<Source>) -> Response {
    let body = render_prometheus(&source.snapshot());
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

async fn expvar_page(State(source): State<Source>) -> Response {
    let body = render_expvar(&source.snapshot()).to_string();
    (
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        body,
    )
        .into_response()
}

async fn healthz() -> &'static str {
    "ok\n"
}

/// Serves the endpoints on `listener` until `shutdown` completes.
pub async fn serve_http(
    listener: TcpListener,
    source: Arc<dyn MetricsSource>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    axum::serve(listener, router(source))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(ServeError)
}
