//! Test support (feature `testing`): the hand-written expected rows of the real-agent
//! fixtures (`crates/fanout-capture/tests/fixtures/real/<name>.expected.json`) and the
//! rules that resolve their placeholders against a transcript, so one expected file checks
//! the committed recording and a fresh live run of the same scenario alike. The Python
//! twin is `tools/capture-transcripts/resolve_expected.py`; the fixtures README documents
//! the format.
//!
//! A string value `"$NAME"` in `rows` stands for `ids.NAME`, whose `rule` finds the value
//! in the run's own transcript:
//!
//! | rule | value |
//! |---|---|
//! | `session` | `result.sessionId` of the agent's answer to `session/new` |
//! | `cwd` | `params.cwd` of `session/new` |
//! | `execution` | the transcript header's `executionId` |
//! | `update-field` | the value at `path` (dot-separated; a number indexes an array) in the first `tool_call`/`tool_call_update` of `toolCallId` that has it |
//! | `tool-response` | `_meta.claudeCode.toolResponse[field]` of the first `tool_call_update` of `toolCallId` that has it |
//! | `child-session` | `recipientSessionId` of the first `session_message` whose `messageId` is `messageId` |
//! | `subagent-session` | the `sessionId` of the `index`-th child (from 0, in order of announcement) a `subagent_update` names |

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::jsonrpc::Direction;

/// A fixture that cannot be read or resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixtureError(String);

impl fmt::Display for FixtureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FixtureError {}

fn error(message: impl Into<String>) -> FixtureError {
    FixtureError(message.into())
}

/// A fanout transcript (DESIGN 3.1): the header and every line with its direction.
#[derive(Debug, Clone)]
pub struct Transcript {
    /// Line 1.
    pub header: Value,
    /// Every further line: its direction and the raw line.
    pub lines: Vec<(Direction, String)>,
}

impl Transcript {
    /// Reads a transcript file.
    pub fn read(path: &Path) -> Result<Self, FixtureError> {
        let text =
            std::fs::read_to_string(path).map_err(|e| error(format!("{}: {e}", path.display())))?;
        let mut lines = text.lines();
        let header = serde_json::from_str(lines.next().unwrap_or_default())
            .map_err(|e| error(format!("{}:1: {e}", path.display())))?;
        let mut records = Vec::new();
        for (n, line) in lines.enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let at = || format!("{}:{}", path.display(), n + 2);
            let record: Value =
                serde_json::from_str(line).map_err(|e| error(format!("{}: {e}", at())))?;
            let direction = record["dir"]
                .as_str()
                .and_then(Direction::from_tag)
                .ok_or_else(|| error(format!("{}: no dir", at())))?;
            let line = record["line"]
                .as_str()
                .ok_or_else(|| error(format!("{}: no line", at())))?;
            records.push((direction, line.to_owned()));
        }
        Ok(Self {
            header,
            lines: records,
        })
    }

    /// The `agentInfo` `{name, version}` of the agent's `initialize` response, if any.
    pub fn agent_info(&self) -> Option<(String, String)> {
        self.messages().find_map(|message| {
            let info = message.get("result")?.get("agentInfo")?;
            let text = |key: &str| info.get(key)?.as_str().map(str::to_owned);
            Some((text("name")?, text("version").unwrap_or_default()))
        })
    }

    /// Every line that is a JSON object.
    fn messages(&self) -> impl Iterator<Item = Value> + '_ {
        self.lines
            .iter()
            .filter_map(|(_, line)| serde_json::from_str::<Value>(line).ok())
            .filter(Value::is_object)
    }

    /// Every `session/update`'s `update`.
    fn updates(&self) -> impl Iterator<Item = Value> + '_ {
        self.messages()
            .filter(|m| m["method"] == "session/update")
            .map(|m| m["params"]["update"].clone())
    }

    fn session_new(&self) -> Option<Value> {
        self.messages()
            .find(|m| m["method"] == "session/new" && m.get("id").is_some())
    }
}

/// One `<name>.expected.json`.
#[derive(Debug, Clone)]
pub struct Expected {
    /// Where it was read from.
    pub path: PathBuf,
    /// The whole document.
    pub spec: Value,
}

/// The rows of an expected file with every placeholder replaced.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// Each placeholder's value.
    pub ids: Map<String, Value>,
    /// The rows `task_session_subagents` must hold, one object each.
    pub rows: Vec<Map<String, Value>>,
}

impl Expected {
    /// Reads an expected file.
    pub fn load(path: &Path) -> Result<Self, FixtureError> {
        let text =
            std::fs::read_to_string(path).map_err(|e| error(format!("{}: {e}", path.display())))?;
        let spec =
            serde_json::from_str(&text).map_err(|e| error(format!("{}: {e}", path.display())))?;
        Ok(Self {
            path: path.to_owned(),
            spec,
        })
    }

    /// The committed transcript it describes (beside it).
    pub fn transcript_path(&self) -> Result<PathBuf, FixtureError> {
        let name = self.spec["transcript"]
            .as_str()
            .ok_or_else(|| error(format!("{}: no transcript", self.path.display())))?;
        Ok(self.path.with_file_name(name))
    }

    /// Each placeholder's value as recorded in the committed transcript.
    pub fn recorded(&self) -> Map<String, Value> {
        self.ids()
            .iter()
            .map(|(name, spec)| (name.clone(), spec["recorded"].clone()))
            .collect()
    }

