"""``openwop-serverless eval`` end to end against the local host over HTTP: exit codes gate CI (0 no regression,
1 regressed, 2 unverifiable, 3 usage or connection error), the per-task table, --json and --junit."""

from __future__ import annotations

import json
import threading
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.evalseed import DRIFT, register_loop_suites, seed_argument_change, seed_drift
from tests.integration.test_eval_runs import AGENT, run_eval


def cli(host: Any, *args: str, key: str | None = None) -> int:
    from shared.local.commands import main

    return main(["eval", *args, "--endpoint", host.base_url, "--api-key", key or host.key_a])


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)  # a CI job's own summary is not these tests' output


@pytest.fixture(scope="module")
def changed(host):
    return seed_argument_change(host, host.client(host.key_a), host.key_a)


@pytest.fixture(scope="module")
def loop(host):
    client = host.client(host.key_a)
    suite = register_loop_suites(host, host.key_a)
    base = run_eval(client, f"{suite}@1.0.0")
    return {"suite": suite, "base": base, **seed_drift(client)}


def test_a_regressed_candidate_exits_1_and_its_junit_fails_the_regressed_task(host, loop, tmp_path, capsys):
    junit = tmp_path / "reports" / "eval.xml"
    code = cli(
        host,
        "run",
        "--suite",
        f"{loop['suite']}@1.1.0",
        "--agent",
        AGENT,
        "--baseline",
        loop["base"],
        "--wait",
        "--junit",
        str(junit),
    )
    out, err = capsys.readouterr()
    assert code == 1, out + err
    # the table: one row per task, the aggregate delta and the paired verdict
    rows = {
        line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
        for line in out.splitlines()
        if line.count("│") == 10 and "task" not in line
    }
    assert rows == {
        "steady": ["1.00", "1.00", "2/2 pass", "0", "2", "0.0000", rows["steady"][6], "unchanged"],
        "served": ["1.00", "1.00", "2/2 pass", "0", "0", "0.0000", rows["served"][6], "unchanged"],
        "answer": ["1.00", "0.00", "0/2 fail", "0", "0", "0.0000", rows["answer"][6], "regressed"],
    }
    assert (
        f"baseline {loop['base']}  scoreDelta -0.333 [95% -1.000, 0.000]  paired verdict regressed (3 paired tasks)"
    ) in out  # the paired bootstrap interval of the delta beside it
    assert "verdict: regressed (exit 1)" in out
    assert "started" in err and ": completed" in err  # plain progress lines (not a terminal)
    # JUnit: one testcase per task, only the regressed one failed
    suite = ET.parse(junit).getroot()
    assert suite.tag == "testsuite" and (suite.get("tests"), suite.get("failures")) == ("3", "1")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert sorted(cases) == ["answer", "served", "steady"]
    assert cases["answer"].find("failure") is not None
    assert cases["answer"].find("failure").get("type") == "regressed"
    assert cases["steady"].find("failure") is None and cases["served"].find("failure") is None


def test_an_unchanged_candidate_exits_0_and_json_carries_the_paired_verdict(host, loop, capsys):
    code = cli(
        host,
        "run",
        "--suite",
        f"{loop['suite']}@1.0.0",
        "--agent",
        AGENT,
        "--baseline",
        loop["base"],
        "--wait",
        "--json",
    )
    out = capsys.readouterr().out
    assert code == 0, out
    doc = json.loads(out)
    assert (doc["verdict"], doc["pairedVerdict"], doc["pairedTaskCount"], doc["exitCode"]) == (
        "unchanged",
        "unchanged",
        3,
        0,
    )
    assert doc["scoreDelta"] == 0.0
    assert [(t["taskId"], t["verdict"]) for t in doc["tasks"]] == [
        ("steady", "unchanged"),
        ("served", "unchanged"),
        ("answer", "unchanged"),
    ]
    # compare a finished run again, against another baseline: the regressed candidate's table is recomputed
    cand = doc["runId"]
    assert cli(host, "compare", cand) == 0
    capsys.readouterr()


