//! The web UI of `fanout serve` (DESIGN 8), on the same loopback listener as
//! `/metrics`: `/` the sessions list (filters task, harness, date), `/sessions/<id>`
//! the tree and SVG timelines, `/report` the report, `/events` server-sent events.
//! Read-only on the database. A watcher reads the store's change marker twice a
//! second; when it moves, every open page gets an event (and refetches itself), and
//! the database part of `/metrics` is recomputed.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use fanout_metrics::{MetricsSource, Series, SeriesValue, Snapshot};
use fanout_store::{PriceTable, ReportScope, SessionFilter, SqlStore, Timestamp, counted_rows};
use tokio::sync::watch;

use crate::look::pages::{Filters, Live, Pages};
use crate::look::{SessionLine, harness, load_view, resolve_session, session_lines};

/// How often the watcher reads the change marker.
const WATCH_EVERY: Duration = Duration::from_millis(500);

/// What the pages need.
pub struct Web {
    store: SqlStore,
    pages: Pages,
    prices: PriceTable,
    changes: watch::Receiver<String>,
}

/// The stats files' counters plus the database's figures.
pub struct CombinedMetrics {
    /// The proxies' stats files (or any other source).
    pub stats: Arc<dyn MetricsSource>,
    /// The database figures, recomputed on every change.
    pub database: Arc<Mutex<Snapshot>>,
}

impl MetricsSource for CombinedMetrics {
    fn snapshot(&self) -> Snapshot {
        let mut snapshot = self.stats.snapshot();
        if let Ok(db) = self.database.lock() {
            snapshot.add(&db, true);
        }
        snapshot
    }
}

/// Starts the watcher and returns the routes; `database` receives the DB metrics.
pub async fn routes(
    store: SqlStore,
    prices: PriceTable,
    database: Arc<Mutex<Snapshot>>,
) -> anyhow::Result<Router> {
    let first = store.change_marker().await.unwrap_or_default();
    let (sender, changes) = watch::channel(first);
    let web = Arc::new(Web {
        store,
        pages: Pages::new()?,
        prices,
        changes,
    });
    refresh_metrics(&web, &database).await;
    let watcher = Arc::clone(&web);
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(WATCH_EVERY);
        loop {
            ticker.tick().await;
            let Ok(marker) = watcher.store.change_marker().await else {
                continue;
            };
            if *sender.borrow() != marker {
                refresh_metrics(&watcher, &database).await;
                if sender.send(marker).is_err() {
                    return;
                }
            }
        }
    });
    Ok(Router::new()
        .route("/", get(sessions_page))
        .route("/sessions/{id}", get(session_page))
        .route("/report", get(report_page))
        .route("/events", get(events))
        .with_state(web))
}

/// The UI routes when no database could be opened: each says why.
pub fn without_database(reason: String) -> Router {
    let page = move || {
        let reason = reason.clone();
        async move {
            failure(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!(
                    "fanout serve has no database to show: {reason}. Start it with --db URL (or import a history first: fanout import)."
                ),
            )
        }
    };
    Router::new()
        .route("/", get(page.clone()))
        .route("/sessions/{id}", get(page.clone()))
        .route("/report", get(page))
}

type Shared = State<Arc<Web>>;

fn failure(status: StatusCode, message: &str) -> Response {
    let body = format!(
        "<!doctype html><meta charset=\"utf-8\"><title>fanout</title><p>{}</p><p><a href=\"/\">sessions</a></p>",
        escape(message)
    );
    (status, Html(body)).into_response()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn date(text: &str) -> Option<Timestamp> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    crate::report::parse_instant(text).ok()
}

