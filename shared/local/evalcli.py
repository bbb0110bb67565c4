"""``openwop-serverless eval``: start eval runs on any OpenWOP host over HTTP and gate CI on their verdict.

Talks HTTP only (through ``openwop-client``): ``--endpoint``/``--api-key`` or ``OPENWOP_BASE_URL``/
``OPENWOP_API_KEY``. The per-task table comes from the host's eval report
(``GET /host/openwop-serverless/runs/{runId}/eval-report``); a plain OpenWOP host without it still gets the
summary's scores and paired verdict (read as raw JSON: ``openwop-client`` 2.7.0's ``EvalRegression`` drops
``verdict`` and ``pairedTaskCount``).

Under the table, each regressed or unverifiable task gets one line saying what changed (its first trajectory
divergence from the baseline, else expected vs actual); ``--markdown FILE`` writes the same as a pull-request
comment, appended to ``$GITHUB_STEP_SUMMARY`` when set (``shared/local/evalmarkdown.py``).

``eval accept RUN [--task T ...]`` publishes the run's suite's next minor version that takes the run's recorded
calls, answers and decisions as the accepted tasks' fixtures and expectations (an intended change).

Exit codes (every command): 0 no regression (accept: published), 1 regressed, 2 unverifiable (a fixture miss, a failed or cancelled
run, no task paired with the baseline), 3 usage or connection error. A task whose baseline trials disagreed is
``flaky``: listed apart, it never makes exit 1 on its own (the host counts its fall only when the bootstrap
interval of ``scoreDelta`` lies wholly below 0; a client-side comparison never counts it).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer
from openwop_client import OpenwopClient, WopError
from openwop_client.types import CreateRunRequest
from openwop_client.wire_id import project_id
from rich.console import Console
from rich.table import Table

from shared.local import evalmarkdown, experiments
from shared.local.evaljunit import junit, num
from shared.local.suitecli import SuiteCliError, suite_app

OK, REGRESSED, UNVERIFIABLE, USAGE = 0, 1, 2, 3
EXIT_CODES = """Exit codes: 0 no regression; 1 regressed; 2 unverifiable (a fixture miss, a failed or cancelled run,
no task paired with the baseline); 3 usage or connection error. A flaky task (its baseline trials disagreed) never
makes exit 1 on its own."""
TERMINAL = ("completed", "failed", "cancelled")
EPSILON = 1e-9
EXTENSION = "openwop-serverless"

app = typer.Typer(
    name="eval",
    help="Eval runs on any OpenWOP host over HTTP: start one, wait for it, compare it with its baseline.\n\n"
    + EXIT_CODES,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)

Endpoint = Annotated[
    str | None,
    typer.Option("--endpoint", metavar="URL", envvar="OPENWOP_BASE_URL", show_envvar=True, help="the host's base URL"),
]
ApiKey = Annotated[
    str | None,
    typer.Option("--api-key", metavar="KEY", envvar="OPENWOP_API_KEY", show_envvar=True, help="a tenant API key"),
]
JsonOut = Annotated[bool, typer.Option("--json", help="print one JSON document instead of the table")]
Junit = Annotated[
    Path | None,
    typer.Option("--junit", metavar="FILE", help="write a JUnit XML file (one testcase per task)", dir_okay=False),
]
Markdown = Annotated[
    Path | None,
    typer.Option(
        "--markdown",
        metavar="FILE",
        dir_okay=False,
        help="write a pull-request comment (markdown); it is also appended to $GITHUB_STEP_SUMMARY when that is set",
    ),
]
ViewerUrl = Annotated[
    str | None,
    typer.Option(
        "--viewer-url",
        metavar="URL",
        help="the viewer's URL (.../host/openwop-serverless/ui): the markdown links each run to it",
    ),
]


app.add_typer(suite_app)  # ``eval suite from-runs``


class CliError(Exception):
    """A usage or connection problem: one ``error:`` line, exit 3."""


class Verdict(Exception):  # noqa: N818 - not an error: how a command hands its exit code to main()
    """A command's outcome: its exit code (raised so it passes through the CLI framework untouched)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


