"""A scripted mock of the Anthropic Messages API (streaming SSE and plain JSON).

Claude Code (inside claude-agent-acp) is pointed at it with ANTHROPIC_BASE_URL. Every
request is logged under `log_dir` as `NNN-METHOD-path.json` (method, path, headers minus
auth and keys, body), then classified by its content (`Request.kind`: the main agent's
conversation, a subagent's, the auto-mode safety check, a title or summary call, a prompt
suggestion, …) and answered by a `Script` (see claude.py) with a deterministic response:
fixed message ids, fixed tool_use ids, fixed usage. The dummy key never reaches a file.

Python 3.11 standard library only.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

# Headers never written to the request log (they carry the key or a session secret).
SECRET_HEADERS = {"authorization", "x-api-key", "api-key", "cookie", "proxy-authorization"}
IDENTITY_HEADERS = ("x-claude-code-session-id", "x-claude-code-agent-id", "x-claude-code-parent-agent-id")


def text_of(content: Any) -> str:
    """All text of a message content (string or block list), tool results included."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict):
                if block.get("type") == "text":
                    parts.append(block.get("text") or "")
                elif block.get("type") == "tool_result":
                    parts.append(text_of(block.get("content")))
            elif isinstance(block, str):
                parts.append(block)
        return "\n".join(parts)
    return ""


@dataclass
class Request:
    """One POST /v1/messages, with what the script needs to know about it."""

    n: int
    headers: dict[str, str]
    body: dict
    kind: str = "other"  # main | child | safety | title | summary | suggestion | other
    role: str = ""  # for kind child: the child's marker name (e.g. "A", "NESTED")

    @property
    def system(self) -> str:
        return text_of(self.body.get("system"))

    @property
    def messages(self) -> list[dict]:
        return self.body.get("messages") or []

    @property
    def first_user(self) -> str:
        for m in self.messages:
            if m.get("role") == "user":
                return text_of(m.get("content"))
        return ""

    @property
    def last_user(self) -> str:
        for m in reversed(self.messages):
            if m.get("role") == "user":
                return text_of(m.get("content"))
        return ""

    @property
    def all_text(self) -> str:
        return json.dumps(self.messages)

    @property
    def tools(self) -> list[str]:
        return [t.get("name") for t in self.body.get("tools") or [] if t.get("name")]

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def model(self) -> str:
        return self.body.get("model") or "claude-mock"

    def tool_result(self, tool_use_id: str) -> dict | None:
        """The tool_result block answering `tool_use_id`, if the conversation has one."""
        for m in self.messages:
            content = m.get("content")
            if m.get("role") != "user" or not isinstance(content, list):
                continue
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result" and block.get("tool_use_id") == tool_use_id:
                    return block
        return None

    def called(self, tool_use_id: str) -> bool:
        """Whether the conversation already holds our tool_use `tool_use_id`."""
        for m in self.messages:
            content = m.get("content")
            if m.get("role") == "assistant" and isinstance(content, list):
                if any(isinstance(b, dict) and b.get("id") == tool_use_id for b in content):
                    return True
        return False

    def said(self, text: str) -> bool:
        """Whether an assistant message of the conversation has exactly this text."""
        for m in self.messages:
            if m.get("role") == "assistant" and text in text_of(m.get("content")):
                return True
        return False

    def identity(self) -> dict[str, str]:
        low = {k.lower(): v for k, v in self.headers.items()}
        return {h: low[h] for h in IDENTITY_HEADERS if h in low}


