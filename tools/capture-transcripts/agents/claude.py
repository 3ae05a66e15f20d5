"""Records the Claude Code ACP agents, offline, against the scripted Anthropic mock.

Two agents (see tools/test-agents/):
- `claude-023`: `@zed-industries/claude-agent-acp` 0.23.1, which bundles Claude Code 2.1.83
  as JavaScript (cli.js); runs on the machine's node.
- `claude-101`: `@agentclientprotocol/claude-agent-acp` 0.101.0 with Claude Code 2.1.318 as
  a native binary; runs on the pinned node 22 (tools/test-agents/node22).

Each scenario (claude_scenarios.py) is one transcript: the mock scripts the main agent's `Agent`
calls (fixed `toolu_01FANOUT…` ids), each subagent's work and every side request.
With `--history-out DIR` Claude Code's own history of the run (CLAUDE_CONFIG_DIR/projects)
is copied there verbatim. With `--wrap "PREFIX…"` the agent runs under that command prefix
(e.g. `fanout proxy --db sqlite://X --`), so a test can drive the same scenario through the
real proxy.

    python3 tools/capture-transcripts/capture.py claude-101 --scenario parallel [--subagents] --out FILE
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import socket
import sys
import tempfile
import threading
from pathlib import Path

import capture
from agents import claude_scenarios as sc
from agents.anthropic_mock import AnthropicMock

AGENTS = {
    # name: (tools/test-agents folder, agentInfo.name, version, command inside the install dir)
    "claude-023": ("claude", "@zed-industries/claude-agent-acp", "0.23.1", "node_modules/.bin/claude-agent-acp"),
    "claude-101": ("claude-acp-101", "@agentclientprotocol/claude-agent-acp", "0.101.0", "bin/claude-agent-acp"),
}


class ProxySink:
    """The agent's HTTP(S) proxy: logs each attempt (CONNECT host:port or the request
    line of a plain-HTTP request) to `log` and refuses it with 403. With it, what the
    agent tries to reach besides the mock is on record; nothing leaves the machine."""

    def __init__(self, log: Path):
        self.log = log
        self.attempts: list[str] = []
        self.lock = threading.Lock()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                line = conn.recv(4096).split(b"\r\n", 1)[0].decode("latin-1")
                conn.sendall(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            except OSError:
                return
        with self.lock:
            self.attempts.append(line)
            with open(self.log, "a", encoding="utf-8") as fh:
                fh.write(f"{capture.now_ts()} {line}\n")

    def close(self) -> None:
        self.sock.close()


def claude_env(root: Path, port: int, proxy_port: int) -> dict[str, str]:
    env = capture.base_env(root)
    proxy = f"http://127.0.0.1:{proxy_port}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        env[name] = proxy
    config = Path(env["HOME"]) / ".claude"
    config.mkdir(parents=True, exist_ok=True)
    env.update({
        "CLAUDE_CONFIG_DIR": str(config),
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
        "ANTHROPIC_API_KEY": capture.API_KEY,
        # No update checks, telemetry, error reports, feedback surveys or other
        # "nonessential" traffic; what is left goes to the proxy sink (ProxySink), refused.
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_BUG_COMMAND": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_ENABLE_TELEMETRY": "0",
        "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
        # Claude Code refuses some modes as root outside a sandbox; this machine runs as root.
        "IS_SANDBOX": "1",
        "CLAUDE_AGENT_LOGS": str(root / "agent-logs"),
    })
    return env


class ClaudeClient(capture.AcpClient):
    """capture's ACP client, plus notifications and a hook on every agent line."""

    def notify(self, method: str, params: dict) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})


def prepare_root(workdir: Path | None, prefix: str) -> Path:
    root = workdir or Path(tempfile.mkdtemp(prefix=prefix))
    marker = root / ".fanout-capture-scratch"
    if workdir and root.exists() and any(root.iterdir()):
        if not marker.exists():
            sys.exit(f"--workdir {root} exists and is not a scratch root of this script; refusing to clear it")
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    marker.write_text("scratch root of tools/capture-transcripts/capture.py; safe to delete\n")
    return root


