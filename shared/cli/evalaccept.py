"""``openwop-serverless eval accept RUN --reason TEXT [--task T] [--answer TASK:CALL=FILE] [--drop TASK]``.

Publishes the run's suite's next minor version whose accepted tasks take the run's calls, answers and decisions
(``POST /host/openwop-serverless/eval-suites/{suiteId}:accept``; docs/decisions/0146-accept-without-invention.md).
A call the record lacks gets its answer from a live read at accept time (a ``pure``/``read`` tool), from the
reviewer (``--answer TASK:CALL=FILE``: CALL is the call's 0-based position among the task's calls in the run's
first trial, as the eval report lists them; FILE holds the JSON answer), or its task is dropped (``--drop TASK``);
otherwise the host refuses and nothing is written. stdout: the new evalSuiteRef (``--json``: the host's answer);
stderr: one line per accepted call with where its answer came from, or per unanswered call on a refusal.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

from openwop_client import WopError
from rich.console import Console

from shared.cli.evalhost import EXTENSION, CliError, Host, wire_error


def parse_answer(value: str) -> dict[str, Any]:
    """``TASK:CALL=FILE`` -> ``{taskId, call, response}`` (the file's JSON); a usage error otherwise."""
    target, eq, path = value.partition("=")
    task, colon, call = target.rpartition(":")
    if not (eq and colon and task and path and call.isdigit()):
        raise CliError(f"--answer {value!r}: expected TASK:CALL=FILE (CALL a call's position, 0 first)")
    try:
        response = json.loads(Path(path).read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise CliError(f"--answer {value!r}: {path} is not a readable JSON file") from exc
    return {"taskId": task, "call": int(call), "response": response}


def body_for(run: str, reason: str, tasks: list[str], answers: list[str], drops: list[str]) -> dict[str, Any]:
    if not reason.strip():
        raise CliError("--reason must say why the change is intended")
    body: dict[str, Any] = {"runId": run, "reason": reason}
    if tasks:
        body["taskIds"] = list(tasks)
    if answers:
        body["answers"] = [parse_answer(a) for a in answers]
    if drops:
        body["dropTaskIds"] = list(drops)
    return body


def _refusal(exc: WopError, err: Console) -> CliError:
    """A refusal naming unanswered calls: one line per call, then the usual ``error:`` line."""
    try:
        details = json.loads(exc.raw_text).get("details") or {}
    except (ValueError, AttributeError):
        details = {}
    for call in details.get("unansweredCalls") or []:
        where = call.get("differingPointers")
        differs = (
            "no recorded call of this tool"
            if where is None
            else f"args differ at {', '.join(where)} from the closest recorded call"
            if where
            else "its recorded twin was used by an earlier call"
        )
        task, k = call.get("taskId"), call.get("call")
        err.print(
            f"unanswered: task {task} call {k} {call.get('tool')} ({differs}); "
            f"give --answer {task}:{k}=FILE or --drop {task}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    return wire_error(exc)


def accept(host: Host, run: str, body: dict[str, Any], as_json: bool) -> None:
    err = Console(stderr=True)
    report = host.report(run, whole=False)
    if report is None:
        raise CliError("the host has no eval report: it cannot accept a run")
    path = f"/host/{EXTENSION}/eval-suites/{quote(str(report['suiteId']), safe='')}:accept"
    try:
        out = host.client._request_json("POST", path, body=body)
    except WopError as exc:
        raise _refusal(exc, err) from exc
    for task in out.get("accepted") or []:
        for call in task.get("calls") or []:
            err.print(
                f"accepted: task {task['taskId']} call {call['call']} {call['tool']}: {call['provenance']}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
    for task_id in out.get("droppedTaskIds") or []:
        err.print(f"dropped: task {task_id}", highlight=False, markup=False, soft_wrap=True)
    sys.stdout.write((json.dumps(out) if as_json else str(out["evalSuiteRef"])) + "\n")
