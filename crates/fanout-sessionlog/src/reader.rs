//! The strict reader: every bad line is reported as `file:line: why`.

use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::error::ReadError;
use crate::types::{Backend, Event, FORMAT_VERSION, Header, SessionLog};

/// Reads and validates a whole log.
pub fn read_log(path: &Path) -> Result<SessionLog, ReadError> {
    let bytes = std::fs::read(path).map_err(|error| ReadError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    parse_log(path, &bytes)
}

/// Parses log bytes; `path` is only used to name the file in errors and in the
/// result.
pub fn parse_log(path: &Path, bytes: &[u8]) -> Result<SessionLog, ReadError> {
    let bad = |line: usize, message: String| ReadError::Line {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut lines = split_lines(bytes);
    let Some(first) = lines.next() else {
        return Err(bad(1, "empty file: expected a header line".into()));
    };
    let header = parse_header(path, first)?;
    let mut events = Vec::new();
    for (index, raw) in lines.enumerate() {
        let line = index + 2;
        let text = line_text(raw).map_err(|m| bad(line, m))?;
        if text.trim().is_empty() {
            return Err(bad(line, "blank line".into()));
        }
        let event: Event =
            serde_json::from_str(text).map_err(|e| bad(line, describe_event_error(text, &e)))?;
        events.push(event);
    }
    if let Some(boundary) = header.seed_boundary
        && boundary > events.len()
    {
        return Err(bad(
            1,
            format!(
                "seedBoundary {boundary} is past the end of the log ({} events)",
                events.len()
            ),
        ));
    }
    Ok(SessionLog {
        path: path.to_path_buf(),
        header,
        events,
    })
}

/// Reads and validates only line 1 of a log.
pub fn read_header(path: &Path) -> Result<Header, ReadError> {
    let file = std::fs::File::open(path).map_err(|error| ReadError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    let mut first = Vec::new();
    BufReader::new(file)
        .read_until(b'\n', &mut first)
        .map_err(|error| ReadError::Io {
            path: path.to_path_buf(),
            error,
        })?;
    if first.last() == Some(&b'\n') {
        first.pop();
    }
    if first.is_empty() {
        return Err(ReadError::Line {
            path: path.to_path_buf(),
            line: 1,
            message: "empty file: expected a header line".into(),
        });
    }
    parse_header(path, &first)
}

/// Splits on `\n`; a final empty piece (after the last newline) is not a line.
fn split_lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let empty = bytes.is_empty();
    body.split(|b| *b == b'\n').filter(move |_| !empty)
}

fn line_text(raw: &[u8]) -> Result<&str, String> {
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    std::str::from_utf8(raw).map_err(|e| format!("not UTF-8: {e}"))
}

fn parse_header(path: &Path, raw: &[u8]) -> Result<Header, ReadError> {
    let bad = |message: String| ReadError::Line {
        path: path.to_path_buf(),
        line: 1,
        message,
    };
    let text = line_text(raw).map_err(bad)?;
    let value: Value =
        serde_json::from_str(text).map_err(|e| bad(format!("not valid JSON: {e}")))?;
    match value.get("type").and_then(Value::as_str) {
        Some("header") => {}
        Some(other) => return Err(bad(format!("expected a header line, found type {other:?}"))),
        None => return Err(bad("expected a header line with \"type\":\"header\"".into())),
    }
    let header = Header::deserialize(&value).map_err(|e| bad(format!("invalid header: {e}")))?;
    validate_header(&header).map_err(bad)?;
    Ok(header)
}

fn validate_header(header: &Header) -> Result<(), String> {
    if header.version != FORMAT_VERSION {
        return Err(format!(
            "unsupported format version {} (this reader knows {FORMAT_VERSION})",
            header.version
        ));
    }
    if header.id.trim().is_empty() {
        return Err("empty session id".into());
    }
    match header.backend {
        Backend::Root => {
            if header.parent_session.is_some() {
                return Err("a root session has no parentSession".into());
            }
            if header.seed_boundary.is_some() {
                return Err("only a fork child has a seedBoundary".into());
            }
        }
        Backend::Spawn => {
            if header.parent_session.is_none() {
                return Err("a spawn child needs parentSession".into());
            }
            if header.seed_boundary.is_some() {
                return Err("only a fork child has a seedBoundary".into());
            }
        }
        Backend::Fork => {
            if header.parent_session.is_none() {
                return Err("a fork child needs parentSession".into());
            }
            if header.seed_boundary.is_none() {
                return Err("a fork child needs seedBoundary".into());
            }
        }
    }
    Ok(())
}

fn describe_event_error(text: &str, err: &serde_json::Error) -> String {
    match serde_json::from_str::<Value>(text) {
        Err(_) => format!("not valid JSON: {err}"),
        Ok(value) => match value.get("type").and_then(Value::as_str) {
            None => "event without a string \"type\"".to_string(),
            Some(kind) => format!("invalid {kind:?} event: {err}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"type":"header","version":1,"id":"s1","createdAt":"2025-08-03T15:32:20.000000Z","backend":"root","cwd":"/w"}"#;
    const EVENT: &str =
        r#"{"type":"user/message","ts":"2025-08-03T15:32:20.000001Z","text":"hello"}"#;

    fn parse(text: &str) -> Result<SessionLog, ReadError> {
        parse_log(Path::new("/r/b/s1.jsonl"), text.as_bytes())
    }

    fn err_at(text: &str) -> (usize, String) {
        let err = parse(text).expect_err("should fail");
        (err.line().unwrap(), err.to_string())
    }

    #[test]
    fn reads_a_valid_log() {
        let log = parse(&format!("{HEADER}\n{EVENT}\n")).unwrap();
        assert_eq!(log.header.id, "s1");
        assert_eq!(log.events.len(), 1);
        // A missing final newline is tolerated.
        assert_eq!(
            parse(&format!("{HEADER}\n{EVENT}")).unwrap().events.len(),
            1
        );
        assert_eq!(parse(HEADER).unwrap().events.len(), 0);
    }

    #[test]
    fn empty_file_is_line_one() {
        let (line, msg) = err_at("");
        assert_eq!(line, 1);
        assert!(msg.starts_with("/r/b/s1.jsonl:1: empty file"), "{msg}");
    }

    #[test]
    fn header_problems_are_line_one() {
        for (text, needle) in [
            ("not json\n", "not valid JSON"),
            (&format!("{EVENT}\n") as &str, "expected a header line"),
            (r#"{"version":1}"#, "\"type\":\"header\""),
            (
                r#"{"type":"header","version":2,"id":"s","createdAt":"2025-08-03T15:32:20.000000Z","backend":"root","cwd":"/"}"#,
                "unsupported format version 2",
            ),
            (
                r#"{"type":"header","version":1,"id":"s","createdAt":"nope","backend":"root","cwd":"/"}"#,
                "invalid timestamp",
            ),
            (
                r#"{"type":"header","version":1,"id":"s","createdAt":"2025-08-03T15:32:20.000000Z","backend":"fork","parentSession":"p","cwd":"/"}"#,
                "needs seedBoundary",
            ),
            (
                r#"{"type":"header","version":1,"id":"s","createdAt":"2025-08-03T15:32:20.000000Z","backend":"spawn","cwd":"/"}"#,
                "needs parentSession",
            ),
            (
                r#"{"type":"header","version":1,"id":"s","createdAt":"2025-08-03T15:32:20.000000Z","backend":"tree","cwd":"/"}"#,
                "invalid header",
            ),
        ] {
            let (line, msg) = err_at(text);
            assert_eq!(line, 1, "{msg}");
            assert!(msg.contains(needle), "{msg} should contain {needle}");
        }
    }

    #[test]
    fn bad_event_lines_name_their_line() {
        let cases = [
            (
                format!("{HEADER}\n{EVENT}\n{{\"type\":\"user/mess"),
                3,
                "not valid JSON",
            ),
            (format!("{HEADER}\n\n{EVENT}\n"), 2, "blank line"),
            (
                format!(
                    "{HEADER}\n{EVENT}\n{{\"type\":\"nope\",\"ts\":\"2025-08-03T15:32:20Z\"}}\n"
                ),
                3,
                "invalid \"nope\" event",
            ),
            (format!("{HEADER}\n[1,2]\n"), 2, "without a string \"type\""),
            (
                format!(
                    "{HEADER}\n{{\"type\":\"model/request\",\"ts\":\"2025-08-03T15:32:20Z\",\"ordinal\":\"x\",\"model\":\"m\"}}\n"
                ),
                2,
                "invalid \"model/request\" event",
            ),
            (
                format!(
                    "{HEADER}\n{{\"type\":\"assistant/chunk\",\"ts\":\"2025-08-03T15:32:20Z\",\"chunk\":{{\"kind\":\"text_delta\"}}}}\n"
                ),
                2,
                "invalid \"assistant/chunk\" event",
            ),
            (
                format!(
                    "{HEADER}\n{{\"type\":\"user/message\",\"ts\":\"2025-08-03T15:32:20Z\",\"text\":\"a\",\"extra\":1}}\n"
                ),
                2,
                "unknown field",
            ),
        ];
        for (text, want_line, needle) in cases {
            let (line, msg) = err_at(&text);
            assert_eq!(line, want_line, "{msg}");
            assert!(
                msg.starts_with(&format!("/r/b/s1.jsonl:{want_line}: ")),
                "{msg}"
            );
            assert!(msg.contains(needle), "{msg} should contain {needle}");
        }
    }

    #[test]
    fn non_utf8_line_is_reported() {
        let mut bytes = format!("{HEADER}\n").into_bytes();
        bytes.extend_from_slice(b"{\"type\":\"user/message\",\"text\":\"\xff\"}\n");
        let err = parse_log(Path::new("f.jsonl"), &bytes).unwrap_err();
        assert_eq!(err.line(), Some(2));
        assert!(err.to_string().contains("not UTF-8"));
    }

    #[test]
    fn seed_boundary_past_end_is_rejected() {
        let header = r#"{"type":"header","version":1,"id":"s","createdAt":"2025-08-03T15:32:20.000000Z","backend":"fork","parentSession":"p","seedBoundary":2,"cwd":"/"}"#;
        let (line, msg) = err_at(&format!("{header}\n{EVENT}\n"));
        assert_eq!(line, 1);
        assert!(msg.contains("seedBoundary 2 is past the end"), "{msg}");
        assert!(parse(&format!("{header}\n{EVENT}\n{EVENT}\n")).is_ok());
    }
}
