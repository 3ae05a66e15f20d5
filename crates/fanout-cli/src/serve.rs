//! `fanout serve [--db URL] [--listen 127.0.0.1:PORT]`: read-only HTTP on one loopback
//! listener: the web UI over the database (`/`, `/sessions/<id>`, `/report`, live
//! through `/events`), and the counters of every proxy on this machine (their stats
//! files) with the database's figures: `/metrics` (Prometheus text), `/debug/vars`
//! (expvar JSON) and `/healthz`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use fanout_metrics::{Snapshot, StatsDir, default_stats_dir, router};

use crate::look::PriceArgs;
use crate::output::DbArgs;
use crate::web::CombinedMetrics;
use tokio::io::AsyncWriteExt;

/// The default address: loopback only.
const DEFAULT_LISTEN: &str = "127.0.0.1:9477";
/// Proxies rewrite their stats file every 5 s; one silent for this long has died.
const STALE_AFTER: Duration = Duration::from_secs(30);

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub prices: PriceArgs,
    /// Address to listen on (loopback by default; port 0 picks a free one).
    #[arg(long, default_value = DEFAULT_LISTEN, value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Directory of the proxies' stats files [default: $XDG_DATA_HOME/fanout/stats].
    #[arg(long, value_name = "DIR")]
    pub stats_dir: Option<PathBuf>,
}

pub async fn run(args: ServeArgs) -> Result<ExitCode> {
    let dir = args.stats_dir.unwrap_or_else(default_stats_dir);
    let prices = args.prices.load()?;
    // Read-only: the UI never creates, migrates or writes the database. Without one
    // (none yet, or unreadable) the counters are still served and `/` says why.
    let store = match args.db.open_existing().await {
        Ok(store) => Ok(store),
        Err(err) => {
            eprintln!("fanout serve: no web UI: {err:#}");
            Err(format!("{err:#}"))
        }
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr().context("reading the address bound")?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "fanout serve listens beyond loopback");
    }
    // The first line is machine-readable on purpose: scripts read the URL from it when
    // listening on port 0.
    let banner = format!(
        "fanout serve: http://{addr}/ (sessions of {}; also /report, /metrics, /debug/vars, /healthz; proxies' stats in {}); Ctrl-C stops\n",
        store
            .as_ref()
            .map_or_else(|_| "no database".to_owned(), |s| s.target().to_owned()),
        dir.display()
    );
    let mut stdout = tokio::io::stdout();
    stdout.write_all(banner.as_bytes()).await?;
    stdout.flush().await?;
    let database = Arc::new(Mutex::new(Snapshot::default()));
    let web = match store {
        Ok(store) => crate::web::routes(store, prices, Arc::clone(&database)).await?,
        Err(reason) => crate::web::without_database(reason),
    };
    let source = Arc::new(CombinedMetrics {
        stats: Arc::new(StatsDir::new(dir, STALE_AFTER)),
        database,
    });
    let app = router(source).merge(web);
    axum::serve(listener, app)
        .with_graceful_shutdown(crate::shutdown_signal())
        .await
        .context("the HTTP server failed")?;
    Ok(ExitCode::SUCCESS)
}
