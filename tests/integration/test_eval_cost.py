"""Cost that is unknown says so (issue 36 part 4): an eval of a model with no known price shows ``unknown`` in the
table and the markdown and ``null`` in ``--json`` (the summary leaves ``costUsd``/``totalCostUsd`` out, as the spec
allows), never ``0.0000``; a price registered on the agent version's model binding prices its calls; a malformed
price is refused with a pointer. A real loopback chat-completions server answers the model calls."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from shared.protocol.ids import project_id
from tests.chat_server import ScriptedChatServer, completion
from tests.integration.test_eval_runs import golden, put_suite
from tests.integration.test_release_cli import cli
from tests.wire import raw

BASE = "/host/openwop-serverless"
PRICE = {"inputPerMTokUsd": 1000, "outputPerMTokUsd": 2000}


def _register(host: Any, agent_id: str, version: str, url: str, price: dict[str, Any] | None) -> Any:
    model: dict[str, Any] = {"provider": "openai", "model": "gpt-test", "baseUrl": url}
    if price is not None:
        model["price"] = price
    body = {
        "version": version,
        "model": model,
        "manifest": {"agentId": agent_id, "persona": "A", "modelClass": "general", "systemPrompt": "Answer."},
    }
    return raw(host.base_url, "POST", f"{BASE}/agents", body, key=host.key_a)


@pytest.fixture
def chat():
    s = ScriptedChatServer()
    s.start()
    s.answers = [(200, completion("42", usage=(21, 4)), {}) for _ in range(10)]
    yield s
    s.stop()


def test_an_unpriced_model_costs_unknown_and_a_registered_price_prices_it(host, chat, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    org = "c" + uuid.uuid4().hex[:8]
    agent_id = f"{org}.answerer"
    # Given version 1.0.0 of a model no price table knows, and 2.0.0 of the same model with a registered price
    assert _register(host, agent_id, "1.0.0", chat.url, None).status == 201
    assert _register(host, agent_id, "2.0.0", chat.url, PRICE).status == 201
    suite = f"tests.{org}.evals.cost"
    doc = {"suiteId": suite, "version": "1.0.0", "modes": ["golden"], "targetAgentId": agent_id}
    doc["tasks"] = [{"taskId": "q", "input": "What is six times seven?", "expected": golden("42")}]
    assert put_suite(host, host.key_a, doc).status == 201
    # When 1.0.0 is evaluated through the CLI
    md = tmp_path / "eval.md"
    code = cli(
        host,
        "eval",
        "run",
        "--suite",
        f"{suite}@1.0.0",
        "--agent",
        f"{agent_id}@1.0.0",
        "--wait",
        "--markdown",
        str(md),
    )
    out = capsys.readouterr().out
    assert code == 0, out
    # Then the table and the markdown say unknown, never 0.0000
    row = next(line for line in out.splitlines() if line.strip("│ ").startswith("q "))
    assert "unknown" in row and "0.0000" not in out
    assert "cost USD unknown" in out
    assert "· cost USD unknown" in md.read_text()
    # And --json says null, and the summary leaves the cost out (the spec's number, absent when unknown)
    listed = raw(host.base_url, "GET", f"{BASE}/eval-runs?agent={agent_id}", key=host.key_a).json
    unpriced = listed["evalRuns"][0]["runId"]
    assert cli(host, "eval", "compare", unpriced, "--json") == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["tasks"][0]["costUsd"] is None and rep["totalCostUsd"] is None
    summary = raw(host.base_url, "GET", f"/runs/{project_id(unpriced)}/eval-summary", key=host.key_a).json
    assert "costUsd" not in summary["tasks"][0] and "totalCostUsd" not in summary
    # When 2.0.0 (priced) is evaluated
    assert (
        cli(host, "eval", "run", "--suite", f"{suite}@1.0.0", "--agent", f"{agent_id}@2.0.0", "--wait", "--json") == 0
    )
    rep = json.loads(capsys.readouterr().out)
    # Then its calls cost what the registered price says: 21 in x 1000 + 4 out x 2000 per million tokens
    assert rep["tasks"][0]["costUsd"] == pytest.approx(0.029) and rep["totalCostUsd"] == pytest.approx(0.029)
    summary = raw(host.base_url, "GET", f"/runs/{project_id(rep['runId'])}/eval-summary", key=host.key_a).json
    assert summary["totalCostUsd"] == pytest.approx(0.029)
    # And a malformed price is refused where it is wrong, nothing registered
    for bad, at in (
        ({"inputPerMTokUsd": 1}, "/model/price/outputPerMTokUsd"),
        ({**PRICE, "currency": "EUR"}, "/model/price/currency"),
        ({**PRICE, "inputPerMTokUsd": -1}, "/model/price/inputPerMTokUsd"),
        ({**PRICE, "outputPerMTokUsd": "2"}, "/model/price/outputPerMTokUsd"),
    ):
        r = _register(host, agent_id, "3.0.0", chat.url, bad)
        assert r.status == 400 and r.json["error"] == "validation_error", r.text
        assert [e["pointer"] for e in r.json["details"]["errors"]] == [at], r.text
    assert raw(host.base_url, "GET", f"/agents/{agent_id}", key=host.key_a).json["versions"] == ["1.0.0", "2.0.0"]
