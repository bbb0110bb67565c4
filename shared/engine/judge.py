"""Rubric grading (RFC 0244): a judge model, reached through the same model port as agents, decides which of a
task's criteria the agent's answer meets; the score is the weighted share of met criteria.

The judge call is one model call of its own invocation (``judge:<taskId>:<trial>``) in the eval run's model-call
log, so a retried trial never asks the judge twice and a replay re-reads the recorded judgement instead of judging
again (a changed answer is a request the log never saw: the trial is unverifiable, never re-judged live).
"""

from __future__ import annotations

import json
from typing import Any

from shared.engine.model_agent import ModelCallFailed, ModelSession
from shared.engine.scorers import Scored, find
from shared.ports import ModelMessage, ModelRequest

SYSTEM = (
    "You are an evaluation judge. You receive a task given to an AI agent, the agent's final answer and a list of "
    "criteria. Decide for each criterion, independently, whether the answer meets it. Reply with JSON only: "
    '{"met": [true|false, ...]} with exactly one boolean per criterion, in order.'
)


class JudgementError(Exception):
    """The judge's answer cannot be read as one boolean per criterion (``code`` for the trial's error)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def request(
    judge: dict[str, Any], task_input: Any, answer: Any, criteria: list[str], openai_base_url: str | None
) -> ModelRequest:
    user = json.dumps(
        {"task": task_input, "answer": answer, "criteria": criteria},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return ModelRequest(
        provider=str(judge["provider"]),
        model=str(judge["model"]),
        system=SYSTEM,
        messages=(ModelMessage("user", user),),
        temperature=judge.get("temperature", 0),
        max_tokens=judge.get("maxTokens"),
        base_url=judge.get("baseUrl") or openai_base_url,
        mock=judge.get("mockProvider"),
    )


def parse(text: str | None, n: int) -> list[bool]:
    """``{"met": [...]}`` (or a bare array), tolerating a fenced code block around the JSON."""
    body = (text or "").strip()
    if body.startswith("```"):
        body = body.strip("`").split("\n", 1)[-1].rsplit("```", 1)[0]
    try:
        value = json.loads(body)
    except ValueError as exc:
        raise JudgementError("openwop-serverless.judge_unreadable", "the judge's answer is not JSON") from exc
    met = value.get("met") if isinstance(value, dict) else value
    if not isinstance(met, list) or len(met) != n or not all(isinstance(m, bool) for m in met):
        raise JudgementError(
            "openwop-serverless.judge_unreadable", "the judge did not answer one boolean per criterion"
        )
    return met


def judge(
    models: ModelSession,
    judge_binding: dict[str, Any],
    invocation_id: str,
    order: str,
    task_input: Any,
    answer: Any,
    rubric: list[dict[str, Any]],
) -> tuple[list[bool], dict[str, Any]]:
    """(which criteria are met, the judge call's log entry). Raises ``ModelCallFailed`` / ``JudgementError``."""
    criteria = [str(r.get("criterion", "")) for r in rubric]
    req = request(judge_binding, task_input, answer, criteria, models.ports.settings.openai_base_url or None)
    entry = models.serve(
        invocation_id, order, 0, req, judge_binding.get("credentialRef"), price=judge_binding.get("price")
    )
    return parse(entry.get("text"), len(criteria)), entry


def criteria(expected: dict[str, Any]) -> list[dict[str, Any]]:
    """What the judge is asked about a task: a rubric task's criteria, or one criterion per ``judge`` match of a
    golden task (top level or inside ``all-of``), in document order; none for anything else."""
    if expected.get("kind") == "rubric":
        return list(expected.get("rubric") or [])
    if expected.get("kind") == "golden":
        return [{"criterion": str(m.get("value")), "weight": 1} for _, m in find(expected.get("match") or {}, "judge")]
    return []


def scored(expected: dict[str, Any], met: list[bool]) -> dict[str, Scored]:
    """A golden task's ``judge`` matches as scorer results, by their pointer (one judgement per criterion)."""
    return {
        at: Scored(
            "judge",
            1.0 if ok else 0.0,
            ok,
            "the judge found the criterion met" if ok else "the judge found the criterion not met",
        )
        for (at, _), ok in zip(find(expected.get("match") or {}, "judge"), met, strict=True)
    }


__all__ = ["JudgementError", "ModelCallFailed", "criteria", "judge", "parse", "scored"]
