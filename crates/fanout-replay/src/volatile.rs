//! Volatile values: what differs between two runs of the same agent on the same
//! task and must not change a conversation's content root (DESIGN 5.5).
//!
//! The rules are declared, applied in this order, and each replaces what it
//! matches with a fixed placeholder:
//! 1. **declared literals**: run-specific values the caller knows (the
//!    workspace, the agent's home, the run's scratch root), in their plain,
//!    JSON-escaped and dash-mangled forms (Claude Code names a project's
//!    history folder `-tmp-x-workspace` after `/tmp/x/workspace`) -> `<name>`;
//! 2. **environment blocks**: `<env>…</env>`, `<environment_context>…
//!    </environment_context>` (Codex) and a `# Environment` section up to its
//!    blank line (Claude Code) -> the block's frame around `<environment>`:
//!    they hold the cwd, the OS version, the date and the shell;
//! 3. **Claude's billing header**: the `x-anthropic-billing-header: …` line
//!    Claude Code puts in its system prompt carries a per-request hash ->
//!    `x-anthropic-billing-header: <billing>`;
//! 4. **temp paths**: the first component under `/tmp/` or `/var/tmp/` (a
//!    `mkdtemp` name) -> `<tmp>`;
//! 5. **UUIDs** (8-4-4-4-12 hex, any case) -> `<uuid>`;
//! 6. **dates and times**: `YYYY-MM-DD`, optionally with a time and zone ->
//!    `<date>`;
//! 7. **long hex ids**: 16 or more hex digits standing alone (device ids,
//!    Claude agent ids) -> `<hex>`.

/// The rules in the order they apply, for documentation and messages.
pub const VOLATILE_RULES: [&str; 7] = [
    "declared literals",
    "environment blocks",
    "Claude billing header",
    "temp paths",
    "UUIDs",
    "dates and times",
    "long hex ids",
];

/// The shortest declared literal that is replaced (shorter ones, such as `/`,
/// would eat ordinary text).
const MIN_LITERAL_LEN: usize = 4;
/// The shortest run of hex digits taken for an id.
const MIN_HEX_ID_LEN: usize = 16;

/// Environment blocks delimited by tags: (opening, closing).
const TAGGED_BLOCKS: [(&str, &str); 2] = [
    ("<env>", "</env>"),
    ("<environment_context>", "</environment_context>"),
];
/// Claude Code's environment section: from this heading to the next blank line.
const ENVIRONMENT_HEADING: &str = "# Environment\n";
const BILLING_HEADER: &str = "x-anthropic-billing-header:";
const TEMP_ROOTS: [&str; 2] = ["/var/tmp/", "/tmp/"];

/// The declared volatile-value rules of one side of a replay (the recording,
/// or the live run): the generic rules plus the literals it declared.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolatileRules {
    /// (form, placeholder), longest form first.
    literals: Vec<(String, String)>,
}

impl VolatileRules {
    /// The generic rules only.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares a run-specific value: every occurrence of `value` (plain,
    /// JSON-escaped or dash-mangled) becomes `<name>`. Values shorter than four
    /// characters are ignored.
    pub fn declare(&mut self, name: &str, value: &str) {
        if value.len() < MIN_LITERAL_LEN {
            return;
        }
        let placeholder = format!("<{name}>");
        let mut forms = vec![value.to_string()];
        if let Ok(quoted) = serde_json::to_string(value) {
            forms.push(quoted[1..quoted.len() - 1].to_string());
        }
        if value.contains('/') {
            forms.push(value.replace(['/', '.'], "-"));
        }
        for form in forms {
            if !self.literals.iter().any(|(known, _)| *known == form) {
                self.literals.push((form, placeholder.clone()));
            }
        }
        self.literals
            .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
    }

    /// The declared (name, value) pairs' placeholders and forms, longest first.
    pub fn literals(&self) -> impl Iterator<Item = (&str, &str)> {
        self.literals
            .iter()
            .map(|(form, placeholder)| (form.as_str(), placeholder.as_str()))
    }

    /// `text` with every rule applied.
    pub fn apply(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (form, placeholder) in &self.literals {
            if out.contains(form.as_str()) {
                out = out.replace(form.as_str(), placeholder);
            }
        }
        let out = environment_blocks(&out);
        let out = billing_header(&out);
        scan_tokens(&out)
    }
}