async fn sessions_page(State(web): Shared, Query(filters): Query<Filters>) -> Response {
    let filter = SessionFilter {
        task_id: Some(filters.task.trim().to_owned()).filter(|t| !t.is_empty()),
        since: date(&filters.since),
        until: date(&filters.until),
        ..SessionFilter::default()
    };
    let lines = match session_lines(&web.store, &filter, &web.prices).await {
        Ok(lines) => lines,
        Err(err) => return failure(StatusCode::SERVICE_UNAVAILABLE, &format!("{err:#}")),
    };
    let mut harnesses: Vec<String> = lines.iter().map(|l| l.harness.clone()).collect();
    harnesses.sort();
    harnesses.dedup();
    let wanted = filters.harness.trim().to_owned();
    let shown: Vec<SessionLine> = lines
        .into_iter()
        .filter(|l| wanted.is_empty() || l.harness == wanted)
        .collect();
    let live = Live { filters, harnesses };
    match web.pages.sessions_page(&shown, &web.prices, Some(&live)) {
        Ok(page) => Html(page).into_response(),
        Err(err) => failure(StatusCode::INTERNAL_SERVER_ERROR, &format!("{err:#}")),
    }
}

async fn session_page(State(web): Shared, Path(id): Path<String>) -> Response {
    let id = match resolve_session(&web.store, &id).await {
        Ok(id) => id,
        Err(err) => return failure(StatusCode::NOT_FOUND, &format!("{err:#}")),
    };
    let view = match load_view(&web.store, &id, &web.prices).await {
        Ok(view) => view,
        Err(err) => return failure(StatusCode::SERVICE_UNAVAILABLE, &format!("{err:#}")),
    };
    match web
        .pages
        .session_page(&view, &web.prices, Some(&Live::default()))
    {
        Ok(page) => Html(page).into_response(),
        Err(err) => failure(StatusCode::INTERNAL_SERVER_ERROR, &format!("{err:#}")),
    }
}

async fn report_page(State(web): Shared) -> Response {
    let usage =
        match crate::report::usage_report_of(&web.store, &ReportScope::All, &web.prices).await {
            Ok(usage) => usage,
            Err(err) => return failure(StatusCode::SERVICE_UNAVAILABLE, &format!("{err:#}")),
        };
    let fanout = match web.store.fanout_report(&ReportScope::All).await {
        Ok(report) => Some(crate::report::fanout_fragment(
            &report,
            &format!("{} ({})", web.store.target(), web.store.engine()),
        )),
        Err(err) => return failure(StatusCode::SERVICE_UNAVAILABLE, &format!("{err:#}")),
    };
    match web.pages.report_page(&usage, "everything", fanout, true) {
        Ok(page) => Html(page).into_response(),
        Err(err) => failure(StatusCode::INTERNAL_SERVER_ERROR, &format!("{err:#}")),
    }
}

/// One event per database change (the data is the change marker), with keep-alives.
async fn events(State(web): Shared) -> impl IntoResponse {
    let changes = web.changes.clone();
    let stream = futures::stream::unfold(changes, |mut changes| async move {
        changes.changed().await.ok()?;
        let marker = changes.borrow_and_update().clone();
        Some((
            Ok::<Event, Infallible>(Event::default().event("message").data(marker)),
            changes,
        ))
    });
    (
        [(header::CACHE_CONTROL, "no-cache")],
        Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))),
    )
}

