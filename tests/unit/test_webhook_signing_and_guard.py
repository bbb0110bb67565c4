"""Webhook signing (v1 checked by the official client's helper, Standard Webhooks by the ``standardwebhooks``
library), delivery ids, and the registration egress check with an injected resolver (nothing connects)."""

from __future__ import annotations

import base64
import datetime
import os
from types import SimpleNamespace
from typing import Any

import pytest
from openwop_client.webhook_helpers import verify_webhook_signature
from standardwebhooks.webhooks import Webhook

from shared.errors import WebhookUrlRejectedError
from shared.protocol import webhooks as wh
from shared.protocol.webhook_bodies import RegisterWebhook
from shared.services import webhooks
from shared.transports.egress import EgressPolicy
from shared.transports.http import GuardedHttpTransport


def _whsec() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


def test_v1_signature_verifies_with_the_client_helper_and_fails_for_another_body() -> None:
    secret = _whsec()
    body = b'{"runId":"t/r","event":{"type":"run.completed"}}'
    h = wh.delivery_headers(
        webhook_id="t/w", event_type="run.completed", timestamp=1_700_000_000, raw_body=body, v1_secret=secret
    )
    ok = verify_webhook_signature(
        secret,
        h["OpenWOP-Signature"],
        h["OpenWOP-Timestamp"],
        body,
        now_seconds=1_700_000_010,
        algorithm_header=h["OpenWOP-Signature-Algorithm"],
    )
    bad = verify_webhook_signature(
        secret, h["OpenWOP-Signature"], h["OpenWOP-Timestamp"], body + b" ", now_seconds=1_700_000_010
    )
    assert ok.valid and not bad.valid
    assert not [k for k in h if k.startswith("webhook-")]


def test_standard_webhooks_entries_one_per_secret_each_verifying_under_its_own() -> None:
    new, old = _whsec(), _whsec()
    now = int(datetime.datetime.now(datetime.UTC).timestamp())
    body = b'{"runId":"t/r","event":{}}'
    h = wh.delivery_headers(
        webhook_id="t/w",
        event_type="run.started",
        timestamp=now,
        raw_body=body,
        v1_secret=old,
        standard=[new, old],
        message_id="msg_" + "a" * 40,
    )
    assert len(h["webhook-signature"].split(" ")) == 2
    sw = {k: v for k, v in h.items() if k.startswith("webhook-")}
    for secret in (new, old):
        Webhook(secret).verify(body, sw)
    with pytest.raises(Exception):  # noqa: B017 - the library's own verification error
        Webhook(_whsec()).verify(body, sw)
    tampered = {**sw, "webhook-id": "msg_" + "b" * 40}  # the id is inside the signed bytes
    with pytest.raises(Exception):  # noqa: B017
        Webhook(new).verify(body, tampered)


def test_delivery_id_is_stable_per_delivery_and_distinct_across() -> None:
    a = wh.delivery_id("t/w1", "t/r1", 3)
    assert a == wh.delivery_id("t/w1", "t/r1", 3)
    assert len({a, wh.delivery_id("t/w1", "t/r1", 4), wh.delivery_id("t/w2", "t/r1", 3)}) == 3
    import re

    assert re.match(r"^[A-Za-z0-9_-]{16,128}$", a)


def test_whsec_form() -> None:
    assert wh.whsec_key(_whsec()) is not None
    assert wh.whsec_key("whsec_" + base64.b64encode(b"x" * 8).decode()) is None  # too short
    assert wh.whsec_key("whsec_not base64!") is None and wh.whsec_key("plain") is None


class _Reached(Exception):
    pass


def _ports(resolved: dict[str, list[str]], allow: tuple[str, ...] = ()) -> SimpleNamespace:
    def resolver(host: str, port: int) -> list[str]:
        return resolved[host]

    def never_connect(*_: object) -> None:
        raise AssertionError("registration must not connect")

    def reached(*_: object, **__: object) -> None:
        raise _Reached  # the URL passed the guard; storage is next

    http = GuardedHttpTransport(EgressPolicy.from_entries(allow, resolver=resolver), connect=never_connect)
    return SimpleNamespace(http=http, webhooks=SimpleNamespace(list_subscriptions=reached))


