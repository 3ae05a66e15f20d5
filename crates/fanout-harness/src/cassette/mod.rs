//! Cassettes (DESIGN 5.5): what `fanout replay record` writes and `fanout
//! replay serve --cassette` replays. [`format`](mod@format) is the file format, [`record`]
//! the recording proxy, [`serve`] the replay server; this module loads a
//! cassette, checking every file, and turns it into `fanout-replay`'s
//! [`CassetteScripts`].

pub mod format;
mod learn;
pub mod record;
pub mod serve;
pub mod substitute;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use fanout_replay::{
    CassetteScripts, IdentityRung, RecordedConversation, RecordedIdentity, Span, VolatileRules,
    WireFormat, request_content,
};

use crate::error::HarnessError;
use format::{CASSETTE_TYPE, CASSETTE_VERSION, Exchange, INDEX_FILE, Index};

/// A loaded, checked cassette.
#[derive(Debug, Clone, PartialEq)]
pub struct Cassette {
    /// Its directory.
    pub dir: PathBuf,
    /// `index.json`.
    pub index: Index,
    /// Each conversation's exchanges, in the index's order.
    pub exchanges: Vec<Vec<Exchange>>,
}

/// The volatile-value rules of a side that declared `declared`.
pub fn declared_rules(declared: &BTreeMap<String, String>) -> VolatileRules {
    let mut rules = VolatileRules::new();
    for (name, value) in declared {
        rules.declare(name, value);
    }
    rules
}

/// `METHOD /path` (query string dropped): what a conversation is on.
pub fn endpoint(method: &str, path: &str) -> String {
    format!("{method} {}", path.split('?').next().unwrap_or(path))
}

impl Cassette {
    /// Reads `dir/index.json` and every conversation file it lists. A missing
    /// or bad file is an error naming it (and the line).
    pub fn load(dir: &Path) -> Result<Self, HarnessError> {
        let index_path = dir.join(INDEX_FILE);
        let text = std::fs::read_to_string(&index_path).map_err(HarnessError::io(&index_path))?;
        let bad = |path: &Path, line: Option<usize>, message: String| HarnessError::Cassette {
            path: path.to_path_buf(),
            line,
            message,
        };
        let index: Index = serde_json::from_str(&text)
            .map_err(|err| bad(&index_path, Some(err.line()), err.to_string()))?;
        if index.kind != CASSETTE_TYPE || index.version != CASSETTE_VERSION {
            return Err(bad(
                &index_path,
                None,
                format!(
                    "not a {CASSETTE_TYPE} version {CASSETTE_VERSION} index (type {:?}, version {})",
                    index.kind, index.version
                ),
            ));
        }
        let mut keys = HashMap::new();
        for identity in &index.identities {
            if IdentityRung::parse(&identity.rung).is_none() {
                return Err(bad(
                    &index_path,
                    None,
                    format!(
                        "identity {} has an unknown rung {:?}",
                        identity.key, identity.rung
                    ),
                ));
            }
            if keys.insert(identity.key.as_str(), ()).is_some() {
                return Err(bad(
                    &index_path,
                    None,
                    format!("identity {} is listed twice", identity.key),
                ));
            }
        }
        for identity in &index.identities {
            if let Some(parent) = &identity.parent
                && !keys.contains_key(parent.as_str())
            {
                return Err(bad(
                    &index_path,
                    None,
                    format!(
                        "identity {} names parent {parent}, which is not listed",
                        identity.key
                    ),
                ));
            }
        }
        let mut exchanges = Vec::with_capacity(index.conversations.len());
        for conversation in &index.conversations {
            let plain = Path::new(&conversation.file)
                .file_name()
                .is_some_and(|name| name == conversation.file.as_str());
            if !plain || conversation.file.starts_with('.') {
                return Err(bad(
                    &index_path,
                    None,
                    format!(
                        "conversation file {:?} must be a plain file name beside the index",
                        conversation.file
                    ),
                ));
            }
            if let Some(identity) = &conversation.identity
                && !keys.contains_key(identity.as_str())
            {
                return Err(bad(
                    &index_path,
                    None,
                    format!(
                        "{} names identity {identity}, which is not listed",
                        conversation.file
                    ),
                ));
            }
            let path = dir.join(&conversation.file);
            let text = std::fs::read_to_string(&path).map_err(|error| match error.kind() {
                std::io::ErrorKind::NotFound => bad(
                    &path,
                    None,
                    format!(
                        "missing: {INDEX_FILE} lists it as a conversation of {} exchange(s)",
                        conversation.exchanges
                    ),
                ),
                _ => HarnessError::Io {
                    path: path.clone(),
                    error,
                },
            })?;
            let mut lines = Vec::new();
            for (number, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let exchange: Exchange = serde_json::from_str(line)
                    .map_err(|err| bad(&path, Some(number + 1), err.to_string()))?;
                if exchange.response.body.bytes().is_none() {
                    return Err(bad(
                        &path,
                        Some(number + 1),
                        "bodyBase64 is not valid base64".into(),
                    ));
                }
                lines.push(exchange);
            }
            if lines.len() != conversation.exchanges {
                return Err(bad(
                    &path,
                    None,
                    format!(
                        "holds {} exchange(s) but {INDEX_FILE} says {}",
                        lines.len(),
                        conversation.exchanges
                    ),
                ));
            }
            if lines.is_empty() {
                return Err(bad(&path, None, "holds no exchange".into()));
            }
            exchanges.push(lines);
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            index,
            exchanges,
        })
    }

    /// The recording's volatile-value rules (its declared values).
    pub fn recorded_rules(&self) -> VolatileRules {
        declared_rules(&self.index.declared)
    }

    /// The binding's view: identities and conversations, with each
    /// conversation's root and steps read from its recorded requests under the
    /// recording's rules.
    pub fn scripts(&self) -> Result<CassetteScripts, HarnessError> {
        let rules = self.recorded_rules();
        let position: HashMap<&str, usize> = self
            .index
            .identities
            .iter()
            .enumerate()
            .map(|(at, identity)| (identity.key.as_str(), at))
            .collect();
        let identities = self
            .index
            .identities
            .iter()
            .map(|identity| RecordedIdentity {
                rung: IdentityRung::parse(&identity.rung).unwrap_or(IdentityRung::FanoutSession),
                key: identity.key.clone(),
                parent: identity
                    .parent
                    .as_deref()
                    .and_then(|p| position.get(p).copied()),
            })
            .collect();
        let conversations = self
            .index
            .conversations
            .iter()
            .zip(&self.exchanges)
            .map(|(entry, exchanges)| {
                let first = &exchanges[0].request;
                let format = WireFormat::of_path(&first.path);
                let content = |exchange: &Exchange| {
                    exchange
                        .request
                        .body
                        .json()
                        .map(|body| request_content(format, body, &rules))
                        .unwrap_or_default()
                };
                RecordedConversation {
                    name: entry.file.clone(),
                    identity: entry
                        .identity
                        .as_deref()
                        .and_then(|key| position.get(key).copied()),
                    endpoint: endpoint(&first.method, &first.path),
                    root: content(&exchanges[0]).root,
                    steps: exchanges.iter().map(|e| content(e).step).collect(),
                    span: Span {
                        start_ms: exchanges.iter().map(|e| e.started_ms).min().unwrap_or(0),
                        end_ms: exchanges.iter().map(|e| e.ended_ms).max().unwrap_or(0),
                    },
                }
            })
            .collect();
        CassetteScripts::new(identities, conversations).map_err(|err| HarnessError::Cassette {
            path: self.dir.join(INDEX_FILE),
            line: None,
            message: err.to_string(),
        })
    }
}
