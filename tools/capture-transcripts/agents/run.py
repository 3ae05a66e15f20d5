"""Runs one scenario of one agent: the scripted mock, the agent, the ACP client, the transcript.

capture.py keeps the single-delegation recordings of opencode and codex; the agents here
(Qwen Code, Gemini CLI, Copilot CLI, codex scenarios, codex-acp 1.x) each declare an
`Agent` with their set-up and a `Scenario` per name, and this module drives them the same
way: initialize, session/new in a fresh project holding hello.txt, one session/prompt,
an optional `session/cancel` once the mock saw the child start, then wait for background
children to end and for the wire to go quiet.

`wrap` puts a command prefix before the agent's argv (e.g. `fanout proxy --db … --`), so a
test runs the same scenario live behind the proxy; the transcript written here is then
the client's view of the same traffic.
"""

from __future__ import annotations

import json
import shlex
import shutil
import socket
import threading
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import capture
from agents.scripted import Events, Script, ScriptedError, ScriptedModel, gemini_events, gemini_json_answer

TURN_DONE = "turn_done"  # set when the prompt's response arrived
CANCEL_SENT = "cancel_sent"  # set once session/cancel went out


@dataclass
class Scenario:
    script: Script
    prompt: str
    what: str  # one line for the README
    cancel_on: str | None = None  # send session/cancel once the mock set this event
    wait_for: list[str] = field(default_factory=list)  # events to await after the turn
    wait_timeout: float = 90.0
    quiet: float = 3.0  # seconds of silence that end the recording


@dataclass
class Setup:
    argv: list[str]
    shown: list[str]  # agentCommand in the transcript header (no scratch paths)
    env: dict[str, str]
    history: Path | None = None  # the agent's own history folder (codex sessions)


@dataclass
class Agent:
    name: str
    installs: list[str]  # tools/test-agents folders, in order
    setup: Callable[[dict[str, Path], Path, int, Any], Setup]  # (install dirs, scratch root, port, options)
    scenarios: dict[str, Callable[[Path], Scenario]]  # scenario name -> (project -> Scenario)
    mock_model: str = capture.MODEL


def make_handler(model: ScriptedModel, model_name: str) -> type:
    base = capture.make_handler(model)

    class Handler(base):  # type: ignore[misc, valid-type]
        def do_POST(self) -> None:
            path = self.path.split("?")[0]
            if any(k in path for k in (":streamGenerateContent", ":generateContent", ":countTokens")):
                body = self._body() or {}
                n = model.record("POST", self.path, dict(self.headers), body)
                self._gemini(path, body, n)
                return
            super().do_POST()

        def _chat(self, body: dict, n: int) -> None:
            try:
                super()._chat(body, n)
            except ScriptedError as err:
                self._json(err.status, err.body)

        def _responses(self, body: dict, n: int) -> None:
            try:
                super()._responses(body, n)
            except ScriptedError as err:
                self._json(err.status, err.body)

        def _gemini(self, path: str, body: dict, n: int) -> None:
            if path.endswith(":countTokens"):
                self._json(200, {"totalTokens": 1000 + n})
                return
            cfg = body.get("generationConfig") or {}
            if cfg.get("responseMimeType") == "application/json" or cfg.get("responseJsonSchema"):
                text = gemini_json_answer(body)
                model.note(f"#{n} gemini JSON side call -> {text}")
                self._gemini_reply(path, [{"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                                                           "finishReason": "STOP", "index": 0}],
                                           "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10,
                                                             "totalTokenCount": 110},
                                           "modelVersion": model_name, "responseId": f"gemini-mock-{n}"}])
                return
            step, role = model.gemini(body)
            if step.error:
                self._json(*step.error)
                return
            self._gemini_reply(path, gemini_events(step, model_name, n, role))

        def _gemini_reply(self, path: str, chunks: list[dict]) -> None:
            if path.endswith(":streamGenerateContent"):
                self._sse([(None, c) for c in chunks])
                return
            merged = dict(chunks[-1])
            parts = [p for c in chunks for cand in c.get("candidates") or [] for p in cand["content"]["parts"]]
            merged["candidates"] = [dict(merged["candidates"][0], content={"role": "model", "parts": parts})]
            self._json(200, merged)

    return Handler


