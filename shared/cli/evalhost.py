"""The eval CLI's conversation with a host over HTTP: the typed ``openwop-client`` where its models carry what the
CLI reads, raw JSON through the same client where they drop fields (the eval report, the summary's verdict), and
waiting for a run to end."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

from openwop_client import OpenwopClient, WopError
from openwop_client.wire_id import project_id
from rich.console import Console

TERMINAL = ("completed", "failed", "cancelled")
EXTENSION = "openwop-serverless"


class CliError(Exception):
    """A usage or connection problem: one ``error:`` line, exit 3."""


class Host:
    """The typed client for what its models carry; raw JSON (same client, same transport) where they drop fields."""

    def __init__(self, endpoint: str | None, api_key: str | None) -> None:
        if not endpoint:
            raise CliError("no host: pass --endpoint or set OPENWOP_BASE_URL")
        if not api_key:
            raise CliError("no API key: pass --api-key or set OPENWOP_API_KEY")
        self.client = OpenwopClient(endpoint.rstrip("/"), api_key)
        self._marks: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}

    def raw(self, path: str) -> dict[str, Any]:
        return self.client._request_json("GET", path)

    def report(self, run_id: str, *, whole: bool = True) -> dict[str, Any] | None:
        """The eval report, every page's tasks joined (``whole``) or only its header and first task; None on a
        host without it (404 for an eval run the summary knows)."""
        path = f"/host/{EXTENSION}/runs/{project_id(run_id)}/eval-report"
        try:
            rep = self.raw(path + ("?limit=1000" if whole else "?limit=1"))
            cursor = rep.pop("nextCursor", None) if whole else None
            # Each page holds at least one task, so a report of N tasks has at most N pages.
            for _ in range(int(rep.get("taskCount") or 0)):
                if not cursor:
                    break
                page = self.raw(f"{path}?limit=1000&cursor={quote(str(cursor), safe='')}")
                rep["tasks"].extend(page["tasks"])
                cursor = page.get("nextCursor")
            return rep
        except WopError as err:
            if err.status == 404 and err.envelope is not None and "not an eval run" not in err.envelope.message:
                return None
            raise

    def summary(self, run_id: str) -> dict[str, Any]:
        return self.raw(f"/runs/{project_id(run_id)}/eval-summary")

    def suite_marks(self, suite_id: Any, version: Any) -> dict[str, dict[str, Any]]:
        """Each task's host extension member of a suite version (``label``, ``knownFailure``), by taskId; empty
        when the host does not serve the version (a conformance fixture, a plain OpenWOP host)."""
        if not suite_id or not version:
            return {}
        key = (str(suite_id), str(version))
        if key not in self._marks:
            path = f"/host/{EXTENSION}/eval-suites/{quote(key[0], safe='')}/versions/{quote(key[1], safe='')}"
            try:
                doc = self.raw(path)
            except WopError as err:
                if err.status not in (400, 404):
                    raise
                doc = {}
            self._marks[key] = {
                str(t["taskId"]): (t.get("extensions") or {}).get(EXTENSION) or {}
                for t in doc.get("tasks") or []
                if isinstance(t, dict) and "taskId" in t
            }
        return self._marks[key]


def wire_error(err: WopError) -> CliError:
    if err.status == 0:
        return CliError(f"cannot reach the host: {err.raw_text}")
    if err.envelope is not None:
        return CliError(f"the host answered {err.status} {err.envelope.error}: {err.envelope.message}")
    return CliError(f"the host answered {err.status}")


def _progress(host: Host, run_id: str) -> dict[str, Any]:
    """The eval run's progress as its report's 409 (not ready yet) tells it; empty when the report is ready."""
    try:
        host.report(run_id, whole=False)
    except WopError as e:
        if e.status == 409 and e.envelope is not None and isinstance(e.envelope.details, dict):
            return e.envelope.details.get("progress") or {}
        if e.status != 409:
            raise
    return {}


class _ProgressView:
    """Where ``wait`` shows progress: a bar on a terminal, a line per change otherwise, nothing unless ``show``."""

    def __init__(self, run_id: str, err: Console, show: bool) -> None:
        self.run_id, self.err, self.show = run_id, err, show
        self.bar: Any = None
        self.last: tuple[Any, ...] | None = None
        if show and err.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self.bar = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=err, transient=True
            )
            self.bar.start()
            self.tasks_bar = self.bar.add_task("tasks", total=None)
            self.trials_bar = self.bar.add_task("trials", total=None)

    def update(self, status: str, prog: dict[str, Any]) -> None:
        tasks, trials = prog.get("tasks") or {}, prog.get("trials") or {}
        if self.bar is not None:
            self.bar.update(self.tasks_bar, completed=tasks.get("done", 0), total=tasks.get("total"))
            self.bar.update(self.trials_bar, completed=trials.get("done", 0), total=trials.get("total"))
            return
        now = (status, tasks.get("done"), tasks.get("total"), trials.get("done"), trials.get("total"))
        if self.show and now != self.last:
            line = f"{self.run_id}: {status}"
            if tasks:
                line += f", tasks {tasks['done']}/{tasks['total']}, trials {trials.get('done')}/{trials.get('total')}"
            self.err.print(line, highlight=False)
            self.last = now

    def finish(self, status: str) -> None:
        if self.show and self.bar is None:
            self.err.print(f"{self.run_id}: {status}", highlight=False)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def wait(host: Host, run_id: str, timeout: float, err: Console, *, show: bool) -> str:
    """Poll until terminal; progress (tasks and trials done / total) as a bar on a terminal, lines otherwise."""
    deadline = time.monotonic() + timeout
    view = _ProgressView(run_id, err, show)
    try:
        while True:
            status = host.client.runs_get(run_id).status
            if status in TERMINAL:
                view.finish(status)
                return status
            view.update(status, _progress(host, run_id))
            if time.monotonic() > deadline:
                raise CliError(f"{run_id} is still {status} after {timeout:g} s")
            time.sleep(0.5)
    finally:
        view.stop()


def waiting_trials(host: Host, run_id: str) -> list[dict[str, Any]]:
    """The eval run's trials waiting for their driver (an external agent's, decision 0143), every page."""
    path = f"/host/{EXTENSION}/runs/{project_id(run_id)}/trials?status=waiting"
    out: list[dict[str, Any]] = []
    page = host.raw(path)
    for _ in range(10_000):
        out += list(page.get("trials") or [])
        cursor = page.get("nextCursor")
        if not cursor:
            break
        page = host.raw(f"{path}&cursor={quote(str(cursor), safe='')}")
    return out


def drive(host: Host, run_id: str, cmd: str, concurrency: int, timeout: float, err: Console) -> int:
    """``eval run --exec CMD``: run CMD once per waiting trial until the eval run ends; the trials run."""
    from shared.cli.gatewayexec import drive_trials

    def done() -> bool:
        return host.client.runs_get(run_id).status in TERMINAL

    return drive_trials(
        lambda: waiting_trials(host, run_id),
        done,
        cmd,
        concurrency=concurrency,
        timeout_s=timeout,
        progress=lambda line: err.print(f"{run_id}: {line}", highlight=False),
    )
