"""RFC 0158's durability test hook (``/host/durability/kill``), served with the conformance seams profile: the
``duplicate-delivery`` exercise delivers one accepted run twice (two executions of its state machine racing on it);
the run still has one terminal event and nothing after it, and its one outside effect reaches the receiver once.
The kill modes are refused (no process of this host is killed by a request); without the setting the hook is a
path never served."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from shared.cli.webhook_receiver import WebhookReceiver
from shared.protocol.ids import project_id
from tests.helpers import wait_for_execution
from tests.wire import raw

KILL = "/host/durability/kill"
IN_FLIGHT_S = 1.5  # the receiver holds each request this long: the second delivery meets the first one's claim


def _ports():
    from shared.wiring import get_ports

    return get_ports()


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    rx = WebhookReceiver(on_hit=lambda hit: time.sleep(IN_FLIGHT_S))
    rx.start()
    yield rx
    rx.stop()


def _log(host, run_id: str) -> list[str]:
    got = raw(host.base_url, "GET", f"/runs/{project_id(run_id)}/events/poll?timeout=1", key=host.key_a)
    assert got.status == 200, got.text
    return [e["type"] for e in got.json["events"]]


def _newest_run(host) -> str | None:
    """The id of tenant A's newest run (the runs list is newest first)."""
    page = _ports().runs.list_runs(host.tenant_a, 1, None, {})
    return page.runs[0].run_id if page.runs else None


def _executions(host, run_id: str) -> dict[str, str]:
    """The executions of the run state machine started for ``run_id``: name -> ARN."""
    sfn = host.aws.client("stepfunctions")
    prefix = run_id.replace("/", "--") + "-run"
    return {
        e["name"]: e["executionArn"]
        for e in sfn.list_executions(stateMachineArn=_ports().settings.state_machine_arn("run"))["executions"]
        if e["name"].startswith(prefix)
    }


def test_the_probe_names_the_one_mode_this_host_stages_and_fires_nothing(host):
    before = _newest_run(host)
    got = raw(host.base_url, "GET", KILL, key=host.key_a)
    assert (got.status, got.json) == (200, {"modes": ["duplicate-delivery"]})
    assert _newest_run(host) == before
    assert raw(host.base_url, "GET", KILL).status == 401


def test_work_delivered_twice_fires_its_effect_once_and_ends_its_log_once(host, receiver):
    # When one run whose node POSTs to a loopback receiver is accepted once and delivered twice
    got = raw(
        host.base_url,
        "POST",
        KILL,
        {"mode": "duplicate-delivery", "effectUrl": receiver.url + "/effect"},
        key=host.key_a,
    )
    assert got.status == 201, got.text
    run_id = got.json["runId"]
    assert {k: got.json[k] for k in ("mode", "workflowId", "deliveries")} == {
        "mode": "duplicate-delivery",
        "workflowId": "conformance-durability-effect",
        "deliveries": 2,
    }
    # Then two executions raced on it, and both have ended (the second found the effect's claim taken, waited, and
    # found the run finished)
    executions = _executions(host, run_id)
    assert sorted(executions) == sorted([run_id.replace("/", "--") + "-run", run_id.replace("/", "--") + "-run-r"])
    sfn = host.aws.client("stepfunctions")
    assert {wait_for_execution(sfn, arn, timeout=30)["status"] for arn in executions.values()} == {"SUCCEEDED"}
    # and the log holds one terminal event with nothing after it
    assert _log(host, run_id) == ["run.started", "node.started", "node.completed", "run.completed"]
    # and the effect reached the receiver once, and is one claim in the run's effect ledger
    assert [h.path for h in receiver.hits] == ["/effect"]
    effects = raw(host.base_url, "GET", f"/runs/{project_id(run_id)}/effects", key=host.key_a).json["effects"]
    assert [(e["nodeId"], e["state"]) for e in effects] == [("fire", "claimed")]


def test_without_an_effect_url_the_work_writes_one_ledger_row(host):
    got = raw(
        host.base_url, "POST", KILL, {"mode": "duplicate-delivery", "workflowId": "conformance-noop"}, key=host.key_a
    )
    assert got.status == 201, got.text
    run_id = got.json["runId"]
    assert got.json["workflowId"] == "conformance-durability-effect"  # the hook chooses work with an effect
    assert _log(host, run_id)[-1] == "run.completed"
    assert len(_ports().host.query(f"LEDGER#{host.tenant_a}", f"{run_id}#")) == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"mode": "after-accept", "workflowId": "conformance-noop"}, "mode"),
        ({"mode": "during-execution", "workflowId": "conformance-noop"}, "mode"),
        ({"mode": "duplicate-delivery", "effectUrl": "ftp://127.0.0.1/x"}, "effectUrl"),
    ],
)
def test_what_this_host_does_not_stage_is_refused_and_starts_nothing(host, body, field):
    before = _newest_run(host)
    got = raw(host.base_url, "POST", KILL, body, key=host.key_a)
    assert (got.status, got.json["error"], got.json["details"]["field"]) == (400, "validation_error", field)
    assert _newest_run(host) == before


@pytest.mark.parametrize("body", [{"mode": "kill-everything"}, {"mode": "duplicate-delivery", "extra": 1}, {}])
def test_a_body_outside_the_contract_is_400(host, body):
    got = raw(host.base_url, "POST", KILL, body, key=host.key_a)
    assert (got.status, got.json["error"]) == (400, "validation_error")


def test_with_the_setting_off_the_hook_is_a_path_never_served(host, monkeypatch):
    from shared.settings import get_settings

    monkeypatch.setenv("OPENWOP_CONFORMANCE_SEAMS", "false")
    get_settings.cache_clear()
    try:
        unknown = raw(host.base_url, "GET", "/host/durability/no-such-hook", key=host.key_a)
        probe = raw(host.base_url, "GET", KILL, key=host.key_a)
        fired = raw(host.base_url, "POST", KILL, {"mode": "duplicate-delivery"}, key=host.key_a)
        other = raw(host.base_url, "PUT", KILL, {}, key=host.key_a)
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
    # Then the probe the suite sends reads "no hook" (404), as every other method and the exercise do
    for got in (probe, fired, other):
        assert (got.status, got.json, "allow" in got.headers) == (404, unknown.json, False)
    # and with the setting on, a method the hook is not served with is 405 with Allow
    got = raw(host.base_url, "PUT", KILL, {}, key=host.key_a)
    assert (got.status, got.headers.get("allow")) == (405, "GET, POST")
