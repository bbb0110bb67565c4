"""``openwop-serverless webhooks listen``: a loopback receiver (``webhook_receiver``) that prints one line per
delivery, verified or not under the given secrets."""

from __future__ import annotations

import signal
import threading
from collections.abc import Sequence

from shared.cli.webhook_receiver import Hit, WebhookReceiver, verify_standard, verify_v1


def describe_hit(hit: Hit, secrets: Sequence[str]) -> str:
    """One printed line for a received request (``webhooks listen``)."""
    if hit.verification:
        return "verification challenge answered"
    try:
        body = hit.json()
        what = f"{hit.headers.get('openwop-event-type')} run={body.get('runId')} seq={body['event'].get('sequence')}"
    except (ValueError, KeyError, TypeError, AttributeError):
        return f"not a delivery ({len(hit.body)} bytes)"
    checks = []
    if secrets:
        checks.append("v1 " + ("verified" if any(verify_v1(s, hit) for s in secrets) else "NOT VERIFIED"))
        if "webhook-signature" in hit.headers:
            ok = any(verify_standard(s, hit) for s in secrets)
            checks.append("standard-webhooks " + ("verified" if ok else "NOT VERIFIED"))
    else:
        checks.append("unverified (no --secret)")
    return f"{what} webhook={hit.headers.get('openwop-webhook-id')} {' '.join(checks)}"


def listen(host: str, port: int, secrets: Sequence[str]) -> int:
    receiver = WebhookReceiver(host, port, on_hit=lambda hit: print(describe_hit(hit, secrets), flush=True))
    url = receiver.start()
    print(f"listening on {url}/ (register it with POST /webhooks; Ctrl-C stops)", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.wait(1.0):  # a second at a time: a signal delivered to another thread runs its handler only
        pass  # once the main thread runs again, which a wait with no timeout never does
    receiver.stop()
    return 0