    fn ids(&self) -> Map<String, Value> {
        self.spec["ids"].as_object().cloned().unwrap_or_default()
    }

    /// The rows with the placeholders resolved from `transcript` (with `execution`
    /// overriding the header's `executionId`, for a live run whose transcript is the
    /// client's view while the rows carry the proxy's execution).
    pub fn resolve(
        &self,
        transcript: &Transcript,
        execution: Option<&str>,
    ) -> Result<Resolved, FixtureError> {
        let mut ids = Map::new();
        for (name, rule) in self.ids() {
            let value = match (rule["rule"].as_str(), execution) {
                (Some("execution"), Some(execution)) => Value::from(execution),
                _ => resolve_one(&rule, transcript).ok_or_else(|| {
                    error(format!(
                        "{}: {name}: {rule} finds nothing",
                        self.path.display()
                    ))
                })?,
            };
            ids.insert(name, value);
        }
        let rows = self.spec["rows"]
            .as_array()
            .ok_or_else(|| error(format!("{}: no rows", self.path.display())))?
            .iter()
            .map(|row| match substitute(row, &ids) {
                Ok(Value::Object(row)) => Ok(row),
                Ok(_) => Err(error(format!(
                    "{}: a row is not an object",
                    self.path.display()
                ))),
                Err(name) => Err(error(format!(
                    "{}: ${name} is not in ids",
                    self.path.display()
                ))),
            })
            .collect::<Result<_, _>>()?;
        Ok(Resolved { ids, rows })
    }
}

fn resolve_one(rule: &Value, transcript: &Transcript) -> Option<Value> {
    let text = |key: &str| rule[key].as_str().unwrap_or_default().to_owned();
    match rule["rule"].as_str()? {
        "session" => {
            let new = transcript.session_new()?;
            transcript
                .messages()
                .find(|m| {
                    m.get("method").is_none() && m["id"] == new["id"] && m.get("result").is_some()
                })
                .map(|m| m["result"]["sessionId"].clone())
        }
        "cwd" => transcript.session_new().map(|m| m["params"]["cwd"].clone()),
        "execution" => transcript.header.get("executionId").cloned(),
        "update-field" => {
            let (id, path) = (text("toolCallId"), text("path"));
            transcript
                .updates()
                .filter(|u| {
                    matches!(
                        u["sessionUpdate"].as_str(),
                        Some("tool_call" | "tool_call_update")
                    )
                })
                .filter(|u| u["toolCallId"] == id.as_str())
                .find_map(|u| dig(&u, &path).cloned())
        }
        "tool-response" => {
            let (id, field) = (text("toolCallId"), text("field"));
            transcript
                .updates()
                .filter(|u| {
                    u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == id.as_str()
                })
                .find_map(|u| {
                    u["_meta"]["claudeCode"]["toolResponse"]
                        .get(&field)
                        .cloned()
                })
        }
        "child-session" => {
            let id = text("messageId");
            transcript
                .updates()
                .find(|u| u["sessionUpdate"] == "session_message" && u["messageId"] == id.as_str())
                .map(|u| u["recipientSessionId"].clone())
        }
        "subagent-session" => {
            let index = usize::try_from(rule["index"].as_u64()?).ok()?;
            let mut children: Vec<Value> = Vec::new();
            for update in transcript
                .updates()
                .filter(|u| u["sessionUpdate"] == "subagent_update")
            {
                let child = update["sessionId"].clone();
                if child.is_string() && !children.contains(&child) {
                    children.push(child);
                }
            }
            children.into_iter().nth(index)
        }
        _ => None,
    }
}

fn dig<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(value, |value, part| match value {
        Value::Array(items) => items.get(part.parse::<usize>().ok()?),
        Value::Object(map) => map.get(part),
        _ => None,
    })
}

/// Replaces `"$NAME"` strings; the error is a name with no value.
fn substitute(value: &Value, ids: &Map<String, Value>) -> Result<Value, String> {
    Ok(match value {
        Value::String(s) if s.starts_with('$') => {
            let name = &s[1..];
            ids.get(name).cloned().ok_or_else(|| name.to_owned())?
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| substitute(item, ids))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, item)| Ok((key.clone(), substitute(item, ids)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

/// Every `*.expected.json` of a fixtures folder, sorted by name.
pub fn expected_files(dir: &Path) -> Result<Vec<PathBuf>, FixtureError> {
    let entries = std::fs::read_dir(dir).map_err(|e| error(format!("{}: {e}", dir.display())))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.ends_with(".expected.json"))
        })
        .collect();
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_dig_into_objects_and_arrays() {
        let value =
            json!({"rawOutput": {"executionSummary": {"totalTokens": 230}}, "content": [{"a": 1}]});
        assert_eq!(
            dig(&value, "rawOutput.executionSummary.totalTokens"),
            Some(&json!(230))
        );
        assert_eq!(dig(&value, "content.0.a"), Some(&json!(1)));
        assert_eq!(dig(&value, "content.1.a"), None);
        assert_eq!(dig(&value, "rawOutput.missing"), None);
    }

    #[test]
    fn placeholders_are_replaced_and_unknown_names_fail() {
        let ids: Map<String, Value> = [("A".to_owned(), json!("x"))].into_iter().collect();
        assert_eq!(
            substitute(&json!({"id": "$A", "n": 2, "list": ["$A"]}), &ids),
            Ok(json!({"id": "x", "n": 2, "list": ["x"]}))
        );
        assert_eq!(substitute(&json!("$B"), &ids), Err("B".into()));
    }
}
