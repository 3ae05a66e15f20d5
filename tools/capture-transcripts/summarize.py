#!/usr/bin/env python3
"""Prints the frames of a fanout transcript that matter for subagent rows, one a line.

Shows every tool_call / tool_call_update / subagent_update (with the session it was sent
under), the session/new and session/prompt exchanges, and agent->client requests; skips
message chunks, usage and command lists. An aid for deriving the expected rows by hand
after a re-record (python3 summarize.py FILE…).
"""
import json
import sys

KEEP_UPDATES = {"tool_call", "tool_call_update", "subagent_update", "config_option_update"}


def short(value, limit=220):
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def main(paths):
    for path in paths:
        print(f"=== {path}")
        with open(path, encoding="utf-8") as fh:
            header = json.loads(fh.readline())
            print(f"header: {short(header, 400)}")
            for n, raw in enumerate(fh, start=2):
                rec = json.loads(raw)
                try:
                    msg = json.loads(rec["line"])
                except ValueError:
                    print(f"{n:3} {rec['dir']} <not json>")
                    continue
                method = msg.get("method")
                if method == "session/update":
                    params = msg.get("params") or {}
                    update = params.get("update") or {}
                    kind = update.get("sessionUpdate")
                    if kind not in KEEP_UPDATES:
                        continue
                    rest = {k: v for k, v in update.items() if k != "sessionUpdate"}
                    print(f"{n:3} {rec['dir']} [{params.get('sessionId')}] {kind} {short(rest)}")
                elif method in ("session/new", "session/prompt", "initialize") or (method and "id" in msg):
                    print(f"{n:3} {rec['dir']} {method} id={msg.get('id')} {short(msg.get('params'), 160)}")
                elif "result" in msg or "error" in msg:
                    res = msg.get("result") if "result" in msg else {"error": msg["error"]}
                    if isinstance(res, dict):
                        res = {k: v for k, v in res.items() if k in ("sessionId", "stopReason", "error", "outcome", "content")}
                    print(f"{n:3} {rec['dir']} response id={msg.get('id')} {short(res, 160)}")


if __name__ == "__main__":
    main(sys.argv[1:])