/// A gauge series: its name and labels.
type GaugeKey<'a> = (&'a str, Vec<(&'a str, String)>);

/// The database figures for `/metrics` (gauges: they are the database's state, not
/// this process's counts): invocations by type, model and harness (total, settled,
/// async), measured tokens by kind and cost by model and harness, unpriced responses.
pub async fn database_metrics(store: &SqlStore, prices: &PriceTable) -> anyhow::Result<Snapshot> {
    let sessions = store.sessions(&SessionFilter::default()).await?;
    let harness_of: BTreeMap<String, String> = sessions
        .iter()
        .map(|s| (s.id.clone(), harness(s)))
        .collect();
    let rows = counted_rows(store.subagents_in(&ReportScope::All).await?);
    let cells = store.usage_cells(&ReportScope::All).await?;
    let none = "(unreported)".to_owned();
    let unknown = "unknown".to_owned();
    let mut gauges: BTreeMap<GaugeKey<'_>, f64> = BTreeMap::new();
    for row in &rows {
        let labels = vec![
            (
                "harness",
                harness_of
                    .get(&row.task_session_id)
                    .unwrap_or(&unknown)
                    .clone(),
            ),
            ("model", row.model.clone().unwrap_or_else(|| none.clone())),
            (
                "subagent_type",
                row.subagent_type.clone().unwrap_or_else(|| none.clone()),
            ),
        ];
        *gauges
            .entry(("fanout_db_subagent_invocations", labels.clone()))
            .or_default() += 1.0;
        if row.settled_at.is_some() {
            *gauges
                .entry(("fanout_db_subagent_invocations_settled", labels.clone()))
                .or_default() += 1.0;
        }
        if row.is_async {
            *gauges
                .entry(("fanout_db_subagent_invocations_async", labels))
                .or_default() += 1.0;
        }
    }
    for cell in &cells {
        let base = vec![
            (
                "harness",
                harness_of
                    .get(&cell.task_session_id)
                    .unwrap_or(&unknown)
                    .clone(),
            ),
            ("model", cell.model.clone().unwrap_or_else(|| none.clone())),
        ];
        let t = &cell.totals.tokens;
        for (kind, value) in [
            ("input", t.input_tokens),
            ("output", t.output_tokens),
            ("cache_creation", t.cache_creation_tokens),
            ("cache_read", t.cache_read_tokens),
            ("reasoning", t.reasoning_tokens),
        ] {
            if let Some(value) = value {
                let mut labels = base.clone();
                labels.push(("kind", kind.to_owned()));
                *gauges
                    .entry(("fanout_db_usage_tokens", labels))
                    .or_default() += value as f64;
            }
        }
        *gauges
            .entry(("fanout_db_usage_responses", base.clone()))
            .or_default() += cell.totals.responses as f64;
        let cost = prices.cost(cell.model.as_deref(), cell.totals.responses, &t.clone());
        if let Some(usd) = cost.usd {
            *gauges
                .entry(("fanout_db_usage_cost_usd", base.clone()))
                .or_default() += usd;
        }
        if cost.unpriced_responses > 0 {
            *gauges
                .entry(("fanout_db_usage_unpriced_responses", base))
                .or_default() += cost.unpriced_responses as f64;
        }
    }
    let mut snapshot = Snapshot::default();
    for ((name, labels), value) in gauges {
        snapshot.series.push(Series {
            name: name.to_owned(),
            labels: labels.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            value: SeriesValue::Gauge { value },
        });
    }
    for (name, help) in [
        (
            "fanout_db_subagent_invocations",
            "Subagent invocations in the database, by subagent type, model and harness.",
        ),
        (
            "fanout_db_subagent_invocations_settled",
            "Of those, settled (a terminal tool status was seen).",
        ),
        (
            "fanout_db_subagent_invocations_async",
            "Of those, launched in the background.",
        ),
        (
            "fanout_db_usage_tokens",
            "Measured tokens in the usage ledger, by kind, model and harness.",
        ),
        (
            "fanout_db_usage_responses",
            "Model responses in the usage ledger, by model and harness.",
        ),
        (
            "fanout_db_usage_cost_usd",
            "Cost in USD of the priced responses (computed from the shipped or --prices table).",
        ),
        (
            "fanout_db_usage_unpriced_responses",
            "Responses whose model has no known price (left out of the cost, never 0).",
        ),
    ] {
        snapshot.help.insert(name.to_owned(), help.to_owned());
    }
    Ok(snapshot)
}

async fn refresh_metrics(web: &Web, target: &Mutex<Snapshot>) {
    match database_metrics(&web.store, &web.prices).await {
        Ok(snapshot) => {
            if let Ok(mut slot) = target.lock() {
                *slot = snapshot;
            }
        }
        Err(err) => tracing::warn!(error = %format!("{err:#}"), "database metrics not refreshed"),
    }
}