@pytest.mark.parametrize(
    "addresses",
    [
        ["10.0.0.7"],
        ["169.254.169.254"],
        ["127.0.0.1"],
        ["fd00:ec2::254"],
        ["::ffff:10.0.0.1"],
        ["::ffff:7f00:1"],
        ["fc00::5"],
        ["93.184.216.34", "192.168.1.1"],
    ],
)
def test_a_name_resolving_to_a_private_or_metadata_address_is_refused_at_registration(addresses) -> None:
    ports = _ports({"hooks.example.com": addresses})
    body = RegisterWebhook(url="https://hooks.example.com/x", events=["run.completed"])
    with pytest.raises(WebhookUrlRejectedError) as err:
        webhooks.register(ports, SimpleNamespace(tenant="t", subject_id="s"), body)  # type: ignore[arg-type]
    assert "hooks.example.com" not in err.value.message and addresses[-1] not in err.value.message


def test_a_public_https_name_passes_and_plain_http_only_when_allowlisted() -> None:
    caller = SimpleNamespace(tenant="t", subject_id="s")
    public = _ports({"hooks.example.com": ["93.184.216.34"]})
    with pytest.raises(_Reached):
        webhooks.register(
            public,
            caller,
            RegisterWebhook(
                url="https://hooks.example.com/x",  # type: ignore[arg-type]
                events=["run.completed"],
            ),
        )
    with pytest.raises(WebhookUrlRejectedError):
        webhooks.register(
            public,
            caller,
            RegisterWebhook(
                url="http://hooks.example.com/x",  # type: ignore[arg-type]
                events=["run.completed"],
            ),
        )
    local = _ports({"127.0.0.1": ["127.0.0.1"]}, allow=("127.0.0.0/8",))
    with pytest.raises(_Reached):
        webhooks.register(
            local,
            caller,
            RegisterWebhook(
                url="http://127.0.0.1:9/x",  # type: ignore[arg-type]
                events=["run.completed"],
            ),
        )


