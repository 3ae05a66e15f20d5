#!/usr/bin/env python3
"""Writes crates/fanout-capture/tests/fixtures/real/expected.json after a re-record.

The rows were derived by hand from DESIGN 3.3 (the reasoning is in that folder's
README.md); this script only re-reads the ids that change on every recording (execution
id, session ids, thread ids, cwd) and first checks that each transcript still has the
wire shapes that derivation relies on, failing loudly when a new agent version changed
them (then re-derive by hand and update both this file and the README).

    python3 tools/capture-transcripts/expected_rows.py [--check]

--check compares with the committed expected.json instead of writing it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
FIXTURES = REPO / "crates" / "fanout-capture" / "tests" / "fixtures" / "real"
CHILD_PROMPT = "FANOUT-CHILD-TASK: read hello.txt in the project directory and reply with its first line."
COLUMNS = [
    "tool_call_id", "agent_execution_id", "task_id", "acp_session_id", "parent_tool_call_id",
    "subagent_type", "description", "agent_id", "child_session_id", "model", "agent_status",
    "tool_status", "settled", "is_async", "total_tokens", "tool_use_count", "duration_ms", "source",
]


class Transcript:
    def __init__(self, name: str):
        lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines()
        self.header = json.loads(lines[0])
        self.messages = [json.loads(json.loads(line)["line"]) for line in lines[1:] if line.strip()]

    def request(self, method: str) -> dict:
        return next(m for m in self.messages if m.get("method") == method and "id" in m)

    @property
    def session(self) -> str:
        new_id = self.request("session/new")["id"]
        return next(m["result"]["sessionId"] for m in self.messages if m.get("id") == new_id and "result" in m)

    @property
    def cwd(self) -> str:
        return self.request("session/new")["params"]["cwd"]

    def updates(self, kind: str | None = None, session: str | None = None) -> list[dict]:
        out = []
        for m in self.messages:
            if m.get("method") != "session/update":
                continue
            params = m.get("params") or {}
            update = params.get("update") or {}
            if kind and update.get("sessionUpdate") != kind:
                continue
            if session and params.get("sessionId") != session:
                continue
            out.append(update)
        return out

    def base(self) -> dict:
        return {
            "agent_execution_id": self.header["executionId"], "task_id": self.cwd,
            "acp_session_id": self.session, "parent_tool_call_id": None, "agent_id": None,
            "is_async": 0, "total_tokens": None, "tool_use_count": None, "duration_ms": None,
            "source": "live",
        }


def check(cond: bool, what: str) -> None:
    if not cond:
        sys.exit(f"shape changed, re-derive by hand: {what}")


def opencode() -> list[dict]:
    t = Transcript("opencode.transcript.jsonl")
    calls = t.updates("tool_call", t.session)
    check([c.get("title") for c in calls] == ["task"], "one tool_call, titled task")
    launch = calls[0]
    frames = [u for u in t.updates(session=t.session) if u.get("toolCallId") == launch["toolCallId"]]
    check(all(f.get("title") != "task" for f in frames[1:]), "later updates carry the description as title")
    done = frames[-1]
    check(done.get("status") == "completed", "last update completed")
    meta = done["rawOutput"]["metadata"]
    check(meta["model"] == {"modelID": "mock-model", "providerID": "mock"}, "model in rawOutput.metadata")
    raw = next(f["rawInput"] for f in frames if f.get("rawInput"))
    check(raw == {"description": "Read hello.txt", "prompt": CHILD_PROMPT, "subagent_type": "general"}, "rawInput")
    return [dict(t.base(), tool_call_id=launch["toolCallId"], child_session_id=meta["sessionId"],
                 subagent_type="general", description="Read hello.txt", model="mock/mock-model",
                 agent_status=None, tool_status="completed", settled=True)]


def codex_v1() -> list[dict]:
    t = Transcript("codex.transcript.jsonl")
    check(not t.updates("subagent_update"), "no subagent_update without the capability")
    spawn = [u for u in t.updates(session=t.session) if u.get("title") == "spawnAgent"]
    check(len(spawn) == 1 and "_meta" not in spawn[0], "one spawnAgent tool_call, no _meta")
    call_id = spawn[0]["toolCallId"]
    check(spawn[0]["rawInput"]["receiverThreadIds"] == [] and spawn[0]["rawInput"]["model"] == "",
          "child and model unknown at launch")
    done = [u for u in t.updates("tool_call_update", t.session) if u.get("toolCallId") == call_id]
    check(len(done) == 1 and done[0]["status"] == "completed" and "title" not in done[0], "one title-less completing update")
    child = done[0]["rawInput"]["receiverThreadIds"][0]
    check(done[0]["rawInput"]["model"] == "mock-model", "model on the completing update")
    check(done[0]["rawInput"]["agentsStates"][child]["status"] == "pendingInit", "pendingInit on completion")
    waits = [u for u in t.updates(session=t.session) if u.get("title") == "wait"]
    wait_id = waits[0]["toolCallId"]
    wait_done = [u for u in t.updates("tool_call_update", t.session) if u.get("toolCallId") == wait_id][-1]
    check(wait_done["rawInput"]["agentsStates"][child]["status"] == "completed", "wait control reports completed")
    return [dict(t.base(), tool_call_id=call_id, child_session_id=child, subagent_type=None,
                 description=CHILD_PROMPT, model="mock-model", agent_status="completed",
                 tool_status="completed", settled=True)]


def native(name: str, description: str | None) -> list[dict]:
    t = Transcript(name)
    subs = t.updates("subagent_update", t.session)
    children = {s["sessionId"] for s in subs}
    check(len(children) == 1, "one native child")
    child = subs[0]["sessionId"]
    check(child.startswith(t.session + ":subagent:"), "child session id is <parent>:subagent:<thread>")
    check("state" not in subs[0], "announcing update has no state")
    check(subs[0].get("description") == description, f"announcing description {description!r}")
    states = [s["state"]["state"] for s in subs if "state" in s]
    check(states[-1] == "idle", "last state idle")
    links = [u for u in t.updates(session=t.session)
             if any(isinstance(c, dict) and c.get("type") == "session" for c in u.get("content") or [])]
    check(not links, "no tool call links the child with a session content block")
    check(not [u for u in t.updates(session=t.session) if u.get("title") in ("spawnAgent",) or
               str(u.get("title", "")).startswith("Start subagent")], "no spawn tool call in native mode")
    check(bool(t.updates(session=child)), "the child's own traffic is on the connection")
    return [dict(t.base(), tool_call_id=child, child_session_id=child, subagent_type=None,
                 description=description, model=None, agent_status="idle", tool_status=None, settled=False)]


def codex_v2() -> list[dict]:
    t = Transcript("codex-v2.transcript.jsonl")
    check(not t.updates("subagent_update"), "no subagent_update without the capability")
    calls = t.updates("tool_call", t.session)
    start = [c for c in calls if c.get("title") == "Start subagent read_hello"]
    end = [c for c in calls if c.get("title") == "Complete subagent read_hello"]
    check(len(start) == 1 and len(end) == 1, "one Start and one Complete lifecycle frame")
    check(start[0]["rawInput"]["activityKind"] == "started" and end[0]["rawInput"]["activityKind"] == "completed", "activities")
    check(end[0]["toolCallId"].startswith("subagent-completed-") and end[0]["toolCallId"] != start[0]["toolCallId"],
          "Complete frame on another wire id")
    child = start[0]["rawInput"]["agentThreadId"]
    check(end[0]["rawInput"]["agentThreadId"] == child and start[0]["rawInput"]["agentPath"] == "/root/read_hello", "same child")
    done = [u for u in t.updates("tool_call_update", t.session) if u.get("toolCallId") == start[0]["toolCallId"]]
    check([d.get("status") for d in done] == ["completed"], "Start frame's call completes")
    check(not [u for u in t.updates() if u.get("title") == "spawnAgent"], "no spawnAgent frame under multi_agent_v2")
    return [dict(t.base(), tool_call_id=start[0]["toolCallId"], child_session_id=child, subagent_type="read_hello",
                 description="read_hello", model=None, agent_status="completed", tool_status="completed", settled=True)]


def main() -> int:
    rows = {
        "opencode.transcript.jsonl": opencode(),
        "codex.transcript.jsonl": codex_v1(),
        "codex-subagents.transcript.jsonl": native("codex-subagents.transcript.jsonl", CHILD_PROMPT),
        "codex-v2.transcript.jsonl": codex_v2(),
        "codex-v2-subagents.transcript.jsonl": native("codex-v2-subagents.transcript.jsonl", None),
    }
    text = json.dumps({k: [{c: r[c] for c in COLUMNS} for r in v] for k, v in rows.items()},
                      indent=2, ensure_ascii=False) + "\n"
    target = FIXTURES / "expected.json"
    if "--check" in sys.argv[1:]:
        if target.read_text(encoding="utf-8") != text:
            sys.exit("expected.json is stale: run tools/capture-transcripts/expected_rows.py")
        print("expected.json matches the transcripts")
        return 0
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
