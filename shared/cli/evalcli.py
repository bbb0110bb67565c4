"""``openwop-serverless eval``: start eval runs on any OpenWOP host over HTTP and gate CI on their verdict.

Talks HTTP only (through ``openwop-client``): ``--endpoint``/``--api-key`` or ``OPENWOP_BASE_URL``/
``OPENWOP_API_KEY``. The per-task table comes from the host's eval report
(``GET /host/openwop-serverless/runs/{runId}/eval-report``); a plain OpenWOP host without it still gets the
summary's scores and paired verdict (read as raw JSON: ``openwop-client`` 2.7.0's ``EvalRegression`` drops
``verdict`` and ``pairedTaskCount``).

Under the table, each regressed or unverifiable task gets one line saying what changed (its first trajectory
divergence from the baseline, else expected vs actual); ``--markdown FILE`` writes the same as a pull-request
comment, appended to ``$GITHUB_STEP_SUMMARY`` when set (``shared/cli/evalmarkdown.py``).

``eval accept RUN [--task T ...]`` publishes the run's suite's next minor version that takes the run's recorded
calls, answers and decisions as the accepted tasks' fixtures and expectations (an intended change).

Exit codes (``EXIT_CODES``; docs/decisions/0145-ci-verdict-baselines-and-precedence.md): when several conditions
apply, the first in the order usage 3 > regression 1 > unverifiable 2 > failure 4 decides; 0 when none does. A task
whose baseline trials disagreed is ``flaky``: listed apart, it never makes exit 1 on its own (the host counts its fall
only when the bootstrap interval of ``scoreDelta`` lies wholly below 0; a client-side comparison never counts it).
Baselines are picked and checked by ``shared/cli/evalbaseline.py``.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from shared.cli import evalaccept, evalbaseline, experiments
from shared.cli.clirun import Verdict, run
from shared.cli.evalcompare import OK, compare
from shared.cli.evalhost import CliError, Host, drive, wait
from shared.cli.evalrequest import build_request, parse_agent, resolve_version
from shared.cli.evaltable import emit
from shared.cli.suitecli import suite_app

EXIT_CODES = """Exit codes, by precedence (when several conditions apply, the first listed decides):
3 usage: a usage or connection error, or a refused baseline (it ran the candidate's own agent version, or did not
pass; --baseline-any lifts the refusal); 1 regression: the paired verdict against the baseline is regressed;
2 unverifiable: a fixture miss, a failed or cancelled run or baseline, no task paired with the baseline; 4 failure:
a task fails its expectation, with or without a baseline, unless its suite marks it knownFailure or
--allow-known-failures tolerates it (the baseline failed it too); 0 none of these. A flaky task (its baseline trials
disagreed) never makes exit 1 on its own. The markdown's first line names the deciding condition."""

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
BaselineAny = Annotated[
    bool,
    typer.Option(
        "--baseline-any",
        help="take the baseline even when it ran the candidate's own agent version or did not pass; "
        "'last' is then the newest completed eval of the suite and agent",
    ),
]
AllowKnown = Annotated[
    bool,
    typer.Option(
        "--allow-known-failures",
        help="tolerate a task that fails its expectation when the baseline failed it too (listed, a JUnit skip, "
        "never exit 4); never a regression or a fixture miss; without a baseline it tolerates nothing",
    ),
]
ChangedOnly = Annotated[
    bool,
    typer.Option(
        "--changed-only",
        help="markdown: list only the tasks that changed or fail (a line counts the others)",
    ),
]


app.add_typer(suite_app)  # ``eval suite from-runs``


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
            help="baseline eval run id, 'stable' (the run that admitted the agent's stable deployment) or 'last' "
            "(the newest passed eval of this suite and agent at another agent version); adds 'regression'; a "
            "baseline of the candidate's own version, or one that did not pass, is refused (exit 3)",
        ),
    ] = None,
    baseline_any: BaselineAny = False,
    allow_known: AllowKnown = False,
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
    exec_: Annotated[
        str | None,
        typer.Option(
            "--exec",
            metavar="CMD",
            help="an external agent's command, run once per trial with the trial's gateway in its environment "
            "(OPENWOP_MCP_URL, OPENWOP_GATEWAY_TOKEN, OPENAI_BASE_URL, OPENAI_API_KEY, OPENWOP_TASK_INPUT) and the "
            "input on stdin; its stdout is the output; implies --wait",
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="--exec trials run at once")] = 4,
    endpoint: Endpoint = None,
    api_key: ApiKey = None,
    as_json: JsonOut = False,
    junit_file: Junit = None,
    markdown_file: Markdown = None,
    viewer_url: ViewerUrl = None,
    changed_only: ChangedOnly = False,
    name: Annotated[
        str | None,
        typer.Option("--name", metavar="NAME", help="the experiment's name (stored on the run; eval list --name)"),
    ] = None,
) -> None:
    """Start an eval run; with --wait show progress until it ends, then print the comparison table."""
    build_request(suite, agent, None, fixtures_from or [], modes or [], agent_version)  # usage errors first
    host = Host(endpoint, api_key)
    err = Console(stderr=True)
    buffer = io.StringIO()
    held = Console(file=buffer, width=err.width)  # said once the baseline is not refused
    agent_id, named = parse_agent(agent)
    version = agent_version or named
    if version is None:  # no version named: resolve it as the host would, pin it, and say so
        version = resolve_version(host, agent_id, held)
    picked = None
    if baseline:
        picked = evalbaseline.pick(host, baseline, experiments.suite_id(suite), agent_id, version, any_=baseline_any)
    sys.stderr.write(buffer.getvalue())
    if picked is not None:
        evalbaseline.say(picked, err)
    req = build_request(suite, agent, picked.run_id if picked else None, fixtures_from or [], modes or [], version)
    req = experiments.with_name(req, name)
    created = host.client.runs_create(req)
    if exec_:
        err.print(f"eval run {created.runId} started: each trial runs {exec_!r}", highlight=False)
        drive(host, created.runId, exec_, concurrency, timeout, err)
        wait_ = True
    if not wait_:
        if as_json:
            sys.stdout.write(json.dumps({"runId": created.runId, "status": created.status}) + "\n")
        else:
            print(created.runId)
        raise Verdict(OK)
    err.print(f"eval run {created.runId} started", highlight=False)
    wait(host, created.runId, timeout, err, show=True)
    rep = compare(host, created.runId, None, allow_known=allow_known, baseline_doc=picked.doc() if picked else None)
    raise Verdict(emit(rep, as_json, junit_file, markdown_file, viewer_url, changed_only))