def _schedule(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> list[int]:
    from shared.settings import get_settings

    for name in (
        "WEBHOOK_MAX_ATTEMPTS",
        "WEBHOOK_RETRY_BASE_SECONDS",
        "WEBHOOK_RETRY_CAP_SECONDS",
        "WEBHOOK_RETRY_DIVISOR",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = get_settings.__wrapped__()  # read now, not the process's cached settings
    ports = SimpleNamespace(settings=settings)
    return [webhooks.retry_delay_s(ports, a) for a in range(1, settings.webhook_max_attempts)]  # type: ignore[arg-type]


def test_the_deployed_retry_schedule_spans_45_minutes_and_local_keeps_its_shape_divided(monkeypatch) -> None:
    from shared.local.stack import LOCAL_WEBHOOK_RETRY_DIVISOR

    # Given the deployed defaults (no setting) and the local divisor
    deployed = _schedule({}, monkeypatch)
    local = _schedule({"WEBHOOK_RETRY_DIVISOR": str(LOCAL_WEBHOOK_RETRY_DIVISOR)}, monkeypatch)
    # Then the deployed schedule is 8 attempts, 30 s doubling to the 15 min cap (~45 min before the last one)
    assert deployed == [30, 60, 120, 240, 480, 900, 900] and sum(deployed) == 2730
    # and local mode has the same attempts and shape, every delay divided by 30
    assert local == [1, 2, 4, 8, 16, 30, 30]
    assert [-(-d // LOCAL_WEBHOOK_RETRY_DIVISOR) for d in deployed] == local
    # so a receiver down for 21 s (the old local schedule, 4 tries 1-2 s apart, dead-lettered that) still gets it:
    # the attempts start at 0, 1, 3, 7, 15, 31, 61, 91 s
    starts = [sum(local[:i]) for i in range(len(local) + 1)]
    assert starts == [0, 1, 3, 7, 15, 31, 61, 91] and any(t > 21 for t in starts)


def _docs_verifier() -> dict[str, Any]:
    """The ``verify.py`` sample of docs/webhooks.md, executed as a receiver would copy it."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "webhooks.md").read_text("utf-8")
    block = next(b.split("\n", 1)[1] for b in text.split("```")[1::2] if b.startswith("python\n# verify.py"))
    namespace: dict[str, Any] = {}
    exec(compile(block, "docs/webhooks.md:verify.py", "exec"), namespace)  # noqa: S102 - our own documentation
    return namespace


def test_the_documented_receiver_checks_verify_real_delivery_headers_and_refuse_tampering() -> None:
    # Given the docs' verify.py and the headers this host sends for an opted-in subscription
    docs = _docs_verifier()
    secret, now = _whsec(), 1_700_000_000
    body = b'{"runId":"t/r","event":{"type":"run.completed","sequence":3}}'
    h = wh.delivery_headers(
        webhook_id="t/w",
        event_type="run.completed",
        timestamp=now,
        raw_body=body,
        v1_secret=secret,
        standard=[secret],
        message_id=wh.delivery_id("t/w", "t/r", 3),
    )
    headers = {k.lower(): v for k, v in h.items()}
    # Then both documented checks accept the delivery as sent
    assert docs["verify_openwop"](secret, headers, body, now + 10)
    assert docs["verify_standard"](secret, headers, body, now + 10)
    # and refuse another body, another secret, a stale timestamp and an unknown algorithm
    assert not docs["verify_openwop"](secret, headers, body + b" ", now)
    assert not docs["verify_standard"](_whsec(), headers, body, now)
    assert not docs["verify_openwop"](secret, headers, body, now + 301)
    assert not docs["verify_openwop"](secret, {**headers, "openwop-signature-algorithm": "v2"}, body, now)


def test_queue_sends_split_by_whole_groups_keep_each_groups_order() -> None:
    from shared.ports import QueueMessage
    from shared.storage.sqs import MAX_BATCH, SEND_LANES, _lanes

    # Given 45 messages of 7 groups, interleaved
    messages = [QueueMessage(f"{g}:{i}", f"g{g}", f"d{g}-{i}") for i in range(7) for g in range(7)][:45]
    # When they are split for the concurrent senders
    lanes = _lanes(messages, SEND_LANES)
    # Then there are at most SEND_LANES lanes, each group in exactly one, in its send order, nothing lost
    assert 1 < len(lanes) <= SEND_LANES
    assert sorted(m.body for lane in lanes for m in lane) == sorted(m.body for m in messages)
    for g in {m.group for m in messages}:
        holding = [lane for lane in lanes if any(m.group == g for m in lane)]
        assert len(holding) == 1
        assert [m.body for m in holding[0] if m.group == g] == [m.body for m in messages if m.group == g]
    # and what fits one request stays one lane
    assert _lanes(messages[:MAX_BATCH], SEND_LANES) == [messages[:MAX_BATCH]] and _lanes([], SEND_LANES) == []


def test_every_event_type_this_host_emits_is_a_registered_v2_name_a_webhook_can_subscribe_to() -> None:
    from shared.protocol import codes
    from shared.protocol.event_types import V2_EVENT_TYPES

    # Given the event-type constants the host emits (shared.protocol.codes: "<domain>.<verb>" strings)
    emitted = {
        v
        for k, v in vars(codes).items()
        if k.isupper() and isinstance(v, str) and "." in v and wh.EVENT_TYPE_RE.match(v)
    }
    # Then each is registered (so a subscription naming it is accepted), and an unregistered one is named
    assert emitted and emitted <= V2_EVENT_TYPES and len(V2_EVENT_TYPES) == 118
    assert wh.unknown_event_types(sorted(emitted)) == []
    assert wh.unknown_event_types(["run.completed", "run.bogus", "Run Done"]) == ["run.bogus", "events[2]"]
