//! The binding of live sessions to recorded scripts (DESIGN 5.3).
//!
//! Live session ids are fresh every run and never equal the recorded ones, so a
//! live session binds by **first-call order**: the first live session to call
//! the model claims the first unclaimed script (the parent, created first), the
//! next new one the next, and each then advances its own cursor. This keys by
//! who calls, not by global call order, so it stays correct when sessions'
//! calls interleave. A call without a session id is one anonymous session bound
//! to the primary script, which makes the single-session path a plain replay.

use std::collections::HashMap;
use std::sync::Mutex;

use fanout_sessionlog::Chunk;

use crate::script::{ScenarioScripts, SessionScript};

/// How a call without a session id is named in messages.
pub const ANONYMOUS_SESSION: &str = "<no session id>";

/// No recorded response matches a live call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindingError {
    /// More distinct live sessions called than the scenario recorded.
    #[error(
        "live session {session} (call 1) is distinct caller number {caller} but the scenario \
         recorded only {recorded} session(s): {scripts}; an unrecorded session appeared"
    )]
    TooManySessions {
        /// The live session.
        session: String,
        /// Its 1-based rank among distinct callers.
        caller: usize,
        /// How many scripts there are.
        recorded: usize,
        /// The scripts, described.
        scripts: String,
    },
    /// A live session asked past the end of its script.
    #[error(
        "live session {session} made model call {call} but its script {script} recorded only \
         {recorded} response(s)"
    )]
    ScriptExhausted {
        /// The live session.
        session: String,
        /// The script it is bound to, described.
        script: String,
        /// The 1-based number of the call.
        call: usize,
        /// How many responses the script has.
        recorded: usize,
    },
    /// A call without a session id found the primary script held by a named session.
    #[error(
        "a call without a session id binds to the primary script {script}, but live session \
         {holder} already holds it"
    )]
    PrimaryTaken {
        /// The primary script, described.
        script: String,
        /// The live session holding it.
        holder: String,
    },
    /// A thread panicked while holding the binding's lock.
    #[error("the replay binding is unusable: a caller panicked while holding it")]
    Poisoned,
}

/// One served call: the recorded response to send back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayedResponse {
    /// Index of the script (claim order).
    pub script: usize,
    /// 0-based index of the response within the script.
    pub call: usize,
    /// The recorded model name of the call.
    pub model: String,
    /// The chunks to stream, in order.
    pub chunks: Vec<Chunk>,
    /// The recorded failure, to be raised after the chunks.
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy)]
struct Cursor {
    script: usize,
    next: usize,
}

/// Live session (None = anonymous) -> its script and next response.
///
/// Every claim takes the lowest unclaimed script (the anonymous session only
/// ever claims script 0, and only while it is free), so the claimed scripts
/// are always `0..cursors.len()` and `cursors.len()` is the number of distinct
/// callers: who holds what needs no bookkeeping of its own.
type Cursors = HashMap<Option<String>, Cursor>;

/// Live sessions bound to a scenario's scripts. Thread-safe: one binding is
/// shared by every concurrent session (and every HTTP request).
#[derive(Debug)]
pub struct ReplayBinding {
    scripts: ScenarioScripts,
    cursors: Mutex<Cursors>,
}

impl ReplayBinding {
    /// A binding with no live session bound yet.
    pub fn new(scripts: ScenarioScripts) -> Self {
        Self {
            scripts,
            cursors: Mutex::new(Cursors::new()),
        }
    }

    /// The scripts being replayed.
    pub fn scripts(&self) -> &ScenarioScripts {
        &self.scripts
    }

    /// The next recorded response for a call by `session_id` (`None`: a call
    /// made outside any session). A failed lookup consumes nothing.
    pub fn next_response(
        &self,
        session_id: Option<&str>,
    ) -> Result<ReplayedResponse, BindingError> {
        let key = session_id.map(str::to_string);
        let who = session_id.unwrap_or(ANONYMOUS_SESSION).to_string();
        let mut cursors = self.cursors.lock().map_err(|_| BindingError::Poisoned)?;
        let cursor = match cursors.get(&key) {
            Some(cursor) => *cursor,
            None => {
                let script = self.claim(&mut cursors, &key, &who)?;
                Cursor { script, next: 0 }
            }
        };
        let script: &SessionScript = &self.scripts.scripts()[cursor.script];
        let Some(recorded) = script.responses.get(cursor.next) else {
            return Err(BindingError::ScriptExhausted {
                session: who,
                script: script.describe(),
                call: cursor.next + 1,
                recorded: script.responses.len(),
            });
        };
        let response = ReplayedResponse {
            script: cursor.script,
            call: cursor.next,
            model: recorded.model.clone(),
            chunks: recorded.chunks.clone(),
            error: recorded.error.clone(),
        };
        cursors.insert(
            key,
            Cursor {
                script: cursor.script,
                next: cursor.next + 1,
            },
        );
        Ok(response)
    }