# --------------------------------------------------------------------------- wire


class Host:
    """The typed client for what its models carry; raw JSON (same client, same transport) where they drop fields."""

    def __init__(self, endpoint: str | None, api_key: str | None) -> None:
        if not endpoint:
            raise CliError("no host: pass --endpoint or set OPENWOP_BASE_URL")
        if not api_key:
            raise CliError("no API key: pass --api-key or set OPENWOP_API_KEY")
        self.client = OpenwopClient(endpoint.rstrip("/"), api_key)

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


def wire_error(err: WopError) -> CliError:
    if err.status == 0:
        return CliError(f"cannot reach the host: {err.raw_text}")
    if err.envelope is not None:
        return CliError(f"the host answered {err.status} {err.envelope.error}: {err.envelope.message}")
    return CliError(f"the host answered {err.status}")


# --------------------------------------------------------------------------- the request


def parse_agent(value: str) -> tuple[str, str | None]:
    """``ID[@VERSION]``."""
    agent, sep, version = value.partition("@")
    if not agent or (sep and not version):
        raise CliError(f"--agent {value!r} is not ID or ID@VERSION")
    return agent, (version or None)


def parse_fixtures(values: list[str]) -> dict[str, str] | None:
    out: dict[str, str] = {}
    for v in values:
        task, sep, run = v.partition("=")
        if not sep or not task or not run:
            raise CliError(f"--fixtures-from {v!r} is not TASK=RUN")
        out[task] = run
    return out or None


def parse_modes(values: list[str], baseline: str | None) -> list[str] | None:
    modes = [m.strip() for v in values for m in v.split(",") if m.strip()]
    if not modes and baseline:
        return ["golden", "regression"]  # a baseline needs the regression mode; golden is what this host grades
    return modes or None


def resolve_version(host: Host, agent_id: str, err: Console) -> str | None:
    """The version ``eval run`` pins when none is named, said on stderr: what ``stable`` serves once the agent has
    a deployment, else its newest registered version, as the host resolves an unpinned reference (None for an agent
    with no registered versions: a built-in or scripted one)."""
    from shared.services.deployments import serving

    wire = quote(agent_id, safe="")
    try:
        listed = host.raw(f"/agents/{wire}/deployments").get("deployments") or []
    except WopError as exc:
        if exc.status != 404:
            raise
        err.print(
            f"agent {agent_id}: no registered versions (a built-in agent); no version pinned",
            highlight=False,
            soft_wrap=True,
        )
        return None
    records = {str(d["version"]): {"state": d.get("state"), "channels": d.get("channels") or []} for d in listed}
    if all(r["state"] == "draft" for r in records.values()):
        version, why = str(host.raw(f"/agents/{wire}")["version"]), "its newest registered version: nothing deployed"
    else:
        got = serving(records, "stable")
        if got is None:
            raise CliError(f"agent {agent_id} has deployments and none serves stable: pass --agent-version")
        version, why = got, "what its stable channel serves"
    err.print(
        f"agent {agent_id}: no version named; running {version} ({why}); pin one with --agent-version",
        highlight=False,
        soft_wrap=True,
    )
    return version


def build_request(
    suite: str, agent: str, baseline: str | None, fixtures_from: list[str], modes: list[str], version: str | None = None
) -> CreateRunRequest:
    """The ``POST /runs`` body of ``eval run``: ``@VERSION`` (or ``version``) pins the agent version through the
    host's ``configurable.extensions`` section (sent only when a version is named)."""
    agent_id, named = parse_agent(agent)
    if version and named and version != named:
        raise CliError(f"--agent {agent!r} and --agent-version {version!r} name two versions")
    version = version or named
    kw: dict[str, Any] = {"mode": "eval", "evalSuiteRef": suite, "agentId": agent_id}
    if baseline:
        kw["baselineRunId"] = baseline
    evals_modes = parse_modes(modes, baseline)
    if evals_modes:
        kw["evalModes"] = evals_modes
    fixtures = parse_fixtures(fixtures_from)
    if fixtures:
        kw["fixtureRuns"] = fixtures
    if version:
        kw["configurable"] = {"version": 1, "extensions": {EXTENSION: {"agentVersion": version}}}
    return CreateRunRequest(**kw)


