"""Gemini CLI (`gemini --acp`, @google/gemini-cli) offline against a Gemini API mock.

The model endpoint is GOOGLE_GEMINI_BASE_URL with GEMINI_API_KEY (the mock answers
`models/<m>:streamGenerateContent?alt=sse`, `:generateContent` and `:countTokens`). The
subagent tool is `invoke_agent {agent_name, prompt}`; the default policy allows
`codebase_investigator` and denies `generalist`.
"""

from __future__ import annotations

from pathlib import Path

import capture
from agents.run import CANCEL_SENT, Agent, Scenario, Setup
from agents.scripted import (FINAL, NESTED_TASK, PROMPT, TASK, Call, Script, Step, call, child_prompt, read_hello,
                              say, write_config)

MODEL = "gemini-2.5-flash"
INVESTIGATOR = "codebase_investigator"


def invoke(call_id: str, child: str, agent: str = INVESTIGATOR, task: str = TASK) -> Call:
    return Call("invoke_agent", {"agent_name": agent, "prompt": child_prompt(child, task)}, call_id)


def finish(call_id: str) -> Call:
    """The subagent's end: Gemini CLI subagents report through `complete_task`."""
    def args(body: dict) -> dict:
        from agents.scripted import offered_tools
        props = offered_tools(body).get("complete_task", {})
        out: dict = {}
        for key, spec in props.items():
            kind = spec.get("type") if isinstance(spec, dict) else None
            if kind == "object":
                sub = {k: capture.CHILD_TEXT if (v or {}).get("type") == "string" else []
                       for k, v in (spec.get("properties") or {}).items()}
                out[key] = sub
            elif kind == "array":
                out[key] = []
            elif kind == "boolean":
                out[key] = False
            else:
                out[key] = capture.CHILD_TEXT
        return out
    return Call("complete_task", args, call_id)


def child(project: Path, name: str, **first: object) -> list[Step]:
    return [Step(calls=[read_hello(project, f"gemini_{name.lower()}_read_1")], **first),  # type: ignore[arg-type]
            call(finish(f"gemini_{name.lower()}_done_1")), say(capture.CHILD_TEXT)]


def single(project: Path) -> Scenario:
    return Scenario(Script(main=[call(invoke("gemini_invoke_1", "A")), say(FINAL)],
                           children={"A": child(project, "A")}),
                    PROMPT, "one `invoke_agent` of `codebase_investigator`")


def parallel(project: Path) -> Scenario:
    return Scenario(Script(main=[call(invoke("gemini_invoke_1", "A"), invoke("gemini_invoke_2", "B")), say(FINAL)],
                           children={"A": child(project, "A"), "B": child(project, "B")}),
                    PROMPT, "two `invoke_agent` calls in one model turn")


def failing(project: Path) -> Scenario:
    return Scenario(Script(main=[call(invoke("gemini_invoke_1", "A", agent="generalist")), say(FINAL)],
                           children={"A": child(project, "A")}),
                    PROMPT, "`invoke_agent` of `generalist`, which the default policy denies")


def cancel(project: Path) -> Scenario:
    return Scenario(Script(main=[call(invoke("gemini_invoke_1", "A")), say(FINAL)],
                           children={"A": child(project, "A", signal="child_running", hold=CANCEL_SENT)}),
                    PROMPT, "client `session/cancel` while the child runs", cancel_on="child_running")


def nested(project: Path) -> Scenario:
    # The child is scripted to call invoke_agent; whether it may is the agent's decision
    # (the mock falls back to reading the file when the tool is not offered to the child).
    def child_step(body: dict) -> dict:
        return {"agent_name": INVESTIGATOR, "prompt": child_prompt("B", TASK)}
    return Scenario(Script(main=[call(invoke("gemini_invoke_1", "A", task=NESTED_TASK)), say(FINAL)],
                           children={"A": [call(Call("invoke_agent", child_step, "gemini_invoke_nested_1")),
                                           call(finish("gemini_a_done_1")), say(capture.CHILD_TEXT)],
                                     "B": child(project, "B")}),
                    PROMPT, "a child scripted to call `invoke_agent` again (nested)")


def setup(installs: dict[str, Path], root: Path, port: int, _options: object) -> Setup:
    env = capture.base_env(root)
    write_config(env, ".gemini", "settings.json", {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "model": {"name": MODEL},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True, "enableAutoUpdate": False,
                    "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
    })
    env.update({
        "GEMINI_API_KEY": capture.API_KEY,
        "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{port}",
        "GEMINI_CLI_NO_RELAUNCH": "true",
        "GEMINI_TELEMETRY_ENABLED": "false",
    })
    gemini = installs["gemini"] / "node_modules" / "@google" / "gemini-cli" / "bundle" / "gemini.js"
    return Setup(["node", str(gemini), "--acp"], ["gemini", "--acp"], env)


AGENT = Agent("gemini", ["gemini"], setup, {
    "single": single, "parallel": parallel, "failing": failing, "cancel": cancel, "nested": nested,
}, mock_model=MODEL)
