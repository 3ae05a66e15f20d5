"""Scenario recordings of further agents (see run.py); `AGENTS` maps capture.py's agent name
to its declaration. Imported by capture.py only when one of these agents is asked for."""

from __future__ import annotations

from agents import codex, copilot, gemini, qwen
from agents.run import Agent

AGENTS: dict[str, Agent] = {a.name: a for a in (qwen.AGENT, gemini.AGENT, copilot.AGENT, codex.AGENT, codex.AGENT_V1)}


def run_cli(args: object) -> int:
    """capture.py's entry for these agents: `agent`, `--scenario`, `--out`, `--wrap`, …"""
    from agents import run

    agent = AGENTS[getattr(args, "agent")]
    scenario = getattr(args, "scenario") or "single"
    if scenario not in agent.scenarios:
        raise SystemExit(f"{agent.name}: no scenario {scenario!r} (have {', '.join(agent.scenarios)})")
    return run.run(agent, scenario, args)
