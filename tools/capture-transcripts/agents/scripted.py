"""A scenario-scripted mock model: which conversation is asking, and what it answers.

Every model request is classified by the first user turn of its conversation: the parent
("main") starts with the scenario's prompt, each child with its own marker
(`FANOUT-CHILD-<name>`), so parallel and nested children are told apart however their
requests interleave. A request that offers no tools is a side call (title, summary,
next-speaker check) and gets a short text. The step of a conversation is the number of
model turns it already holds, so each conversation walks its own list of scripted steps.

A step may hold its answer until the driver sets an event (a background child waits for
the parent's turn to end; a child to be cancelled waits for the cancel) and may signal an
event when its request arrives (the driver then knows the child is running). Tool-call ids
are fixed by the script, so the ids on the wire are the same on every run.

Speaks three wire formats through capture.py's handler (chat completions SSE, Responses
SSE) plus Gemini `streamGenerateContent` SSE / `generateContent` JSON added here.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import capture

MARKER = "FANOUT-CHILD-"
# What every scenario asks for: the parent delegates, each child reads hello.txt.
PROMPT = ("Delegate to subagents as scripted by the test: they read hello.txt in the project and "
          "report its first line. Then tell me what they said.")
FINAL = "The subagents report that hello.txt says: hello from the fanout capture fixture"
TASK = "read hello.txt in the project directory and reply with its first line."
NESTED_TASK = "delegate reading hello.txt to a subagent of your own and report what it said."


@dataclass
class Call:
    """One scripted tool call; `args` may depend on the request (a callable of it)."""
    name: str
    args: dict | Callable[[dict], dict]
    call_id: str


@dataclass
class Step:
    """A model turn: tool calls or a text, optionally an HTTP error instead."""
    calls: list[Call] = field(default_factory=list)
    text: str | None = None
    error: tuple[int, dict] | None = None  # (status, JSON body): the request fails
    hold: str | None = None  # answer only once the driver set this event
    hold_timeout: float = 60.0
    signal: str | None = None  # set this event when the request arrives


def say(text: str, **kw: Any) -> Step:
    return Step(text=text, **kw)


def call(*calls: Call, **kw: Any) -> Step:
    return Step(calls=list(calls), **kw)


def child_prompt(name: str, task: str) -> str:
    return f"{MARKER}{name}: {task}"


@dataclass
class Script:
    """The parent's steps, each child's steps (by marker name) and the side-call text."""
    main: list[Step]
    children: dict[str, list[Step]] = field(default_factory=dict)
    side_text: str = "Delegating to a subagent"

    def steps_for(self, role: str) -> list[Step]:
        return self.main if role == "main" else self.children.get(role, [])


class Events:
    """Named one-shot events shared by the mock and the ACP driver."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[str, threading.Event] = {}

    def get(self, name: str) -> threading.Event:
        with self._lock:
            return self._events.setdefault(name, threading.Event())

    def set(self, name: str) -> None:
        self.get(name).set()

    def wait(self, name: str, timeout: float) -> bool:
        return self.get(name).wait(timeout)


def role_of(first_user_text: str) -> str:
    idx = first_user_text.find(MARKER)
    if idx < 0:
        return "main"
    rest = first_user_text[idx + len(MARKER):]
    return rest.split(":", 1)[0].strip()


