#!/usr/bin/env python3
"""Record a real ACP agent's traffic, offline, as a fanout transcript (DESIGN 3.1).

Starts a scripted mock model server on 127.0.0.1:<free port> (OpenAI chat completions
SSE for opencode, OpenAI Responses SSE for codex), spawns the real agent with an isolated
HOME / config pointing at the mock, drives ACP as a small client (initialize with or
without `clientCapabilities.subagents`, session/new in a temp project, one session/prompt
asking to delegate to a subagent; it answers the agent's own requests such as
session/request_permission and fs/read_text_file) and records every line in both
directions verbatim:

    {"type":"fanout-transcript","version":1,"executionId":…,"taskId":null,"agentCommand":[…],"startedAt":…}
    {"ts":"YYYY-MM-DDTHH:MM:SS.ffffffZ","dir":"c2a"|"a2c","line":"<raw line>"}

The mock scripts a delegation: the main agent calls its subagent tool (opencode `task`,
codex `spawn_agent` then `wait_agent`), the child reads one file and answers, the main
agent finishes. Python 3.11 standard library only.

    python3 tools/capture-transcripts/capture.py opencode --out FILE
    python3 tools/capture-transcripts/capture.py codex [--subagents] --out FILE

`record-all.sh` beside this file installs the pinned agents and re-records every fixture.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

API_KEY = "sk-test"  # dummy: the mock accepts anything
MODEL = "mock-model"
CHILD_MARKER = "FANOUT-CHILD-TASK"
FILE_NAME = "hello.txt"
FILE_TEXT = "hello from the fanout capture fixture\n"
PROMPT = (
    "Delegate to a subagent: have it read hello.txt in the project and report the first "
    "line. Then tell me what it said."
)
CHILD_PROMPT = f"{CHILD_MARKER}: read {FILE_NAME} in the project directory and reply with its first line."
CHILD_DESCRIPTION = "Read hello.txt"
FINAL_TEXT = "The subagent reports that hello.txt says: hello from the fanout capture fixture"
CHILD_TEXT = "hello.txt says: hello from the fanout capture fixture"


def now_ts() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def uuid7() -> str:
    """A UUID v7 string (48-bit unix ms, version 7, variant 10, random rest)."""
    ms = int(time.time() * 1000)
    rand = int.from_bytes(secrets.token_bytes(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= ((rand >> 62) & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def log(msg: str) -> None:
    print(f"[capture {datetime.now().strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- mock model


class MockModel:
    """Scripted model behind an HTTP server; every request body is kept in `log_dir`."""

    def __init__(self, log_dir: Path, project: Path):
        self.log_dir = log_dir
        self.project = project
        self.count = 0
        self.lock = threading.Lock()
        self.calls: list[str] = []  # what each model call was scripted to do (for the README)

    # -- request log
    def record(self, method: str, path: str, headers: dict[str, str], body: Any) -> int:
        with self.lock:
            self.count += 1
            n = self.count
        safe = path.strip("/").replace("/", "_") or "root"
        hdrs = {k: v for k, v in headers.items() if k.lower() not in ("authorization", "api-key")}
        (self.log_dir / f"{n:03d}-{method}-{safe}.json").write_text(
            json.dumps({"method": method, "path": path, "headers": hdrs, "body": body}, indent=2)
        )
        return n

    def note(self, what: str) -> None:
        with self.lock:
            self.calls.append(what)
        log(f"mock: {what}")

    # -- chat completions (opencode)
    def chat(self, body: dict) -> tuple[list[dict], str]:
        """Returns (stream chunks' deltas as (delta, finish) pairs, label)."""
        messages = body.get("messages") or []
        tools = {t.get("function", {}).get("name") for t in body.get("tools") or []}
        system = " ".join(_text(m.get("content")) for m in messages if m.get("role") == "system")
        users = " ".join(_text(m.get("content")) for m in messages if m.get("role") == "user")
        tool_results = [m for m in messages if m.get("role") == "tool"]
        if not tools:
            # title generation (and any other tool-less side call)
            title = "Delegate reading hello.txt"
            return [{"content": title}], "text:title"
        if CHILD_MARKER in users and not _mentions_task_call(messages):
            # the child session
            if not tool_results and "read" in tools:
                args = {"filePath": str(self.project / FILE_NAME)}
                return [_tool_delta("read", args, "call_child_read_1")], "tool:read (child)"
            return [{"content": CHILD_TEXT}], "text:child-final"
        if not tool_results:
            args = {
                "description": CHILD_DESCRIPTION,
                "prompt": CHILD_PROMPT,
                "subagent_type": "general",
            }
            return [_tool_delta("task", args, "call_main_task_1")], "tool:task (main)"
        return [{"content": FINAL_TEXT}], "text:main-final"

    # -- responses (codex)
    def responses(self, body: dict) -> tuple[list[dict], str]:
        """Returns (output items, label)."""
        items = body.get("input") or []
        tools = _response_tool_names(body.get("tools") or [])
        texts = " ".join(_item_text(i) for i in items if i.get("type") == "message" and i.get("role") == "user")
        calls = {i.get("call_id"): i for i in items if i.get("type") in ("function_call", "custom_tool_call")}
        outputs = [i for i in items if i.get("type") in ("function_call_output", "custom_tool_call_output")]
        called = [calls.get(o.get("call_id"), {}).get("name") for o in outputs]
        if not tools:
            if "title" in texts:  # thread title generation: codex wants one JSON object
                return [_message_item(json.dumps({"title": "Delegate reading hello.txt"}))], "text:title"
            return [_message_item("Delegate reading hello.txt")], "text:side-call"
        spawn = next((t for t in ("spawn_agent", "spawnAgent") if t in tools), None)
        start = _child_task_start(items)
        if start is not None:
            # the child thread: only what follows its task counts (multi_agent_v2 children
            # inherit the parent's history, tool calls included)
            own_outputs = [i for i in items[start:] if i.get("type") in ("function_call_output", "custom_tool_call_output")]
            if not own_outputs:
                shell = next((t for t in ("exec_command", "shell_command", "shell") if t in tools), None)
                if shell == "exec_command":
                    args = {"cmd": f"cat {FILE_NAME}", "workdir": str(self.project)}
                elif shell == "shell_command":
                    args = {"command": f"cat {FILE_NAME}", "workdir": str(self.project)}
                elif shell == "shell":
                    args = {"command": ["cat", FILE_NAME], "workdir": str(self.project)}
                else:
                    return [_message_item(CHILD_TEXT)], "text:child-final (no shell tool)"
                return [_function_call_item(shell, args, "call_child_cat_1", tools[shell])], f"tool:{shell} (child)"
            return [_message_item(CHILD_TEXT)], "text:child-final"
        if spawn is None:
            return [_message_item("No subagent tool was offered.")], "text:no-spawn-tool"
        if spawn not in called:
            args = _spawn_args(body.get("tools") or [], spawn)
            return [_function_call_item(spawn, args, "call_main_spawn_1", tools[spawn])], f"tool:{spawn} (main)"
        wait = next((t for t in ("wait_agent", "wait") if t in tools), None)
        if wait and wait not in called:
            spawn_out = next(o for o in outputs if calls.get(o.get("call_id"), {}).get("name") == spawn)
            agent_id = _agent_id_from_output(spawn_out.get("output"))
            args = _wait_args(body.get("tools") or [], wait, agent_id)
            return [_function_call_item(wait, args, "call_main_wait_1", tools[wait])], f"tool:{wait} (main)"
        return [_message_item(FINAL_TEXT)], "text:main-final"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(_text(c.get("text") if isinstance(c, dict) else c) for c in content)
    return ""


def _item_text(item: dict) -> str:
    return _text(item.get("content"))


def _child_task_start(items: list[dict]) -> int | None:
    """Index of the item that hands a child thread its task, or None for the main thread.

    multi_agent (v1): the child's first user message is the spawn message.
    multi_agent_v2: an `agent_message` to a task path below /root carries it (the payload
    sits in an `encrypted_content` part), after the inherited parent history.
    """
    for idx in range(len(items) - 1, -1, -1):
        item = items[idx]
        if item.get("type") == "agent_message" and str(item.get("recipient", "")).startswith("/root/"):
            return idx
    for idx, item in enumerate(items):
        if item.get("type") == "message" and item.get("role") == "user" and CHILD_MARKER in _item_text(item):
            return idx
    return None


def _mentions_task_call(messages: list[dict]) -> bool:
    for m in messages:
        for call in m.get("tool_calls") or []:
            if call.get("function", {}).get("name") == "task":
                return True
    return False


def _tool_delta(name: str, args: dict, call_id: str) -> dict:
    return {
        "tool_calls": [
            {"index": 0, "id": call_id, "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}
        ]
    }


def _response_tool_names(tools: list[dict]) -> dict[str, str | None]:
    """Tool name -> its namespace (codex offers the multi-agent tools inside one)."""
    names: dict[str, str | None] = {}
    for t in tools:
        if t.get("type") == "namespace":
            for sub in t.get("tools") or []:
                if sub.get("name"):
                    names[sub["name"]] = t.get("name")
        elif t.get("name"):
            names[t["name"]] = None
    return names


def _tool_schema(tools: list[dict], name: str) -> dict:
    for t in tools:
        if t.get("name") == name:
            return t.get("parameters") or {}
        for sub in t.get("tools") or []:
            if sub.get("name") == name:
                return sub.get("parameters") or {}
    return {}


def _spawn_args(tools: list[dict], name: str) -> dict:
    props = (_tool_schema(tools, name).get("properties") or {}).keys()
    args: dict[str, Any] = {}
    for key in ("message", "prompt", "task", "items"):
        if key in props:
            if key == "items":
                args[key] = [{"type": "text", "text": CHILD_PROMPT}]
            else:
                args[key] = CHILD_PROMPT
            break
    else:
        args["message"] = CHILD_PROMPT
    if "task_name" in props:
        args["task_name"] = "read_hello"
    if "agent_type" in props:
        args["agent_type"] = "explorer"
    return args


def _agent_id_from_output(output: Any) -> str | None:
    text = output if isinstance(output, str) else json.dumps(output)
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        return None
    if isinstance(data, dict):
        for key in ("agent_id", "id", "thread_id", "task_name", "name"):
            if isinstance(data.get(key), str):
                return data[key]
    return None


def _wait_args(tools: list[dict], name: str, agent_id: str | None) -> dict:
    props = _tool_schema(tools, name).get("properties") or {}
    args: dict[str, Any] = {}
    for key in ("ids", "targets", "agent_ids", "agents"):
        if key in props:
            args[key] = [agent_id] if agent_id else []
            break
    if "timeout_ms" in props:
        args["timeout_ms"] = 30000
    return args


def _function_call_item(name: str, args: dict, call_id: str, namespace: str | None = None) -> dict:
    item = {
        "type": "function_call",
        "id": "fc_" + call_id,
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(args),
        "status": "completed",
    }
    if namespace:
        item["namespace"] = namespace
    return item


def _message_item(text: str) -> dict:
    return {
        "type": "message",
        "id": "msg_" + secrets.token_hex(6),
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def responses_usage(body: dict, items: list[dict]) -> dict:
    """A realistic `response.completed` usage, derived from the request and the answer only
    (so it is the same on every run): input grows with the history sent, a continuation of
    a thread reads most of it from the prompt cache, output counts what was generated and
    includes some reasoning (as OpenAI reports it, reasoning is part of output_tokens)."""
    sent = json.dumps(body.get("input") or []) + json.dumps(body.get("instructions") or "")
    input_tokens = 1200 + len(sent) // 4 + len(json.dumps(body.get("tools") or [])) // 16
    continued = any(i.get("type") in ("function_call_output", "custom_tool_call_output")
                    or i.get("role") == "assistant" for i in body.get("input") or [])
    cached = (input_tokens - 400) // 256 * 256 if continued else 0
    calls = [i for i in items if i.get("type") == "function_call"]
    reasoning = 64 * len(calls) if calls else 16
    generated = sum(12 + len(i.get("arguments", "")) // 4 for i in calls) + sum(
        8 + len(c.get("text", "")) // 4 for i in items if i.get("type") == "message" for c in i.get("content") or [])
    output_tokens = generated + reasoning
    return {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": input_tokens + output_tokens}


def make_handler(model: MockModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *args: Any) -> None:  # quiet
            pass

        def _body(self) -> Any:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            enc = (self.headers.get("content-encoding") or "").lower()
            if enc == "zstd" or enc == "gzip":
                if enc == "gzip":
                    import gzip

                    raw = gzip.decompress(raw)
                else:
                    return {"_undecodable": enc}
            try:
                return json.loads(raw) if raw else None
            except ValueError:
                return {"_raw": raw.decode("utf-8", "replace")}

        def _json(self, status: int, obj: Any) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _sse(self, events: list[tuple[str | None, Any]]) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            for name, data in events:
                chunk = ""
                if name:
                    chunk += f"event: {name}\n"
                chunk += "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n"
                self.wfile.write(chunk.encode())
                self.wfile.flush()
                time.sleep(0.01)
            self.close_connection = True

        def do_GET(self) -> None:
            model.record("GET", self.path, dict(self.headers), None)
            if self.path.rstrip("/").endswith("/models"):
                self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "mock"}], "models": []})
            else:
                self._json(404, {"error": {"message": f"mock: no GET {self.path}"}})

        def do_POST(self) -> None:
            body = self._body()
            n = model.record("POST", self.path, dict(self.headers), body)
            path = self.path.split("?")[0].rstrip("/")
            if path.endswith("/chat/completions"):
                self._chat(body or {}, n)
            elif path.endswith("/responses"):
                self._responses(body or {}, n)
            else:
                self._json(404, {"error": {"message": f"mock: no POST {self.path}"}})

        def _chat(self, body: dict, n: int) -> None:
            deltas, label = model.chat(body)
            model.note(f"#{n} chat/completions -> {label}")
            cid = f"chatcmpl-mock{n}"
            created = int(time.time())
            finish = "tool_calls" if any("tool_calls" in d for d in deltas) else "stop"
            usage = {"prompt_tokens": 100 + n, "completion_tokens": 10 + n, "total_tokens": 110 + 2 * n}
            if not body.get("stream"):
                msg: dict[str, Any] = {"role": "assistant", "content": None}
                for d in deltas:
                    if "content" in d:
                        msg["content"] = (msg["content"] or "") + d["content"]
                    if "tool_calls" in d:
                        msg["tool_calls"] = [
                            {k: v for k, v in c.items() if k != "index"} for c in d["tool_calls"]
                        ]
                self._json(200, {"id": cid, "object": "chat.completion", "created": created, "model": MODEL,
                                 "choices": [{"index": 0, "message": msg, "finish_reason": finish}], "usage": usage})
                return

            def chunk(delta: dict, fin: str | None) -> dict:
                return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": MODEL,
                        "choices": [{"index": 0, "delta": delta, "finish_reason": fin}]}

            events: list[tuple[str | None, Any]] = [(None, chunk({"role": "assistant", "content": ""}, None))]
            for d in deltas:
                if "content" in d:
                    text = d["content"]
                    half = len(text) // 2
                    events.append((None, chunk({"content": text[:half]}, None)))
                    events.append((None, chunk({"content": text[half:]}, None)))
                if "tool_calls" in d:
                    call = d["tool_calls"][0]
                    args = call["function"]["arguments"]
                    half = len(args) // 2
                    first = {"index": 0, "id": call["id"], "type": "function",
                             "function": {"name": call["function"]["name"], "arguments": args[:half]}}
                    events.append((None, chunk({"tool_calls": [first]}, None)))
                    events.append((None, chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[half:]}}]}, None)))
            events.append((None, chunk({}, finish)))
            final_usage = chunk({}, None)
            final_usage["choices"] = []
            final_usage["usage"] = usage
            events.append((None, final_usage))
            events.append((None, "[DONE]"))
            self._sse(events)

        def _responses(self, body: dict, n: int) -> None:
            items, label = model.responses(body)
            model.note(f"#{n} responses -> {label}")
            rid = f"resp_mock{n}"
            base = {"id": rid, "object": "response", "created_at": int(time.time()), "model": body.get("model", MODEL),
                    "status": "in_progress", "output": []}
            seq = 0

            def ev(kind: str, **fields: Any) -> tuple[str, dict]:
                nonlocal seq
                seq += 1
                return kind, {"type": kind, "sequence_number": seq, **fields}

            events = [ev("response.created", response=base), ev("response.in_progress", response=base)]
            for idx, item in enumerate(items):
                if item["type"] == "function_call":
                    added = dict(item, arguments="", status="in_progress")
                    events.append(ev("response.output_item.added", output_index=idx, item=added))
                    args = item["arguments"]
                    half = len(args) // 2
                    for part in (args[:half], args[half:]):
                        events.append(ev("response.function_call_arguments.delta", item_id=item["id"],
                                         output_index=idx, delta=part))
                    events.append(ev("response.function_call_arguments.done", item_id=item["id"],
                                     output_index=idx, arguments=args))
                else:
                    text = item["content"][0]["text"]
                    added = dict(item, content=[], status="in_progress")
                    events.append(ev("response.output_item.added", output_index=idx, item=added))
                    part0 = {"type": "output_text", "text": "", "annotations": []}
                    events.append(ev("response.content_part.added", item_id=item["id"], output_index=idx,
                                     content_index=0, part=part0))
                    half = len(text) // 2
                    for part in (text[:half], text[half:]):
                        events.append(ev("response.output_text.delta", item_id=item["id"], output_index=idx,
                                         content_index=0, delta=part))
                    events.append(ev("response.output_text.done", item_id=item["id"], output_index=idx,
                                     content_index=0, text=text))
                    events.append(ev("response.content_part.done", item_id=item["id"], output_index=idx,
                                     content_index=0, part=item["content"][0]))
                events.append(ev("response.output_item.done", output_index=idx, item=item))
            usage = responses_usage(body, items)
            done = dict(base, status="completed", output=items, usage=usage)
            events.append(ev("response.completed", response=done))
            self._sse(events)

    return Handler