def test_a_fixture_miss_exits_2_and_the_report_names_the_differing_pointer(host, loop, tmp_path, capsys):
    junit = tmp_path / "miss.xml"
    comment = tmp_path / "pr" / "miss.md"
    # When eval run --wait serves a task from a recorded run whose call now differs at /key
    code = cli(
        host,
        "run",
        "--suite",
        DRIFT,
        "--agent",
        AGENT,
        "--fixtures-from",
        f"record={loop['source']}",
        "--wait",
        "--junit",
        str(junit),
        "--markdown",
        str(comment),
    )
    out, err = capsys.readouterr()
    # Then exit 2, and the table's miss line names the pointer and the rules that would have matched
    assert code == 2, out
    would = '; would match with {"ignore":["/key"]} or {"anyOf":{"/key":["k2"]}}'
    miss = [
        ln for ln in out.splitlines() if ln.startswith("fixture miss in record (trial 1): conformance.eval:counter")
    ]
    assert len(miss) == 1 and "closest recorded call" in miss[0] and miss[0].endswith("differs at /key" + would)
    assert "verdict: unverifiable (exit 2)" in out
    # and the JUnit failure's message and text carry them too
    case = ET.parse(junit).getroot().find("testcase")
    assert case.get("name") == "record" and case.find("failure").get("type") == "unverifiable"
    line = "fixture miss: conformance.eval:counter differs at /key" + would
    assert case.find("failure").get("message").endswith("; " + line)
    assert case.find("failure").text.splitlines()[-1] == line
    # and eval run --markdown wrote the comment: summary line, the task's row, the miss with its rules
    lines = comment.read_text(encoding="utf-8").splitlines()
    run_id = err.split("eval run ", 1)[1].split(" started", 1)[0]
    assert lines[2].startswith(f"**eval unverifiable** (exit 2) · run `{run_id}`") and " · no baseline" in lines[2]
    assert "| record | - | 0.00 | 0/1 | 1 | unverifiable |" in lines
    assert f"  - fixture miss (trial 1): `{line.split(': ', 1)[1]}`" in lines
    # the same run compared again: same exit code (the verdict is the host's data, not the run command's)
    assert cli(host, "compare", loop["drift"], "--json") == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["tasks"][0]["fixtureMisses"][0]["differingPointers"] == ["/key"]


def test_compare_against_another_baseline_pairs_client_side(host, loop, capsys):
    client = host.client(host.key_a)
    cand = run_eval(client, f"{loop['suite']}@1.1.0")  # no baseline of its own
    # no baseline: no regression to report, but its task "answer" fails its expectation: exit 4 (issue 36)
    assert cli(host, "compare", cand) == 4
    capsys.readouterr()
    assert cli(host, "compare", cand, "--baseline", loop["base"], "--json") == 1
    doc = json.loads(capsys.readouterr().out)
    assert (doc["baselineRunId"], doc["pairedVerdict"], doc["verdict"]) == (loop["base"], "regressed", "regressed")
    assert [t["verdict"] for t in doc["tasks"]] == ["unchanged", "unchanged", "regressed"]


def test_usage_and_connection_errors_exit_3(host, loop, capsys):
    from shared.local.commands import main

    assert main(["eval", "run", "--agent", AGENT, "--endpoint", host.base_url, "--api-key", host.key_a]) == 3
    assert "Missing option '--suite'" in capsys.readouterr().err
    assert main(["eval", "compare", loop["base"], "--endpoint", "http://127.0.0.1:9", "--api-key", "k"]) == 3
    assert capsys.readouterr().err.startswith("error: cannot reach the host")
    assert cli(host, "compare", loop["base"], key="not-a-key") == 3
    assert "401 unauthenticated" in capsys.readouterr().err
    # another tenant's run: refused by the protocol's path rule (GET /runs/{id}), exit 3
    assert cli(host, "compare", loop["base"], key=host.key_b) == 3
    assert "error: the host answered 403 id_tenant_mismatch" in capsys.readouterr().err
    assert cli(host, "run", "--suite", "no-such-suite", "--agent", AGENT) == 3
    assert "400 validation_error" in capsys.readouterr().err
    assert cli(host, "run", "--suite", DRIFT, "--agent", AGENT, "--fixtures-from", "record") == 3
    assert "is not TASK=RUN" in capsys.readouterr().err


class _Capture(BaseHTTPRequestHandler):
    bodies: list[tuple[str, dict[str, str], Any]] = []
    gets: list[str] = []

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Capture.bodies.append((self.path, dict(self.headers), body))
        out = json.dumps(
            {"runId": "tenant-a/r-captured00000000000000000000", "status": "pending", "eventsUrl": "/runs/x/events"}
        ).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def do_GET(self) -> None:  # noqa: N802
        # "support" is not a registered agent here (as a built-in or scripted one): no version to pin
        _Capture.gets.append(self.path)
        out = json.dumps({"error": "not_found", "message": "No such agent."}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: Any) -> None:
        pass