@dataclass
class Reply:
    """A scripted answer: content blocks (text / tool_use), or an HTTP error."""

    label: str
    blocks: list[dict] = field(default_factory=list)
    stop_reason: str = "end_turn"
    stop_sequence: str | None = None
    message_id: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    error_status: int = 0  # non-zero: answer with an Anthropic error body instead
    error_type: str = "api_error"
    error_message: str = ""
    hold: Callable[[], None] | None = None  # called after message_start, before the content

    @staticmethod
    def text(label: str, text: str, **kw: Any) -> "Reply":
        return Reply(label, [{"type": "text", "text": text}], "end_turn", **kw)

    @staticmethod
    def tool(label: str, tool_id: str, name: str, tool_input: dict, **kw: Any) -> "Reply":
        return Reply(label, [{"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}], "tool_use", **kw)

    @staticmethod
    def tools(label: str, calls: list[tuple[str, str, dict]], **kw: Any) -> "Reply":
        blocks = [{"type": "tool_use", "id": i, "name": n, "input": inp} for i, n, inp in calls]
        return Reply(label, blocks, "tool_use", **kw)

    @staticmethod
    def error(label: str, status: int, error_type: str, message: str) -> "Reply":
        return Reply(label, error_status=status, error_type=error_type, error_message=message)


class AnthropicMock:
    """The HTTP server state: the request log, the classifier and the script."""

    def __init__(self, log_dir: Path, classify: Callable[[Request], None], answer: Callable[[Request], Reply]):
        self.log_dir = log_dir
        self.classify = classify
        self.answer = answer
        self.lock = threading.Lock()
        self.count = 0
        self.served: list[str] = []  # "#n kind[role] -> label", in order
        self.labels: set[str] = set()
        self.identities: list[dict[str, Any]] = []  # per messages request: who sent it, which ids
        self.changed = threading.Condition(self.lock)
        self.server: ThreadingHTTPServer | None = None

    # -- log
    def record(self, method: str, path: str, headers: dict[str, str], body: Any) -> int:
        with self.lock:
            self.count += 1
            n = self.count
        safe = path.split("?")[0].strip("/").replace("/", "_") or "root"
        hdrs = {k: v for k, v in headers.items() if k.lower() not in SECRET_HEADERS}
        (self.log_dir / f"{n:03d}-{method}-{safe}.json").write_text(
            json.dumps({"method": method, "path": path, "headers": hdrs, "body": body}, indent=2)
        )
        return n

    def note(self, req: Request, label: str) -> None:
        with self.changed:
            who = req.kind + (f"[{req.role}]" if req.role else "")
            self.served.append(f"#{req.n} {who} -> {label}")
            self.labels.add(label)
            low = {k.lower(): v for k, v in req.headers.items()}
            self.identities.append({"n": req.n, "kind": req.kind, "role": req.role, "label": label,
                                    "model": req.model, "stream": req.stream,
                                    "user_agent": low.get("user-agent"), "headers": req.identity()})
            self.changed.notify_all()

    def done(self, label: str) -> None:
        """A streamed answer was sent whole: `<label>:sent` joins the served labels."""
        with self.changed:
            self.labels.add(f"{label}:sent")
            self.changed.notify_all()

    def wait_for(self, label: str, timeout: float) -> bool:
        end = time.monotonic() + timeout
        with self.changed:
            while label not in self.labels:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(left)
            return True

    # -- server
    def start(self) -> int:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self.server.server_address[1]

    def stop(self) -> None:
        if self.server:
            self.server.shutdown()


def sse_events(req: Request, reply: Reply) -> list[tuple[str, dict]]:
    """The Messages API stream of `reply`: text and tool input each split in two deltas."""
    usage = dict(reply.usage)
    start_usage = {
        "input_tokens": usage.get("input_tokens", 0),
        "cache_creation_input_tokens": usage.get("cache_creation_input_tokens", 0),
        "cache_read_input_tokens": usage.get("cache_read_input_tokens", 0),
        "output_tokens": 1,
    }
    events: list[tuple[str, dict]] = [("message_start", {"type": "message_start", "message": {
        "id": reply.message_id, "type": "message", "role": "assistant", "model": req.model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": start_usage}})]
    for idx, block in enumerate(reply.blocks):
        if block["type"] == "text":
            events.append(("content_block_start", {"type": "content_block_start", "index": idx,
                                                   "content_block": {"type": "text", "text": ""}}))
            text = block["text"]
            half = len(text) // 2
            for part in (text[:half], text[half:]):
                events.append(("content_block_delta", {"type": "content_block_delta", "index": idx,
                                                       "delta": {"type": "text_delta", "text": part}}))
        else:
            events.append(("content_block_start", {"type": "content_block_start", "index": idx, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}))
            args = json.dumps(block["input"])
            half = len(args) // 2
            for part in (args[:half], args[half:]):
                events.append(("content_block_delta", {"type": "content_block_delta", "index": idx,
                                                       "delta": {"type": "input_json_delta", "partial_json": part}}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": idx}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": reply.stop_reason, "stop_sequence": reply.stop_sequence},
                                     "usage": {**start_usage, "output_tokens": usage.get("output_tokens", 1)}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def message_json(req: Request, reply: Reply) -> dict:
    usage = {k: reply.usage.get(k, 0) for k in
             ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")}
    return {"id": reply.message_id, "type": "message", "role": "assistant", "model": req.model,
            "content": reply.blocks, "stop_reason": reply.stop_reason, "stop_sequence": reply.stop_sequence,
            "usage": usage}


def _handler(mock: AnthropicMock) -> type[BaseHTTPRequestHandler]:
    # capture.py's handler brings the request-body and JSON-reply helpers (its model is
    # not used by them); this one answers the Anthropic Messages API.
    import capture

    class Handler(capture.make_handler(None)):  # type: ignore[misc]
        def _error(self, status: int, error_type: str, message: str) -> None:
            data = json.dumps({"type": "error", "error": {"type": error_type, "message": message}}).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header("x-should-retry", "false")  # the SDK's own retries stay off
            self.end_headers()
            self.wfile.write(data)

        def do_HEAD(self) -> None:
            mock.record("HEAD", self.path, dict(self.headers), None)
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            mock.record("GET", self.path, dict(self.headers), None)
            self._error(404, "not_found_error", f"mock: no GET {self.path}")

        def do_POST(self) -> None:
            body = self._body()
            n = mock.record("POST", self.path, dict(self.headers), body)
            path = self.path.split("?")[0].rstrip("/")
            if path.endswith("/v1/messages/count_tokens"):
                self._json(200, {"input_tokens": 100})
                return
            if not path.endswith("/v1/messages") or not isinstance(body, dict):
                self._error(404, "not_found_error", f"mock: no POST {self.path}")
                return
            req = Request(n, dict(self.headers), body)
            try:
                mock.classify(req)
                reply = mock.answer(req)
            except Exception as exc:  # noqa: BLE001 - a script failure is answered, and logged
                reply = Reply.error(f"mock-failure: {exc}", 500, "api_error", f"mock script failed: {exc}")
            mock.note(req, reply.label)
            if reply.error_status:
                self._error(reply.error_status, reply.error_type, reply.error_message)
                return
            if not req.stream:
                self._json(200, message_json(req, reply))
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("request-id", f"req_01FANOUT{n:04d}")
            self.send_header("connection", "close")
            self.end_headers()
            events = [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in sse_events(req, reply)]
            # The last content_block_stop, message_delta and message_stop go out in one
            # write, as the real API tends to send them: Claude Code 2.1.83 writes a
            # response's last history record with the final usage only when message_delta
            # arrives before that record is flushed (a gap here makes output_tokens racy).
            tail = b"".join(events[-3:])
            try:
                for i, chunk in enumerate(events[:-3] + [tail]):
                    self.wfile.write(chunk)
                    self.wfile.flush()
                    if i == 0 and reply.hold:
                        reply.hold()
                    time.sleep(0.005)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the agent aborted the request (a cancel)
            else:
                mock.done(reply.label)
            self.close_connection = True

    return Handler