def copy_history(config_dir: Path, dest: Path) -> list[Path]:
    """Copies CLAUDE_CONFIG_DIR/projects verbatim into dest/projects; returns the files."""
    src = config_dir / "projects"
    target = dest / "projects"
    if target.exists():
        shutil.rmtree(target)
    if not src.exists():
        return []
    shutil.copytree(src, target)
    return sorted(p for p in target.rglob("*") if p.is_file())


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="capture.py claude-023|claude-101", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("agent", choices=sorted(AGENTS))
    ap.add_argument("--scenario", required=True, choices=sorted(sc.SCENARIOS))
    ap.add_argument("--out", required=True, type=Path, help="transcript file to write")
    ap.add_argument("--subagents", action="store_true", help="advertise clientCapabilities.subagents in initialize")
    ap.add_argument("--history-out", type=Path, help="copy Claude Code's projects/ history here")
    ap.add_argument("--requests-out", type=Path,
                    help="write one entry per model request (kind, script step, model, identity headers)")
    ap.add_argument("--wrap", default="", help="command prefix to run the agent under (shell words)")
    ap.add_argument("--workdir", type=Path, help="scratch root (default: a fresh temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch root (logs, mock requests)")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds for the prompt turn")
    args = ap.parse_args(argv)

    folder, agent_name, version, command = AGENTS[args.agent]
    install_dir = capture.install(folder)
    root = prepare_root(args.workdir, f"fanout-capture-{args.agent}-{args.scenario}-")
    project = root / "project"
    project.mkdir()
    (project / capture.FILE_NAME).write_text(capture.FILE_TEXT)
    mock_log = root / "mock-requests"
    mock_log.mkdir()

    scenario = sc.SCENARIOS[args.scenario](project)
    mock = AnthropicMock(mock_log, scenario.classify, scenario.answer)
    scenario.mock = mock
    port = mock.start()
    capture.log(f"mock Anthropic API on 127.0.0.1:{port}; scratch {root}")

    sink = ProxySink(root / "proxy-attempts.log")
    env = claude_env(root, port, sink.port)
    agent_argv = [str(install_dir / command)]
    argv = shlex.split(args.wrap) + agent_argv
    shown = shlex.split(args.wrap) + [Path(command).name] if args.wrap else [Path(command).name]

    args.out.parent.mkdir(parents=True, exist_ok=True)
    header = {"type": "fanout-transcript", "version": 1, "executionId": capture.uuid7(), "taskId": None,
              "agentCommand": shown, "startedAt": capture.now_ts()}
    transcript = capture.Transcript(args.out, header)
    client = ClaudeClient(argv, env, project, transcript, root / "agent-stderr.log", project)
    ok = False
    try:
        init = capture.initialize(client, args.subagents)
        info = init.get("agentInfo") or {}
        capture.log(f"initialize: agent {json.dumps(info)}")
        if info.get("name") != agent_name or info.get("version") != version:
            raise RuntimeError(f"expected {agent_name} {version}, got {info}")
        new = client.request("session/new", {"cwd": str(project), "mcpServers": []}, timeout=60)
        session = new["sessionId"]
        capture.log(f"session {session}")
        scenario.before_prompt(client, session, new)
        canceller = threading.Thread(target=scenario.cancel_when_due, args=(client, session), daemon=True)
        canceller.start()
        result = client.request("session/prompt", {"sessionId": session, "prompt": [
            {"type": "text", "text": scenario.prompt}]}, timeout=args.timeout)
        capture.log(f"prompt finished: {json.dumps(result)}")
        scenario.after_prompt(client, session)
        client.quiesce(idle=3.0, limit=20.0)
        ok = scenario.check(result)
    except Exception as exc:  # noqa: BLE001
        capture.log(f"FAILED: {exc}")
        client.quiesce(idle=1.0, limit=3.0)
    finally:
        code = client.close()
        transcript.close()
        mock.stop()
        sink.close()
        capture.log(f"outside requests refused by the proxy sink: {len(sink.attempts)} "
                    + "; ".join(sorted(set(sink.attempts)))[:500])
        capture.log(f"agent exited {code}; transcript {args.out}")
        capture.log("mock served: " + "; ".join(mock.served))
        requests = json.dumps(sorted(mock.identities, key=lambda r: r["n"]), indent=2) + "\n"
        (root / "requests.json").write_text(requests)
        if args.requests_out:
            args.requests_out.write_text(requests)
        if args.history_out:
            files = copy_history(Path(env["CLAUDE_CONFIG_DIR"]), args.history_out)
            capture.log(f"history: {len(files)} files copied to {args.history_out}")
        stderr_tail = (root / "agent-stderr.log").read_text(errors="replace")[-3000:]
        if not ok and stderr_tail:
            capture.log("agent stderr tail:\n" + stderr_tail)
        if args.keep or not ok:
            capture.log(f"scratch kept at {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 0 if ok else 1