def test_agent_at_version_pins_the_version_in_the_request_the_cli_sends(capsys):
    from shared.local.commands import main

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Capture)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        _Capture.bodies.clear()
        _Capture.gets.clear()
        assert (
            main(
                [
                    "eval",
                    "run",
                    "--suite",
                    "s.evals.x@1.0.0",
                    "--agent",
                    "support@2.0.0",
                    "--baseline",
                    "tenant-a/r-base",
                    "--baseline-any",  # taken as given: this stand-in host serves no run to check it against
                    "--fixtures-from",
                    "t1=tenant-a/r-src",
                    "--endpoint",
                    url,
                    "--api-key",
                    "k",
                ]
            )
            == 0
        )
        assert (
            main(
                [
                    "eval",
                    "run",
                    "--suite",
                    "s.evals.x",
                    "--agent",
                    "support",
                    "--modes",
                    "golden",
                    "--endpoint",
                    url,
                    "--api-key",
                    "k",
                    "--json",
                ]
            )
            == 0
        )
        assert (
            main(
                [
                    "eval",
                    "run",
                    "--suite",
                    "s.evals.x",
                    "--agent",
                    "support",
                    "--agent-version",
                    "3.0.0",
                    "--endpoint",
                    url,
                    "--api-key",
                    "k",
                ]
            )
            == 0
        )
        assert (
            main(
                [
                    "eval",
                    "run",
                    "--suite",
                    "s.evals.x",
                    "--agent",
                    "support@1.0.0",
                    "--agent-version",
                    "3.0.0",
                    "--endpoint",
                    url,
                    "--api-key",
                    "k",
                ]
            )
            == 3
        )
    finally:
        server.shutdown()
        server.server_close()
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    assert out[0] == "tenant-a/r-captured00000000000000000000"
    assert json.loads(out[1]) == {"runId": "tenant-a/r-captured00000000000000000000", "status": "pending"}
    (path1, headers1, first), (_, _, second), (_, _, third) = _Capture.bodies
    # Only the run without a version asked the host which version it would get
    assert _Capture.gets == ["/agents/support/deployments"]
    assert "agent support: no registered versions" in captured.err and "name two versions" in captured.err
    assert path1 == "/runs" and headers1["Authorization"] == "Bearer k"
    assert first == {
        "mode": "eval",
        "evalSuiteRef": "s.evals.x@1.0.0",
        "agentId": "support",
        "baselineRunId": "tenant-a/r-base",
        "evalModes": ["golden", "regression"],
        "fixtureRuns": {"t1": "tenant-a/r-src"},
        "configurable": {"version": 1, "extensions": {"openwop-serverless": {"agentVersion": "2.0.0"}}},
    }
    assert second == {"mode": "eval", "evalSuiteRef": "s.evals.x", "agentId": "support", "evalModes": ["golden"]}
    assert third["configurable"] == {"version": 1, "extensions": {"openwop-serverless": {"agentVersion": "3.0.0"}}}


def _slow_suite(host) -> str:
    from tests.helpers import unique
    from tests.integration.test_eval_runs import put_suite

    suite_id = f"tests.local.evals.{unique('progress')}"
    doc = {
        "suiteId": suite_id,
        "version": "1.0.0",
        "modes": ["golden"],
        "trials": 5,
        "tasks": [
            {
                "taskId": f"t{i}",
                "input": {"calls": [], "answer": "x"},
                "expected": {"kind": "golden", "match": {"strategy": "exact", "value": "x"}},
            }
            for i in range(8)
        ],
    }
    assert put_suite(host, host.key_a, doc).status in (200, 201)
    return f"{suite_id}@1.0.0"


def test_wait_shows_tasks_and_trials_done_as_plain_lines_or_a_progress_bar(host):
    import io

    from rich.console import Console

    from shared.cli.evalhost import Host, wait
    from shared.cli.evalrequest import build_request

    api = Host(host.base_url, host.key_a)
    for terminal in (False, True):
        run = api.client.runs_create(build_request(_slow_suite(host), AGENT, None, [], [])).runId
        buf = io.StringIO()
        console = Console(file=buf, force_terminal=terminal, width=120)
        assert wait(api, run, 120, console, show=True) == "completed"
        out = buf.getvalue()
        if terminal:  # rich's live bar: the trials row with its M/N count, redrawn with ANSI control codes
            assert "\x1b[" in out and "trials" in out and "/40" in out
        else:  # one plain line per change, then the terminal status
            lines = out.splitlines()
            assert lines[-1] == f"{run}: completed"
            progress = [ln for ln in lines if ", trials " in ln]
            assert progress and all(ln.endswith("/40") and "tasks " in ln and "/8," in ln for ln in progress)


def test_a_cancelled_eval_is_unverifiable_exit_2_and_every_task_fails_in_junit(host, tmp_path, capsys):
    from tests.wire import wait_terminal

    client = host.client(host.key_a)
    from shared.cli.evalrequest import build_request

    run = client.runs_create(build_request(_slow_suite(host), AGENT, None, [], [])).runId
    client.runs_cancel(run)
    assert wait_terminal(client, run).status == "cancelled"
    junit = tmp_path / "cancelled.xml"
    assert cli(host, "compare", run, "--junit", str(junit)) == 2
    assert "verdict: unverifiable (exit 2)" in capsys.readouterr().out
    suite = ET.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("8", "8")


