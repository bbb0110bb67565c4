"""Fault injection: tenant A floods the write routes past its limit while tenant B works. A's excess gets the
protocol's ``429 rate_limited`` with ``Retry-After``; every run B starts is admitted and finishes."""

from __future__ import annotations

import time

from shared.local.cli import seed
from tests.helpers import unique
from tests.isolation import create, flooding, write_limits
from tests.wire import wait_terminal

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
                time.sleep(1.2)
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