# --------------------------------------------------------------------------- waiting


def wait(host: Host, run_id: str, timeout: float, err: Console, *, show: bool) -> str:
    """Poll until terminal; progress (tasks and trials done / total) as a bar on a terminal, lines otherwise."""
    deadline = time.monotonic() + timeout
    bar = None
    last: tuple[Any, ...] | None = None
    if show and err.is_terminal:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=err, transient=True)
        bar.start()
        tasks_bar = bar.add_task("tasks", total=None)
        trials_bar = bar.add_task("trials", total=None)
    try:
        while True:
            status = host.client.runs_get(run_id).status
            if status in TERMINAL:
                if show and bar is None:
                    err.print(f"{run_id}: {status}", highlight=False)
                return status
            prog: dict[str, Any] = {}
            try:
                host.report(run_id, whole=False)
            except WopError as e:
                if e.status == 409 and e.envelope is not None and isinstance(e.envelope.details, dict):
                    prog = e.envelope.details.get("progress") or {}
                elif e.status != 409:
                    raise
            tasks, trials = prog.get("tasks") or {}, prog.get("trials") or {}
            if bar is not None:
                bar.update(tasks_bar, completed=tasks.get("done", 0), total=tasks.get("total"))
                bar.update(trials_bar, completed=trials.get("done", 0), total=trials.get("total"))
            elif show:
                now = (status, tasks.get("done"), tasks.get("total"), trials.get("done"), trials.get("total"))
                if now != last:
                    line = f"{run_id}: {status}"
                    if tasks:
                        line += (
                            f", tasks {tasks['done']}/{tasks['total']},"
                            f" trials {trials.get('done')}/{trials.get('total')}"
                        )
                    err.print(line, highlight=False)
                    last = now
            if time.monotonic() > deadline:
                raise CliError(f"{run_id} is still {status} after {timeout:g} s")
            time.sleep(0.5)
    finally:
        if bar is not None:
            bar.stop()


# --------------------------------------------------------------------------- comparing


def _task_verdict(score: float, base: float | None, misses: int, has_baseline: bool, flaky: bool = False) -> str:
    if misses:
        return "unverifiable"
    if not has_baseline:
        return "passed" if score >= 1.0 - EPSILON else "failed"
    if base is None:
        return "unpaired"
    if flaky:
        return "flaky"
    if score < base - EPSILON:
        return "regressed"
    if score > base + EPSILON:
        return "improved"
    return "unchanged"


def _disagree(row: dict[str, Any]) -> bool:
    """A task's trials disagreed: from a report row's trial counts, or a summary row's pass@k / pass^k."""
    tr = row.get("trials")
    if isinstance(tr, dict):
        return 0 < int(tr.get("passed", 0)) < int(tr.get("done", 0))
    return "passAtK" in row and float(row["passAtK"]) > 0 and float(row.get("passHatK", 0)) < 1