def test_a_changed_tool_argument_shows_in_the_table_json_and_junit(host, changed, tmp_path, capsys):
    # Given a v2 whose task "lookup" sends /opts/limit 2 where its baseline sent 1
    junit = tmp_path / "args.xml"
    # When it is compared in a table with a JUnit file
    assert cli(host, "compare", changed["candidate"], "--junit", str(junit)) == 1
    out = capsys.readouterr().out
    # Then one indented line names the divergence: trial, step, kind, pointer and both values
    line = (
        "  lookup: trial 1 step 0 tool-arguments at /opts/limit: baseline tool-call conformance.eval:echo "
        '{"opts":{"limit":1},"text":"find"} / candidate tool-call conformance.eval:echo '
        '{"opts":{"limit":2},"text":"find"}'
    )
    assert line in out.splitlines()
    assert not any(ln.startswith("  same:") for ln in out.splitlines())  # unchanged: no line
    # and the JUnit failure's message carries it
    failure = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}["lookup"].find("failure")
    assert failure.get("type") == "regressed"
    assert failure.get("message").endswith(line.split(": ", 1)[1]) and "/opts/limit" in failure.text
    # and --json carries the divergence member
    assert cli(host, "compare", changed["candidate"], "--json") == 1
    doc = json.loads(capsys.readouterr().out)
    div = {t["taskId"]: t["divergence"] for t in doc["tasks"]}
    assert div["same"] is None
    assert (div["lookup"]["kind"], div["lookup"]["pointers"], div["lookup"]["step"]) == (
        "tool-arguments",
        ["/opts/limit"],
        0,
    )


def test_an_answer_regression_without_a_changed_step_shows_expected_vs_actual(host, loop, capsys):
    # Given a candidate compared against another baseline, its changed answer the first divergence
    client = host.client(host.key_a)
    cand = run_eval(client, f"{loop['suite']}@1.1.0")
    # When compared client-side against the baseline
    assert cli(host, "compare", cand, "--baseline", loop["base"], "--json") == 1
    doc = json.loads(capsys.readouterr().out)
    rows = {t["taskId"]: t for t in doc["tasks"]}
    # Then the divergence is recomputed from both reports' trajectories
    assert rows["answer"]["divergence"]["kind"] == "final-output"
    assert rows["answer"]["divergence"]["candidate"] == {"type": "final-output", "output": "a changed answer"}
    assert rows["steady"]["divergence"] is None


def test_markdown_is_written_and_appended_to_the_step_summary(host, changed, tmp_path, monkeypatch, capsys):
    # Given a step summary file already holding another step's text
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    comment = tmp_path / "out" / "comment.md"
    viewer = "http://127.0.0.1:8080/host/openwop-serverless/ui"
    # When the regressed candidate is compared with --markdown and --viewer-url
    assert cli(host, "compare", changed["candidate"], "--markdown", str(comment), "--viewer-url", viewer) == 1
    capsys.readouterr()
    text = comment.read_text(encoding="utf-8")
    # Then the comment has the summary line, the per-task table, the divergence and the viewer links
    lines = text.splitlines()
    from urllib.parse import quote

    link = f"{viewer}#run={quote(changed['candidate'], safe='')}"
    assert lines[2].startswith(f"**eval regressed** (exit 1) · run [`{changed['candidate']}`]({link})")
    assert f"vs baseline [`{changed['base']}`]({viewer}#run={quote(changed['base'], safe='')})" in lines[2]
    assert "| same | 1.00 | 1.00 | 1/1 | 0 | unchanged |" in lines
    assert "| lookup | 1.00 | 0.00 | 0/1 | 0 | regressed |" in lines
    assert (
        "- **lookup** (regressed): `trial 1 step 0 tool-arguments at /opts/limit: baseline tool-call "
        'conformance.eval:echo {"opts":{"limit":1},"text":"find"} / candidate tool-call conformance.eval:echo '
        '{"opts":{"limit":2},"text":"find"}`'
    ) in lines
    assert lines[-1] == f"[Side by side in the viewer]({link})"
    # and the same markdown is appended to the step summary
    assert summary.read_text(encoding="utf-8") == "earlier step\n" + text


def test_the_step_summary_alone_gets_the_markdown_of_eval_run(host, changed, tmp_path, monkeypatch, capsys):
    # Given only GITHUB_STEP_SUMMARY (no --markdown)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    # When eval run --wait finishes an unchanged candidate
    code = cli(
        host, "run", "--suite", f"{changed['suite']}@1.0.0", "--agent", AGENT, "--baseline", changed["base"], "--wait"
    )
    capsys.readouterr()
    # Then the summary holds its comment: no divergences, no viewer link
    text = summary.read_text(encoding="utf-8")
    assert code == 0 and "**eval unchanged** (exit 0)" in text
    assert "What changed" not in text and "viewer" not in text