    /// Binds a new live session to its script: the anonymous session to the
    /// primary one, a named session to the first unclaimed one.
    fn claim(
        &self,
        cursors: &mut Cursors,
        key: &Option<String>,
        who: &str,
    ) -> Result<usize, BindingError> {
        // Claimed scripts are `0..cursors.len()` (see [`Cursors`]).
        let first_unclaimed = cursors.len();
        if key.is_none() && first_unclaimed > 0 && !self.scripts.is_empty() {
            let holder = cursors
                .iter()
                .find(|(_, cursor)| cursor.script == 0)
                .and_then(|(holder, _)| holder.as_deref());
            return Err(BindingError::PrimaryTaken {
                script: self.scripts.scripts()[0].describe(),
                holder: holder.unwrap_or(ANONYMOUS_SESSION).to_string(),
            });
        }
        if first_unclaimed < self.scripts.len() {
            cursors.insert(
                key.clone(),
                Cursor {
                    script: first_unclaimed,
                    next: 0,
                },
            );
            return Ok(first_unclaimed);
        }
        Err(BindingError::TooManySessions {
            session: who.to_string(),
            caller: cursors.len() + 1,
            recorded: self.scripts.len(),
            scripts: self
                .scripts
                .scripts()
                .iter()
                .map(SessionScript::describe)
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    /// Calls served so far per script, in claim order (for diagnostics).
    pub fn progress(&self) -> Vec<usize> {
        let Ok(cursors) = self.cursors.lock() else {
            return Vec::new();
        };
        let mut served = vec![0; self.scripts.len()];
        for cursor in cursors.values() {
            served[cursor.script] = cursor.next;
        }
        served
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    use fanout_sessionlog::{Backend, Event, Header, SessionLog, Timestamp};

    fn ts(micros: i64) -> Timestamp {
        Timestamp::from_micros(1_754_235_140_000_000 + micros).unwrap()
    }

    fn text(t: &str) -> Chunk {
        Chunk::TextDelta { text: t.into() }
    }

    /// A log whose responses are single text chunks `"<label><n>"`.
    fn log(id: &str, created: i64, label: &str, calls: usize, parent: Option<&str>) -> SessionLog {
        let mut events = Vec::new();
        for n in 0..calls {
            events.push(Event::ModelRequest {
                ts: ts(created + 1),
                ordinal: n as u64,
                model: "m".into(),
            });
            events.push(Event::AssistantChunk {
                ts: ts(created + 2),
                chunk: text(&format!("{label}{n}")),
            });
        }
        SessionLog {
            path: PathBuf::from(format!("{label}.jsonl")),
            header: Header {
                created_at: ts(created),
                ..match parent {
                    Some(parent) => Header::child(id, "/w", parent, "call", Backend::Spawn, None),
                    None => Header::root(id, "/w"),
                }
            },
            events,
        }
    }

    fn binding(logs: &[SessionLog]) -> ReplayBinding {
        ReplayBinding::new(ScenarioScripts::from_logs(logs).unwrap())
    }

    fn served_text(response: &ReplayedResponse) -> String {
        match response.chunks.as_slice() {
            [Chunk::TextDelta { text }] => text.clone(),
            other => panic!("unexpected chunks {other:?}"),
        }
    }

    /// Every interleaving of `a` calls by one session and `b` by another, as
    /// sequences of `false` (first session) and `true` (second session).
    fn interleavings(a: usize, b: usize) -> Vec<Vec<bool>> {
        if a == 0 {
            return vec![vec![true; b]];
        }
        if b == 0 {
            return vec![vec![false; a]];
        }
        let mut out = Vec::new();
        for mut rest in interleavings(a - 1, b) {
            rest.insert(0, false);
            out.push(rest);
        }
        for mut rest in interleavings(a, b - 1) {
            rest.insert(0, true);
            out.push(rest);
        }
        out
    }

    #[test]
    fn interleaved_sessions_each_get_their_own_responses_in_every_order() {
        // Logs listed out of order: the scripts are ordered by createdAt.
        let logs = [
            log("child", 100, "c", 3, Some("parent")),
            log("parent", 0, "p", 3, None),
        ];
        let orders = interleavings(3, 3);
        assert_eq!(orders.len(), 20);
        for order in orders {
            let replay = binding(&logs);
            let live = ["live-A", "live-B"];
            // Whoever calls first claims the first script (the parent's).
            let first = usize::from(order[0]);
            let mut got: [Vec<String>; 2] = Default::default();
            for &who in &order {
                let who = usize::from(who);
                let response = replay.next_response(Some(live[who])).unwrap();
                got[who].push(served_text(&response));
            }
            let want = |prefix: &str| (0..3).map(|n| format!("{prefix}{n}")).collect::<Vec<_>>();
            assert_eq!(got[first], want("p"), "order {order:?}");
            assert_eq!(got[1 - first], want("c"), "order {order:?}");
            assert_eq!(replay.progress(), vec![3, 3]);
        }
    }

    #[test]
    fn concurrent_sessions_keep_their_own_cursors() {
        let logs: Vec<SessionLog> = (0..4)
            .map(|i| {
                let label = format!("s{i}");
                let parent = (i > 0).then_some("s0");
                log(&format!("id{i}"), i * 10, &label, 50, parent)
            })
            .collect();
        let replay = std::sync::Arc::new(binding(&logs));
        // Claim in a known order first, then hammer from four threads.
        for i in 0..4 {
            let first = replay.next_response(Some(&format!("live{i}"))).unwrap();
            assert_eq!(first.script, i);
        }
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let replay = replay.clone();
                std::thread::spawn(move || {
                    (1..50)
                        .map(|_| {
                            served_text(&replay.next_response(Some(&format!("live{i}"))).unwrap())
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for (i, thread) in threads.into_iter().enumerate() {
            let got = thread.join().unwrap();
            let want: Vec<String> = (1..50).map(|n| format!("s{i}{n}")).collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn anonymous_calls_are_a_plain_replay_of_the_primary_script() {
        let replay = binding(&[
            log("child", 5, "c", 1, Some("p")),
            log("p", 0, "p", 2, None),
        ]);
        assert_eq!(served_text(&replay.next_response(None).unwrap()), "p0");
        assert_eq!(served_text(&replay.next_response(None).unwrap()), "p1");
        let err = replay.next_response(None).unwrap_err().to_string();
        assert_eq!(
            err,
            "live session <no session id> made model call 3 but its script p.jsonl (recorded \
             session p) recorded only 2 response(s)"
        );
        // A named session after the anonymous one takes the next script.
        assert_eq!(served_text(&replay.next_response(Some("x")).unwrap()), "c0");
    }

    #[test]
    fn a_claim_stands_even_when_its_first_call_fails() {
        let replay = binding(&[log("p", 0, "p", 0, None), log("c", 5, "c", 1, Some("p"))]);
        assert!(matches!(
            replay.next_response(Some("A")),
            Err(BindingError::ScriptExhausted { call: 1, .. })
        ));
        assert_eq!(served_text(&replay.next_response(Some("B")).unwrap()), "c0");
        let anonymous = replay.next_response(None).unwrap_err().to_string();
        assert!(
            anonymous.contains("but live session A already holds it"),
            "{anonymous}"
        );
        assert_eq!(replay.progress(), vec![0, 1]);
    }

    #[test]
    fn errors_name_the_live_session_the_script_and_the_call() {
        let replay = binding(&[log("p", 0, "p", 1, None), log("c", 5, "c", 1, Some("p"))]);
        replay.next_response(Some("A")).unwrap();
        replay.next_response(Some("B")).unwrap();
        let exhausted = replay.next_response(Some("B")).unwrap_err();
        assert_eq!(
            exhausted,
            BindingError::ScriptExhausted {
                session: "B".into(),
                script: "c.jsonl (recorded session c)".into(),
                call: 2,
                recorded: 1,
            }
        );
        // The failed call consumed nothing: it fails the same way again.
        assert_eq!(replay.next_response(Some("B")).unwrap_err(), exhausted);
        let extra = replay.next_response(Some("C")).unwrap_err().to_string();
        assert!(
            extra.contains("live session C (call 1) is distinct caller number 3")
                && extra
                    .contains("recorded only 2 session(s): p.jsonl (recorded session p), c.jsonl"),
            "{extra}"
        );
        let anonymous = replay.next_response(None).unwrap_err().to_string();
        assert!(
            anonymous.contains("primary script p.jsonl (recorded session p), but live session A"),
            "{anonymous}"
        );
    }
}