def start_trap(log_path: Path) -> int:
    """A local port standing in for base_env's closed proxy port: it logs the first line of
    every connection (the URL or CONNECT host an agent tried to reach past the mock), then
    closes it, so the request fails as it would on the closed port but is seen."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    lock = threading.Lock()

    def serve() -> None:
        while True:
            conn, _ = sock.accept()
            with conn:
                conn.settimeout(2.0)
                try:
                    first = conn.recv(4096).split(b"\r\n", 1)[0].decode("latin-1")
                except OSError:
                    first = "<no request line>"
                with lock, open(log_path, "a", encoding="utf-8") as fh:
                    fh.write(f"{capture.now_ts()} {first}\n")

    threading.Thread(target=serve, daemon=True).start()
    return sock.getsockname()[1]


def run(agent: Agent, scenario_name: str, args: Any) -> int:
    """Records one scenario; `args` are capture.py's options (out, workdir, keep, wrap, …)."""
    out, workdir, keep, wrap = args.out, args.workdir, args.keep, args.wrap
    timeout, subagents, history_out = args.timeout, args.subagents, args.history_out
    installs = {name: capture.install(name) for name in agent.installs}
    root, project, mock_log = capture.scratch_root(workdir, agent.name)

    scenario = agent.scenarios[scenario_name](project)
    events = Events()
    model = ScriptedModel(mock_log, project, scenario.script, events)
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(model, agent.mock_model))
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    capture.log(f"mock model on 127.0.0.1:{port}; scratch {root}; scenario {scenario_name}")

    setup = agent.setup(installs, root, port, args)
    trap = start_trap(root / "proxy-requests.log")
    for key in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        if key in setup.env:
            setup.env[key] = f"http://127.0.0.1:{trap}"
    argv = (shlex.split(wrap) if wrap else []) + setup.argv
    out.parent.mkdir(parents=True, exist_ok=True)
    header = {"type": "fanout-transcript", "version": 1, "executionId": capture.uuid7(), "taskId": None,
              "agentCommand": setup.shown, "startedAt": capture.now_ts()}
    transcript = capture.Transcript(out, header)
    client = capture.AcpClient(argv, setup.env, project, transcript, root / "agent-stderr.log", project)
    ok = False
    try:
        init = capture.initialize(client, subagents)
        capture.log(f"initialize: agent {json.dumps(init.get('agentInfo'))}, "
                    f"auth {[m.get('id') for m in init.get('authMethods') or []]}")
        new = client.request("session/new", {"cwd": str(project), "mcpServers": []}, timeout=90)
        session = new["sessionId"]
        capture.log(f"session {session}")
        if scenario.cancel_on:
            def cancel() -> None:
                if events.wait(scenario.cancel_on, timeout):
                    client.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}})
                    events.set(CANCEL_SENT)
                    capture.log("sent session/cancel")
            threading.Thread(target=cancel, daemon=True).start()
        result = client.request("session/prompt", {"sessionId": session,
                                                   "prompt": [{"type": "text", "text": scenario.prompt}]},
                                timeout=timeout)
        events.set(TURN_DONE)
        capture.log(f"prompt finished: {json.dumps(result)}")
        for name in scenario.wait_for:
            if not events.wait(name, scenario.wait_timeout):
                raise TimeoutError(f"event {name} never came")
        client.quiesce(idle=scenario.quiet, limit=scenario.wait_timeout)
        ok = True
    except Exception as exc:  # noqa: BLE001 - reported, then the scratch root is kept
        capture.log(f"FAILED: {exc}")
        client.quiesce(idle=1.0, limit=3.0)
    finally:
        code = client.close()
        transcript.close()
        server.shutdown()
        capture.log(f"agent exited {code}; transcript {out}")
        capture.log("model calls: " + "; ".join(model.calls))
        if history_out and setup.history:
            if history_out.exists():
                shutil.rmtree(history_out)
            shutil.copytree(setup.history, history_out)
            capture.log(f"history {setup.history} copied to {history_out}")
        stderr_tail = (root / "agent-stderr.log").read_text(errors="replace")[-3000:]
        if not ok and stderr_tail:
            capture.log("agent stderr tail:\n" + stderr_tail)
        if keep or not ok:
            capture.log(f"scratch kept at {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 0 if ok else 1
