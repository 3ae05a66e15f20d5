//! The binding of live model requests to a cassette's recorded conversations
//! (DESIGN 5.5): pure rules, no files and no HTTP.
//!
//! A recorded **conversation** is identified by the caller's identity (if its
//! requests carried identity headers), the endpoint and its content root.
//! A live request binds in two steps:
//! 1. **its identity** (when it has one): a live id seen before keeps the
//!    recorded identity it claimed; a new one claims a recorded identity of the
//!    same rung *within its parent* (the recorded identity its live parent
//!    claimed; roots among roots) in first-call order, the first new subagent
//!    of a live root taking the first recorded subagent of the recorded root.
//!    Siblings that ran at the same time when recording (their spans overlap)
//!    are independent, so among them the one whose conversations hold this
//!    request's content root is taken; a sibling that had finished before the
//!    next one started is never skipped.
//! 2. **its conversation**: among the recorded conversations of that identity
//!    (or, without one, of no identity) on the same endpoint with the same root
//!    hash, the one whose next exchange is at this request's step, else the next
//!    unclaimed one. Each bound conversation has its own cursor.
//!
//! Anything else is a [`Miss`] naming the rung tried, the live key and the
//! closest recorded conversation; a miss consumes nothing.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;

use crate::content::ContentRoot;
use crate::identity::{Identity, IdentityRung};

/// How a conversation was identified or bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rung {
    /// By the caller's identity headers (then by root within the identity).
    Identity(IdentityRung),
    /// By the content root alone (the caller sent no identity headers).
    Content,
}

impl Rung {
    /// `claude-agent`, …, or `content`.
    pub fn as_str(self) -> &'static str {
        match self {
            Rung::Identity(rung) => rung.as_str(),
            Rung::Content => "content",
        }
    }
}

impl fmt::Display for Rung {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When something happened, in milliseconds from the start of the recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    /// The first request's start.
    pub start_ms: u64,
    /// The last response's end.
    pub end_ms: u64,
}

impl Span {
    fn overlaps(self, other: Span) -> bool {
        self.start_ms <= other.end_ms && other.start_ms <= self.end_ms
    }

    fn cover(self, other: Span) -> Span {
        Span {
            start_ms: self.start_ms.min(other.start_ms),
            end_ms: self.end_ms.max(other.end_ms),
        }
    }
}

/// A recorded caller identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedIdentity {
    /// The rung that identified it.
    pub rung: IdentityRung,
    /// Its recorded key (`<rung>:<id>`).
    pub key: String,
    /// Its parent among the recorded identities, if recorded.
    pub parent: Option<usize>,
}

/// A recorded conversation, as the binding needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedConversation {
    /// Its name in messages (the cassette file).
    pub name: String,
    /// Its caller, among the recorded identities.
    pub identity: Option<usize>,
    /// `METHOD /path` (query string excluded).
    pub endpoint: String,
    /// Its content root.
    pub root: Option<ContentRoot>,
    /// The step of each recorded exchange, in order.
    pub steps: Vec<Option<usize>>,
    /// When it ran.
    pub span: Span,
}

/// A cassette's identities (in first-call order) and conversations (in
/// listed order), validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CassetteScripts {
    identities: Vec<RecordedIdentity>,
    /// Each identity's span: the cover of its conversations'.
    spans: Vec<Span>,
    conversations: Vec<RecordedConversation>,
}

/// A cassette's conversations refer to something that is not there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScriptsError {
    /// An identity or conversation names an identity index out of range.
    #[error("{what} refers to identity {index}, but only {count} are recorded")]
    NoSuchIdentity {
        /// What refers to it.
        what: String,
        /// The index.
        index: usize,
        /// How many identities there are.
        count: usize,
    },
    /// A conversation has no exchanges.
    #[error("{name} records no exchange")]
    Empty {
        /// The conversation.
        name: String,
    },
}

