"""The scripted Claude scenarios: what the mock answers to each request, by its content.

A request is classified (`Scenario.classify`) as one of:
- `main`: the main agent's conversation (its first marked user text has FANOUT-PARENT);
- `child`: a subagent's (its first marked user text has FANOUT-CHILD-<ROLE>);
- `safety`: Claude Code 2.1.3xx's auto-mode safety check (system prompt "You are a
  security monitor …"), answered "allow";
- `title`, `suggestion`, `other`: side calls (session title, next-prompt suggestion, any
  other tool-less call), answered with short text.
Scripts name every tool_use id (`toolu_01FANOUT…`), message id (`msg_01FANOUT…`) and
usage figure, so a run's model traffic is the same every time.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

from agents.anthropic_mock import Reply, Request

PARENT = "FANOUT-PARENT"
MARK = re.compile(r"FANOUT-(PARENT|CHILD-[A-Z0-9]+)")
FILE_NAME = "hello.txt"
CHILD_TEXT = "hello.txt says: hello from the fanout capture fixture"
FINAL_TEXT = "The subagent reports: hello from the fanout capture fixture"
# Kinds of side request in a fixed order, for their usage figures (see `usage`).
ROLE_INDEX = {"MAIN": 1, "A": 2, "B": 3, "NESTED": 4, "SAFETY": 6, "TITLE": 7, "SUGGESTION": 8, "OTHER": 9}


def usage(role: str, step: int) -> dict[str, int]:
    """Distinct, fixed token figures per (conversation, step): attribution is checkable."""
    r = ROLE_INDEX.get(role, 9)
    return {
        "input_tokens": 100 * r + 10 * step + 1,
        "cache_creation_input_tokens": 1000 * r + 100 * step + 2,
        "cache_read_input_tokens": 10000 * r + 1000 * step + 3,
        "output_tokens": 10 * r + step + 4,
    }


def user_texts(req: Request) -> list[str]:
    """The user messages' own text blocks (not tool results), in order."""
    out = []
    for m in req.messages:
        if m.get("role") != "user":
            continue
        content = m.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out.extend(b.get("text") or "" for b in content if isinstance(b, dict) and b.get("type") == "text")
    return out


