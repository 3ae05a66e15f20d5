#!/usr/bin/env python3
"""One scripted mock model API, standalone, as the upstream of `fanout replay record`.

The snapshot scenarios with third-party agents (scenarios/claude-*, opencode-task,
codex-spawn) are recorded once through the recording proxy against this mock:

    python3 tools/capture-transcripts/mock_upstream.py claude-parallel &   # prints its URL
    fanout snapshot record --upstream http://127.0.0.1:PORT --force scenarios/claude-subagents
    kill %1

Mocks (the same scripts capture.py records the transcript fixtures with):
- `claude-parallel`: Anthropic Messages (agents/claude_scenarios.py `parallel`): the main
  agent calls Agent twice in one message, each child reads hello.txt and reports,
  side calls (title, safety check, suggestion) get their scripted answers;
- `opencode-task`: chat completions (capture.py's MockModel): a title call, the main
  agent's `task` call, the child's `read`, the answers;
- `codex-parallel`: Responses (agents/codex.py `parallel`): two spawn_agent calls in one
  turn, wait_agent for each, each child runs `cat hello.txt`;
- `codex-spawn`: Responses (agents/codex.py `single`): one spawn_agent, wait_agent, the
  child runs `cat hello.txt` (what scenarios/codex-spawn records).

The scripts name files by the agent's project directory; here it is learned from each
request (the working directory the agent states in its prompt), since the recording
run's workspace is made by the harness. Serves until SIGINT or SIGTERM. Python 3.11,
standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import tempfile
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import capture  # noqa: E402
from agents import claude_scenarios, codex  # noqa: E402
from agents.anthropic_mock import AnthropicMock, Request  # noqa: E402
from agents.run import make_handler  # noqa: E402
from agents.scripted import Events, ScriptedModel  # noqa: E402

# How agents state their working directory in a request (JSON text of the body).
CWD_PATTERNS = [
    re.compile(r"Primary working directory: (/[^\s\"\\]+)"),
    re.compile(r"Working directory: (/[^\s\"\\]+)"),
    re.compile(r"<cwd>(/[^<\"\\]+)</cwd>"),
]


class ProjectRef(os.PathLike):
    """The project directory the scripts name files by: a path learned from requests."""

    def __init__(self) -> None:
        self.path = Path("/fanout-mock-project-not-seen-yet")
        self.lock = threading.Lock()

    def learn(self, body: Any) -> None:
        text = json.dumps(body)
        for pattern in CWD_PATTERNS:
            found = pattern.search(text)
            if found:
                with self.lock:
                    self.path = Path(found.group(1))
                return

    def __truediv__(self, other: str) -> Path:
        return self.path / other

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)


def claude_parallel(project: ProjectRef, log_dir: Path) -> ThreadingHTTPServer:
    scenario = claude_scenarios.Parallel(project)  # type: ignore[arg-type]

    def classify(req: Request) -> None:
        project.learn(req.body)
        scenario.classify(req)

    mock = AnthropicMock(log_dir, classify, scenario.answer)
    scenario.mock = mock
    mock.start()
    assert mock.server is not None
    return mock.server


class LearningChat(capture.MockModel):
    def __init__(self, log_dir: Path, project: ProjectRef) -> None:
        super().__init__(log_dir, project)  # type: ignore[arg-type]
        self.ref = project

    def chat(self, body: dict) -> tuple[list[dict], str]:
        self.ref.learn(body)
        return super().chat(body)


class LearningResponses(ScriptedModel):
    def __init__(self, log_dir: Path, project: ProjectRef, scenario: str) -> None:
        events = Events()
        script = codex.SCENARIOS[scenario](project).script  # type: ignore[arg-type]
        super().__init__(log_dir, project, script, events)  # type: ignore[arg-type]
        self.ref = project

    def responses(self, body: dict) -> tuple[list[dict], str]:
        self.ref.learn(body)
        return super().responses(body)


def serve_model(model: capture.MockModel) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(model, capture.MODEL))  # type: ignore[arg-type]
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mock", choices=["claude-parallel", "opencode-task", "codex-parallel", "codex-spawn"])
    ap.add_argument("--log-dir", type=Path, help="keep every request body here (default: a temp dir, removed)")
    args = ap.parse_args()
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="fanout-mock-upstream-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    project = ProjectRef()
    if args.mock == "claude-parallel":
        server = claude_parallel(project, log_dir)
    elif args.mock == "opencode-task":
        server = serve_model(LearningChat(log_dir, project))
    elif args.mock == "codex-spawn":
        server = serve_model(LearningResponses(log_dir, project, "single"))
    else:
        server = serve_model(LearningResponses(log_dir, project, "parallel"))
    port = server.server_address[1]
    print(f"mock upstream {args.mock} listening on http://127.0.0.1:{port}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    server.shutdown()
    if not args.log_dir:
        import shutil

        shutil.rmtree(log_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