class ScriptedModel(capture.MockModel):
    """capture.MockModel's request log, answering from a Script instead of one delegation."""

    def __init__(self, log_dir: Any, project: Any, script: Script, events: Events):
        super().__init__(log_dir, project)
        self.script = script
        self.events = events
        self.pending_label = ""

    SECRET_HEADERS = ("authorization", "api-key", "x-api-key", "x-goog-api-key")

    def record(self, method: str, path: str, headers: dict[str, str], body: Any) -> int:
        """capture.MockModel.record, minus every header that carries the (dummy) key."""
        return super().record(method, path, {k: v for k, v in headers.items()
                                             if k.lower() not in self.SECRET_HEADERS}, body)

    # -- shared
    def resolved(self, step: Step, body: dict) -> Step:
        """The step with every call's name and arguments fixed for this request."""
        calls = [c.resolve(body) if isinstance(c, DynamicCall) else Call(c.name, _args(c, body), c.call_id)
                 for c in step.calls]
        what = step.error and f"HTTP {step.error[0]}" or (",".join(f"{c.name}[{c.call_id}]" for c in calls) or "text")
        self.note(f"{self.pending_label} -> {what}")
        return Step(calls=calls, text=step.text, error=step.error)

    def _step(self, role: str, turn: int, label_wire: str) -> Step:
        steps = self.script.steps_for(role)
        if not steps:
            return self._unscripted(f"{label_wire} {role}#{turn} (no script)")
        step = steps[turn] if turn < len(steps) else Step(text=steps[-1].text or "Done.")
        if step.signal:
            self.events.set(step.signal)
        if step.hold:
            waited = self.events.wait(step.hold, step.hold_timeout)
            self.note(f"{label_wire} {role}#{turn}: held for {step.hold} ({'set' if waited else 'timed out'})")
        self.pending_label = f"{label_wire} {role}#{turn}"
        return step

    def _side(self, label_wire: str) -> Step:
        self.note(f"{label_wire} side call -> text")
        return say(self.script.side_text)

    def _unscripted(self, label: str) -> Step:
        self.pending_label = label
        return say("Done.")

    # -- chat completions (Qwen Code, Copilot CLI)
    def chat(self, body: dict) -> tuple[list[dict], str]:
        step = self.chat_step(body)
        if step.error:
            raise ScriptedError(*step.error)
        if step.calls:
            deltas = [{"tool_calls": [{"index": i, "id": c.call_id, "type": "function",
                                        "function": {"name": c.name, "arguments": json.dumps(_args(c, body))}}]}
                      for i, c in enumerate(step.calls)]
            return deltas, "tools"
        return [{"content": step.text or ""}], "text"

    def chat_step(self, body: dict) -> Step:
        messages = body.get("messages") or []
        if not body.get("tools"):
            return self._side("chat")
        first = next((capture._text(m.get("content")) for m in messages if m.get("role") == "user"), "")
        role = role_of(first)
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        return self.resolved(self._step(role, turn, "chat"), body)

    # -- Responses (codex)
    def responses(self, body: dict) -> tuple[list[dict], str]:
        items = body.get("input") or []
        tools = capture._response_tool_names(body.get("tools") or [])
        if not tools:
            texts = " ".join(capture._item_text(i) for i in items if i.get("role") == "user")
            if "title" in texts:
                return [capture._message_item(json.dumps({"title": "Delegate reading hello.txt"}))], "text:title"
            return [capture._message_item(self.script.side_text)], "text:side-call"
        role, own = _responses_role(items)
        turn = sum(1 for i in own if i.get("type") == "message" and i.get("role") == "assistant") + \
            _function_turns(own)
        step = self.resolved(self._step(role, turn, "responses"), body)
        if step.error:
            raise ScriptedError(*step.error)
        if step.calls:
            return [capture._function_call_item(c.name, _args(c, body), c.call_id, tools.get(c.name))
                    for c in step.calls], "tools"
        return [capture._message_item(step.text or "")], "text"

    # -- Gemini generateContent / streamGenerateContent
    def gemini(self, body: dict) -> tuple[Step, str]:
        contents = body.get("contents") or []
        tools = [d.get("name") for t in body.get("tools") or [] for d in t.get("functionDeclarations") or []]
        if not tools:
            return self._side("gemini"), "side"
        first = next((_gemini_text(c) for c in contents if c.get("role") == "user" and _gemini_text(c)), "")
        role = role_of(first)
        turn = sum(1 for c in contents if c.get("role") == "model")
        return self.resolved(self._step(role, turn, "gemini"), body), role


class ScriptedError(Exception):
    def __init__(self, status: int, body: dict):
        super().__init__(f"HTTP {status}")
        self.status = status
        self.body = body


def _args(c: Call, body: dict) -> dict:
    return c.args(body) if callable(c.args) else c.args


def _gemini_text(content: dict) -> str:
    return " ".join(p.get("text", "") for p in content.get("parts") or [] if isinstance(p, dict))


def _responses_role(items: list[dict]) -> tuple[str, list[dict]]:
    """The conversation of a Responses request and the items that are its own.

    A codex child thread's input starts with (v1) or carries after the inherited parent
    history (v2) the message that hands it its task; only what follows counts."""
    for idx in range(len(items) - 1, -1, -1):
        item = items[idx]
        text = capture._item_text(item) if item.get("type") in ("message", "agent_message") else ""
        if MARKER in text and (item.get("role") == "user" or item.get("type") == "agent_message"):
            return role_of(text), items[idx:]
        if item.get("type") == "agent_message" and str(item.get("recipient", "")).startswith("/root/"):
            # v2: the task text sits in encrypted_content; the task path names the child
            return str(item["recipient"]).rsplit("/", 1)[-1], items[idx:]
    return "main", items


def _function_turns(items: list[dict]) -> int:
    """Model turns that produced tool calls: consecutive function_call items are one turn."""
    turns, prev_call = 0, False
    for item in items:
        is_call = item.get("type") in ("function_call", "custom_tool_call")
        if is_call and not prev_call:
            turns += 1
        prev_call = is_call or (prev_call and item.get("type") == "reasoning")
    return turns