@app.command("compare", epilog=EXIT_CODES)
def compare_command(
    run: Annotated[str, typer.Argument(help="the candidate eval run id")],
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            metavar="RUN|stable|last",
            help="compare with this run instead of the run's own baseline; 'stable' or 'last' (the newest passed "
            "eval of the same suite and agent at another agent version, older than the run); a baseline of the "
            "run's own agent version, or one that did not pass, is refused (exit 3)",
        ),
    ] = None,
    baseline_any: BaselineAny = False,
    allow_known: AllowKnown = False,
    endpoint: Endpoint = None,
    api_key: ApiKey = None,
    as_json: JsonOut = False,
    junit_file: Junit = None,
    markdown_file: Markdown = None,
    viewer_url: ViewerUrl = None,
    changed_only: ChangedOnly = False,
) -> None:
    """Print the per-task table of a finished eval run against its baseline, and the verdict; without --baseline,
    the run's own baseline (picked, and checked, when the run was started)."""
    host = Host(endpoint, api_key)
    picked = None
    if baseline:
        head = host.report(run, whole=False) or {}
        if baseline in experiments.NAMED_BASELINES and (not head.get("suiteId") or not head.get("agentId")):
            raise CliError(f"--baseline {baseline} needs the host's eval report for {run}")
        version = head.get("agentVersion")
        picked = evalbaseline.pick(
            host,
            baseline,
            str(head.get("suiteId")),
            str(head.get("agentId")),
            None if version is None else str(version),
            before=run,
            any_=baseline_any,
        )
        evalbaseline.say(picked, Console(stderr=True))
    rep = compare(
        host,
        run,
        picked.run_id if picked else None,
        allow_known=allow_known,
        baseline_doc=picked.doc() if picked else None,
    )
    raise Verdict(emit(rep, as_json, junit_file, markdown_file, viewer_url, changed_only))


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


ACCEPT_EXIT = """Exit codes: 0 published; 3 usage or connection error, or the host refused (nothing is written;
each call the record lacks that has no answer is listed)."""


@app.command("accept", epilog=ACCEPT_EXIT)
def accept_command(
    run: Annotated[str, typer.Argument(help="the candidate eval run id whose changes are intended")],
    reason: Annotated[
        str, typer.Option("--reason", metavar="TEXT", help="why the change is intended (recorded in the version)")
    ],
    tasks: Annotated[
        list[str] | None,
        typer.Option("--task", metavar="T", help="accept only this task (repeatable; default: every task)"),
    ] = None,
    answers: Annotated[
        list[str] | None,
        typer.Option(
            "--answer",
            metavar="TASK:CALL=FILE",
            help="the answer (JSON in FILE) to a call the record lacks; CALL is its 0-based position among the "
            "task's calls (repeatable)",
        ),
    ] = None,
    drops: Annotated[
        list[str] | None,
        typer.Option("--drop", metavar="TASK", help="leave this task out of the new version (repeatable)"),
    ] = None,
    endpoint: Endpoint = None,
    api_key: ApiKey = None,
    as_json: JsonOut = False,
) -> None:
    """Publish the suite's next minor version whose tasks take the run's recorded calls, answers and final
    outputs as their fixtures and expectations (the run's suite must be one of the caller's); prints its
    evalSuiteRef, and on stderr each accepted call with where its answer came from (recorded, accepted-live,
    reviewer-supplied). A new call of a read tool is called live once; of any other tool it needs --answer or
    --drop, else the host refuses and names it."""
    body = evalaccept.body_for(run, reason, tasks or [], answers or [], drops or [])  # usage errors first
    evalaccept.accept(Host(endpoint, api_key), run, body, as_json)
    raise Verdict(OK)


def main(argv: list[str]) -> int:
    """Run the ``eval`` group; every failure that is not a verdict is exit 3 with one ``error:`` line.

    The framework runs in its standalone mode (it prints usage errors itself and exits 2, help exits 0); a
    command's verdict leaves as ``Verdict``, so the framework's own 2 can only mean a usage error (-> 3)."""
    return run(app, argv, "openwop-serverless eval", (experiments.ExperimentError,))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