# --------------------------------------------------------------------------- ACP client


class Transcript:
    def __init__(self, path: Path, header: dict):
        self.fh = open(path, "w", encoding="utf-8")
        os.chmod(path, 0o600)
        self.lock = threading.Lock()
        self._write(header)

    def _write(self, obj: dict) -> None:
        self.fh.write(json.dumps(obj, ensure_ascii=False) + "\n")
        self.fh.flush()

    def frame(self, direction: str, line: str) -> None:
        with self.lock:
            self._write({"ts": now_ts(), "dir": direction, "line": line})

    def close(self) -> None:
        self.fh.close()


class AcpClient:
    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, transcript: Transcript,
                 stderr_path: Path, project: Path):
        self.transcript = transcript
        self.project = project
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(stderr_path, "wb"),
            env=env, cwd=cwd, start_new_session=True,
        )
        self.write_lock = threading.Lock()
        self.pending: dict[int, tuple[threading.Event, list]] = {}
        self.next_id = 0
        self.last_a2c = time.monotonic()
        self.updates: list[dict] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    # -- wire
    def _send_line(self, line: str) -> None:
        with self.write_lock:
            self.transcript.frame("c2a", line)
            assert self.proc.stdin is not None
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()

    def send(self, obj: dict) -> None:
        self._send_line(json.dumps(obj, separators=(",", ":"), ensure_ascii=False))

    def request(self, method: str, params: dict, timeout: float = 120.0) -> dict:
        rid = self.next_id
        self.next_id += 1
        event = threading.Event()
        slot: list = []
        self.pending[rid] = (event, slot)
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        if not event.wait(timeout):
            raise TimeoutError(f"{method} (id {rid}) got no answer in {timeout}s")
        msg = slot[0]
        if "error" in msg:
            raise RuntimeError(f"{method} failed: {json.dumps(msg['error'])}")
        return msg.get("result") or {}

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if not line:
                continue
            self.last_a2c = time.monotonic()
            self.transcript.frame("a2c", line)
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if not isinstance(msg, dict):
                continue
            if "method" in msg and "id" in msg:
                threading.Thread(target=self._answer, args=(msg,), daemon=True).start()
            elif "method" in msg:
                if msg["method"] == "session/update":
                    self.updates.append(msg.get("params") or {})
            elif "id" in msg and msg["id"] in self.pending:
                event, slot = self.pending.pop(msg["id"])
                slot.append(msg)
                event.set()

    def _answer(self, msg: dict) -> None:
        method = msg["method"]
        params = msg.get("params") or {}
        try:
            result = self._handle(method, params)
            reply = {"jsonrpc": "2.0", "id": msg["id"], "result": result}
        except NotImplementedError:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": f"method not found: {method}"}}
        except Exception as exc:  # noqa: BLE001 - reported to the agent
            reply = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32603, "message": str(exc)}}
        log(f"agent asked {method}; answered {json.dumps(reply.get('result', reply.get('error')))[:200]}")
        self.send(reply)

    def _handle(self, method: str, params: dict) -> Any:
        if method == "session/request_permission":
            options = params.get("options") or []
            for kind in ("allow_once", "allow_always"):
                for opt in options:
                    if opt.get("kind") == kind:
                        return {"outcome": {"outcome": "selected", "optionId": opt["optionId"]}}
            if options:
                return {"outcome": {"outcome": "selected", "optionId": options[0]["optionId"]}}
            return {"outcome": {"outcome": "cancelled"}}
        if method == "fs/read_text_file":
            text = Path(params["path"]).read_text()
            line, limit = params.get("line"), params.get("limit")
            if line or limit:
                lines = text.splitlines(keepends=True)
                start = max((line or 1) - 1, 0)
                text = "".join(lines[start: start + limit] if limit else lines[start:])
            return {"content": text}
        if method == "fs/write_text_file":
            Path(params["path"]).write_text(params.get("content", ""))
            return {}
        raise NotImplementedError(method)

    # -- lifecycle
    def quiesce(self, idle: float, limit: float) -> None:
        end = time.monotonic() + limit
        while time.monotonic() < end:
            if time.monotonic() - self.last_a2c >= idle:
                return
            time.sleep(0.1)

    def close(self) -> int | None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            return self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)  # the group this script created for the agent
            except ProcessLookupError:
                break
            try:
                return self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                continue
        return self.proc.poll()