def gemini_events(step: Step, model: str, n: int, role: str) -> list[dict]:
    """The SSE chunks of one Gemini streamGenerateContent answer."""
    usage = {"promptTokenCount": 1000 + 10 * n, "candidatesTokenCount": 20 + n,
             "totalTokenCount": 1020 + 11 * n}
    base = {"modelVersion": model, "responseId": f"gemini-mock-{n}"}
    if step.calls:
        parts = [{"functionCall": {"id": c.call_id, "name": c.name, "args": c.args if isinstance(c.args, dict) else {}}}
                 for c in step.calls]
        return [dict(base, candidates=[{"content": {"role": "model", "parts": parts}, "finishReason": "STOP",
                                        "index": 0}], usageMetadata=usage)]
    text = step.text or ""
    half = len(text) // 2
    return [
        dict(base, candidates=[{"content": {"role": "model", "parts": [{"text": text[:half]}]}, "index": 0}]),
        dict(base, candidates=[{"content": {"role": "model", "parts": [{"text": text[half:]}]},
                                "finishReason": "STOP", "index": 0}], usageMetadata=usage),
    ]


def gemini_json_answer(body: dict) -> str:
    """A side call that asks for JSON (next-speaker check, routing classifier)."""
    cfg = body.get("generationConfig") or body.get("config") or {}
    schema = cfg.get("responseJsonSchema") or cfg.get("responseSchema") or {}
    props = schema.get("properties") or {}
    out: dict[str, Any] = {}
    for key, spec in props.items():
        kind = spec.get("type", "string") if isinstance(spec, dict) else "string"
        enum = spec.get("enum") if isinstance(spec, dict) else None
        if key == "next_speaker":
            out[key] = "user"
        elif enum:
            out[key] = enum[0]
        elif str(kind).lower() in ("number", "integer"):
            out[key] = 0
        elif str(kind).lower() == "boolean":
            out[key] = False
        elif str(kind).lower() == "array":
            out[key] = []
        else:
            out[key] = "mock"
    return json.dumps(out)


READ_TOOLS = ("read_file", "read", "view", "Read")
PATH_KEYS = ("absolute_path", "file_path", "filePath", "path")


def offered_tools(body: dict) -> dict[str, dict]:
    """Tool name -> JSON-schema properties, for chat completions, Gemini and Responses bodies."""
    out: dict[str, dict] = {}
    for t in body.get("tools") or []:
        if "function" in t:
            out[t["function"].get("name", "")] = (t["function"].get("parameters") or {}).get("properties") or {}
        for d in t.get("functionDeclarations") or []:
            params = d.get("parametersJsonSchema") or d.get("parameters") or {}
            out[d.get("name", "")] = params.get("properties") or {}
        if t.get("name"):
            out[t["name"]] = (t.get("parameters") or {}).get("properties") or {}
    return out


def read_hello(project: Any, call_id: str) -> Call:
    """The child's one tool call: read hello.txt with whatever read tool the agent offers."""
    path = str(project / capture.FILE_NAME)

    def args(body: dict) -> dict:
        tools = offered_tools(body)
        name = next((t for t in READ_TOOLS if t in tools), None)
        props = tools.get(name or "", {})
        key = next((k for k in PATH_KEYS if k in props), "path")
        return {key: path}

    def name_of(body: dict) -> str:
        tools = offered_tools(body)
        return next((t for t in READ_TOOLS if t in tools), "read_file")

    return DynamicCall(name_of, args, call_id)


class DynamicCall(Call):
    """A Call whose tool name also depends on the request (the agent's read tool)."""

    def __init__(self, name_of: Callable[[dict], str], args: Callable[[dict], dict], call_id: str):
        super().__init__("read_file", args, call_id)
        self.name_of = name_of

    def resolve(self, body: dict) -> "Call":
        return Call(self.name_of(body), self.args(body) if callable(self.args) else self.args, self.call_id)


def reader(project: Any, child: str, **last: Any) -> list[Step]:
    """A child that reads hello.txt (call id `call_<child>_read_1`) and answers with it."""
    return [call(read_hello(project, f"call_{child.lower()}_read_1")), say(capture.CHILD_TEXT, **last)]


def write_config(env: dict[str, str], folder: str, name: str, content: dict) -> Path:
    """Writes $HOME/<folder>/<name> as JSON (an agent's settings in the isolated home)."""
    directory = Path(env["HOME"]) / folder
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(json.dumps(content, indent=2))
    return directory
