//! `fanout import`: recorded history (fanout transcripts, Claude Code session folders)
//! into the store. The reading and mapping live in `fanout_capture::import`; this
//! module only opens the store, shows progress and prints the summary.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use clap::Args;
use fanout_capture::import::{
    ImportProgress, ImportSummary, LineError, catch_up_pending, import_paths,
};
use fanout_store::Store;
use indicatif::{ProgressBar, ProgressStyle};

use crate::output::{DbArgs, Format};

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Files or directories (walked for *.transcript and *.jsonl): fanout transcripts
    /// and Claude Code session folders (`<id>.jsonl` with `<id>/subagents/agent-*.jsonl`).
    /// Proxy transcripts in the default place that are not yet wholly in this store
    /// are written too.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub db: DbArgs,
    /// Output format of the summary.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

pub async fn run(args: ImportArgs) -> Result<ExitCode> {
    let store = args.db.open().await?;
    let store = Arc::new(store);
    let bar = std::io::stderr().is_terminal().then(BarProgress::new);
    let progress: &dyn ImportProgress = match &bar {
        Some(bar) => bar,
        None => &PlainProgress,
    };
    let summary = import_paths(Arc::clone(&store) as Arc<dyn Store>, &args.paths, progress).await;
    if let Some(bar) = bar {
        bar.bar.finish_and_clear();
    }
    // What a proxy left not wholly in this store (DESIGN 7): written now, no one asked.
    let transcripts = fanout_types::default_data_dir().join("transcripts");
    let identity = fanout_store::store_identity(&args.db.url());
    let caught_up = catch_up_pending(
        Arc::clone(&store) as Arc<dyn Store>,
        &transcripts,
        &identity,
    )
    .await;
    if !caught_up.files.is_empty() {
        eprintln!(
            "fanout: also wrote {} line(s) of {} proxy transcript(s) in {} that were not yet in the store",
            caught_up.lines_applied(),
            caught_up.files.len(),
            transcripts.display()
        );
    }
    for failure in &caught_up.failed {
        eprintln!("fanout: {}", failure.error);
    }
    for failure in &summary.failed_files {
        eprintln!("fanout: {}", failure.error);
    }
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&json_summary(&summary, store.target()))?
        ),
        Format::Text => print_text(&summary, store.target()),
    }
    store.close().await;
    Ok(if summary.has_failures() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn json_summary(summary: &ImportSummary, database: &str) -> serde_json::Value {
    let totals = summary.totals();
    let line_errors: Vec<String> = summary
        .files
        .iter()
        .flat_map(|f| f.errors.iter().map(LineError::to_string))
        .collect();
    serde_json::json!({
        "database": database,
        "files": totals.files,
        "failed_files": summary.failed_files,
        "skipped_files": summary.skipped_files,
        "frames": totals.frames,
        "sessions": totals.sessions,
        "turns": totals.turns,
        "messages": totals.messages,
        "subagent_rows": totals.subagent_rows,
        "skipped": totals.skipped,
        "errors": totals.errors,
        "line_errors": line_errors,
        "counters": totals.counters,
        "per_file": summary.files,
    })
}

fn print_text(summary: &ImportSummary, database: &str) {
    let totals = summary.totals();
    println!("database       {database}");
    println!(
        "imported       {} file(s), {} frame(s): {} session(s), {} turn(s), {} message(s), {} subagent row(s)",
        totals.files,
        totals.frames,
        totals.sessions,
        totals.turns,
        totals.messages,
        totals.subagent_rows
    );
    let c = totals.counters;
    println!(
        "subagent writer attempted {}, persisted {}, skipped (no identity) {}, failed {}, anomalous values {}, unknown execution {}",
        c.attempted,
        c.persisted,
        c.skipped_no_identity,
        c.failed,
        c.anomalous_value,
        c.unknown_execution
    );
    for skipped in &summary.skipped_files {
        println!(
            "not imported   {}: {}",
            skipped.path.display(),
            skipped.reason
        );
    }
    if totals.errors == 0 {
        println!("errors         none");
    } else {
        println!(
            "errors         {} ({} bad line(s) skipped, {} file(s) failed)",
            totals.errors, totals.skipped, totals.failed_files
        );
    }
}

/// A byte-based progress bar on stderr; bad lines print above it.
struct BarProgress {
    bar: ProgressBar,
}

impl BarProgress {
    fn new() -> Self {
        let bar = ProgressBar::new(0);
        if let Ok(style) = ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {msg}",
        ) {
            bar.set_style(style);
        }
        Self { bar }
    }
}

impl ImportProgress for BarProgress {
    fn planned(&self, _units: usize, bytes: u64) {
        self.bar.set_length(bytes);
    }

    fn file_started(&self, path: &Path) {
        let name = path.file_name().unwrap_or(path.as_os_str());
        self.bar.set_message(name.to_string_lossy().into_owned());
    }

    fn advanced(&self, bytes: u64) {
        self.bar.inc(bytes);
    }

    fn line_error(&self, error: &LineError) {
        self.bar.println(format!("fanout: {error}"));
    }
}

/// No terminal: bad lines go to stderr as they are found, nothing else.
struct PlainProgress;

impl ImportProgress for PlainProgress {
    fn line_error(&self, error: &LineError) {
        eprintln!("fanout: {error}");
    }
}