impl CassetteScripts {
    /// Validates the references between identities and conversations.
    pub fn new(
        identities: Vec<RecordedIdentity>,
        conversations: Vec<RecordedConversation>,
    ) -> Result<Self, ScriptsError> {
        let count = identities.len();
        let check = |what: String, index: Option<usize>| match index {
            Some(index) if index >= count => {
                Err(ScriptsError::NoSuchIdentity { what, index, count })
            }
            _ => Ok(()),
        };
        for identity in &identities {
            check(format!("identity {}", identity.key), identity.parent)?;
        }
        let mut spans: Vec<Option<Span>> = vec![None; count];
        for conversation in &conversations {
            check(conversation.name.clone(), conversation.identity)?;
            if conversation.steps.is_empty() {
                return Err(ScriptsError::Empty {
                    name: conversation.name.clone(),
                });
            }
            if let Some(index) = conversation.identity {
                spans[index] = Some(match spans[index] {
                    Some(span) => span.cover(conversation.span),
                    None => conversation.span,
                });
            }
        }
        Ok(Self {
            identities,
            spans: spans.into_iter().map(Option::unwrap_or_default).collect(),
            conversations,
        })
    }

    /// The recorded identities.
    pub fn identities(&self) -> &[RecordedIdentity] {
        &self.identities
    }

    /// The recorded conversations.
    pub fn conversations(&self) -> &[RecordedConversation] {
        &self.conversations
    }

    /// How many exchanges are recorded in all.
    pub fn exchanges(&self) -> usize {
        self.conversations.iter().map(|c| c.steps.len()).sum()
    }

    /// The rung that identified conversation `index` when recording.
    pub fn recorded_rung(&self, index: usize) -> Rung {
        match self.conversations[index].identity {
            Some(identity) => Rung::Identity(self.identities[identity].rung),
            None => Rung::Content,
        }
    }
}

/// A live request, as the binding needs it.
#[derive(Debug, Clone, Copy)]
pub struct LiveRequest<'a> {
    /// For messages: `request 7 (POST /v1/messages)`.
    pub label: &'a str,
    /// Its identity headers' identity.
    pub identity: Option<&'a Identity>,
    /// `METHOD /path`.
    pub endpoint: &'a str,
    /// Its content root.
    pub root: Option<&'a ContentRoot>,
    /// Its step.
    pub step: Option<usize>,
}

/// A served request: which recorded exchange answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    /// The conversation (index into [`CassetteScripts::conversations`]).
    pub conversation: usize,
    /// The exchange within it (0-based).
    pub exchange: usize,
    /// The rung that bound it.
    pub rung: Rung,
}

/// Why a request bound to nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MissReason {
    /// No recorded identity of this rung is left within the parent.
    NoIdentity {
        /// How many recorded identities of the rung are within the parent.
        recorded: usize,
    },
    /// No recorded conversation of the identity (or without one) has this
    /// endpoint and root.
    NoConversation,
    /// Its conversation's recorded exchanges are all served.
    Exhausted {
        /// The conversation.
        conversation: String,
        /// How many it recorded.
        recorded: usize,
    },
    /// Its conversation's next exchange is at another step.
    StepMismatch {
        /// The conversation.
        conversation: String,
        /// The recorded step of its next exchange.
        expected: Option<usize>,
        /// The live request's step.
        got: Option<usize>,
    },
}

/// Where the live root first differs from the closest recorded one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// Character offset into the normalised root text.
    pub at: usize,
    /// The live text around it.
    pub live: String,
    /// The recorded text around it.
    pub recorded: String,
}

/// The recorded conversation most like the request that missed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closest {
    /// Its name.
    pub conversation: String,
    /// The rung that identified it.
    pub rung: Rung,
    /// Its root hash.
    pub root: Option<String>,
    /// Where its root and the live one first differ.
    pub difference: Option<Difference>,
}

/// A live request that bound to nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Miss {
    /// The request's label.
    pub request: String,
    /// The rung tried.
    pub rung: Rung,
    /// The live key: identity key and root hash.
    pub live: String,
    /// Why.
    pub reason: MissReason,
    /// The closest recorded conversation, if any.
    pub closest: Option<Closest>,
}

