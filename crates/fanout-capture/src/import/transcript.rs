//! fanout transcripts (DESIGN 3.1; the format is [`crate::transcript`]'s): a JSON header
//! `{"type":"fanout-transcript","version","executionId","taskId","agentCommand",
//! "startedAt"}`, then version 1's `{ts, dir, line}` per frame or version 2's framed
//! records ([`v2`], which also catches up what a proxy left unapplied).

mod v2;

use std::path::Path;
use std::sync::Arc;

use fanout_acp::Direction;
use fanout_store::{Store, Timestamp};
use serde_json::Value;

use super::lines::NumberedLines;
use super::{FileSummary, ImportError, ImportProgress, SourceKind};
use crate::capture::{Capture, CaptureConfig};
use crate::transcript::TRANSCRIPT_VERSION_1;

pub use crate::transcript::{TRANSCRIPT_TYPE, TRANSCRIPT_VERSION};
pub use v2::{CatchUp, catch_up_pending};

/// Generic over the progress display so a caller with a `Sync` one (catch-up in a
/// spawned task) gets a `Send` future.
pub(super) async fn import_transcript<P: ImportProgress + ?Sized>(
    store: Arc<dyn Store>,
    path: &Path,
    progress: &P,
) -> Result<FileSummary, ImportError> {
    let mut lines = NumberedLines::open(path).await?;
    let mut summary = FileSummary::new(path, SourceKind::Transcript);
    // Where the records of a version 2 transcript start: just after the header line.
    let mut header_end = 0;
    let mut header_line;
    let (version, config) = loop {
        let Some((number, consumed, line)) = lines.next_line().await? else {
            return Err(ImportError::BadHeader {
                path: path.to_owned(),
                reason: "the file has no header line".to_owned(),
            });
        };
        progress.advanced(consumed);
        header_end += consumed;
        header_line = number;
        if line.trim_ascii().is_empty() {
            continue;
        }
        break parse_header(line).map_err(|reason| ImportError::BadHeader {
            path: path.to_owned(),
            reason,
        })?;
    };
    if version == TRANSCRIPT_VERSION {
        drop(lines);
        let records = v2::Records {
            offset: header_end,
            line: header_line + 1,
        };
        return v2::import_v2(store, path, records, config, progress).await;
    }
    let mut capture = Capture::new(store, config);
    // Frames go to capture in chunks, each one group commit (Capture::observe_batch).
    let mut chunk: Vec<(Timestamp, Direction, String)> = Vec::with_capacity(CHUNK_FRAMES);
    while let Some((number, consumed, line)) = lines.next_line().await? {
        progress.advanced(consumed);
        if line.trim_ascii().is_empty() {
            continue;
        }
        summary.frames += 1;
        match parse_frame(line) {
            Ok(frame) => {
                chunk.push(frame);
                if chunk.len() == CHUNK_FRAMES {
                    observe_chunk(&mut capture, &mut chunk).await;
                }
            }
            Err(reason) => {
                summary.bad_line(path, number, reason);
                if let Some(error) = summary.errors.last() {
                    progress.line_error(error);
                }
            }
        }
    }
    observe_chunk(&mut capture, &mut chunk).await;
    summary.capture = capture.stats();
    summary.counters = capture.counters().snapshot();
    Ok(summary)
}

/// Frames per group commit during import.
const CHUNK_FRAMES: usize = 256;

async fn observe_chunk(capture: &mut Capture, chunk: &mut Vec<(Timestamp, Direction, String)>) {
    let lines: Vec<(Direction, &[u8], Timestamp)> = chunk
        .iter()
        .map(|(at, direction, frame)| (*direction, frame.as_bytes(), *at))
        .collect();
    capture.observe_batch(&lines).await;
    chunk.clear();
}

