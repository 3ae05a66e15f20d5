#!/usr/bin/env python3
"""Resolves the hand-written expected rows of the Claude fixtures against a transcript.

Each `crates/fanout-capture/tests/fixtures/real/claude-*.expected.json` holds the rows of
`task_session_subagents` (and, for the history fixture beside it, the usage ledger) that
the fixture must produce, derived by hand from its frames (the fixtures README says, per
file, which frame gives which value). Ids the mock scripts (`toolu_01FANOUT…`,
`msg_01FANOUT…`) are literal; ids and figures the agent mints per run are placeholders,
a string `"$NAME"` standing for `ids.NAME`, whose `rule` says how to find the value in
the run's own transcript (so the same file checks a fresh live run):

  session          `result.sessionId` of the response to `session/new`
  cwd              `params.cwd` of `session/new` (the task id)
  execution        the transcript header's `executionId` (the proxy's own transcript
                   for a live run behind `fanout proxy`)
  tool-response    `_meta.claudeCode.toolResponse[field]` of the first `tool_call_update`
                   of `toolCallId` that has that field
  child-session    `recipientSessionId` of the first `session_message` whose
                   `messageId` is `messageId` (the Agent tool_use id the mock scripted)

Every entry also keeps the value it had in the committed recording (`recorded`).

    python3 tools/capture-transcripts/claude_expected.py check [EXPECTED…]
        resolves every placeholder of the committed files from their own transcripts and
        fails unless each rule finds exactly the recorded value, every literal toolu_/msg_
        id occurs in the transcript or history, and each `usage` entry agrees with the
        history's records (largest value per field per response id, attribution by
        meta.json toolUseId or the parent's toolUseResult.agentId)
    python3 tools/capture-transcripts/claude_expected.py record [EXPECTED…]
        after a re-record: writes the resolved values into `recorded`
    python3 tools/capture-transcripts/claude_expected.py resolve EXPECTED TRANSCRIPT
        prints the rows (and usage) with every placeholder replaced from that transcript,
        as JSON: what a test of a fresh run compares the database with
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent.parent
FIXTURES = REPO / "crates" / "fanout-capture" / "tests" / "fixtures"
REAL = FIXTURES / "real"


class Transcript:
    def __init__(self, path: Path):
        lines = path.read_text(encoding="utf-8").splitlines()
        self.text = path.read_text(encoding="utf-8")
        self.header = json.loads(lines[0])
        self.messages = []
        for line in lines[1:]:
            if line.strip():
                try:
                    self.messages.append(json.loads(json.loads(line)["line"]))
                except ValueError:
                    continue

    def request(self, method: str) -> dict:
        return next(m for m in self.messages if m.get("method") == method and "id" in m)

    def updates(self) -> list[dict]:
        return [(m.get("params") or {}).get("update") or {} for m in self.messages if m.get("method") == "session/update"]


class Unresolved(Exception):
    pass


def resolve_one(name: str, spec: dict, t: Transcript) -> Any:
    rule = spec["rule"]
    if rule == "session":
        new_id = t.request("session/new")["id"]
        for m in t.messages:
            if m.get("id") == new_id and "result" in m and "method" not in m:
                return m["result"]["sessionId"]
    elif rule == "cwd":
        return t.request("session/new")["params"]["cwd"]
    elif rule == "execution":
        return t.header["executionId"]
    elif rule == "tool-response":
        for u in t.updates():
            if u.get("sessionUpdate") == "tool_call_update" and u.get("toolCallId") == spec["toolCallId"]:
                response = ((u.get("_meta") or {}).get("claudeCode") or {}).get("toolResponse") or {}
                if isinstance(response, dict) and spec["field"] in response:
                    return response[spec["field"]]
    elif rule == "child-session":
        for u in t.updates():
            if u.get("sessionUpdate") == "session_message" and u.get("messageId") == spec["messageId"]:
                return u["recipientSessionId"]
    else:
        raise Unresolved(f"{name}: unknown rule {rule!r}")
    raise Unresolved(f"{name}: rule {json.dumps(spec)} found nothing")


def resolve_ids(spec: dict, t: Transcript) -> dict[str, Any]:
    return {name: resolve_one(name, rule, t) for name, rule in (spec.get("ids") or {}).items()}


def substitute(value: Any, ids: dict[str, Any]) -> Any:
    if isinstance(value, str) and value.startswith("$"):
        return ids[value[1:]]
    if isinstance(value, list):
        return [substitute(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, ids) for k, v in value.items()}
    return value


def load(path: Path) -> tuple[dict, Transcript, Path | None]:
    spec = json.loads(path.read_text(encoding="utf-8"))
    t = Transcript(path.parent / spec["transcript"])
    history = (path.parent / spec["history"]).resolve() if spec.get("history") else None
    return spec, t, history


def literal_ids(value: Any) -> set[str]:
    if isinstance(value, str) and value.startswith(("toolu_", "msg_")):
        return {value}
    if isinstance(value, list):
        return set().union(*(literal_ids(v) for v in value)) if value else set()
    if isinstance(value, dict):
        return set().union(*(literal_ids(v) for v in value.values())) if value else set()
    return set()


USAGE_FIELDS = {"input_tokens": "input_tokens", "output_tokens": "output_tokens",
                "cache_creation_tokens": "cache_creation_input_tokens", "cache_read_tokens": "cache_read_input_tokens"}


def history_usage(history: Path) -> dict[str, dict]:
    """A cross-check of the hand-written `usage` entries: per response id of the history
    copy, the largest value of each usage field over its records, the model, and the
    call it is attributed to (the parent log: None; a subagent log: its meta.json
    `toolUseId`, else the parent's tool_result whose `toolUseResult.agentId` names it).
    Claude Code's `<synthetic>` API-error records are not model responses: left out."""
    spawned: dict[str, str] = {}
    logs: list[tuple[Path, str | None]] = []
    for log in sorted(history.rglob("*.jsonl")):
        if log.parent.name == "subagents":
            logs.append((log, log.stem.removeprefix("agent-")))
            continue
        logs.append((log, None))
        for line in log.read_text().splitlines():
            rec = json.loads(line)
            result = rec.get("toolUseResult")
            if isinstance(result, dict) and isinstance(result.get("agentId"), str):
                for block in (rec.get("message") or {}).get("content") or []:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        spawned[result["agentId"]] = block["tool_use_id"]
    out: dict[str, dict] = {}
    for log, agent in logs:
        call = None
        if agent is not None:
            meta = log.with_suffix(".meta.json")
            call = (json.loads(meta.read_text()).get("toolUseId") if meta.exists() else None) or spawned.get(agent)
            call = call or f"<unlinked agent {agent}>"
        for line in log.read_text().splitlines():
            rec = json.loads(line)
            msg = rec.get("message") or {}
            if rec.get("type") != "assistant" or rec.get("isApiErrorMessage") or msg.get("model") == "<synthetic>":
                continue
            entry = out.setdefault(msg["id"], {"model": msg.get("model"), "subagent_tool_call_id": call})
            for ours, theirs in USAGE_FIELDS.items():
                value = (msg.get("usage") or {}).get(theirs)
                if isinstance(value, int):
                    entry[ours] = max(entry.get(ours, value), value)
    return out


def check(paths: list[Path], write: bool) -> int:
    failed = 0
    for path in paths:
        spec, t, history = load(path)
        try:
            ids = resolve_ids(spec, t)
        except Unresolved as exc:
            print(f"{path.name}: {exc}")
            failed += 1
            continue
        problems = []
        for name, value in ids.items():
            if write:
                spec["ids"][name]["recorded"] = value
            elif spec["ids"][name].get("recorded") != value:
                problems.append(f"{name} resolves to {value!r}, recorded {spec['ids'][name].get('recorded')!r}")
        corpus = t.text + "".join(p.read_text() for p in history.rglob("*.jsonl")) if history else t.text
        for literal in sorted(literal_ids(spec.get("rows")) | literal_ids(spec.get("usage"))):
            if literal not in corpus:
                problems.append(f"literal {literal} occurs nowhere in the recording")
        if history is not None and spec.get("usage") is not None:
            sessions = sorted(p.stem for p in history.glob("projects/*/*.jsonl"))
            if sessions != [ids.get("SESSION")]:
                problems.append(f"history sessions {sessions} are not the ACP session {ids.get('SESSION')}")
            logged = history_usage(history)
            want = {u["response_id"]: u for u in spec["usage"]}
            for rid in sorted(set(logged) | set(want)):
                if rid not in want or rid not in logged:
                    problems.append(f"usage {rid}: {'not expected' if rid not in want else 'not in the history'}")
                    continue
                for key, value in logged[rid].items():
                    if substitute(want[rid].get(key), ids) != value:
                        problems.append(f"usage {rid}.{key}: expected {want[rid].get(key)!r}, the log says {value!r}")
        if write:
            path.write_text(json.dumps(spec, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        if problems:
            failed += 1
            print(f"{path.name}: " + "; ".join(problems))
        else:
            print(f"{path.name}: {len(spec['rows'])} rows, {len(spec.get('usage') or [])} usage rows, "
                  f"{len(ids)} placeholders {'written' if write else 'resolve as recorded'}")
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("check", "record", "resolve"):
        print(__doc__)
        return 2
    if argv[0] == "resolve":
        rest = argv[1:]
        spec = json.loads(Path(rest[0]).read_text(encoding="utf-8"))
        ids = resolve_ids(spec, Transcript(Path(rest[1])))
        out = {"ids": ids, "rows": substitute(spec["rows"], ids)}
        if spec.get("usage") is not None:
            out["usage"] = substitute(spec["usage"], ids)
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0
    paths = [Path(p) for p in argv[1:]] or sorted(REAL.glob("claude-*.expected.json"))
    return check(paths, write=argv[0] == "record")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
