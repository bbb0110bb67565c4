"""The viewer page (GET /host/openwop-serverless/ui/): served with a strict CSP, and driven in a real headless
Chromium (Debian's ``chromium``, installed by ``make browser``; Playwright only drives it) against the local host:
the page lists a run, shows an eval's regressed task in red, shows a fork's divergence. Screenshots go to
``build/screenshots/``."""

from __future__ import annotations

import base64
import hashlib
import re
import time
from pathlib import Path

import pytest
from openwop_client.types import CreateRunRequest, ForkRunRequest

from tests.evalseed import seed_argument_change, seed_drift, seed_regression
from tests.wire import all_events, raw, types_of, wait_terminal

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "build" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PAGE = "/host/openwop-serverless/ui/"


def _sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_page_is_served_with_a_strict_content_security_policy(host):
    r = raw(host.base_url, "GET", PAGE)
    assert r.status == 200 and r.headers["content-type"].startswith("text/html")
    csp = dict(part.strip().split(" ", 1) for part in r.headers["content-security-policy"].split(";"))
    script = re.search(r"<script>(.*)</script>", r.text, re.S).group(1)
    style = re.search(r"<style>(.*)</style>", r.text, re.S).group(1)
    assert csp == {
        "default-src": "'none'",
        "script-src": _sha(script),
        "style-src": _sha(style),
        "connect-src": "'self'",
        "img-src": "'self' data:",
        "base-uri": "'none'",
        "form-action": "'none'",
        "frame-ancestors": "'none'",
    }
    assert "unsafe" not in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff"
    # (the key reaches localStorage only when the user ticks "remember": test_viewer_links, decision 0142)
    assert "sessionStorage" in script and "innerHTML" not in script
    # no auth on the page itself; the same document without the trailing slash
    assert raw(host.base_url, "GET", PAGE.rstrip("/")).text == r.text


def _diverged_fork(client):
    src = client.runs_create(CreateRunRequest(workflowId="conformance-replay-side-effect", inputs={"delayMs": 4000}))
    deadline = time.monotonic() + 30
    while ("node.started", "wait") not in types_of(all_events(client, src.runId)):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    client.runs_cancel(src.runId)
    wait_terminal(client, src.runId)
    fork = client.runs_fork(src.runId, ForkRunRequest(fromSeq=0, mode="replay"))
    wait_terminal(client, fork.runId, timeout=30)
    return src.runId, fork.runId


@pytest.fixture(scope="module")
def seeded(host):
    client = host.client(host.key_a)
    noop = client.runs_create(CreateRunRequest(workflowId="conformance-noop")).runId
    wait_terminal(client, noop)
    source, fork = _diverged_fork(client)
    return {
        "run": noop,
        "source": source,
        "fork": fork,
        "drift": seed_drift(client)["drift"],
        **seed_regression(host, client, host.key_a),
    }


