"""A run the host accepts is a run it can store and execute: large creation facts live in S3, and whatever the
store still cannot hold is refused up front with 413, never a 500 or a run that fails later."""

from __future__ import annotations

import pytest

from shared.protocol.ids import project_id
from tests.helpers import unique
from tests.wire import raw, wait_terminal


def _ports():
    from shared.wiring import get_ports

    return get_ports()


@pytest.mark.parametrize("kb", [210, 260, 500, 900])
def test_large_inputs_are_accepted_stored_and_executed(host, kb):
    # Given inputs of a size that used to overflow the 400 KB run item (210-260 KB failed later, 500+ was a 500)
    message = "x" * (kb * 1000)
    # When a run is created with them
    r = raw(
        host.base_url,
        "POST",
        "/runs",
        {"workflowId": "conformance-multi-node", "inputs": {"message": message}},
        key=host.key_a,
    )
    # Then it is accepted, completes, and reads back whole
    assert r.status == 201, r.text
    run_id = r.json["runId"]
    assert wait_terminal(host.client(host.key_a), run_id).status == "completed"
    snap = raw(host.base_url, "GET", f"/runs/{project_id(run_id)}", key=host.key_a).json
    assert snap["inputs"]["message"] == message
    if kb >= 500:  # the creation facts went to S3 under the run's own prefix
        assert _ports().blobs.list_keys(f"runs/{run_id}/data.json") == [f"runs/{run_id}/data.json"]


def test_large_metadata_on_a_fork_is_stored(host):
    r = raw(
        host.base_url,
        "POST",
        "/runs",
        {"workflowId": "conformance-noop", "metadata": {"m": "y" * 600_000}},
        key=host.key_a,
    )
    assert r.status == 201, r.text
    run_id = r.json["runId"]
    wait_terminal(host.client(host.key_a), run_id)
    fork = raw(
        host.base_url,
        "POST",
        f"/runs/{project_id(run_id)}:fork",
        {"mode": "branch", "fromSeq": 0, "runOptionsOverlay": {"metadata": {"n": "z" * 300_000}}},
        key=host.key_a,
    )
    assert fork.status == 201, fork.text
    assert wait_terminal(host.client(host.key_a), fork.json["runId"]).status == "completed"


def test_an_eval_suite_too_large_to_store_is_413_not_500(host):
    # Given a schema-valid suite of ~700 KB that does not compress below 400 KB (random text: the body limit is 1 MB;
    # a suite item, compressed, must fit in 400 KB)
    import base64
    import random

    noise = base64.b64encode(random.Random(15).randbytes(525_000)).decode()
    task = {
        "taskId": "t",
        "input": {"calls": [], "answer": noise},
        "expected": {"kind": "golden", "match": {"strategy": "exact", "value": "a"}},
    }
    doc = {
        "suiteId": "tests.local.evals." + unique("big").replace("-", ""),
        "version": "1.0.0",
        "modes": ["golden"],
        "tasks": [task],
    }
    r = raw(host.base_url, "POST", "/host/openwop-serverless/eval-suites", doc, key=host.key_a)
    # Then it is refused with the envelope, and nothing is stored under its id
    assert (r.status, r.json["error"]) == (413, "payload_too_large"), r.text
    assert raw(host.base_url, "POST", "/host/openwop-serverless/eval-suites", doc, key=host.key_a).status == 413