/// Rule 2: every environment block reduced to its frame around `<environment>`.
fn environment_blocks(text: &str) -> String {
    let mut out = text.to_string();
    for (open, close) in TAGGED_BLOCKS {
        out = replace_between(&out, open, |rest| rest.find(close).map(|end| (end, close)));
    }
    replace_between(&out, ENVIRONMENT_HEADING, |rest| {
        Some((rest.find("\n\n").unwrap_or(rest.len()), ""))
    })
}

/// Replaces what follows each `start` up to the end `find_end` reports (an
/// offset into the rest and the text kept after it) with `<environment>`.
fn replace_between(
    text: &str,
    start: &str,
    find_end: impl Fn(&str) -> Option<(usize, &'static str)>,
) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(start) {
        let body = &rest[at + start.len()..];
        let Some((end, kept)) = find_end(body) else {
            break;
        };
        out.push_str(&rest[..at + start.len()]);
        out.push_str("<environment>");
        out.push_str(kept);
        rest = &body[end + kept.len()..];
    }
    out.push_str(rest);
    out
}

/// Rule 3: the billing header line's value.
fn billing_header(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(BILLING_HEADER) {
        out.push_str(&rest[..at + BILLING_HEADER.len()]);
        out.push_str(" <billing>");
        let tail = &rest[at + BILLING_HEADER.len()..];
        rest = &tail[tail.find('\n').unwrap_or(tail.len())..];
    }
    out.push_str(rest);
    out
}

