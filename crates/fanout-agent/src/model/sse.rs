//! A small incremental Server-Sent Events decoder (the subset model APIs use:
//! `event:` and `data:` fields, comments, blank-line dispatch).

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Feeds bytes in arbitrary splits; returns complete events.
#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
    event: Option<String>,
    data: Vec<String>,
}

impl SseDecoder {
    /// A fresh decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds bytes; returns every event completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        let mut start = 0;
        while let Some(pos) = self.buf[start..].iter().position(|b| *b == b'\n') {
            let end = start + pos;
            let line = self.buf[start..end]
                .strip_suffix(b"\r")
                .unwrap_or(&self.buf[start..end]);
            let line = String::from_utf8_lossy(line).into_owned();
            start = end + 1;
            if let Some(event) = self.line(&line) {
                out.push(event);
            }
        }
        self.buf.drain(..start);
        out
    }

    /// Whether undispatched input remains (an incomplete line or event).
    pub fn has_partial(&self) -> bool {
        !self.buf.is_empty() || !self.data.is_empty()
    }

    fn line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            let event = self.event.take();
            if self.data.is_empty() {
                return None;
            }
            let data = std::mem::take(&mut self.data).join("\n");
            return Some(SseEvent { event, data });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => self.data.push(value.to_string()),
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_across_arbitrary_splits() {
        let text = "event: a\r\ndata: {\"x\":\ndata: 1}\r\n\r\n: comment\n\ndata: two\n\n";
        let whole = SseDecoder::new().push(text.as_bytes());
        assert_eq!(
            whole,
            vec![
                SseEvent {
                    event: Some("a".into()),
                    data: "{\"x\":\n1}".into()
                },
                SseEvent {
                    event: None,
                    data: "two".into()
                },
            ]
        );
        for split in 1..text.len() {
            let mut d = SseDecoder::new();
            let mut got = d.push(&text.as_bytes()[..split]);
            got.extend(d.push(&text.as_bytes()[split..]));
            assert_eq!(got, whole, "split at {split}");
            assert!(!d.has_partial());
        }
    }
}