def initialize(client: AcpClient, subagents: bool) -> dict:
    """ACP `initialize` as the recorder sends it: protocol 1, fs read/write, no terminal,
    and `subagents: {}` when asked; returns the agent's result."""
    caps: dict[str, Any] = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False}
    if subagents:
        caps["subagents"] = {}
    return client.request("initialize", {
        "protocolVersion": 1,
        "clientCapabilities": caps,
        "clientInfo": {"name": "fanout-capture", "title": "fanout capture-transcripts", "version": "0.1.0"},
    }, timeout=60)


def scratch_root(workdir: Path | None, agent: str) -> tuple[Path, Path, Path]:
    """A fresh scratch root (--workdir, cleared only when this script made it, or a temp
    dir) holding project/hello.txt and mock-requests/; returns (root, project, mock log)."""
    root = workdir or Path(tempfile.mkdtemp(prefix=f"fanout-capture-{agent}-"))
    marker = root / ".fanout-capture-scratch"
    if workdir and root.exists() and any(root.iterdir()):
        if not marker.exists():
            sys.exit(f"--workdir {root} exists and is not a scratch root of this script; refusing to clear it")
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    marker.write_text("scratch root of tools/capture-transcripts/capture.py; safe to delete\n")
    project = root / "project"
    project.mkdir()
    (project / FILE_NAME).write_text(FILE_TEXT)
    mock_log = root / "mock-requests"
    mock_log.mkdir()
    return root, project, mock_log