class Scenario:
    """A base scenario: one foreground Agent call whose child reads hello.txt."""

    name = "single"
    prompt_text = "delegate reading hello.txt to a subagent, then report what it said."

    def __init__(self, project: Path):
        self.project = project
        self.lock = threading.Lock()
        self.side_counts: dict[str, int] = {}
        self.cancel_due = threading.Event()
        self.cancel_sent = threading.Event()
        self.mock: Any = None  # the AnthropicMock serving this scenario (set by the driver)

    @property
    def prompt(self) -> str:
        return f"{PARENT} ({self.name}): {self.prompt_text}"

    # -- classification
    def classify(self, req: Request) -> None:
        system = req.system
        if "security monitor" in system:
            req.kind = "safety"  # the auto-mode classifier (Claude Code 2.1.3xx)
        elif "naming a coding session" in system:
            req.kind = "title"  # the session title (2.1.3xx; 2.1.83 asks none here)
        elif req.last_user.lstrip().startswith("[SUGGESTION MODE"):
            req.kind = "suggestion"  # 2.1.3xx predicts the user's next prompt after a turn
        else:
            for text in user_texts(req):
                m = MARK.search(text)
                if m:
                    if m.group(1) == "PARENT":
                        req.kind = "main"
                    else:
                        req.kind, req.role = "child", m.group(1).removeprefix("CHILD-")
                    break
            if req.kind == "main" and not req.tools:
                req.kind = "other"  # a tool-less side call about the main conversation

    # -- answers
    def answer(self, req: Request) -> Reply:
        if req.kind == "main":
            return self.main(req)
        if req.kind == "child":
            return self.child(req, req.role)
        return self.side(req)

    def side(self, req: Request) -> Reply:
        with self.lock:
            n = self.side_counts.get(req.kind, 0) + 1
            self.side_counts[req.kind] = n
        mid = f"msg_01FANOUT{req.kind.upper()}{n:02d}"
        if req.kind == "safety":
            # Stage 1 grades harm as <severity>N</severity> (stop sequence </severity>);
            # stage 2, when it runs, answers <block>yes|no</block>. Both mean "allow" here.
            stops = req.body.get("stop_sequences") or []
            if "</severity>" in stops:
                return Reply("safety:allow", [{"type": "text", "text": "<severity>0"}], "stop_sequence", "</severity>",
                             message_id=mid, usage=usage("SAFETY", n))
            if "</block>" in stops:
                return Reply("safety:allow", [{"type": "text", "text": "<block>no"}], "stop_sequence", "</block>",
                             message_id=mid, usage=usage("SAFETY", n))
            return Reply.text("safety:allow", "<block>no</block>", message_id=mid, usage=usage("SAFETY", n))
        if req.kind == "title":
            return Reply.text("title", json.dumps({"title": f"Fanout {self.name} scenario"}), message_id=mid,
                              usage=usage("TITLE", n))
        if req.kind == "suggestion":
            return Reply.text("suggestion", "show me hello.txt", message_id=mid, usage=usage("SUGGESTION", n))
        return Reply.text(f"{req.kind}:text", "ok", message_id=mid, usage=usage("OTHER", n))

    def reply(self, role: str, step: int) -> dict:
        """The fixed message id and usage of step `step` of conversation `role`."""
        return {"message_id": f"msg_01FANOUT{role}{step:02d}", "usage": usage(role, step)}

    def agent_input(self, role: str, description: str, background: bool = False, task: str = "") -> dict:
        # run_in_background is always explicit: Claude Code 2.1.3xx runs a subagent in the
        # background unless the call says false.
        return {
            "description": description,
            "prompt": f"FANOUT-CHILD-{role}: " + (task or f"read {FILE_NAME} in the project directory and reply with its first line."),
            "subagent_type": "general-purpose",
            "run_in_background": background,
        }

    def main(self, req: Request) -> Reply:
        call = agent_call("A")
        if not req.called(call):
            return Reply.tool("main:Agent", call, "Agent", self.agent_input("A", "Read hello.txt"), **self.reply("MAIN", 1))
        return Reply.text("main:final", FINAL_TEXT, **self.reply("MAIN", 2))

    def child(self, req: Request, role: str) -> Reply:
        read = f"toolu_01FANOUTREAD{role}"
        if not req.called(read):
            return Reply.tool(f"child[{role}]:Read", read, "Read", {"file_path": str(self.project / FILE_NAME)},
                              **self.reply(role, 1))
        return self.report(req, role, 2, CHILD_TEXT)

    def report(self, req: Request, role: str, step: int, text: str) -> Reply:
        """A child's last step: Claude Code 2.1.3xx delivers it through SubagentHandback
        (plain text is not delivered); 2.1.83 takes the final text."""
        if "SubagentHandback" in req.tools:
            return Reply.tool(f"child[{role}]:handback", f"toolu_01FANOUTHANDBACK{role}", "SubagentHandback",
                              {"message": text}, **self.reply(role, step))
        return Reply.text(f"child[{role}]:final", text, **self.reply(role, step))

    def wait_label(self, label: str, timeout: float = 60.0) -> None:
        """Holds a response until the mock has served `label` (orders concurrent work)."""
        assert self.mock is not None
        if not self.mock.wait_for(label, timeout):
            raise TimeoutError(f"the mock never served {label!r}")

    # -- driver hooks
    def before_prompt(self, client: Any, session: str, new: dict) -> None:
        pass

    def cancel_when_due(self, client: Any, session: str) -> None:
        pass

    def after_prompt(self, client: Any, session: str) -> None:
        pass

    def check(self, result: dict) -> bool:
        return result.get("stopReason") == "end_turn" and "main:final" in self.mock.labels


def agent_call(role: str) -> str:
    return f"toolu_01FANOUTAGENT{role}"


class Parallel(Scenario):
    """Two foreground Agent calls in one assistant message."""

    name = "parallel"
    prompt_text = "have two subagents read hello.txt at the same time, then report."

    def main(self, req: Request) -> Reply:
        a, b = agent_call("A"), agent_call("B")
        if not req.called(a):
            return Reply.tools("main:Agent x2", [
                (a, "Agent", self.agent_input("A", "Read hello.txt (A)")),
                (b, "Agent", self.agent_input("B", "Read hello.txt (B)")),
            ], **self.reply("MAIN", 1))
        return Reply.text("main:final", "Both subagents report: hello from the fanout capture fixture",
                          **self.reply("MAIN", 2))


class Background(Scenario):
    """One Agent call with run_in_background: true; the main turn ends while it runs and
    the child's end comes back to the main agent as a notification."""

    name = "background"
    prompt_text = "start a background subagent that reads hello.txt; tell me when it reports."
    LAUNCHED = "The subagent runs in the background; I will report when it is done."

    def main(self, req: Request) -> Reply:
        call = agent_call("A")
        if not req.called(call):
            return Reply.tool("main:Agent", call, "Agent", self.agent_input("A", "Read hello.txt", background=True),
                              **self.reply("MAIN", 1))
        if not req.said(self.LAUNCHED):
            return Reply.text("main:launched", self.LAUNCHED, **self.reply("MAIN", 2))
        return Reply.text("main:final", FINAL_TEXT, **self.reply("MAIN", 3))

    def child(self, req: Request, role: str) -> Reply:
        if not req.called(f"toolu_01FANOUTREAD{role}"):
            # The child starts only after the main agent said it was launched, so the
            # order of the two conversations is the same on every run.
            self.wait_label("main:launched:sent")
            time.sleep(0.5)  # and the agent has passed it on
        return super().child(req, role)

    def after_prompt(self, client: Any, session: str) -> None:
        # The child's end reaches the main agent after the prompt's response: wait for
        # the main agent's answer to it (or give up and record what came).
        if not self.mock.wait_for("main:final", 90):
            log_note("background: the main agent never answered the child's end")

    def check(self, result: dict) -> bool:
        return result.get("stopReason") == "end_turn" and "main:launched" in self.mock.labels