/// The header: its version (1 or 2) and the capture configuration it records.
fn parse_header(line: &[u8]) -> Result<(u32, CaptureConfig), String> {
    let header: Value = serde_json::from_slice(line).map_err(|e| format!("not JSON: {e}"))?;
    if header.get("type").and_then(Value::as_str) != Some(TRANSCRIPT_TYPE) {
        return Err(format!(r#"expected "type": "{TRANSCRIPT_TYPE}""#));
    }
    let version = match header.get("version").and_then(Value::as_u64) {
        Some(1) => TRANSCRIPT_VERSION_1,
        Some(2) => TRANSCRIPT_VERSION,
        Some(other) => {
            return Err(format!(
                "version {other} is not supported (this build reads versions {TRANSCRIPT_VERSION_1} and {TRANSCRIPT_VERSION})"
            ));
        }
        None => return Err("no numeric \"version\"".to_owned()),
    };
    let text = |key: &str| -> Result<Option<String>, String> {
        match header.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone()).filter(|s| !s.is_empty())),
            Some(other) => Err(format!("\"{key}\" must be a string or null, not {other}")),
        }
    };
    let agent_command = match header.get("agentCommand") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        // The argv as recorded; joined with spaces for the one text column.
        Some(Value::Array(argv)) => Some(
            argv.iter()
                .map(|arg| arg.as_str().map_or_else(|| arg.to_string(), str::to_owned))
                .collect::<Vec<_>>()
                .join(" "),
        ),
        Some(other) => {
            return Err(format!(
                "\"agentCommand\" must be an array, a string or null, not {other}"
            ));
        }
    };
    Ok((
        version,
        CaptureConfig {
            agent_execution_id: text("executionId")?,
            task_id: text("taskId")?,
            agent_command: agent_command.filter(|c| !c.is_empty()),
        },
    ))
}

fn parse_frame(line: &[u8]) -> Result<(Timestamp, Direction, String), String> {
    let mut record: Value = serde_json::from_slice(line).map_err(|e| format!("not JSON: {e}"))?;
    let Some(object) = record.as_object_mut() else {
        return Err("not a JSON object".to_owned());
    };
    let ts = object
        .get("ts")
        .and_then(Value::as_str)
        .ok_or("no \"ts\" string")?;
    let at = Timestamp::parse(ts).map_err(|e| format!("bad \"ts\": {e}"))?;
    let dir = object
        .get("dir")
        .and_then(Value::as_str)
        .ok_or("no \"dir\" string")?;
    let direction = Direction::from_tag(dir)
        .ok_or_else(|| format!("bad \"dir\" {dir:?} (expected \"c2a\" or \"a2c\")"))?;
    match object.remove("line") {
        Some(Value::String(frame)) => Ok((at, direction, frame)),
        _ => Err("no \"line\" string".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_fields() {
        let (version, config) = parse_header(
            br#"{"type":"fanout-transcript","version":1,"executionId":"e1","taskId":null,"agentCommand":["npx","x"],"startedAt":"2026-08-03T15:32:20Z"}"#,
        )
        .expect("header");
        assert_eq!(version, 1);
        assert_eq!(config.agent_execution_id.as_deref(), Some("e1"));
        assert_eq!(config.task_id, None);
        assert_eq!(config.agent_command.as_deref(), Some("npx x"));
        assert_eq!(
            parse_header(br#"{"type":"fanout-transcript","version":2}"#).map(|(v, _)| v),
            Ok(2)
        );
        assert!(
            parse_header(br#"{"type":"fanout-transcript","version":3}"#)
                .is_err_and(|e| e.contains("version 3"))
        );
        assert!(parse_header(b"[]").is_err());
        assert!(parse_header(br#"{"type":"fanout-transcript","version":1,"taskId":3}"#).is_err());
    }

    #[test]
    fn frame_errors_say_what_is_wrong() {
        let ok = parse_frame(br#"{"ts":"2026-08-03T15:32:20Z","dir":"a2c","line":"{}"}"#);
        assert_eq!(
            ok,
            Ok((
                Timestamp::parse("2026-08-03T15:32:20Z").unwrap(),
                Direction::AgentToClient,
                "{}".to_owned()
            ))
        );
        for (line, expected) in [
            (&b"{"[..], "not JSON"),
            (b"3", "not a JSON object"),
            (br#"{"dir":"a2c","line":"x"}"#, "\"ts\""),
            (br#"{"ts":"noon","dir":"a2c","line":"x"}"#, "bad \"ts\""),
            (
                br#"{"ts":"2026-08-03T15:32:20Z","dir":"up","line":"x"}"#,
                "bad \"dir\"",
            ),
            (
                br#"{"ts":"2026-08-03T15:32:20Z","dir":"c2a","line":7}"#,
                "\"line\"",
            ),
        ] {
            let error = parse_frame(line).expect_err("bad frame");
            assert!(error.contains(expected), "{error}");
        }
    }
}
