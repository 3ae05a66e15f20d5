#!/usr/bin/env python3
"""Resolves the placeholders of the hand-written `<fixture>.expected.json` files.

Every file in `crates/fanout-capture/tests/fixtures/real/*.expected.json` lists the rows
`task_session_subagents` must hold after importing its transcript (or after a live run
of the same scenario behind `fanout proxy`), written by hand from the frames (that
folder's README says why each value is what it is). Values the mock scripts (tool-call
ids, descriptions, types, the Claude mock's token figures) are literal; values the agent
mints or measures on each run (session ids, child ids, agent ids, durations, token
totals) are placeholders: a string `"$NAME"` stands for `ids.NAME`, whose `rule` finds
the value in the run's own transcript, so the same file checks the committed recording
and a fresh live run. Each id also keeps the value it had in the committed recording
(`recorded`). The rules (the fixtures README documents them too; the Rust twin, used by
the tests, is `fanout_acp::fixtures`):

    session           `result.sessionId` of the agent's answer to `session/new`
    cwd               `params.cwd` of `session/new` (the task id)
    execution         the transcript header's `executionId` (for a live run behind
                      `fanout proxy`: the proxy's own transcript header; see --execution)
    update-field      the value at `path` (dot-separated keys, a number indexes an array)
                      in the first `tool_call` / `tool_call_update` of `toolCallId` that
                      has it
    tool-response     `_meta.claudeCode.toolResponse[field]` of the first
                      `tool_call_update` of `toolCallId` that has that field
    child-session     `recipientSessionId` of the first `session_message` whose
                      `messageId` is `messageId`
    subagent-session  the `sessionId` of the `index`-th child (from 0, in order of
                      announcement) a `subagent_update` names

A rule that finds nothing is an error. Python 3.11, standard library only.

    python3 resolve_expected.py check [EXPECTED…]
        every id of the committed files resolves to its `recorded` value, every literal
        `toolu_`/`msg_` id occurs in the recording, and each `usage` entry (the Claude
        fixtures' usage-ledger rows) agrees with the history copy beside it (largest value
        per field per response id; attribution by meta.json `toolUseId`, else the
        parent's `toolUseResult.agentId`)
    python3 resolve_expected.py record [EXPECTED…]
        after a re-record: rewrites the `recorded` values (re-derive the literals by hand
        first)
    python3 resolve_expected.py resolve EXPECTED [TRANSCRIPT] [--execution ID]
        prints the rows (and usage) with the values of another run, as JSON

Without EXPECTED, check and record take every *.expected.json in fixtures/real.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent.parent
REAL = REPO / "crates" / "fanout-capture" / "tests" / "fixtures" / "real"
MISSING = object()


def dig(value: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return MISSING
    return value


class Transcript:
    def __init__(self, path: Path):
        self.text = path.read_text(encoding="utf-8")
        lines = self.text.splitlines()
        self.header = json.loads(lines[0])
        self.messages: list[dict] = []
        for line in lines[1:]:
            if not line.strip():
                continue
            try:
                msg = json.loads(json.loads(line)["line"])
            except ValueError:
                continue
            if isinstance(msg, dict):
                self.messages.append(msg)

    def request(self, method: str) -> dict:
        return next(m for m in self.messages if m.get("method") == method and "id" in m)

    def updates(self) -> list[dict]:
        return [(m.get("params") or {}).get("update") or {} for m in self.messages
                if m.get("method") == "session/update"]


class Unresolved(Exception):
    pass


def resolve_one(name: str, spec: dict, t: Transcript) -> Any:
    rule = spec.get("rule")
    found: Any = MISSING
    if rule == "session":
        new_id = t.request("session/new")["id"]
        found = next((m["result"]["sessionId"] for m in t.messages
                      if m.get("id") == new_id and "result" in m and "method" not in m), MISSING)
    elif rule == "cwd":
        found = t.request("session/new")["params"]["cwd"]
    elif rule == "execution":
        found = t.header.get("executionId", MISSING)
    elif rule == "update-field":
        for u in t.updates():
            if u.get("sessionUpdate") in ("tool_call", "tool_call_update") and u.get("toolCallId") == spec["toolCallId"]:
                found = dig(u, spec["path"])
                if found is not MISSING:
                    break
    elif rule == "tool-response":
        for u in t.updates():
            if u.get("sessionUpdate") == "tool_call_update" and u.get("toolCallId") == spec["toolCallId"]:
                response = ((u.get("_meta") or {}).get("claudeCode") or {}).get("toolResponse") or {}
                if isinstance(response, dict) and spec["field"] in response:
                    found = response[spec["field"]]
                    break
    elif rule == "child-session":
        found = next((u["recipientSessionId"] for u in t.updates()
                      if u.get("sessionUpdate") == "session_message" and u.get("messageId") == spec["messageId"]),
                     MISSING)
    elif rule == "subagent-session":
        children: list[str] = []
        for u in t.updates():
            child = u.get("sessionId") if u.get("sessionUpdate") == "subagent_update" else None
            if isinstance(child, str) and child not in children:
                children.append(child)
        if spec["index"] < len(children):
            found = children[spec["index"]]
    else:
        raise Unresolved(f"{name}: unknown rule {rule!r}")
    if found is MISSING:
        raise Unresolved(f"{name}: rule {json.dumps(spec)} finds nothing")
    return found


def resolve_ids(spec: dict, t: Transcript, execution: str | None = None) -> dict[str, Any]:
    ids = {}
    for name, rule in (spec.get("ids") or {}).items():
        ids[name] = execution if execution and rule.get("rule") == "execution" else resolve_one(name, rule, t)
    return ids


def substitute(value: Any, ids: dict[str, Any]) -> Any:
    if isinstance(value, str) and value.startswith("$"):
        if value[1:] not in ids:
            raise Unresolved(f"{value} is used but not defined in ids")
        return ids[value[1:]]
    if isinstance(value, list):
        return [substitute(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, ids) for k, v in value.items()}
    return value


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


def problems_of(spec: dict, ids: dict[str, Any], t: Transcript, history: Path | None) -> list[str]:
    problems = [f"{name} resolves to {value!r}, recorded {spec['ids'][name].get('recorded')!r}"
                for name, value in ids.items() if spec["ids"][name].get("recorded") != value]
    corpus = t.text + ("".join(p.read_text() for p in history.rglob("*.jsonl")) if history else "")
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
    return problems


def expected_files(args: list[str]) -> list[Path]:
    return [Path(a) for a in args] if args else sorted(REAL.glob("*.expected.json"))


def check(paths: list[Path], write: bool) -> int:
    failed = False
    for path in paths:
        spec = json.loads(path.read_text(encoding="utf-8"))
        t = Transcript(path.parent / spec["transcript"])
        history = (path.parent / spec["history"]).resolve() if spec.get("history") else None
        try:
            ids = resolve_ids(spec, t)
            substitute(spec["rows"], ids)
        except Unresolved as err:
            print(f"{path.name}: {err}")
            failed = True
            continue
        if write:
            for name, value in ids.items():
                spec["ids"][name]["recorded"] = value
            path.write_text(json.dumps(spec, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            print(f"{path.name}: recorded {len(ids)} id(s)")
            continue
        problems = problems_of(spec, ids, t, history)
        if problems:
            failed = True
            print(f"{path.name}: " + "; ".join(problems))
        else:
            usage = f", {len(spec['usage'])} usage row(s)" if spec.get("usage") is not None else ""
            print(f"{path.name}: {len(spec['rows'])} row(s){usage}, {len(ids)} id(s) resolve as recorded")
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    cmd, rest = (argv[0], argv[1:]) if argv else ("", [])
    if cmd == "resolve" and rest:
        execution = None
        if "--execution" in rest:
            at = rest.index("--execution")
            execution = rest[at + 1]
            rest = rest[:at] + rest[at + 2:]
        path = Path(rest[0])
        spec = json.loads(path.read_text(encoding="utf-8"))
        t = Transcript(Path(rest[1]) if len(rest) > 1 else path.parent / spec["transcript"])
        ids = resolve_ids(spec, t, execution)
        out = {"ids": ids, **{k: substitute(spec[k], ids) for k in ("rows", "usage") if k in spec}}
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0
    if cmd in ("check", "record"):
        return check(expected_files(rest), write=cmd == "record")
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