def _from_summary(run_id: str, status: str, summary: dict[str, Any]) -> dict[str, Any]:
    """A report-shaped document from a summary alone (a host without the eval report)."""
    reg = summary.get("regression") or {}
    flaky = set(reg.get("flakyTasks") or [])
    return {
        "runId": run_id,
        "status": status,
        "suiteId": summary.get("suiteId"),
        "suiteVersion": summary.get("suiteVersion"),
        "baselineRunId": reg.get("baselineRunId"),
        "aggregateScore": summary.get("aggregateScore"),
        "scoreDelta": reg.get("scoreDelta"),
        "pairedVerdict": reg.get("verdict"),
        "pairedTaskCount": reg.get("pairedTaskCount"),
        "scoreDeltaInterval": reg.get("scoreDeltaInterval"),
        "flakyTasks": reg.get("flakyTasks"),
        "baselineAggregateScore": None,
        "tasks": [
            {
                "taskId": t["taskId"],
                "score": float(t["score"]),
                "passed": t.get("passed"),
                "baselineFlaky": t["taskId"] in flaky,
                "passAtK": t.get("passAtK"),
                "passHatK": t.get("passHatK"),
                "baselineScore": None,
                "fixtureMissCount": int(t.get("fixtureMissCount", 0)),
                "trials": None,
                "passAllK": None,
                "liveToolCalls": None,
                "costUsd": None,
                "latencyMs": None,
                "fixtureMisses": [],
                "verdict": None,
            }
            for t in summary.get("tasks") or []
        ],
    }


def _load(host: Host, run_id: str) -> dict[str, Any]:
    status = host.client.runs_get(run_id).status
    if status not in TERMINAL:
        raise CliError(f"{run_id} is still {status}: wait for it (eval run --wait) before comparing")
    rep = host.report(run_id)
    if rep is not None:
        return rep
    try:
        return _from_summary(run_id, status, host.summary(run_id))
    except WopError as err:
        if err.status == 404 and status != "completed":
            return {"runId": run_id, "status": status, "tasks": [], "baselineRunId": None}
        raise


def compare(host: Host, run_id: str, baseline: str | None) -> dict[str, Any]:
    """The run's report, paired with ``baseline`` (default: the run's own baseline), and the verdict it implies."""
    rep = _load(host, run_id)
    if baseline and baseline != rep.get("baselineRunId"):
        base = _load(host, baseline)
        base_scores = {t["taskId"]: float(t["score"]) for t in base.get("tasks") or []}
        base_flaky = {t["taskId"] for t in base.get("tasks") or [] if _disagree(t)}
        rep["baselineRunId"] = baseline
        rep["baselineAggregateScore"] = base.get("aggregateScore")
        for t in rep["tasks"]:
            t["baselineScore"] = base_scores.get(t["taskId"])
            t["baselineFlaky"] = t["taskId"] in base_flaky
        paired = [t for t in rep["tasks"] if t["baselineScore"] is not None]
        counted = [t for t in paired if not t["baselineFlaky"]]  # no interval client-side: flaky never counts
        fell = any(t["score"] < t["baselineScore"] - EPSILON for t in counted)
        rose = any(t["score"] > t["baselineScore"] + EPSILON for t in counted)
        rep["flakyTasks"] = [t["taskId"] for t in paired if t["baselineFlaky"]]
        rep["scoreDeltaInterval"] = None
        rep["pairedTaskCount"] = len(paired)
        rep["pairedVerdict"] = (
            "inconclusive" if not paired else "regressed" if fell else "improved" if rose else "unchanged"
        )
        if rep.get("aggregateScore") is not None and base.get("aggregateScore") is not None:
            rep["scoreDelta"] = float(rep["aggregateScore"]) - float(base["aggregateScore"])
        if base.get("status") != "completed":
            rep["baselineStatus"] = base.get("status")
        evalmarkdown.rediverge(rep, base)
    has_baseline = rep.get("baselineRunId") is not None
    for t in rep["tasks"]:
        t["verdict"] = _task_verdict(
            float(t["score"]),
            t.get("baselineScore"),
            int(t["fixtureMissCount"]),
            has_baseline,
            bool(t.get("baselineFlaky")),
        )
    misses = sum(int(t["fixtureMissCount"]) for t in rep["tasks"])
    if rep.get("status") != "completed" or misses or rep.get("baselineStatus"):
        verdict = "unverifiable"
    elif not has_baseline:
        verdict = "no-baseline"
    else:
        verdict = str(rep.get("pairedVerdict"))
    rep["verdict"] = verdict
    rep["exitCode"] = {"regressed": REGRESSED, "unverifiable": UNVERIFIABLE, "inconclusive": UNVERIFIABLE}.get(
        verdict, OK
    )
    return rep


