"""Codex scenarios: codex-acp 2.6.0 (`codex`, history fixtures from its rollout files) and
codex-acp 1.13.1 (`codex1`, the series that sends `_meta.codex.*`), both offline against
the Responses mock with capture.py's config.toml (provider `mock`, `wire_api =
"responses"`, `[features] multi_agent` or `multi_agent_v2` from --codex-feature).

The parent spawns (one child, or two in one turn), waits, and answers; each child runs
`cat hello.txt` with the shell tool codex offers and answers. Codex writes one rollout
file per thread under $CODEX_HOME/sessions; --history-out copies that folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import capture
from agents.run import Agent, Scenario, Setup
from agents.scripted import FINAL, PROMPT, TASK, Call, DynamicCall, Script, call, child_prompt, say



def _namespaced_props(body: dict, name: str) -> dict:
    return (capture._tool_schema(body.get("tools") or [], name).get("properties") or {})


def spawn(call_id: str, child: str) -> Call:
    """spawn_agent: v1 `{message}`, v2 `{task_name, message}` (the task name is the child's
    marker name, so the mock knows a v2 child by its task path)."""
    def args(body: dict) -> dict:
        props = _namespaced_props(body, "spawn_agent")
        out: dict[str, Any] = {}
        key = next((k for k in ("message", "prompt", "task") if k in props), "message")
        out[key] = child_prompt(child, TASK)
        if "task_name" in props:
            out["task_name"] = child
        return out
    return Call("spawn_agent", args, call_id)


def wait(call_id: str, spawns_of: tuple[str, ...] | None = None) -> Call:
    """wait_agent on the children of the given spawn calls, default every one so far (v1
    names them; v2 takes a timeout only)."""
    def args(body: dict) -> dict:
        props = _namespaced_props(body, "wait_agent")
        items = body.get("input") or []
        spawns = set(spawns_of) if spawns_of else {
            i.get("call_id") for i in items if i.get("type") == "function_call" and i.get("name") == "spawn_agent"}
        ids = [capture._agent_id_from_output(i.get("output")) for i in items
               if i.get("type") == "function_call_output" and i.get("call_id") in spawns]
        out: dict[str, Any] = {}
        for key in ("targets", "ids", "agent_ids", "agents"):
            if key in props:
                out[key] = [i for i in ids if i]
                break
        if "timeout_ms" in props:
            out["timeout_ms"] = 30000
        return out
    return Call("wait_agent", args, call_id)


def shell_cat(project: Path, call_id: str) -> DynamicCall:
    def name_of(body: dict) -> str:
        tools = capture._response_tool_names(body.get("tools") or [])
        return next((t for t in ("exec_command", "shell_command", "shell") if t in tools), "exec_command")

    def args(body: dict) -> dict:
        name = name_of(body)
        if name == "exec_command":
            return {"cmd": f"cat {capture.FILE_NAME}", "workdir": str(project)}
        if name == "shell":
            return {"command": ["cat", capture.FILE_NAME], "workdir": str(project)}
        return {"command": f"cat {capture.FILE_NAME}", "workdir": str(project)}
    return DynamicCall(name_of, args, call_id)


def child(project: Path, name: str, **last: Any) -> list:
    return [call(shell_cat(project, f"call_{name}_cat_1")), say(capture.CHILD_TEXT, **last)]


def single(project: Path) -> Scenario:
    return Scenario(Script(main=[call(spawn("call_main_spawn_1", "reader_a")), call(wait("call_main_wait_1")),
                                 say(FINAL)],
                           children={"reader_a": child(project, "reader_a")}),
                    PROMPT, "one spawn_agent, then wait_agent")


def parallel(project: Path) -> Scenario:
    # wait_agent returns when the first child is done; so that the run is the same every
    # time, reader_b answers only after the parent asked to wait a second time (for it).
    return Scenario(Script(main=[call(spawn("call_main_spawn_1", "reader_a"), spawn("call_main_spawn_2", "reader_b")),
                                 call(wait("call_main_wait_1", ("call_main_spawn_1",))),
                                 call(wait("call_main_wait_2", ("call_main_spawn_2",)), signal="second_wait"),
                                 say(FINAL)],
                           children={"reader_a": child(project, "reader_a"),
                                     "reader_b": child(project, "reader_b", hold="second_wait")}),
                    PROMPT, "two spawn_agent calls in one model turn, then wait_agent for each")


def setup_with(install: str):
    def setup(installs: dict[str, Path], root: Path, port: int, options: Any) -> Setup:
        argv, shown, env = capture.codex_setup(installs[install], root, port, options.codex_feature)
        return Setup(argv, shown, env, history=Path(env["CODEX_HOME"]) / "sessions")
    return setup


SCENARIOS = {"single": single, "parallel": parallel}
AGENT = Agent("codex", ["codex"], setup_with("codex"), SCENARIOS)
AGENT_V1 = Agent("codex1", ["codex1"], setup_with("codex1"), SCENARIOS)
