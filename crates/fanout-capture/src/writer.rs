//! The subagent writer (DESIGN 4.2): identity gate, value normalisation, terminality,
//! one upsert, counters. It returns nothing, so telemetry can never fail the product
//! path that calls it.

use std::sync::Arc;

use fanout_acp::SubagentTask;
use fanout_store::{Source, SubagentRecord, Timestamp, is_terminal_tool_status};

use crate::counters::{Outcome, WriterCounters};

/// One subagent frame as capture hands it over: identities, the frame's own tool
/// status and the cumulative payload. Borrowed from capture's own state: the record
/// [`normalize`] builds is the only copy made per frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SubagentFrame<'a> {
    /// The `task_sessions.id` of the session the row belongs to.
    pub task_session_id: &'a str,
    pub task_id: &'a str,
    /// The turn open when the frame was observed; never created for this frame.
    pub turn_id: Option<&'a str>,
    pub tool_call_id: &'a str,
    pub parent_tool_call_id: Option<&'a str>,
    /// `None` or `""` is stored as `'unknown'` and counted (AC-31).
    pub agent_execution_id: Option<&'a str>,
    /// This frame's tool status; `None` = not a status change (the payload still merges).
    pub tool_status: Option<&'a str>,
    pub payload: &'a SubagentTask,
    pub observed_at: Timestamp,
    /// The row's provenance (written once by its first frame).
    pub source: Source,
}

/// How one prepared record's write ended ([`SubagentWriter::settle`]), for callers
/// inside this crate that keep their own tallies (distinct rows per import).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecordOutcome {
    Persisted,
    Failed,
}

/// DESIGN 4.2 around each subagent write: the identity gate, the value rules and the
/// AC-26 [`WriterCounters`]. The caller runs the upsert itself, alone or in a group
/// commit, between [`SubagentWriter::prepare`] and [`SubagentWriter::settle`].
#[derive(Default)]
pub(crate) struct SubagentWriter {
    counters: Arc<WriterCounters>,
}

impl SubagentWriter {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn counters(&self) -> Arc<WriterCounters> {
        Arc::clone(&self.counters)
    }

    /// DESIGN 4.2 for one frame, first half: `attempted`, the identity gate
    /// (`skipped_no_identity`, then `None`) and the value rules (`anomalous_value`).
    /// The caller runs the upsert of the returned record (alone or in a group commit)
    /// and then MUST call [`SubagentWriter::settle`] with its outcome, so that
    /// attempted = skipped + persisted + failed holds again (AC-26).
    pub(crate) fn prepare(&self, frame: &SubagentFrame<'_>) -> Option<SubagentRecord> {
        self.counters.bump(Outcome::Attempted);
        // AC-2: the execution id is deliberately not part of the gate (AC-31).
        if frame.task_session_id.is_empty()
            || frame.task_id.is_empty()
            || frame.tool_call_id.is_empty()
        {
            self.counters.bump(Outcome::SkippedNoIdentity);
            return None;
        }
        let (record, anomalous) = normalize(frame);
        // Counted before the upsert, so a frame whose write then fails still counts.
        if anomalous {
            self.counters.bump(Outcome::AnomalousValue);
        }
        Some(record)
    }

    /// DESIGN 4.2, second half: `persisted` (and
    /// `unknown_execution`) or a WARN with the session and tool_call id and `failed`.
    pub(crate) fn settle(
        &self,
        record: &SubagentRecord,
        error: Option<&fanout_store::StoreError>,
    ) -> RecordOutcome {
        match error {
            None => {
                self.counters.bump(Outcome::Persisted);
                if record.agent_execution_id.is_none() {
                    self.counters.bump(Outcome::UnknownExecution);
                }
                RecordOutcome::Persisted
            }
            Some(error) => {
                tracing::warn!(
                    session_id = %record.task_session_id,
                    tool_call_id = %record.tool_call_id,
                    error = %error,
                    "failed to record subagent context"
                );
                self.counters.bump(Outcome::Failed);
                RecordOutcome::Failed
            }
        }
    }
}