/// Rules 4 to 7, in one left-to-right pass.
fn scan_tokens(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut at = 0;
    while at < bytes.len() {
        let boundary = at == 0 || !is_word(bytes[at - 1]);
        let found = if bytes[at] == b'/' {
            temp_path_len(&bytes[at..]).map(|len| (len, "<tmp>"))
        } else if boundary && bytes[at].is_ascii_alphanumeric() {
            uuid_len(&bytes[at..])
                .map(|len| (len, "<uuid>"))
                .or_else(|| date_len(&bytes[at..]).map(|len| (len, "<date>")))
                .or_else(|| hex_id_len(&bytes[at..]).map(|len| (len, "<hex>")))
        } else {
            None
        };
        match found {
            Some((len, placeholder)) => {
                out.push_str(&text[copied..at]);
                out.push_str(placeholder);
                at += len;
                copied = at;
            }
            None => at += 1,
        }
    }
    out.push_str(&text[copied..]);
    out
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// `/tmp/<name>` (or `/var/tmp/<name>`): the length of the root and its first
/// component, which is what differs between two runs.
fn temp_path_len(bytes: &[u8]) -> Option<usize> {
    let root = TEMP_ROOTS
        .iter()
        .find(|root| bytes.starts_with(root.as_bytes()))?;
    let name = bytes[root.len()..]
        .iter()
        .take_while(|b| !is_path_end(**b))
        .count();
    (name > 0).then_some(root.len() + name)
}

/// Where a path component found in prose or JSON text ends.
fn is_path_end(b: u8) -> bool {
    b.is_ascii_whitespace()
        || matches!(
            b,
            b'/' | b'"'
                | b'\''
                | b'<'
                | b'>'
                | b'`'
                | b';'
                | b','
                | b':'
                | b'('
                | b')'
                | b'['
                | b']'
                | b'{'
                | b'}'
                | b'\\'
        )
}

/// An 8-4-4-4-12 hex UUID not followed by a word character.
fn uuid_len(bytes: &[u8]) -> Option<usize> {
    let candidate = bytes.get(..36)?;
    let shaped = candidate.iter().enumerate().all(|(i, b)| match i {
        8 | 13 | 18 | 23 => *b == b'-',
        _ => b.is_ascii_hexdigit(),
    });
    (shaped && bytes.get(36).is_none_or(|b| !is_word(*b))).then_some(36)
}

/// `YYYY-MM-DD`, optionally `T` or a space and `HH:MM[:SS[.fff]]`, optionally
/// `Z` or `±HH:MM`.
fn date_len(bytes: &[u8]) -> Option<usize> {
    let digits = |at: usize, n: usize| {
        bytes
            .get(at..at + n)
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    let date = digits(0, 4)
        && bytes.get(4) == Some(&b'-')
        && digits(5, 2)
        && bytes.get(7) == Some(&b'-')
        && digits(8, 2);
    if !date {
        return None;
    }
    let mut len = 10;
    let has_time = matches!(bytes.get(10), Some(b'T' | b' '))
        && digits(11, 2)
        && bytes.get(13) == Some(&b':')
        && digits(14, 2);
    if has_time {
        len = 16;
        if bytes.get(16) == Some(&b':') && digits(17, 2) {
            len = 19;
            if bytes.get(19) == Some(&b'.') {
                let fraction = bytes[20..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit())
                    .count();
                if fraction > 0 {
                    len = 20 + fraction;
                }
            }
        }
        match bytes.get(len) {
            Some(b'Z') => len += 1,
            Some(b'+' | b'-')
                if digits(len + 1, 2)
                    && bytes.get(len + 3) == Some(&b':')
                    && digits(len + 4, 2) =>
            {
                len += 6;
            }
            _ => {}
        }
    }
    bytes.get(len).is_none_or(|b| !is_word(*b)).then_some(len)
}

/// 16 or more hex digits, with at least one digit, standing alone.
fn hex_id_len(bytes: &[u8]) -> Option<usize> {
    let len = bytes.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    let standalone = bytes.get(len).is_none_or(|b| !is_word(*b));
    (len >= MIN_HEX_ID_LEN && standalone && bytes[..len].iter().any(u8::is_ascii_digit))
        .then_some(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_literals_cover_escaped_and_mangled_forms() {
        let mut rules = VolatileRules::new();
        rules.declare("workspace", "/srv/run.x1/workspace");
        rules.declare("tiny", "/a");
        let text = "cwd /srv/run.x1/workspace, memory at ~/.claude/projects/-srv-run-x1-workspace/memory, /a stays";
        assert_eq!(
            rules.apply(text),
            "cwd <workspace>, memory at ~/.claude/projects/<workspace>/memory, /a stays"
        );
    }

    #[test]
    fn environment_blocks_lose_their_contents() {
        let rules = VolatileRules::new();
        let claude = "intro\n# Environment\nYou have been invoked in:\n - OS Version: Linux 6.1\n\nYou are powered by";
        assert_eq!(
            rules.apply(claude),
            "intro\n# Environment\n<environment>\n\nYou are powered by"
        );
        let codex = "<environment_context>\n  <cwd>/x</cwd>\n</environment_context> then <env>\nOS: y\n</env>!";
        assert_eq!(
            rules.apply(codex),
            "<environment_context><environment></environment_context> then <env><environment></env>!"
        );
        // An unclosed block is left as it is.
        assert_eq!(rules.apply("<env> open"), "<env> open");
    }

    #[test]
    fn billing_header_values_are_dropped() {
        let rules = VolatileRules::new();
        assert_eq!(
            rules.apply(
                "x-anthropic-billing-header: cc_version=2.1.318.585; cc_entrypoint=sdk-ts;\nYou are"
            ),
            "x-anthropic-billing-header: <billing>\nYou are"
        );
    }

    #[test]
    fn temp_paths_uuids_dates_and_hex_ids() {
        let rules = VolatileRules::new();
        let text = "in /tmp/fanout-snapshot-Ab12/workspace/hello.txt and /var/tmp/x; \
                    id 0198A3F2-1111-7abc-8def-0123456789ab, today 2026-12-01, \
                    at 2026-12-01T10:20:30.123Z or 2026-12-01 10:20+02:00; agent aee10ebc4ed20730c; \
                    not ids: deadbeef, 1234567890123456x, 2026-12-01x";
        assert_eq!(
            rules.apply(text),
            "in <tmp>/workspace/hello.txt and <tmp>; id <uuid>, today <date>, at <date> or <date>; \
             agent <hex>; not ids: deadbeef, 1234567890123456x, 2026-12-01x"
        );
    }

    #[test]
    fn applying_twice_changes_nothing() {
        let mut rules = VolatileRules::new();
        rules.declare("home", "/tmp/h.1/home");
        let text = "HOME=/tmp/h.1/home date 2026-01-02 <env>x</env> /tmp/abc";
        let once = rules.apply(text);
        assert_eq!(rules.apply(&once), once);
    }
}