# --------------------------------------------------------------------------- output


def _trials(t: dict[str, Any]) -> str:
    tr = t.get("trials")
    if not tr:
        return "-"
    return f"{tr['passed']}/{tr['total']} {'pass' if t.get('passAllK') else 'fail'}"


STYLE = {"regressed": "bold red", "unverifiable": "yellow", "improved": "green", "failed": "red", "flaky": "magenta"}


def table(rep: dict[str, Any], out: Console) -> None:
    title = f"eval {rep['runId']}"
    if rep.get("suiteId"):
        title += f"  suite {rep['suiteId']}@{rep.get('suiteVersion')}"
    t = Table(title=title, title_justify="left")
    for col, just in (
        ("task", "left"),
        ("baseline", "right"),
        ("candidate", "right"),
        ("trials (pass^k)", "right"),
        ("fixture misses", "right"),
        ("live tool calls", "right"),
        ("cost USD", "right"),
        ("latency ms", "right"),
        ("verdict", "left"),
    ):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for task in rep["tasks"]:
        t.add_row(
            task["taskId"],
            num(task.get("baselineScore")),
            num(task["score"]),
            _trials(task),
            str(task["fixtureMissCount"]),
            "-" if task.get("liveToolCalls") is None else str(task["liveToolCalls"]),
            num(task.get("costUsd"), 4),
            "-" if task.get("latencyMs") is None else str(task["latencyMs"]),
            task["verdict"],
            style=STYLE.get(task["verdict"]),
        )
    out.print(t)
    for task in rep["tasks"]:
        for m in task.get("fixtureMisses") or []:
            near = m.get("closest")
            where = ", ".join(m.get("differingPointers") or []) or ("the tool name" if near else "-")
            out.print(
                f"fixture miss in {task['taskId']} (trial {m.get('trial')}): {m['tool']} "
                f"{json.dumps(m.get('args'))}; closest recorded call "
                f"{json.dumps(near.get('args')) if near else 'none'} differs at {where}"
                f"{evalmarkdown.would_match_with(m)}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
    for task in rep["tasks"]:
        if task["verdict"] in evalmarkdown.FAILING:
            out.print(
                f"  {task['taskId']}: {evalmarkdown.what_changed(task)}", highlight=False, markup=False, soft_wrap=True
            )
    line = f"status {rep.get('status')}"
    if rep.get("baselineRunId"):
        line += f"  baseline {rep['baselineRunId']}  scoreDelta {num(rep.get('scoreDelta'), 3)}"
        ci = rep.get("scoreDeltaInterval")
        if ci:
            line += f" [{round(100 * float(ci['confidence']))}% {num(ci['low'], 3)}, {num(ci['high'], 3)}]"
        line += f"  paired verdict {rep.get('pairedVerdict')} ({rep.get('pairedTaskCount')} paired tasks)"
    else:
        line += "  no baseline"
    out.print(line, highlight=False)
    if rep.get("flakyTasks"):
        out.print(
            f"flaky (baseline trials disagreed, never a regression alone): {', '.join(rep['flakyTasks'])}",
            highlight=False,
        )
    out.print(f"verdict: {rep['verdict']} (exit {rep['exitCode']})", style=STYLE.get(rep["verdict"]), highlight=False)


def emit(
    rep: dict[str, Any],
    as_json: bool,
    junit_file: Path | None,
    markdown_file: Path | None = None,
    viewer_url: str | None = None,
) -> int:
    if junit_file is not None:
        junit(rep, junit_file)
    evalmarkdown.write(rep, markdown_file, viewer_url)
    if as_json:
        sys.stdout.write(json.dumps(rep, indent=2) + "\n")
    else:
        table(rep, Console(width=None if sys.stdout.isatty() else 160))
    return int(rep["exitCode"])


# --------------------------------------------------------------------------- commands


@app.command("run", epilog=EXIT_CODES)
def run_command(
    suite: Annotated[
        str, typer.Option("--suite", metavar="REF", help="evalSuiteRef (suiteId, suiteId@version or a URI)")
    ],
    agent: Annotated[
        str, typer.Option("--agent", metavar="ID[@VERSION]", help="ID or ID@VERSION (a version pins the agent version)")
    ],
    agent_version: Annotated[
        str | None,
        typer.Option(
            "--agent-version",
            metavar="VERSION",
            help="the agent version to evaluate; without it (or ID@VERSION) the "
            "CLI pins what the agent's stable channel serves, else its newest version, and says which",
        ),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            metavar="RUN|stable|last",
            help="baseline eval run id, 'stable' (the run that admitted the "
            "agent's stable deployment) or 'last' (the newest completed "
            "eval of this suite and agent); adds 'regression'",
        ),
    ] = None,
    fixtures_from: Annotated[
        list[str] | None,
        typer.Option(
            "--fixtures-from",
            metavar="TASK=RUN",
            help="TASK=RUN: serve TASK the tool answers RUN recorded (repeatable)",
        ),
    ] = None,
    modes: Annotated[
        list[str] | None,
        typer.Option(
            "--modes",
            metavar="MODE[,MODE]",
            help="eval modes (repeatable or comma-separated); default: the suite's, plus regression with --baseline",
        ),
    ] = None,
    wait_: Annotated[bool, typer.Option("--wait", help="wait until terminal, then compare (exit code gates)")] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds --wait waits at most")] = 900.0,
    endpoint: Endpoint = None,
    api_key: ApiKey = None,
    as_json: JsonOut = False,
    junit_file: Junit = None,
    markdown_file: Markdown = None,
    viewer_url: ViewerUrl = None,
    name: Annotated[
        str | None,
        typer.Option("--name", metavar="NAME", help="the experiment's name (stored on the run; eval list --name)"),
    ] = None,
) -> None:
    """Start an eval run; with --wait show progress until it ends, then print the comparison table."""
    build_request(suite, agent, None, fixtures_from or [], modes or [], agent_version)  # usage errors first
    host = Host(endpoint, api_key)
    if baseline in experiments.NAMED_BASELINES:
        baseline = experiments.resolve_baseline(host, baseline, experiments.suite_id(suite), parse_agent(agent)[0])
    req = build_request(suite, agent, baseline, fixtures_from or [], modes or [], agent_version)
    err = Console(stderr=True)
    if req.configurable is None:  # no version named: resolve it as the host would, pin it, and say so
        resolved = resolve_version(host, req.agentId or "", err)
        if resolved is not None:
            req = build_request(suite, agent, baseline, fixtures_from or [], modes or [], resolved)
    req = experiments.with_name(req, name)
    created = host.client.runs_create(req)
    if not wait_:
        if as_json:
            sys.stdout.write(json.dumps({"runId": created.runId, "status": created.status}) + "\n")
        else:
            print(created.runId)
        raise Verdict(OK)
    err.print(f"eval run {created.runId} started", highlight=False)
    wait(host, created.runId, timeout, err, show=True)
    raise Verdict(emit(compare(host, created.runId, None), as_json, junit_file, markdown_file, viewer_url))