impl fmt::Display for Miss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}) by rung {}: ",
            self.request, self.live, self.rung
        )?;
        match &self.reason {
            MissReason::NoIdentity { recorded } => write!(
                f,
                "no recorded {} identity left within its parent ({recorded} recorded there)",
                self.rung
            )?,
            MissReason::NoConversation => {
                f.write_str("no recorded conversation has this endpoint and content root")?;
            }
            MissReason::Exhausted {
                conversation,
                recorded,
            } => write!(
                f,
                "asks past the end of {conversation}, which recorded {recorded} exchange(s)"
            )?,
            MissReason::StepMismatch {
                conversation,
                expected,
                got,
            } => write!(
                f,
                "{conversation}'s next exchange is at step {} but the request is at step {}",
                step_text(*expected),
                step_text(*got)
            )?,
        }
        if let Some(closest) = &self.closest {
            write!(
                f,
                "; closest recorded: {} ({}",
                closest.conversation, closest.rung
            )?;
            if let Some(root) = &closest.root {
                write!(f, ", root {root}")?;
            }
            f.write_str(")")?;
            if let Some(difference) = &closest.difference {
                write!(
                    f,
                    "; roots differ at character {}: live {:?} vs recorded {:?}",
                    difference.at, difference.live, difference.recorded
                )?;
            }
        }
        Ok(())
    }
}

fn step_text(step: Option<usize>) -> String {
    step.map_or_else(|| "?".to_string(), |s| s.to_string())
}

#[derive(Debug, Default)]
struct State {
    /// Live identity key -> recorded identity.
    identities: HashMap<String, usize>,
    identity_claimed: Vec<bool>,
    conversation_claimed: Vec<bool>,
    /// Next exchange per conversation.
    cursors: Vec<usize>,
    /// The rung that bound each conversation, once served.
    bound_by: Vec<Option<Rung>>,
    misses: Vec<Miss>,
}

/// A cassette's conversations bound to live requests. Thread-safe: one binding
/// serves every concurrent request.
#[derive(Debug)]
pub struct CassetteBinding {
    scripts: CassetteScripts,
    state: Mutex<State>,
}

/// How many characters of context a [`Difference`] shows on each side.
const DIFFERENCE_CONTEXT: usize = 40;

impl CassetteBinding {
    /// A binding with nothing bound yet.
    pub fn new(scripts: CassetteScripts) -> Self {
        let state = State {
            identity_claimed: vec![false; scripts.identities.len()],
            conversation_claimed: vec![false; scripts.conversations.len()],
            cursors: vec![0; scripts.conversations.len()],
            bound_by: vec![None; scripts.conversations.len()],
            ..State::default()
        };
        Self {
            scripts,
            state: Mutex::new(state),
        }
    }

    /// The recorded conversations.
    pub fn scripts(&self) -> &CassetteScripts {
        &self.scripts
    }

