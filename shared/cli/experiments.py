"""Named experiments for ``openwop-serverless eval`` (HTTP only): a run's name, ``eval list``, named baselines.

- ``eval run --name NAME`` sends the name as ``configurable.extensions["openwop-serverless"].name``; the host stores
  it on the run and lists and filters by it (``GET /host/openwop-serverless/eval-runs``).
- ``eval list [--suite S] [--agent A] [--name N]``: run id, suite@version, agent@version, name, score, verdict,
  started; newest first.
- ``--baseline stable``: the eval run that admitted the agent's active ``stable`` deployment (its ``evalRunId``,
  ``GET /agents/{agentId}/deployments``). ``--baseline last`` and the checks every named baseline passes:
  ``shared/cli/evalbaseline.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol
from urllib.parse import quote, urlencode

from rich.console import Console
from rich.table import Table

EXTENSION = "openwop-serverless"
EVAL_RUNS = f"/host/{EXTENSION}/eval-runs"
NAMED_BASELINES = ("stable", "last")
MAX_PAGES = 100  # listing pages read at most to find a baseline (100 runs each)


class RawHost(Protocol):
    def raw(self, path: str) -> dict[str, Any]: ...


class ExperimentError(Exception):
    """A baseline that names no run: one ``error:`` line, exit 3."""


def with_name(req: Any, name: str | None) -> Any:
    """The ``POST /runs`` body with the experiment name in the host's extension section (beside ``agentVersion``)."""
    if name is None:
        return req
    configurable = dict(req.configurable or {"version": 1})
    extensions = dict(configurable.get("extensions") or {})
    extensions[EXTENSION] = {**(extensions.get(EXTENSION) or {}), "name": name}
    configurable["extensions"] = extensions
    req.configurable = configurable
    return req


def eval_runs(
    host: RawHost,
    *,
    suite: str | None = None,
    agent: str | None = None,
    name: str | None = None,
    status: str | None = None,
    limit: int = 100,
) -> Iterator[dict[str, Any]]:
    """The tenant's eval runs, newest first, page by page (at most ``MAX_PAGES``)."""
    query = {k: v for k, v in (("suite", suite), ("agent", agent), ("name", name), ("status", status)) if v}
    query["limit"] = str(limit)
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = host.raw(f"{EVAL_RUNS}?{urlencode({**query, **({'cursor': cursor} if cursor else {})})}")
        yield from page.get("evalRuns") or []
        cursor = page.get("nextCursor")
        if not cursor:
            return


def suite_id(ref: str) -> str:
    """The suiteId of an ``evalSuiteRef`` written ``suiteId`` or ``suiteId@version``."""
    return ref.partition("@")[0]


def stable_baseline(host: RawHost, agent_id: str) -> str:
    doc = host.raw(f"/agents/{quote(agent_id, safe='')}/deployments")
    for dep in doc.get("deployments") or []:
        if dep.get("state") == "active" and "stable" in (dep.get("channels") or []) and dep.get("evalRunId"):
            return str(dep["evalRunId"])
    raise ExperimentError(f"agent {agent_id} has no active stable deployment admitted by an eval run")


def _at(row: dict[str, Any], what: str) -> str:
    ident, version = row.get(f"{what}Id"), row.get(f"{what}Version")
    return f"{ident}@{version}" if version else str(ident)


def list_table(rows: list[dict[str, Any]], out: Console) -> None:
    t = Table(title="eval runs", title_justify="left")
    for col in ("run", "suite", "agent", "name", "score", "verdict", "started"):
        t.add_column(col, justify="right" if col == "score" else "left")  # type: ignore[arg-type]
    for r in rows:
        score = r.get("aggregateScore")
        t.add_row(
            r["runId"],
            _at(r, "suite"),
            _at(r, "agent"),
            r.get("name") or "-",
            "-" if score is None else f"{float(score):.2f}",
            r.get("verdict") or r.get("status") or "-",
            r.get("startedAt") or r.get("createdAt") or "-",
        )
    out.print(t)