@app.command("compare", epilog=EXIT_CODES)
def compare_command(
    run: Annotated[str, typer.Argument(help="the candidate eval run id")],
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            metavar="RUN|stable|last",
            help="compare with this run instead of the run's own baseline; "
            "'stable' or 'last' (the newest completed eval of the same "
            "suite and agent older than the run)",
        ),
    ] = None,
    endpoint: Endpoint = None,
    api_key: ApiKey = None,
    as_json: JsonOut = False,
    junit_file: Junit = None,
    markdown_file: Markdown = None,
    viewer_url: ViewerUrl = None,
) -> None:
    """Print the per-task table of a finished eval run against its baseline, and the paired verdict."""
    host = Host(endpoint, api_key)
    if baseline in experiments.NAMED_BASELINES:
        head = host.report(run, whole=False) or {}
        if not head.get("suiteId") or not head.get("agentId"):
            raise CliError(f"--baseline {baseline} needs the host's eval report for {run}")
        baseline = experiments.resolve_baseline(host, baseline, str(head["suiteId"]), str(head["agentId"]), before=run)
    raise Verdict(emit(compare(host, run, baseline), as_json, junit_file, markdown_file, viewer_url))


@app.command("list", epilog="Exit codes: 0 listed; 3 usage or connection error.")
def list_command(
    suite: Annotated[str | None, typer.Option("--suite", metavar="SUITE", help="only this suiteId")] = None,
    agent: Annotated[str | None, typer.Option("--agent", metavar="AGENT", help="only this agentId")] = None,
    name: Annotated[str | None, typer.Option("--name", metavar="NAME", help="only runs of this name")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="list at most this many runs")] = 50,
    endpoint: Endpoint = None,
    api_key: ApiKey = None,
    as_json: JsonOut = False,
) -> None:
    """List eval runs, newest first: run id, suite@version, agent@version, name, score, verdict, started."""
    host = Host(endpoint, api_key)
    rows: list[dict[str, Any]] = []
    for row in experiments.eval_runs(host, suite=suite, agent=agent, name=name, limit=min(limit, 100)):
        rows.append(row)
        if len(rows) >= limit:
            break
    if as_json:
        sys.stdout.write(json.dumps({"evalRuns": rows}, indent=2) + "\n")
    else:
        experiments.list_table(rows, Console(width=None if sys.stdout.isatty() else 200))
    raise Verdict(OK)


