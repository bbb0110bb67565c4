"""A custom scorer that is a registered HTTP tool, and statistics that do not cry wolf (decision 0114): the tool's
reason reaches the report, a replay of the eval makes 0 scorer calls, a task whose baseline trials disagree is
flaky (listed apart, never a regression alone) and the CLI's exit code follows."""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from openwop_client.types import ForkRunRequest

from shared.protocol.ids import project_id
from tests.integration.test_eval_runs import put_suite, run_eval, summary_json
from tests.wire import raw, wait_terminal

REPORT = "/host/openwop-serverless/runs/{}/eval-report"


class ScorerServer:
    """Loopback scorer: ``input.mode`` ``match`` passes when output == expected; ``alternate`` passes on every
    other request for the same input; ``fail`` always fails. Every request body is kept."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                with owner.lock:
                    owner.bodies.append(body)
                    seen = sum(1 for b in owner.bodies if b.get("input") == body.get("input"))
                mode = (body.get("input") or {}).get("mode")
                if mode == "alternate":
                    ok = seen % 2 == 1
                elif mode == "fail":
                    ok = False
                else:
                    ok = body.get("output") == body.get("expected")
                answer = {
                    "score": 1.0 if ok else 0.25,
                    "pass": ok,
                    "reason": f"loopback scorer: {'agreed' if ok else 'disagreed'} on request {seen}",
                }
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/score"

    def count(self) -> int:
        with self.lock:
            return len(self.bodies)


@pytest.fixture(scope="module")
def scorer(host):
    s = ScorerServer()
    tool_id = f"t{uuid.uuid4().hex[:8]}.evals:scorer"
    r = raw(
        host.base_url,
        "POST",
        "/host/openwop-serverless/tools",
        {
            "toolId": tool_id,
            "description": "Scores an answer",
            "source": {"kind": "http", "url": s.url},
            "inputSchema": {"type": "object", "required": ["input", "expected", "output", "trajectory"]},
            "replayPolicy": "idempotent",
        },
        key=host.key_a,
    )
    assert r.status == 201, r.text
    yield s, tool_id
    s.httpd.shutdown()
    s.httpd.server_close()


def _suite(suite_id: str, version: str, tool_id: str, wobbly_mode: str) -> dict[str, Any]:
    def task(task_id: str, mode: str, answer: str = "yes") -> dict[str, Any]:
        return {
            "taskId": task_id,
            "input": {"calls": [], "answer": answer, "mode": mode},
            "expected": {"kind": "golden", "match": {"strategy": "tool", "tool": tool_id, "value": "yes"}},
        }

    return {
        "suiteId": suite_id,
        "version": version,
        "modes": ["golden", "regression"],
        "trials": 2,
        "tasks": [
            task("steady", f"match-{version}"),
            task("wobbly", wobbly_mode),
            {
                "taskId": "mixed",
                "input": {"calls": [], "answer": "yes", "mode": f"m-{version}"},
                "expected": {
                    "kind": "golden",
                    "match": {
                        "strategy": "all-of",
                        "of": [
                            {"strategy": "exact", "value": "yes"},
                            {"strategy": "tool", "tool": tool_id, "value": "no"},
                        ],
                    },
                },
            },
        ],
    }


@pytest.fixture(scope="module")
def runs(host, scorer):
    server, tool_id = scorer
    client = host.client(host.key_a)
    suite_id = f"tests.local.evals.{uuid.uuid4().hex[:10]}"
    for version, wobbly in (("1.0.0", "alternate"), ("1.1.0", "fail")):
        r = put_suite(host, host.key_a, _suite(suite_id, version, tool_id, wobbly))
        assert r.status == 201, r.text
    base = run_eval(client, f"{suite_id}@1.0.0")
    cand = run_eval(client, f"{suite_id}@1.1.0", evalModes=["golden", "regression"], baselineRunId=base)
    return {"suite": suite_id, "base": base, "candidate": cand}


def test_the_tool_scorer_is_sent_the_task_and_its_answer_and_reason_reach_the_report(host, scorer, runs):
    server, tool_id = scorer
    # Given the baseline run (each task 2 trials, scored by the loopback tool)
    summary = summary_json(host, host.key_a, runs["base"])
    rows = {t["taskId"]: t for t in summary["tasks"]}
    # Then steady passed both trials, wobbly one of two (the tool alternates), mixed's tool part failed
    assert (rows["steady"]["score"], rows["steady"]["passed"]) == (1.0, True)
    assert (rows["wobbly"]["score"], rows["wobbly"]["passed"]) == (0.625, False)
    assert (rows["wobbly"]["passAtK"], rows["wobbly"]["passHatK"], rows["wobbly"]["trials"]) == (1.0, 0.0, 2)
    assert (rows["mixed"]["score"], rows["mixed"]["passed"]) == (0.625, False)
    # and the tool received {input, expected, output, trajectory}
    sent = [b for b in server.bodies if (b["input"] or {}).get("mode") == "match-1.0.0"]
    assert sent and sent[0] == {
        "input": {"calls": [], "answer": "yes", "mode": "match-1.0.0"},
        "expected": "yes",
        "output": "yes",
        "trajectory": [],
    }
    # When the report is read, each trial's tool reason is there
    rep = raw(host.base_url, "GET", REPORT.format(project_id(runs["base"])), key=host.key_a).json
    tasks = {t["taskId"]: t for t in rep["tasks"]}
    reasons = sorted(s["reason"] for s in tasks["wobbly"]["scorers"])
    assert [r.split(" on request")[0] for r in reasons] == ["loopback scorer: agreed", "loopback scorer: disagreed"]
    mixed = tasks["mixed"]["scorers"][0]
    assert [(p["strategy"], p["passed"]) for p in mixed["parts"]] == [("exact", True), ("tool", False)]
    assert mixed["parts"][1]["reason"].startswith("loopback scorer: disagreed")
    assert tasks["wobbly"]["passAtK"] == {"1": 0.5, "2": 1.0} and tasks["wobbly"]["passHatK"] == {"1": 0.5, "2": 0.0}
    # and the scorer's calls are not the agent's: none in the trial's tool calls
    assert all(t["toolCalls"] == [] for t in tasks["steady"]["trialResults"])


def test_a_flaky_baseline_task_is_listed_apart_and_never_a_regression_alone(host, runs):
    # Given a candidate where only wobbly (flaky in the baseline: its trials disagreed) fell
    summary = summary_json(host, host.key_a, runs["candidate"])
    reg = summary["regression"]
    # Then the paired verdict is unchanged, wobbly is listed apart, the pairing keeps its shape
    assert (reg["verdict"], reg["pairedTaskCount"], reg["flakyTasks"]) == ("unchanged", 3, ["wobbly"])
    assert reg["scoreDelta"] == pytest.approx((0.25 - 0.625) / 3)
    ci = reg["scoreDeltaInterval"]
    assert (ci["confidence"], ci["resamples"], ci["method"]) == (0.95, 4, "paired-bootstrap-exact")
    # the exact bootstrap: 1 of the 27 resamples draws wobbly's fall three times (3.7%, past the 2.5% tail)
    assert (ci["low"], ci["high"]) == (pytest.approx(0.25 - 0.625), 0.0)
    rep = raw(host.base_url, "GET", REPORT.format(project_id(runs["candidate"])), key=host.key_a).json
    assert rep["verdict"] == "unchanged" and rep["flakyTasks"] == ["wobbly"]
    assert {t["taskId"]: t["verdict"] for t in rep["tasks"]} == {
        "steady": "unchanged",
        "wobbly": "flaky",
        "mixed": "unchanged",
    }


def test_the_cli_exits_0_on_a_flaky_fall_and_junit_skips_it(host, runs, tmp_path, capsys):
    from shared.local.commands import main

    junit = tmp_path / "flaky.xml"
    # When the CLI compares the candidate with its own baseline, and with the baseline named explicitly
    code = main(
        [
            "eval",
            "compare",
            runs["candidate"],
            "--endpoint",
            host.base_url,
            "--api-key",
            host.key_a,
            "--junit",
            str(junit),
            "--allow-known-failures",
        ]
    )
    out = capsys.readouterr().out
    # Then exit 0, the flaky task listed apart, JUnit skips it (no failure); wobbly and mixed fail their
    # expectation as the baseline did, which --allow-known-failures tolerates (issue 36): skipped too
    assert code == 0, out
    assert "flaky (baseline trials disagreed, never a regression alone): wobbly" in out
    assert "[95% " in out
    text = junit.read_text()
    assert 'skipped="2"' in text and 'failures="0"' in text and "flaky: the baseline's trials disagreed" in text
    assert "tolerated (failed in the baseline too, --allow-known-failures): wobbly, mixed" in out
    # without it, those standing failures fail CI (exit 4), still no regression
    code = main(["eval", "compare", runs["candidate"], "--json", "--endpoint", host.base_url, "--api-key", host.key_a])
    doc = json.loads(capsys.readouterr().out)
    assert (code, doc["decidedBy"], doc["pairedVerdict"], doc["failedTasks"]) == (
        4,
        "failure",
        "unchanged",
        ["wobbly", "mixed"],
    )
    code = main(
        [
            "eval",
            "compare",
            runs["candidate"],
            "--baseline",
            runs["base"],
            "--baseline-any",  # the baseline failed wobbly and mixed too: named on purpose
            "--allow-known-failures",
            "--json",
            "--endpoint",
            host.base_url,
            "--api-key",
            host.key_a,
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert (code, doc["verdict"], doc["flakyTasks"]) == (0, "unchanged", ["wobbly"])


def test_a_replay_of_the_eval_makes_no_scorer_call_and_reproduces_the_scores(host, scorer, runs):
    server, _ = scorer
    client = host.client(host.key_a)
    before = server.count()
    # When the candidate is forked in replay mode from the start
    fork = client.runs_fork(runs["candidate"], ForkRunRequest(fromSeq=0, mode="replay"))
    assert wait_terminal(client, fork.runId, timeout=60).status == "completed"
    # Then the scorer tool got no request and the summary equals the source's
    assert server.count() == before
    assert summary_json(host, host.key_a, fork.runId) == summary_json(host, host.key_a, runs["candidate"])


def test_a_one_task_suite_whose_flaky_task_fell_is_not_regressed(host, scorer, capsys):
    from shared.local.commands import main

    _, tool_id = scorer
    client = host.client(host.key_a)
    suite_id = f"tests.local.evals.{uuid.uuid4().hex[:10]}"

    def suite(version: str, mode: str) -> dict[str, Any]:
        return {
            "suiteId": suite_id,
            "version": version,
            "modes": ["golden", "regression"],
            "trials": 2,
            "tasks": [
                {
                    "taskId": "wobbly",
                    "input": {"calls": [], "answer": "yes", "mode": mode, "suite": suite_id},
                    "expected": {"kind": "golden", "match": {"strategy": "tool", "tool": tool_id, "value": "yes"}},
                }
            ],
        }

    for version, mode in (("1.0.0", "alternate"), ("1.1.0", "fail")):
        assert put_suite(host, host.key_a, suite(version, mode)).status == 201
    # Given a baseline whose only task's two trials disagreed, and a candidate where it fails both
    base = run_eval(client, f"{suite_id}@1.0.0")
    cand = run_eval(client, f"{suite_id}@1.1.0", evalModes=["golden", "regression"], baselineRunId=base)
    reg = summary_json(host, host.key_a, cand)["regression"]
    # Then the interval over the one paired task is a point below 0: the task's own fall
    ci = reg["scoreDeltaInterval"]
    assert ci["low"] == ci["high"] == pytest.approx(0.25 - 0.625)
    # and still the flaky task alone does not make the suite regressed: listed apart, exit 0
    assert (reg["verdict"], reg["flakyTasks"]) == ("unchanged", ["wobbly"])
    # (the task fails its expectation as the baseline did: --allow-known-failures tolerates that, issue 36)
    code = main(
        [
            "eval",
            "compare",
            cand,
            "--json",
            "--allow-known-failures",
            "--endpoint",
            host.base_url,
            "--api-key",
            host.key_a,
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert (code, doc["verdict"], [t["verdict"] for t in doc["tasks"]]) == (0, "unchanged", ["flaky"])


SCORE_TOOL = {
    "name": "score_answer",
    "description": "Scores an answer: passes when the output equals the expected value.",
    "inputSchema": {"type": "object", "required": ["input", "expected", "output", "trajectory"]},
    "outputSchema": {
        "type": "object",
        "properties": {"score": {"type": "number"}, "pass": {"type": "boolean"}, "reason": {"type": "string"}},
        "required": ["score", "pass"],
    },
}


@pytest.fixture(scope="module")
def mcp_scorer(host):
    from shared.local.demo_mcp import DemoMcpServer

    sent: list[dict[str, Any]] = []

    def score(args: dict[str, Any]) -> dict[str, Any]:
        sent.append(args)
        ok = args.get("output") == args.get("expected")
        return {
            "score": 1.0 if ok else 0.0,
            "pass": ok,
            "reason": f"mcp scorer: {'agreed' if ok else 'disagreed'} with {args.get('expected')}",
        }

    server = DemoMcpServer(extra_tools=[(SCORE_TOOL, score)])
    url = server.start()
    server_id = "s" + uuid.uuid4().hex[:8]
    r = raw(
        host.base_url,
        "POST",
        "/host/openwop-serverless/mcp-servers",
        {
            "serverId": server_id,
            "url": url,
            "tools": {"score_answer": {"safetyTier": "read", "replayPolicy": "deterministic"}},
        },
        key=host.key_a,
    )
    assert r.status == 201, r.text
    yield server, f"mcp:{server_id}", sent
    server.stop()


def test_an_mcp_tool_scorer_passes_and_fails_and_its_reason_reaches_the_report(host, mcp_scorer):
    server, prefix, sent = mcp_scorer
    client = host.client(host.key_a)
    suite_id = f"tests.local.evals.{uuid.uuid4().hex[:10]}"

    def task(task_id: str, tool: str, value: str) -> dict[str, Any]:
        return {
            "taskId": task_id,
            "input": {"calls": [], "answer": "yes"},
            "expected": {"kind": "golden", "match": {"strategy": "tool", "tool": f"{prefix}.{tool}", "value": value}},
        }

    # Given tasks scored by a tool of a real MCP server on loopback: one it agrees with, one it does not, and one
    # scored by a tool that answers isError
    suite = {
        "suiteId": suite_id,
        "version": "1.0.0",
        "modes": ["golden"],
        "tasks": [
            task("agreed", "score_answer", "yes"),
            task("disagreed", "score_answer", "no"),
            task("errored", "fail_always", "yes"),
        ],
    }
    assert put_suite(host, host.key_a, suite).status == 201
    before = dict(server.calls)
    # When the eval runs
    run = run_eval(client, f"{suite_id}@1.0.0")
    # Then the MCP tool was called once per scored trial, with {input, expected, output, trajectory}
    assert server.calls["score_answer"] - before.get("score_answer", 0) == 2
    assert server.calls["fail_always"] - before.get("fail_always", 0) == 1
    assert {"input": {"calls": [], "answer": "yes"}, "expected": "no", "output": "yes", "trajectory": []} in sent
    # and its answer (the result's structuredContent) decided each task
    rows = {t["taskId"]: t for t in summary_json(host, host.key_a, run)["tasks"]}
    assert {k: (v["passed"], v["score"]) for k, v in rows.items()} == {
        "agreed": (True, 1.0),
        "disagreed": (False, 0.0),
        "errored": (False, 0.0),
    }
    # and each reason reached the report
    rep = raw(host.base_url, "GET", REPORT.format(project_id(run)), key=host.key_a).json
    reasons = {t["taskId"]: t["scorers"][0]["reason"] for t in rep["tasks"]}
    assert reasons == {
        "agreed": "mcp scorer: agreed with yes",
        "disagreed": "mcp scorer: disagreed with no",
        "errored": "the scorer tool answered with an error (isError)",
    }
