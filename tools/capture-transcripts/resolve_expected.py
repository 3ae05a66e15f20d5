#!/usr/bin/env python3
"""Resolves the placeholders of a hand-written `<fixture>.expected.json` against a transcript.

The rows in `crates/fanout-capture/tests/fixtures/real/*.expected.json` are written by
hand from the frames (their README says why each value is what it is). Values the mock
scripts (tool-call ids, descriptions, types) are literal; values the agent mints or
measures on each run (session ids, thread ids, durations, token totals) are placeholders,
strings `"$name"` defined in the file's `placeholders` object by a rule that finds them in
the run's own transcript, so the same file checks the committed recording and a fresh live
run of the same scenario. The rules (the fixtures README documents them):

    {"header": KEY}                         the transcript header's KEY
    {"result_of": METHOD, "path": P}        P in the result of the agent's answer to the
                                            first client request METHOD
    {"match": {P: VALUE, …}, "path": P2,    P2 in the first (or "last") agent->client
     "which": "first"|"last"}               message whose every path P equals VALUE

A path is dot-separated keys, a number indexes an array. A placeholder that finds nothing
is an error. Python 3.11, standard library only.

    python3 resolve_expected.py EXPECTED.json [TRANSCRIPT]   # prints the resolved rows
    python3 resolve_expected.py --check DIR                  # every *.expected.json in DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

MISSING = object()


def dig(value: Any, path: str) -> Any:
    for part in path.split(".") if path else []:
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return MISSING
    return value


class Transcript:
    def __init__(self, path: Path):
        lines = path.read_text(encoding="utf-8").splitlines()
        self.header = json.loads(lines[0])
        self.frames: list[tuple[str, Any]] = []
        for line in lines[1:]:
            if not line.strip():
                continue
            rec = json.loads(line)
            try:
                self.frames.append((rec["dir"], json.loads(rec["line"])))
            except ValueError:
                continue

    def resolve(self, name: str, rule: dict) -> Any:
        if "header" in rule:
            found = self.header.get(rule["header"], MISSING)
        elif "result_of" in rule:
            req = next((m for d, m in self.frames if d == "c2a" and isinstance(m, dict)
                        and m.get("method") == rule["result_of"] and "id" in m), None)
            answer = req and next((m for d, m in self.frames if d == "a2c" and isinstance(m, dict)
                                   and m.get("id") == req["id"] and "result" in m), None)
            found = dig(answer["result"], rule.get("path", "")) if answer else MISSING
        elif "match" in rule:
            hits = [m for d, m in self.frames if d == "a2c" and isinstance(m, dict)
                    and all(dig(m, p) == v for p, v in rule["match"].items())]
            hits = [dig(m, rule["path"]) for m in hits]
            hits = [h for h in hits if h is not MISSING]
            found = (hits[-1] if rule.get("which") == "last" else hits[0]) if hits else MISSING
        else:
            raise SystemExit(f"{name}: unknown placeholder rule {rule}")
        if found is MISSING:
            raise SystemExit(f"{name}: rule {json.dumps(rule)} finds nothing")
        return found


def resolved_rows(expected: dict, transcript: Transcript) -> list[dict]:
    values = {name: transcript.resolve(name, rule) for name, rule in (expected.get("placeholders") or {}).items()}

    def sub(v: Any) -> Any:
        if isinstance(v, str) and v.startswith("$"):
            if v not in values:
                raise SystemExit(f"{v} is used but not defined in placeholders")
            return values[v]
        return v

    return [{k: sub(v) for k, v in row.items()} for row in expected["rows"]]


def main(argv: list[str]) -> int:
    if argv[:1] == ["--check"]:
        folder = Path(argv[1])
        for path in sorted(folder.glob("*.expected.json")):
            expected = json.loads(path.read_text(encoding="utf-8"))
            rows = resolved_rows(expected, Transcript(folder / expected["transcript"]))
            print(f"{path.name}: {len(rows)} row(s) resolve")
        return 0
    path = Path(argv[0])
    expected = json.loads(path.read_text(encoding="utf-8"))
    transcript = Path(argv[1]) if len(argv) > 1 else path.parent / expected["transcript"]
    print(json.dumps(resolved_rows(expected, Transcript(transcript)), indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
