#!/usr/bin/env bash
# Re-records every transcript under crates/fanout-capture/tests/fixtures/real/ from the
# real agents (installed on demand by tools/test-agents/<agent>/install.sh), offline,
# against capture.py's mock model. Scratch roots (agent homes, logs, the mock's request
# bodies) go under ${FANOUT_CAPTURE_SCRATCH:-${TMPDIR:-/tmp}/fanout-capture}/<name>; the
# recorded project directory is <scratch>/<name>/project, which is also the task id.
#
# Usage: tools/capture-transcripts/record-all.sh [name…]   (default: all of them)
# Names: opencode codex codex-subagents codex-v2 codex-v2-subagents (single delegations);
# qwen-<scenario>, copilot-<scenario> (single parallel background failing cancel nested),
# gemini-<scenario> (no background), codex1-single, codex1-parallel (codex-acp 1.13.1);
# history-v1-single, history-v1-parallel, history-v2-single, history-v2-parallel;
# claude-<0.23.1|0.101.0>-<scenario>[-subagents] (`claude` = every Claude name).
# After re-recording, re-derive the *.expected.json files by hand where a shape changed
# (their placeholders resolve minted ids from each transcript; check the literal values
# still hold), then `resolve_expected.py record` and `resolve_expected.py check`, and the
# README's tables: ids, thread ids and timestamps change on every run
# (tools/capture-transcripts/summarize.py helps).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="$repo/crates/fanout-capture/tests/fixtures/real"
scratch="${FANOUT_CAPTURE_SCRATCH:-${TMPDIR:-/tmp}/fanout-capture}"
mkdir -p "$out" "$scratch"

record() {
  local name="$1"; shift
  echo "== $name" >&2
  python3 "$here/capture.py" "$@" --workdir "$scratch/$name" --keep --out "$out/$name.transcript.jsonl"
}

# Codex native history: the rollout files ($CODEX_HOME/sessions) of a codex-acp 2.6.0 run,
# verbatim, under crates/fanout-capture/tests/fixtures/history/codex/<name>/sessions; the
# run's transcript stays in the scratch root.
history() {
  local name="$1"; shift
  echo "== history $name" >&2
  python3 "$here/capture.py" codex "$@" --workdir "$scratch/history-$name" --keep \
    --out "$scratch/history-$name/transcript.jsonl" --history-out "$history_out/$name/sessions"
}
history_out="$repo/crates/fanout-capture/tests/fixtures/history/codex"
scenario_names=()
for agent in qwen copilot; do
  for sc in single parallel background failing cancel nested; do scenario_names+=("$agent-$sc"); done
done
for sc in single parallel failing cancel nested; do scenario_names+=("gemini-$sc"); done
scenario_names+=(codex1-single codex1-parallel)
history_names=(history-v1-single history-v1-parallel history-v2-single history-v2-parallel)

names=("$@")
defaulted=$(( ${#names[@]} == 0 ))
[[ ${#names[@]} -gt 0 ]] || names=(opencode codex codex-subagents codex-v2 codex-v2-subagents
  "${scenario_names[@]}" "${history_names[@]}")
# Claude (agents/claude.py): claude-<adapter version>-<scenario>[-subagents]; each run also
# keeps Claude Code's own history under fixtures/history/claude/<name>/projects/ and the
# list of its model requests (<name>.requests.json). Then run resolve_expected.py record.
claude_scenarios=(single parallel background failing cancel nested permission)
claude_names=()
for s in "${claude_scenarios[@]}"; do
  claude_names+=("claude-0.23.1-$s" "claude-0.101.0-$s" "claude-0.101.0-$s-subagents")
done
if (( defaulted )); then names+=("${claude_names[@]}"); fi
expanded=()
for name in "${names[@]}"; do
  if [[ "$name" == claude ]]; then expanded+=("${claude_names[@]}"); else expanded+=("$name"); fi
done
names=("${expanded[@]}")

record_claude() {  # record_claude NAME AGENT: the scenario and --subagents come from NAME
  local name="$1" agent="$2" scenario="${1#claude-*.*.*-}" caps=()
  if [[ "$scenario" == *-subagents ]]; then scenario="${scenario%-subagents}"; caps=(--subagents); fi
  record "$name" "$agent" --scenario "$scenario" "${caps[@]}" --requests-out "$out/$name.requests.json" \
    --history-out "$repo/crates/fanout-capture/tests/fixtures/history/claude/$name"
}
for name in "${names[@]}"; do
  case "$name" in
    qwen-*|gemini-*|copilot-*) record "$name" "${name%%-*}" --scenario "${name#*-}" ;;
    codex1-*) record "$name" codex1 --codex-feature multi_agent --scenario "${name#*-}" ;;
    history-v1-*) history "${name#history-}" --codex-feature multi_agent --scenario "${name#history-v1-}" ;;
    history-v2-*) history "${name#history-}" --codex-feature multi_agent_v2 --scenario "${name#history-v2-}" ;;
    opencode) record opencode opencode ;;
    codex) record codex codex --codex-feature multi_agent ;;
    codex-subagents) record codex-subagents codex --codex-feature multi_agent --subagents ;;
    codex-v2) record codex-v2 codex --codex-feature multi_agent_v2 ;;
    codex-v2-subagents) record codex-v2-subagents codex --codex-feature multi_agent_v2 --subagents ;;
    claude-0.23.1-*) record_claude "$name" claude-023 ;;
    claude-0.101.0-*) record_claude "$name" claude-101 ;;
    *) echo "unknown transcript name: $name" >&2; exit 2 ;;
  esac
done
