//! `fanout show SESSION [--turn N] [--format table|json] [--html FILE]`: one session as
//! a tree of its turns and invocations with usage and cost, and a timeline per turn.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::look::pages::Pages;
use crate::look::tree::{Style, colour_wanted, render};
use crate::look::{PriceArgs, load_view, resolve_session};
use crate::output::DbArgs;
use crate::sessions::LookFormat;

#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub prices: PriceArgs,
    /// The session: its id, a prefix of it, or the harness's own session id.
    pub session: String,
    /// Only this turn (1-based, as numbered in the output).
    #[arg(long, value_name = "N")]
    pub turn: Option<usize>,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = LookFormat::Table)]
    pub format: LookFormat,
    /// Also write the session as one self-contained HTML page (tree and SVG timeline).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

pub async fn run(args: ShowArgs) -> Result<ExitCode> {
    let prices = args.prices.load()?;
    let store = args.db.open_existing().await?;
    let loaded = async {
        let id = resolve_session(&store, &args.session).await?;
        load_view(&store, &id, &prices).await
    }
    .await;
    store.close().await;
    let view = loaded?;
    if let Some(n) = args.turn
        && !view.turns.iter().any(|t| t.number == n)
    {
        bail!(
            "session {} has no turn {n} (it has {} turn(s))",
            view.session.id,
            view.turns.len()
        );
    }
    if let Some(path) = &args.html {
        let page = Pages::new()?.session_page(&view, &prices, None)?;
        std::fs::write(path, page)
            .with_context(|| format!("writing the HTML page to {}", path.display()))?;
        eprintln!("fanout: wrote {}", path.display());
    }
    match args.format {
        LookFormat::Json => {
            let mut view = view;
            if let Some(n) = args.turn {
                view.turns.retain(|t| t.number == n);
            }
            let doc = serde_json::json!({
                "session": view,
                "harness": crate::look::harness(&view.session),
                "source": crate::look::provenance(&view.session),
                "prices_taken_on": prices.taken_on,
            });
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
        LookFormat::Table => {
            let style = Style {
                width: crate::report::terminal_width(),
                colour: colour_wanted(),
            };
            print!("{}", render(&view, args.turn, style));
        }
    }
    Ok(ExitCode::SUCCESS)
}