    /// The state; a caller that panicked left it consistent (every change is
    /// made in one step), so a poisoned lock is taken over.
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(state) => state,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The recorded exchange that answers `request`, or the miss (which is
    /// also kept, see [`CassetteBinding::misses`]).
    pub fn bind(&self, request: &LiveRequest<'_>) -> Result<Served, Box<Miss>> {
        let mut state = self.lock();
        let result = self.bind_locked(&mut state, request);
        if let Err(miss) = &result {
            state.misses.push((**miss).clone());
        }
        result
    }

    fn bind_locked(
        &self,
        state: &mut State,
        request: &LiveRequest<'_>,
    ) -> Result<Served, Box<Miss>> {
        let identity = match request.identity {
            None => None,
            Some(live) => Some(match state.identities.get(&live.key) {
                Some(&recorded) => recorded,
                None => self.claim_identity(state, live, request)?,
            }),
        };
        let rung = request
            .identity
            .map_or(Rung::Content, |live| Rung::Identity(live.rung));
        let candidates: Vec<usize> = (0..self.scripts.conversations.len())
            .filter(|&c| self.same_key(c, identity, request))
            .collect();
        let next_step = |state: &State, c: usize| {
            self.scripts.conversations[c]
                .steps
                .get(state.cursors[c])
                .copied()
        };
        let open = |state: &State, c: usize| {
            state.conversation_claimed[c] && next_step(state, c).is_some()
        };
        // 1. A bound conversation whose next exchange is at this step.
        let mut chosen = candidates.iter().copied().find(|&c| {
            open(state, c) && request.step.is_some() && next_step(state, c) == Some(request.step)
        });
        // 2. The next unclaimed one that starts at this step.
        if chosen.is_none() {
            chosen = candidates.iter().copied().find(|&c| {
                !state.conversation_claimed[c] && {
                    let first = self.scripts.conversations[c].steps[0];
                    first.is_none() || request.step.is_none() || first == request.step
                }
            });
        }
        // 3. Steps unknown on either side: the first bound one with exchanges left.
        if chosen.is_none() {
            chosen = candidates.iter().copied().find(|&c| {
                open(state, c) && (request.step.is_none() || next_step(state, c) == Some(None))
            });
        }
        if let Some(c) = chosen {
            state.conversation_claimed[c] = true;
            state.bound_by[c] = Some(rung);
            let exchange = state.cursors[c];
            state.cursors[c] += 1;
            return Ok(Served {
                conversation: c,
                exchange,
                rung,
            });
        }
        let live = live_key(request);
        let conversation_name = |c: usize| self.scripts.conversations[c].name.clone();
        let reason = if candidates.is_empty() {
            MissReason::NoConversation
        } else if let Some(c) = candidates.iter().copied().find(|&c| open(state, c)) {
            MissReason::StepMismatch {
                conversation: conversation_name(c),
                expected: next_step(state, c).flatten(),
                got: request.step,
            }
        } else if let Some(c) = candidates
            .iter()
            .copied()
            .find(|&c| !state.conversation_claimed[c])
        {
            MissReason::StepMismatch {
                conversation: conversation_name(c),
                expected: self.scripts.conversations[c].steps[0],
                got: request.step,
            }
        } else {
            MissReason::Exhausted {
                conversation: conversation_name(candidates[0]),
                recorded: self.scripts.conversations[candidates[0]].steps.len(),
            }
        };
        let pool: Vec<usize> = if candidates.is_empty() {
            (0..self.scripts.conversations.len())
                .filter(|&c| {
                    identity.is_none() || self.scripts.conversations[c].identity == identity
                })
                .collect()
        } else {
            candidates
        };
        Err(Box::new(Miss {
            request: request.label.to_string(),
            rung,
            live,
            reason,
            closest: self.closest(&pool, request),
        }))
    }

    fn same_key(&self, c: usize, identity: Option<usize>, request: &LiveRequest<'_>) -> bool {
        let conversation = &self.scripts.conversations[c];
        conversation.identity == identity
            && conversation.endpoint == request.endpoint
            && conversation.root.as_ref().map(|r| &r.hash) == request.root.map(|r| &r.hash)
    }

    /// Claims a recorded identity for a live one seen for the first time.
    fn claim_identity(
        &self,
        state: &mut State,
        live: &Identity,
        request: &LiveRequest<'_>,
    ) -> Result<usize, Box<Miss>> {
        let parent = live
            .parent
            .as_ref()
            .and_then(|parent| state.identities.get(parent).copied());
        let siblings: Vec<usize> = (0..self.scripts.identities.len())
            .filter(|&i| {
                let recorded = &self.scripts.identities[i];
                recorded.rung == live.rung && recorded.parent == parent
            })
            .collect();
        let unclaimed: Vec<usize> = siblings
            .iter()
            .copied()
            .filter(|&i| !state.identity_claimed[i])
            .collect();
        // An unclaimed sibling that finished before a later one started must
        // be claimed first: only siblings that overlap every earlier unclaimed
        // one may be taken out of order.
        let allowed: Vec<usize> = unclaimed
            .iter()
            .enumerate()
            .filter(|&(at, &i)| {
                unclaimed[..at]
                    .iter()
                    .all(|&earlier| self.scripts.spans[earlier].overlaps(self.scripts.spans[i]))
            })
            .map(|(_, &i)| i)
            .collect();
        let holds_request = |i: usize| {
            (0..self.scripts.conversations.len()).any(|c| self.same_key(c, Some(i), request))
        };
        if let Some(&chosen) = allowed.iter().find(|&&i| holds_request(i)) {
            state.identity_claimed[chosen] = true;
            state.identities.insert(live.key.clone(), chosen);
            return Ok(chosen);
        }
        let pool: Vec<usize> = (0..self.scripts.conversations.len())
            .filter(|&c| {
                self.scripts.conversations[c]
                    .identity
                    .is_some_and(|i| allowed.contains(&i))
            })
            .collect();
        let reason = if allowed.is_empty() {
            MissReason::NoIdentity {
                recorded: siblings.len(),
            }
        } else {
            MissReason::NoConversation
        };
        Err(Box::new(Miss {
            request: request.label.to_string(),
            rung: Rung::Identity(live.rung),
            live: live_key(request),
            reason,
            closest: self.closest(&pool, request),
        }))
    }

    /// The conversation of `pool` whose root is most like the request's
    /// (same endpoint first), with where they differ.
    fn closest(&self, pool: &[usize], request: &LiveRequest<'_>) -> Option<Closest> {
        let live_text = request.root.map(|r| r.text.as_str()).unwrap_or("");
        let best = pool.iter().copied().max_by_key(|&c| {
            let conversation = &self.scripts.conversations[c];
            let recorded = conversation
                .root
                .as_ref()
                .map(|r| r.text.as_str())
                .unwrap_or("");
            (
                conversation.endpoint == request.endpoint,
                similarity(live_text, recorded),
                std::cmp::Reverse(c),
            )
        })?;
        let conversation = &self.scripts.conversations[best];
        let difference = match (request.root, &conversation.root) {
            (Some(live), Some(recorded)) if live.hash != recorded.hash => {
                Some(first_difference(&live.text, &recorded.text))
            }
            _ => None,
        };
        Some(Closest {
            conversation: conversation.name.clone(),
            rung: self.scripts.recorded_rung(best),
            root: conversation.root.as_ref().map(|r| r.hash.clone()),
            difference,
        })
    }

    /// Exchanges served so far per conversation.
    pub fn progress(&self) -> Vec<usize> {
        self.lock().cursors.clone()
    }

    /// The rung that bound each conversation (`None`: never served).
    pub fn bound_rungs(&self) -> Vec<Option<Rung>> {
        self.lock().bound_by.clone()
    }

    /// Every miss so far, in order.
    pub fn misses(&self) -> Vec<Miss> {
        self.lock().misses.clone()
    }

    /// Live identity key -> the recorded identity it claimed.
    pub fn bound_identities(&self) -> Vec<(String, usize)> {
        let state = self.lock();
        let mut bound: Vec<(String, usize)> = state
            .identities
            .iter()
            .map(|(live, &recorded)| (live.clone(), recorded))
            .collect();
        bound.sort_by_key(|(_, recorded)| *recorded);
        bound
    }

    /// Whether every recorded exchange has been served.
    pub fn finished(&self) -> bool {
        self.progress()
            .iter()
            .zip(&self.scripts.conversations)
            .all(|(served, conversation)| *served >= conversation.steps.len())
    }
}

fn live_key(request: &LiveRequest<'_>) -> String {
    let root = request.root.map_or_else(
        || "no content root".to_string(),
        |r| format!("root {}", r.hash),
    );
    match request.identity {
        Some(identity) => format!("{}, {root}", identity.key),
        None => root,
    }
}

/// Characters shared at the start and at the end (not overlapping).
fn similarity(a: &str, b: &str) -> usize {
    let prefix = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let a_rest: Vec<char> = a.chars().skip(prefix).collect();
    let b_rest: Vec<char> = b.chars().skip(prefix).collect();
    let suffix = a_rest
        .iter()
        .rev()
        .zip(b_rest.iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    prefix + suffix
}

fn first_difference(live: &str, recorded: &str) -> Difference {
    let at = live
        .chars()
        .zip(recorded.chars())
        .take_while(|(x, y)| x == y)
        .count();
    let excerpt = |text: &str| -> String {
        text.chars()
            .skip(at.saturating_sub(DIFFERENCE_CONTEXT))
            .take(DIFFERENCE_CONTEXT * 2)
            .collect()
    };
    Difference {
        at,
        live: excerpt(live),
        recorded: excerpt(recorded),
    }
}

#[cfg(test)]
#[path = "cassette_tests.rs"]
mod tests;