class Failing(Scenario):
    """The child's first model request gets an API error (HTTP 400, not retried)."""

    name = "failing"
    prompt_text = "delegate reading hello.txt to a subagent, then report what it said."

    def child(self, req: Request, role: str) -> Reply:
        return Reply.error(f"child[{role}]:error 400", 400, "invalid_request_error",
                           "FANOUT scripted failure: the subagent's model request is rejected")

    def main(self, req: Request) -> Reply:
        call = agent_call("A")
        if not req.called(call):
            return Reply.tool("main:Agent", call, "Agent", self.agent_input("A", "Read hello.txt"), **self.reply("MAIN", 1))
        return Reply.text("main:final", "The subagent failed.", **self.reply("MAIN", 2))


class Cancelled(Scenario):
    """The client sends session/cancel while the child's model response is streaming."""

    name = "cancel"

    def child(self, req: Request, role: str) -> Reply:
        reply = super().child(req, role)
        if not req.called(f"toolu_01FANOUTREAD{role}"):
            reply.hold = self.hold
        return reply

    def hold(self) -> None:
        self.cancel_due.set()
        self.cancel_sent.wait(30)
        time.sleep(3)  # the agent aborts the request meanwhile; the rest then fails to send

    def cancel_when_due(self, client: Any, session: str) -> None:
        if self.cancel_due.wait(120):
            client.notify("session/cancel", {"sessionId": session})
            self.cancel_sent.set()

    def check(self, result: dict) -> bool:
        return result.get("stopReason") == "cancelled"


class Nested(Scenario):
    """The child itself calls Agent (Claude Code 2.1.83 does not offer it the tool: the
    call is made anyway and its refusal recorded)."""

    name = "nested"
    prompt_text = "delegate to a subagent that delegates reading hello.txt to its own subagent."

    def main(self, req: Request) -> Reply:
        call = agent_call("A")
        if not req.called(call):
            task = "start one nested subagent (Agent tool) that reads hello.txt, then report what it said."
            return Reply.tool("main:Agent", call, "Agent", self.agent_input("A", "Delegate hello.txt", task=task),
                              **self.reply("MAIN", 1))
        return Reply.text("main:final", FINAL_TEXT, **self.reply("MAIN", 2))

    def child(self, req: Request, role: str) -> Reply:
        if role != "A":
            return super().child(req, role)
        call = agent_call("NESTED")
        if not req.called(call):
            return Reply.tool("child[A]:Agent", call, "Agent", self.agent_input("NESTED", "Read hello.txt (nested)"),
                              **self.reply("A", 1))
        result = req.tool_result(call) or {}
        text = CHILD_TEXT if not result.get("is_error") else "The nested subagent could not be started."
        return self.report(req, "A", 2, text)


class Permission(Scenario):
    """A child's Bash call needs the user's permission: the session is switched to the
    "default" (ask) mode, the agent sends session/request_permission, the client allows."""

    name = "permission"
    prompt_text = "delegate writing report.txt with a shell command to a subagent."

    def before_prompt(self, client: Any, session: str, new: dict) -> None:
        modes = [m.get("id") for m in (new.get("modes") or {}).get("availableModes") or []]
        if "default" in modes and (new.get("modes") or {}).get("currentModeId") != "default":
            client.request("session/set_mode", {"sessionId": session, "modeId": "default"}, timeout=30)

    def main(self, req: Request) -> Reply:
        call = agent_call("A")
        if not req.called(call):
            task = "write report.txt in the project directory with a shell command."
            return Reply.tool("main:Agent", call, "Agent", self.agent_input("A", "Write report.txt", task=task),
                              **self.reply("MAIN", 1))
        return Reply.text("main:final", "The subagent wrote report.txt.", **self.reply("MAIN", 2))

    def child(self, req: Request, role: str) -> Reply:
        bash = f"toolu_01FANOUTBASH{role}"
        if not req.called(bash):
            return Reply.tool(f"child[{role}]:Bash", bash, "Bash",
                              {"command": "echo fanout > report.txt", "description": "Write report.txt"},
                              **self.reply(role, 1))
        return self.report(req, role, 2, "report.txt written")

    def check(self, result: dict) -> bool:
        return super().check(result) and (self.project / "report.txt").exists()


def log_note(msg: str) -> None:
    import sys

    print(f"[scenario] {msg}", file=sys.stderr, flush=True)


SCENARIOS: dict[str, type[Scenario]] = {
    cls.name: cls for cls in (Scenario, Parallel, Background, Failing, Cancelled, Nested, Permission)
}
