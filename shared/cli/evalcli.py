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

Exit codes (every command): 0 no regression (accept: published), 1 regressed, 2 unverifiable (a fixture miss, a failed or cancelled
run, no task paired with the baseline), 3 usage or connection error. A task whose baseline trials disagreed is
``flaky``: listed apart, it never makes exit 1 on its own (the host counts its fall only when the bootstrap
interval of ``scoreDelta`` lies wholly below 0; a client-side comparison never counts it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from openwop_client import WopError
from rich.console import Console

from shared.cli import evalaccept, experiments
from shared.cli.evalcompare import OK, USAGE, compare
from shared.cli.evalhost import CliError, Host, wait, wire_error
from shared.cli.evalrequest import build_request, parse_agent, resolve_version
from shared.cli.evaltable import emit
from shared.cli.suitecli import SuiteCliError, suite_app

EXIT_CODES = """Exit codes: 0 no regression; 1 regressed; 2 unverifiable (a fixture miss, a failed or cancelled run,
no task paired with the baseline); 3 usage or connection error. A flaky task (its baseline trials disagreed) never
makes exit 1 on its own."""

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


class Verdict(Exception):  # noqa: N818 - not an error: how a command hands its exit code to main()
    """A command's outcome: its exit code (raised so it passes through the CLI framework untouched)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


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
