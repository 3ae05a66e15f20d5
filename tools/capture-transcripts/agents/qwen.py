"""Qwen Code (`qwen --acp`, @qwen-code/qwen-code) offline against the chat-completions mock.

Qwen Code 0.24 needs node >= 22, so it runs under tools/test-agents/node22. Its model is
the OpenAI-compatible provider from OPENAI_BASE_URL / OPENAI_API_KEY / OPENAI_MODEL; the
subagent tool is `agent {description, prompt, subagent_type, run_in_background}`, and a
top-level subagent runs in the background unless the call says `run_in_background:false`.
"""

from __future__ import annotations

from pathlib import Path

import capture
from agents.run import CANCEL_SENT, TURN_DONE, Agent, Scenario, Setup
from agents.scripted import (FINAL, NESTED_TASK, PROMPT, TASK, Call, Script, Step, call, child_prompt, read_hello,
                              reader, say, write_config)

TYPE = "general-purpose"


def launch(call_id: str, child: str, description: str, background: bool | None, kind: str = TYPE,
           task: str = TASK) -> Call:
    args: dict = {"description": description, "prompt": child_prompt(child, task), "subagent_type": kind}
    if background is not None:
        args["run_in_background"] = background
    return Call("agent", args, call_id)


def single(project: Path) -> Scenario:
    return Scenario(
        Script(main=[call(launch("call_qwen_agent_1", "A", "Read hello.txt", False)), say(FINAL)],
               children={"A": reader(project, "A")}),
        PROMPT, "one foreground launch (`run_in_background:false`)")


def parallel(project: Path) -> Scenario:
    return Scenario(
        Script(main=[call(launch("call_qwen_agent_1", "A", "Read hello.txt (A)", False),
                          launch("call_qwen_agent_2", "B", "Read hello.txt (B)", False)), say(FINAL)],
               children={"A": reader(project, "A"), "B": reader(project, "B")}),
        PROMPT, "two foreground launches in one model turn")


def background(project: Path) -> Scenario:
    # The child's last answer waits for the parent's turn to end, so the completion can only
    # arrive afterwards, as the background-task notification.
    return Scenario(
        Script(main=[call(launch("call_qwen_agent_1", "A", "Read hello.txt in the background", None)),
                     say("The subagent is reading hello.txt in the background."), say(FINAL)],
               children={"A": reader(project, "A", hold=TURN_DONE, signal="background_done")}),
        PROMPT, "one launch with no `run_in_background` (Qwen's default: background)",
        wait_for=["background_done"], quiet=5.0)


def failing(project: Path) -> Scenario:
    # The child's first model call fails with a non-retryable HTTP 400.
    err = (400, {"error": {"message": "mock: this child fails", "type": "invalid_request_error", "code": "mock_fail"}})
    return Scenario(
        Script(main=[call(launch("call_qwen_agent_1", "A", "A child that fails", False)), say(FINAL)],
               children={"A": [Step(error=err)]}),
        PROMPT, "a foreground child whose model call fails (HTTP 400)")


def cancel(project: Path) -> Scenario:
    # The child's model call is held until the client's session/cancel went out.
    return Scenario(
        Script(main=[call(launch("call_qwen_agent_1", "A", "A child that is cancelled", False)), say(FINAL)],
               children={"A": [Step(calls=[read_hello(project, "call_a_read_1")], signal="child_running",
                                    hold=CANCEL_SENT), say(capture.CHILD_TEXT)]}),
        PROMPT, "client `session/cancel` while a foreground child runs", cancel_on="child_running")


def nested(project: Path) -> Scenario:
    return Scenario(
        Script(main=[call(launch("call_qwen_agent_1", "A", "Delegate once more", False,
                                 task=NESTED_TASK)),
                     say(FINAL)],
               children={"A": [call(launch("call_qwen_agent_nested_1", "B", "Read hello.txt (nested)", False)),
                               say(capture.CHILD_TEXT)],
                         "B": reader(project, "B")}),
        PROMPT, "a foreground child that launches its own `agent` (nested)")


def setup(installs: dict[str, Path], root: Path, port: int, _options: object) -> Setup:
    env = capture.base_env(root)
    write_config(env, ".qwen", "settings.json", {
        "security": {"auth": {"selectedType": "openai"}},
        "model": {"name": capture.MODEL},
        "general": {"enableAutoUpdate": False, "disableAutoUpdate": True, "disableUpdateNag": True},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "tools": {"approvalMode": "yolo"},
        # side calls that would otherwise run after every turn (with the full tool list)
        "ui": {"enableFollowupSuggestions": False},
        "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False},
    })
    env.update({
        "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
        "OPENAI_API_KEY": capture.API_KEY,
        "OPENAI_MODEL": capture.MODEL,
        "QWEN_TELEMETRY_ENABLED": "false",
        "QWEN_USAGE_STATISTICS_ENABLED": "false",
        "QWEN_CODE_NO_RELAUNCH": "1",
    })
    node = installs["node22"] / "node_modules" / ".bin" / "node"
    qwen = installs["qwen"] / "node_modules" / "@qwen-code" / "qwen-code" / "cli-entry.js"
    return Setup([str(node), str(qwen), "--acp"], ["qwen", "--acp"], env)


AGENT = Agent("qwen", ["node22", "qwen"], setup, {
    "single": single, "parallel": parallel, "background": background, "failing": failing,
    "cancel": cancel, "nested": nested,
})