/// The value rules of DESIGN 4.2 (AC-7…AC-11, AC-23): returns the record to upsert and
/// whether any metric was negative (`anomalous_value`, once per frame).
pub(crate) fn normalize(frame: &SubagentFrame<'_>) -> (SubagentRecord, bool) {
    let task = frame.payload;
    let mut anomalous = false;
    // total_tokens and duration_ms: 0 means "not reported" (AC-7a).
    let mut metric = |value: Option<i64>, zero_is_unreported: bool| match value {
        Some(v) if v < 0 => {
            anomalous = true;
            None
        }
        Some(0) if zero_is_unreported => None,
        other => other,
    };
    let total_tokens = metric(task.total_tokens, true);
    let duration_ms = metric(task.duration_ms, true);
    // tool_use_count: a reported 0 is a report (AC-8).
    let tool_use_count = metric(task.tool_use_count, false);
    let tool_status = non_empty(frame.tool_status);
    // AC-11: terminality comes from the tool status only; the agent status never decides.
    let settled_at = tool_status
        .as_deref()
        .filter(|status| is_terminal_tool_status(status))
        .map(|_| frame.observed_at);
    let record = SubagentRecord {
        task_session_id: frame.task_session_id.to_owned(),
        task_id: frame.task_id.to_owned(),
        turn_id: non_empty(frame.turn_id),
        tool_call_id: frame.tool_call_id.to_owned(),
        agent_execution_id: non_empty(frame.agent_execution_id),
        parent_tool_call_id: non_empty(frame.parent_tool_call_id),
        subagent_type: non_empty(Some(&task.subagent_type)),
        description: non_empty(Some(&task.description)),
        agent_id: non_empty(task.agent_id.as_deref()),
        child_session_id: non_empty(task.child_session_id.as_deref()),
        model: non_empty(task.model.as_deref()),
        agent_status: non_empty(task.status.as_deref()),
        tool_status,
        is_async: task.is_async,
        total_tokens,
        tool_use_count,
        duration_ms,
        observed_at: Some(frame.observed_at),
        settled_at,
        source: frame.source,
    };
    (record, anomalous)
}

/// '' -> NULL (AC-4, AC-23).
fn non_empty(value: Option<&str>) -> Option<String> {
    value.filter(|v| !v.is_empty()).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(payload: &SubagentTask) -> SubagentFrame<'_> {
        SubagentFrame {
            task_session_id: "s",
            task_id: "t",
            turn_id: None,
            tool_call_id: "tc",
            parent_tool_call_id: None,
            agent_execution_id: Some("exec"),
            tool_status: None,
            payload,
            observed_at: Timestamp::parse("2026-08-10T09:00:00Z").expect("fixed time"),
            source: Source::Live,
        }
    }

    #[test]
    fn zero_tokens_and_duration_are_unreported_but_zero_tool_uses_is_a_report() {
        let task = SubagentTask {
            total_tokens: Some(0),
            duration_ms: Some(0),
            tool_use_count: Some(0),
            ..SubagentTask::default()
        };
        let (record, anomalous) = normalize(&frame(&task));
        assert_eq!(record.total_tokens, None);
        assert_eq!(record.duration_ms, None);
        assert_eq!(record.tool_use_count, Some(0));
        assert!(!anomalous);
    }

    #[test]
    fn negative_metrics_are_null_and_flag_the_frame_once() {
        let mut task = SubagentTask {
            total_tokens: Some(-1),
            duration_ms: Some(-5),
            tool_use_count: Some(-2),
            ..SubagentTask::default()
        };
        let (record, anomalous) = normalize(&frame(&task));
        assert_eq!(
            (
                record.total_tokens,
                record.duration_ms,
                record.tool_use_count
            ),
            (None, None, None)
        );
        assert!(anomalous);
        task.total_tokens = Some(7);
        task.duration_ms = None;
        task.tool_use_count = Some(-1);
        let (record, anomalous) = normalize(&frame(&task));
        assert_eq!(record.total_tokens, Some(7));
        assert_eq!(record.tool_use_count, None);
        assert!(anomalous);
    }

    #[test]
    fn empty_texts_are_null() {
        let task = SubagentTask {
            status: Some(String::new()),
            model: Some(String::new()),
            ..SubagentTask::default()
        };
        let f = SubagentFrame {
            turn_id: Some(""),
            parent_tool_call_id: Some(""),
            agent_execution_id: Some(""),
            tool_status: Some(""),
            ..frame(&task)
        };
        let (record, _) = normalize(&f);
        assert_eq!(record.turn_id, None);
        assert_eq!(record.parent_tool_call_id, None);
        assert_eq!(record.agent_execution_id, None);
        assert_eq!(record.tool_status, None);
        assert_eq!(record.agent_status, None);
        assert_eq!(record.model, None);
        assert_eq!(record.description, None);
        assert_eq!(record.subagent_type, None);
    }

    #[test]
    fn only_a_terminal_tool_status_settles() {
        let task = SubagentTask {
            status: Some("completed".into()),
            ..SubagentTask::default()
        };
        let mut f = frame(&task);
        f.tool_status = Some("in_progress");
        assert_eq!(
            normalize(&f).0.settled_at,
            None,
            "agent status never decides"
        );
        for status in [
            "completed",
            "failed",
            "cancelled",
            "error",
            "success",
            "complete",
        ] {
            f.tool_status = Some(status);
            assert_eq!(normalize(&f).0.settled_at, Some(f.observed_at), "{status}");
        }
        f.tool_status = None;
        assert_eq!(normalize(&f).0.settled_at, None);
    }
}