def _open(browser, host, *, check_start: bool = False, url: str | None = None):
    """A page of the viewer with the tenant-a key pasted (or opened at ``url``, which signs in itself); its console,
    page errors and HTTP errors collected."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    console: list[str] = []
    page.on("console", lambda msg: console.append(f"{msg.type}: {msg.text}"))
    page.on("pageerror", lambda exc: console.append(f"pageerror: {exc}"))
    page.on("response", lambda r: console.append(f"error: {r.status} {r.url}") if r.status >= 400 else None)
    if url is not None:
        page.on("request", lambda r: console.append(f"request: {r.url}"))
        page.goto(url)
        return page, console
    page.goto(host.base_url + PAGE)
    if check_start:
        assert page.title() == "openwop-serverless viewer"
        assert page.text_content("#status") == "paste an API key to start"
    page.fill("#api-key", host.key_a)
    page.click("#key-form button[type=submit]")
    return page, console


def _model_agent_run(host) -> tuple[str, str]:
    """A run of a model-backed agent named without a version (no deployment: its newest registered version)."""
    import uuid

    from tests.workflows import definition, node, static

    agent_id = f"v{uuid.uuid4().hex[:8]}.answerer"
    for version in ("1.0.0", "1.1.0"):
        body = {
            "version": version,
            "model": {"provider": "mock", "model": "m", "mockProvider": {"script": [{"text": "42"}]}},
            "manifest": {"agentId": agent_id, "persona": "Answerer", "modelClass": "general", "systemPrompt": "answer"},
        }
        assert raw(host.base_url, "POST", "/host/openwop-serverless/agents", body, key=host.key_a).status == 201
    n = node("agent", "core.agent", inputs={"input": static("six times seven?")})
    n["agent"] = {"agentId": agent_id}
    wid = f"wf-{uuid.uuid4().hex[:10]}"
    assert (
        raw(host.base_url, "POST", "/host/openwop-serverless/workflows", definition(wid, [n]), key=host.key_a).status
        == 201
    )
    client = host.client(host.key_a)
    run_id = client.runs_create(CreateRunRequest(workflowId=wid)).runId
    assert wait_terminal(client, run_id).status == "completed"
    return agent_id, run_id


def test_the_viewer_in_headless_chromium_shows_runs_a_regressed_task_and_a_fork_divergence(host, seeded):
    from playwright.sync_api import sync_playwright

    agent_id, agent_run = _model_agent_run(host)

    assert Path(CHROMIUM).exists(), "Debian chromium is missing: run `make browser` (make test does)"
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            # the key is pasted once and kept in sessionStorage; the tenant's runs are listed
            page, console = _open(browser, host, check_start=True)
            page.wait_for_selector(f"tr.run-row[data-run-id='{seeded['run']}']")
            assert page.evaluate("sessionStorage.getItem('openwop.viewer.apiKey')") == host.key_a
            assert page.evaluate("localStorage.length") == 0
            assert page.input_value("#api-key") == ""
            listed = page.eval_on_selector_all("tr.run-row", "rows => rows.map(r => r.dataset.runId)")
            assert {seeded["run"], seeded["candidate"], seeded["fork"]} <= set(listed)
            assert all(r.startswith("tenant-a/") for r in listed)
            page.screenshot(path=str(SHOTS / "runs.png"), full_page=True)

            # an eval against its baseline: the regressed task is red, the others are not
            page.evaluate(f"location.hash = 'run=' + encodeURIComponent({seeded['candidate']!r})")
            page.wait_for_selector("#eval-tasks tr.task-row.regressed")
            rows = page.eval_on_selector_all(
                "#eval-tasks tr.task-row",
                "rows => rows.map(r => [r.dataset.taskId, r.cells[8].textContent, getComputedStyle(r.cells[8]).color])",
            )
            assert rows == [
                ["steady", "unchanged", "rgb(0, 0, 0)"],
                ["served", "unchanged", "rgb(0, 0, 0)"],
                ["answer", "regressed", "rgb(200, 30, 30)"],
            ]
            assert "paired verdict regressed" in page.text_content("#eval-aggregate")
            provs = page.eval_on_selector_all("#tool-calls td.provenance", "cells => cells.map(c => c.textContent)")
            assert provs == ["live", "live", "served", "served"]
            page.screenshot(path=str(SHOTS / "eval.png"), full_page=True)

            # an eval served from a recorded run, with a fixture miss: refused vs served calls, the differing pointer
            page.evaluate(f"location.hash = 'run=' + encodeURIComponent({seeded['drift']!r})")
            page.wait_for_selector("#eval-tasks tr.task-row.unverifiable")
            assert page.eval_on_selector_all(".diagnostic .pointer", "els => els.map(e => e.textContent)") == ["/key"]
            provs = page.eval_on_selector_all("#tool-calls td.provenance", "cells => cells.map(c => c.textContent)")
            assert provs == ["refused", "served"]
            page.screenshot(path=str(SHOTS / "eval-miss.png"), full_page=True)

            # a fork side by side with its source, the divergence highlighted
            page.evaluate(f"location.hash = 'run=' + encodeURIComponent({seeded['fork']!r})")
            page.wait_for_selector("#fork-fork li.diverged")
            assert page.text_content("#fork-source-id") == seeded["source"]
            assert page.text_content("#fork-summary").startswith("diverged at seq 2")
            first = page.eval_on_selector("#fork-fork li.diverged", "li => [li.dataset.seq, li.textContent]")
            assert first[0] == "2" and "node.completed" in first[1]
            bg = page.eval_on_selector("#fork-fork li.diverged", "li => getComputedStyle(li).backgroundColor")
            assert bg == "rgb(255, 236, 179)"
            page.screenshot(path=str(SHOTS / "fork.png"), full_page=True)

            # a model-backed agent's run shows the version it was resolved to at create
            page.evaluate(f"location.hash = 'run=' + encodeURIComponent({agent_run!r})")
            page.wait_for_selector("#agent-versions:not(:empty)")
            assert page.text_content("#agent-versions") == f"agent versions: {agent_id}@1.1.0"
            assert not [m for m in console if "Content Security Policy" in m or "pageerror" in m], console
        finally:
            browser.close()
    for name in ("runs.png", "eval.png", "eval-miss.png", "fork.png"):
        assert (SHOTS / name).stat().st_size > 10_000


def test_the_viewer_shows_baseline_and_candidate_trajectories_side_by_side_with_the_divergence(host):
    from playwright.sync_api import sync_playwright

    # Given a v2 that changes one tool argument of task "lookup" against its baseline
    changed = seed_argument_change(host, host.client(host.key_a), host.key_a)
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page, console = _open(browser, host)
            page.wait_for_selector("tr.run-row")
            # When the candidate is opened
            page.evaluate(f"location.hash = 'run=' + encodeURIComponent({changed['candidate']!r})")
            pair = "#eval-trajectories details.trajectory-pair[data-task-id='lookup']"
            page.wait_for_selector(f"{pair} .trajectory-candidate li.diverged")
            # Then both sides list the task's steps, the first divergence (step 0, the call) marked on each
            sides = page.eval_on_selector_all(
                f"{pair} ol.trajectory",
                "ols => ols.map(ol => Array.from(ol.children).map(li => [li.dataset.step, li.className, li.textContent]))",
            )
            assert sides == [
                [
                    ["0", "diverged", 'tool-call conformance.eval:echo {"text":"find","opts":{"limit":1}}'],
                    ["1", "", 'tool-answer conformance.eval:echo {"text":"find","opts":{"limit":1}}'],
                    ["2", "", 'final-output "found"'],
                ],
                [
                    ["0", "diverged", 'tool-call conformance.eval:echo {"text":"find","opts":{"limit":2}}'],
                    ["1", "", 'tool-answer conformance.eval:echo {"text":"find","opts":{"limit":2}}'],
                    ["2", "", 'final-output "found"'],
                ],
            ]
            assert page.eval_on_selector(pair, "d => d.open") is True
            assert page.text_content(f"{pair} summary").startswith(
                "lookup (trial 1): first divergence at step 0, tool-arguments"
            )
            assert page.eval_on_selector_all(f"{pair} .pointer", "els => els.map(e => e.textContent)") == [
                "/opts/limit"
            ]
            bg = page.eval_on_selector(f"{pair} li.diverged", "li => getComputedStyle(li).backgroundColor")
            assert bg == "rgb(255, 236, 179)"
            # and the unchanged task is listed closed, with no mark
            same = "#eval-trajectories details.trajectory-pair[data-task-id='same']"
            assert page.eval_on_selector(same, "d => d.open") is False
            assert page.eval_on_selector_all(f"{same} li.diverged", "els => els.length") == 0
            page.eval_on_selector(same, "d => { d.open = true; }")
            page.screenshot(path=str(SHOTS / "eval-trajectories.png"), full_page=True)
            assert not [m for m in console if m.startswith(("error", "pageerror"))], console
        finally:
            browser.close()
    assert (SHOTS / "eval-trajectories.png").stat().st_size > 10_000


def test_the_served_viewer_url_signs_in_and_the_run_list_shows_and_filters_evals(host):
    from playwright.sync_api import sync_playwright

    from shared.local.commands import viewer_url

    # Given two named eval runs of one suite and agent, one regressed against the other
    changed = seed_argument_change(host, host.client(host.key_a), host.key_a)
    rows = raw(host.base_url, "GET", "/host/openwop-serverless/eval-runs?limit=100", key=host.key_a).json["evalRuns"]
    cand = next(r for r in rows if r["runId"] == changed["candidate"])
    base = next(r for r in rows if r["runId"] == changed["base"])
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            # When the URL `serve` prints is opened (the key in its fragment)
            page, console = _open(browser, host, url=viewer_url(host.base_url, host.key_a))
            row = f"tr.run-row[data-run-id='{changed['candidate']}']"
            page.wait_for_selector(row)
            # Then the key is kept for the session, out of the address bar and of every request URL
            assert page.evaluate("sessionStorage.getItem('openwop.viewer.apiKey')") == host.key_a
            assert page.evaluate("location.hash") == ""
            requests = [m for m in console if m.startswith("request: ")]
            assert requests and not [u for u in requests if host.key_a in u], requests
            # and the candidate's row shows its suite, agent@version, score and verdict
            cells = page.eval_on_selector(row, "r => Array.from(r.cells).slice(3, 8).map(c => c.textContent)")
            assert cells == [
                f"{cand['suiteId']}@{cand['suiteVersion']}",
                f"{cand['agentId']}@{cand['agentVersion']}" if cand.get("agentVersion") else cand["agentId"],
                "-",
                f"{cand['aggregateScore']:.2f}",
                cand["verdict"],
            ]
            page.screenshot(path=str(SHOTS / "runs-evals.png"), full_page=True)
            # When the list is filtered by the suite and the candidate's verdict
            page.fill("#filter-suite", cand["suiteId"])
            page.select_option("#filter-verdict", cand["verdict"])
            page.click("#run-filters button[type=submit]")
            page.wait_for_selector(f"tr.run-row[data-run-id='{changed['base']}']", state="detached")
            # Then only that suite's runs with that verdict are listed
            listed = page.eval_on_selector_all("tr.run-row", "rows => rows.map(r => r.dataset.runId)")
            assert changed["candidate"] in listed and changed["base"] not in listed
            assert base["verdict"] != cand["verdict"]
            assert not [m for m in console if m.startswith(("error", "pageerror"))], console
        finally:
            browser.close()
    assert (SHOTS / "runs-evals.png").stat().st_size > 10_000
