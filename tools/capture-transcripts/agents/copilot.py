"""GitHub Copilot CLI (`copilot --acp`, @github/copilot + its linux-x64 binary) offline.

COPILOT_OFFLINE=true with a bring-your-own provider (COPILOT_PROVIDER_BASE_URL,
COPILOT_PROVIDER_TYPE=openai, COPILOT_PROVIDER_API_KEY) at the chat-completions mock: no
GitHub login. The subagent tool is `task {description, prompt, agent_type, name, mode}`;
`mode:"background"` runs the child in the background.
"""

from __future__ import annotations

from pathlib import Path

import capture
from agents.run import CANCEL_SENT, Agent, Scenario, Setup
from agents.scripted import (FINAL, NESTED_TASK, PROMPT, TASK, Call, Script, Step, call, child_prompt, read_hello,
                              reader, say, write_config)

TYPE = "general-purpose"


def task(call_id: str, child: str, description: str, name: str, mode: str | None = None,
         kind: str = TYPE, what: str = TASK) -> Call:
    args: dict = {"description": description, "prompt": child_prompt(child, what), "agent_type": kind,
                  "name": name}
    if mode:
        args["mode"] = mode
    return Call("task", args, call_id)


def single(project: Path) -> Scenario:
    return Scenario(Script(main=[call(task("call_copilot_task_1", "A", "Read hello.txt", "reader-a")), say(FINAL)],
                           children={"A": reader(project, "A")}),
                    PROMPT, "one `task` launch (default mode)")


def parallel(project: Path) -> Scenario:
    return Scenario(Script(main=[call(task("call_copilot_task_1", "A", "Read hello.txt (A)", "reader-a"),
                                      task("call_copilot_task_2", "B", "Read hello.txt (B)", "reader-b")),
                                 say(FINAL)],
                           children={"A": reader(project, "A"), "B": reader(project, "B")}),
                    PROMPT, "two `task` launches in one model turn")


def background(project: Path) -> Scenario:
    return Scenario(Script(main=[call(task("call_copilot_task_1", "A", "Read hello.txt in the background",
                                           "reader-bg", mode="background")),
                                 say("The subagent is reading hello.txt in the background.", signal="parent_replied"),
                                 say(FINAL)],
                           # Copilot keeps the turn open until its background agents are done, so
                           # the child's answer waits for the parent's reply to the launch only.
                           children={"A": reader(project, "A", hold="parent_replied", signal="background_done")}),
                    PROMPT, "one `task` launch with `mode:\"background\"`", wait_for=["background_done"], quiet=5.0)


def failing(project: Path) -> Scenario:
    err = (400, {"error": {"message": "mock: this child fails", "type": "invalid_request_error", "code": "mock_fail"}})
    return Scenario(Script(main=[call(task("call_copilot_task_1", "A", "A child that fails", "failer")), say(FINAL)],
                           children={"A": [Step(error=err)]}),
                    PROMPT, "a child whose model call fails (HTTP 400)")


def cancel(project: Path) -> Scenario:
    return Scenario(Script(main=[call(task("call_copilot_task_1", "A", "A child that is cancelled", "cancelled")),
                                 say(FINAL)],
                           children={"A": [Step(calls=[read_hello(project, "call_a_read_1")], signal="child_running",
                                                hold=CANCEL_SENT), say(capture.CHILD_TEXT)]}),
                    PROMPT, "client `session/cancel` while the child runs", cancel_on="child_running")


def nested(project: Path) -> Scenario:
    return Scenario(Script(main=[call(task("call_copilot_task_1", "A", "Delegate once more", "delegator",
                                           what=NESTED_TASK)), say(FINAL)],
                           children={"A": [call(task("call_copilot_task_nested_1", "B", "Read hello.txt (nested)",
                                                     "reader-b")), say(capture.CHILD_TEXT)],
                                     "B": reader(project, "B")}),
                    PROMPT, "a child scripted to call `task` again (nested)")


def setup(installs: dict[str, Path], root: Path, port: int, _options: object) -> Setup:
    env = capture.base_env(root)
    home = write_config(env, ".copilot", "config.json",
                        {"trusted_folders": [str(root / "project")], "auto_update": False})
    env.update({
        "COPILOT_HOME": str(home),
        # the binary unpacks its JavaScript once per version; share that outside the run
        "COPILOT_PKG_CACHE_HOME": str(installs["copilot"] / "sea-cache"),
        "COPILOT_OFFLINE": "true",
        "COPILOT_PROVIDER_BASE_URL": f"http://127.0.0.1:{port}/v1",
        "COPILOT_PROVIDER_TYPE": "openai",
        "COPILOT_PROVIDER_API_KEY": capture.API_KEY,
        "COPILOT_MODEL": capture.MODEL,
        "COPILOT_AUTO_UPDATE": "false",
        "COPILOT_OTEL_ENABLED": "false",
        "COPILOT_DISABLE_KEYTAR": "1",
        "COPILOT_DISABLE_DESKTOP_NOTIFICATIONS": "1",
    })
    binary = installs["copilot"] / "node_modules" / "@github" / "copilot-linux-x64" / "copilot"
    return Setup([str(binary), "--acp", "--allow-all-tools"], ["copilot", "--acp", "--allow-all-tools"], env)


AGENT = Agent("copilot", ["copilot"], setup, {
    "single": single, "parallel": parallel, "background": background, "failing": failing,
    "cancel": cancel, "nested": nested,
})
