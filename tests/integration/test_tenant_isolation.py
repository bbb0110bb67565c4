"""Fault injection: tenant A floods the write routes past its limit while tenant B works. A's excess gets the
protocol's ``429 rate_limited`` with ``Retry-After``; every run B starts is admitted and finishes."""

from __future__ import annotations

import re
import time
from urllib.parse import quote

from shared.local.commands import seed
from shared.manifest.routes import ROUTES, SEAMS_PATH
from shared.services.ratelimits import WRITE_METHODS
from tests.helpers import unique
from tests.isolation import create, flooding, write_limits
from tests.wire import raw, wait_terminal

RATE, BURST = 1, 3  # the local host creates a few runs a second: a low limit makes A's 6 clients a flood


def test_a_flooding_tenant_is_refused_past_its_limit_and_the_other_tenants_runs_all_finish(host):
    # Given two fresh tenants (full buckets) and a write limit of 1 a second, 3 at once, per tenant
    tenant_a, tenant_b = unique("tenant-flood-a"), unique("tenant-flood-b")
    key_a, key_b = unique("key-flood-a"), unique("key-flood-b")
    assert seed({key_a: tenant_a, key_b: tenant_b})
    client_b = host.client(key_b)
    with write_limits(RATE, BURST):
        # When A floods POST /runs from 6 clients (240 requests back to back) while B starts a run every 1.2 s
        b_answers = []
        with flooding(host.base_url, key_a, "conformance-noop", threads=6, per_thread=40) as flood:
            for _ in range(6):
                b_answers.append(create(host.base_url, key_b, "conformance-noop")[0])
                time.sleep(1.2 / RATE)  # the scenario's pace: B writes a little slower than its bucket refills
        # Then A's excess was refused with the protocol's envelope and a Retry-After, never a 5xx
        assert sum(flood.statuses.values()) == 240
        assert set(flood.statuses) <= {201, 429}, flood.statuses
        assert flood.statuses[429] >= 240 - (BURST + RATE * flood.seconds + 1) > 100
        for refusal in flood.refusals:
            assert refusal.json == {"error": "rate_limited", "message": refusal.json["message"]}
            assert 1 <= int(refusal.headers["retry-after"]) <= 1 / RATE  # whole seconds until a token is back
        # and A got at most its burst plus what the bucket refilled while it flooded
        assert BURST <= flood.statuses[201] <= BURST + RATE * flood.seconds + 1
        # and every run B asked for was admitted and finishes
        assert [a.status for a in b_answers] == [201] * 6
        for answer in b_answers:
            assert wait_terminal(client_b, answer.json["runId"], timeout=90).status == "completed"
        # and so do A's admitted runs (the refusals cost them nothing)
        for run_id in flood.admitted_runs:
            assert wait_terminal(host.client(key_a), run_id, timeout=90).status == "completed"


def _concrete(path: str, tenant: str) -> str:
    """An operation path with every ``{name}`` segment filled with a well-formed value of ``tenant``."""
    values = {
        "runId": quote(f"{tenant}/{unique('r')}", safe=""),
        "toolId": quote("acme.crm:lookup", safe=""),
        "collection": "runs:bulk-cancel",
        "version": "1.0.0",
        "channel": "stable",
    }
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), unique(m.group(1).lower())), path)


def test_every_authenticated_write_operation_takes_a_token_before_anything_else(host):
    from shared.settings import get_settings

    # Given a fresh tenant whose bucket holds one token and refills one in 1,000 s
    tenant, key = unique("tenant-bucket"), unique("key-bucket")
    assert seed({key: tenant})
    operations = sorted({(r.method, op) for r in ROUTES if r.auth and r.method in WRITE_METHODS for op in r.operations})
    assert len(operations) > 30
    with write_limits(0.001, 1):  # type: ignore[arg-type]
        seams_on = get_settings().conformance_seams
        # When its one token is spent, then every authenticated write operation of the route table is asked
        assert raw(host.base_url, "DELETE", f"/webhooks/{unique('wh')}", key=key).status == 400  # malformed id
        answers = {
            (method, op): raw(host.base_url, method, _concrete(op, tenant), {}, key=key) for method, op in operations
        }
    # Then each is refused 429 rate_limited with a Retry-After, before its body, path or ids were looked at
    # (a seam path off the certification profile is not served at all)
    for (method, op), answer in answers.items():
        if op.startswith(SEAMS_PATH) and not seams_on:
            assert answer.status == 404, (method, op)
            continue
        assert (answer.status, answer.json) == (429, {"error": "rate_limited", "message": answer.json["message"]}), (
            method,
            op,
            answer.status,
            answer.text,
        )
        assert int(answer.headers["retry-after"]) > 1