# --------------------------------------------------------------------------- agents


def install(agent: str) -> Path:
    script = REPO / "tools" / "test-agents" / agent / "install.sh"
    out = subprocess.run(["bash", str(script)], check=True, stdout=subprocess.PIPE, text=True).stdout
    return Path(out.strip().splitlines()[-1])


def base_env(root: Path) -> dict[str, str]:
    home = root / "home"
    for d in ("home", "home/.config", "home/.cache", "home/.local/share", "home/.local/state", "tmp"):
        (root / d).mkdir(parents=True, exist_ok=True)
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "SHELL")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update({
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_STATE_HOME": str(home / ".local/state"),
        "TMPDIR": str(root / "tmp"),
        "NO_COLOR": "1",
        # Offline by construction: any HTTP(S) request that is not for the mock goes to a
        # closed local port and fails at once (both agents honour these variables), and
        # so does any npm registry request of opencode's embedded npm.
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "ALL_PROXY": "http://127.0.0.1:9",
        "http_proxy": "http://127.0.0.1:9",
        "https_proxy": "http://127.0.0.1:9",
        "all_proxy": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "npm_config_registry": "http://127.0.0.1:9/",
    })
    return env


def opencode_setup(install_dir: Path, root: Path, port: int) -> tuple[list[str], list[str], dict[str, str]]:
    env = base_env(root)
    config = {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "model": f"mock/{MODEL}",
        "small_model": f"mock/{MODEL}",
        "enabled_providers": ["mock"],
        "provider": {
            "mock": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Mock (fanout capture)",
                "options": {"baseURL": f"http://127.0.0.1:{port}/v1", "apiKey": API_KEY},
                "models": {MODEL: {"name": "Mock model", "tool_call": True, "limit": {"context": 128000, "output": 8192}}},
            }
        },
    }
    cfg_dir = Path(env["XDG_CONFIG_HOME"]) / "opencode"
    cfg_dir.mkdir(parents=True, exist_ok=True)
    (cfg_dir / "opencode.json").write_text(json.dumps(config, indent=2))
    # At start-up opencode "installs" @opencode-ai/plugin into every config dir with its
    # embedded npm (Npm.install: nothing happens when <dir>/node_modules exists and every
    # dependency named in <dir>/package.json is in <dir>/package-lock.json). Make the config
    # dir the pre-installed tools/test-agents/opencode project so no registry is asked;
    # @ai-sdk/openai-compatible (the mock provider's package) is there too, although
    # opencode 1.18.33 bundles it and installs nothing for it.
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(install_dir / name, cfg_dir / name)
    (cfg_dir / "node_modules").symlink_to(install_dir / "node_modules", target_is_directory=True)
    env.update({
        "OPENCODE_CONFIG": str(cfg_dir / "opencode.json"),
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "OPENCODE_DISABLE_CLAUDE_CODE": "1",
        "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
        "OPENCODE_DISABLE_EMBEDDED_WEB_UI": "1",
    })
    argv = [str(install_dir / "node_modules" / ".bin" / "opencode"), "acp"]
    return argv, ["opencode", "acp"], env