@app.command("accept", epilog=EXIT_CODES)
def accept_command(
    run: Annotated[str, typer.Argument(help="the candidate eval run id whose changes are intended")],
    tasks: Annotated[
        list[str] | None,
        typer.Option("--task", metavar="T", help="accept only this task (repeatable; default: every task)"),
    ] = None,
    endpoint: Endpoint = None,
    api_key: ApiKey = None,
    as_json: JsonOut = False,
) -> None:
    """Publish the suite's next minor version whose tasks take the run's recorded calls, answers and final
    outputs as their fixtures and expectations (the run's suite must be one of the caller's); prints its
    evalSuiteRef. The same candidate then evaluates with no miss."""
    host = Host(endpoint, api_key)
    report = host.report(run, whole=False)
    if report is None:
        raise CliError("the host has no eval report: it cannot accept a run")
    body: dict[str, Any] = {"runId": run, **({"taskIds": list(tasks)} if tasks else {})}
    path = f"/host/{EXTENSION}/eval-suites/{quote(str(report['suiteId']), safe='')}:accept"
    out = host.client._request_json("POST", path, body=body)
    sys.stdout.write((json.dumps(out) if as_json else str(out["evalSuiteRef"])) + "\n")
    raise Verdict(OK)


def main(argv: list[str]) -> int:
    """Run the ``eval`` group; every failure that is not a verdict is exit 3 with one ``error:`` line.

    The framework runs in its standalone mode (it prints usage errors itself and exits 2, help exits 0); a
    command's verdict leaves as ``Verdict``, so the framework's own 2 can only mean a usage error (-> 3)."""
    command = typer.main.get_command(app)
    try:
        command.main(args=argv, prog_name="openwop-serverless eval", standalone_mode=True)
    except Verdict as v:
        return v.code
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else USAGE)
        return OK if code == 0 else USAGE
    except (CliError, SuiteCliError, experiments.ExperimentError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE
    except WopError as exc:
        print(f"error: {wire_error(exc)}", file=sys.stderr)
        return USAGE
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE
    return OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
