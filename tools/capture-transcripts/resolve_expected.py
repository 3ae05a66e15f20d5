#!/usr/bin/env python3
"""Resolves the placeholders of a hand-written `<fixture>.expected.json` against a transcript.

The rows in `crates/fanout-capture/tests/fixtures/real/*.expected.json` are written by
hand from the frames (the fixtures README says why each value is what it is). Values the
mock scripts (tool-call ids, descriptions, types) are literal; values the agent mints or
measures on each run (session ids, thread ids, durations, token totals) are placeholders:
a string `"$NAME"` stands for `ids.NAME`, whose `rule` finds the value in the run's own
transcript, so the same file checks the committed recording and a fresh live run of the
same scenario. Each id also keeps the value it had in the committed recording
(`recorded`). The rules (the fixtures README documents them too):

    session        `result.sessionId` of the agent's answer to `session/new`
    cwd            `params.cwd` of `session/new` (the task id)
    execution      the transcript header's `executionId` (for a live run behind
                   `fanout proxy`: the proxy's own transcript header)
    update-field   the value at `path` (dot-separated keys, a number indexes an array) in
                   the first `tool_call` / `tool_call_update` of `toolCallId` that has it
    tool-response  `_meta.claudeCode.toolResponse[field]` of the first `tool_call_update`
                   of `toolCallId` that has that field (the Claude fixtures' rule)
    child-session  `recipientSessionId` of the first `session_message` whose `messageId`
                   is `messageId` (the Claude fixtures' rule)

A rule that finds nothing is an error. Python 3.11, standard library only.

    python3 resolve_expected.py resolve EXPECTED [TRANSCRIPT]  # rows with values, as JSON
    python3 resolve_expected.py check [EXPECTED…]   # committed files: every id resolves
                                                    # to its `recorded` value
    python3 resolve_expected.py record [EXPECTED…]  # after a re-record: rewrite `recorded`

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
        lines = path.read_text(encoding="utf-8").splitlines()
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
    else:
        raise Unresolved(f"{name}: unknown rule {rule!r}")
    if found is MISSING:
        raise Unresolved(f"{name}: rule {json.dumps(spec)} finds nothing")
    return found


def resolve_ids(spec: dict, t: Transcript) -> dict[str, Any]:
    return {name: resolve_one(name, rule, t) for name, rule in (spec.get("ids") or {}).items()}


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


def expected_files(args: list[str]) -> list[Path]:
    return [Path(a) for a in args] if args else sorted(REAL.glob("*.expected.json"))


def main(argv: list[str]) -> int:
    cmd, rest = (argv[0], argv[1:]) if argv else ("", [])
    if cmd == "resolve" and rest:
        path = Path(rest[0])
        spec = json.loads(path.read_text(encoding="utf-8"))
        t = Transcript(Path(rest[1]) if len(rest) > 1 else path.parent / spec["transcript"])
        ids = resolve_ids(spec, t)
        out = {k: substitute(spec[k], ids) for k in ("rows", "usage") if k in spec}
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0
    if cmd in ("check", "record"):
        failed = False
        for path in expected_files(rest):
            spec = json.loads(path.read_text(encoding="utf-8"))
            try:
                ids = resolve_ids(spec, Transcript(path.parent / spec["transcript"]))
                substitute(spec["rows"], ids)
            except Unresolved as err:
                print(f"{path.name}: {err}")
                failed = True
                continue
            if cmd == "record":
                for name, value in ids.items():
                    spec["ids"][name]["recorded"] = value
                path.write_text(json.dumps(spec, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
                print(f"{path.name}: recorded {len(ids)} id(s)")
                continue
            stale = [n for n, v in ids.items() if spec["ids"][n].get("recorded") != v]
            if stale:
                print(f"{path.name}: recorded values differ for {', '.join(stale)}")
                failed = True
            else:
                print(f"{path.name}: {len(spec['rows'])} row(s), {len(ids)} id(s) resolve to their recorded values")
        return 1 if failed else 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