def codex_setup(install_dir: Path, root: Path, port: int, feature: str) -> tuple[list[str], list[str], dict[str, str]]:
    env = base_env(root)
    codex_home = Path(env["HOME"]) / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    project = root / "project"
    config = f"""# written by tools/capture-transcripts/capture.py: everything points at the local mock
model = "{MODEL}"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.mock]
name = "Mock (fanout capture)"
base_url = "http://127.0.0.1:{port}/v1"
wire_api = "responses"
env_key = "OPENAI_API_KEY"
requires_openai_auth = false
request_max_retries = 0
stream_max_retries = 0
supports_websockets = false

[features]
# the plugin marketplace sync reaches github.com, api.github.com and chatgpt.com at start-up
plugins = false
{feature} = true

[analytics]
enabled = false

[otel]
exporter = "none"

[projects."{project}"]
trust_level = "trusted"
"""
    (codex_home / "config.toml").write_text(config)
    env.update({
        "CODEX_HOME": str(codex_home),
        "OPENAI_API_KEY": API_KEY,
        "CODEX_API_KEY": API_KEY,
        "NO_BROWSER": "1",
        "MODEL_PROVIDER": "mock",
        "APP_SERVER_LOGS": str(root / "codex-acp-logs"),
    })
    argv = [str(install_dir / "node_modules" / ".bin" / "codex-acp")]
    return argv, ["codex-acp"], env


# --------------------------------------------------------------------------- main

# Agents recorded per scenario by the agents/ package (one module each).
SCENARIO_AGENTS = ("qwen", "gemini", "copilot", "codex1")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1].startswith("claude-"):
        from agents import claude  # the Claude agents and their Anthropic mock live there

        return claude.main(sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("agent", choices=["opencode", "codex", *SCENARIO_AGENTS])
    ap.add_argument("--out", required=True, type=Path, help="transcript file to write")
    ap.add_argument("--subagents", action="store_true",
                    help="advertise clientCapabilities.subagents in initialize")
    ap.add_argument("--codex-feature", default="multi_agent", choices=["multi_agent", "multi_agent_v2"])
    ap.add_argument("--workdir", type=Path, help="scratch root (default: a fresh temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch root (logs, mock request bodies)")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds for the prompt turn")
    ap.add_argument("--scenario", help="scenario of agents/<agent>.py (single, parallel, background, failing, "
                    "cancel, nested; which ones per agent: see README); codex with --scenario runs agents/codex.py")
    ap.add_argument("--wrap", help='command prefix for the agent, e.g. "fanout proxy --db sqlite://X --"')
    ap.add_argument("--history-out", type=Path, help="copy the agent's own history folder here (codex sessions)")
    args = ap.parse_args()
    if args.agent in SCENARIO_AGENTS or (args.agent == "codex" and args.scenario):
        from agents import run_cli

        return run_cli(args)

    install_dir = install(args.agent)
    root, project, mock_log = scratch_root(args.workdir, args.agent)

    model = MockModel(mock_log, project)
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(model))
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    log(f"mock model on 127.0.0.1:{port}; scratch {root}")

    if args.agent == "opencode":
        argv, shown, env = opencode_setup(install_dir, root, port)
    else:
        argv, shown, env = codex_setup(install_dir, root, port, args.codex_feature)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    header = {"type": "fanout-transcript", "version": 1, "executionId": uuid7(), "taskId": None,
              "agentCommand": shown, "startedAt": now_ts()}
    transcript = Transcript(args.out, header)
    client = AcpClient(argv, env, project, transcript, root / "agent-stderr.log", project)
    ok = False
    try:
        init = initialize(client, args.subagents)
        log(f"initialize: agent {json.dumps(init.get('agentInfo'))}, auth {[m.get('id') for m in init.get('authMethods') or []]}")
        try:
            new = client.request("session/new", {"cwd": str(project), "mcpServers": []}, timeout=60)
        except RuntimeError as exc:
            if "auth" not in str(exc).lower():
                raise
            methods = [m.get("id") for m in init.get("authMethods") or []]
            method = next((m for m in methods if m and ("api" in m or "key" in m)), methods[0] if methods else None)
            log(f"session/new needs auth ({exc}); authenticating with {method}")
            client.request("authenticate", {"methodId": method}, timeout=60)
            new = client.request("session/new", {"cwd": str(project), "mcpServers": []}, timeout=60)
        session = new["sessionId"]
        log(f"session {session}")
        result = client.request("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": PROMPT}]},
                                timeout=args.timeout)
        log(f"prompt finished: {json.dumps(result)}")
        client.quiesce(idle=2.0, limit=15.0)
        ok = True
    except Exception as exc:  # noqa: BLE001
        log(f"FAILED: {exc}")
        client.quiesce(idle=1.0, limit=3.0)
    finally:
        code = client.close()
        transcript.close()
        server.shutdown()
        log(f"agent exited {code}; transcript {args.out}")
        log("model calls: " + "; ".join(model.calls))
        stderr_tail = (root / "agent-stderr.log").read_text(errors="replace")[-3000:]
        if not ok and stderr_tail:
            log("agent stderr tail:\n" + stderr_tail)
        if args.keep or not ok:
            log(f"scratch kept at {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
