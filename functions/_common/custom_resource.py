"""CloudFormation custom resources backed by a function: run the work, then PUT the result to the ResponseURL.

CloudFormation waits (up to an hour) for that PUT, so every path answers: the work's failure becomes ``FAILED``
with a one-line reason (the refusal's message, or the exception's type and the log stream to read), never a
traceback and never a value the work returned beyond the small ``Data`` it chose. ``Delete`` runs no work.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from typing import Any

from functions._common.observability import logger

RESPONSE_TIMEOUT_S = 30
MAX_REASON_CHARS = 500


class Refused(Exception):
    """An expected refusal: its message is the reason CloudFormation shows."""


def respond(event: dict[str, Any], context: Any, work: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """Run ``work(ResourceProperties)`` for Create and Update, and answer CloudFormation; returns the response."""
    kind = str(event.get("RequestType", ""))
    physical = str(event.get("PhysicalResourceId") or f"{event.get('LogicalResourceId', 'resource')}-seed")
    status, reason, data = "SUCCESS", "done", {}
    if kind in ("Create", "Update"):
        try:
            data = work(dict(event.get("ResourceProperties") or {}))
        except Refused as exc:
            status, reason = "FAILED", str(exc)
        except Exception as exc:  # the deploy must not hang: every failure is answered
            logger().exception("custom resource failed", extra={"requestType": kind})
            stream = getattr(context, "log_stream_name", "") or "the function's log group"
            status, reason = "FAILED", f"{type(exc).__name__}; see {stream}"
    body = {
        "Status": status,
        "Reason": reason[:MAX_REASON_CHARS],
        "PhysicalResourceId": physical,
        "StackId": event.get("StackId"),
        "RequestId": event.get("RequestId"),
        "LogicalResourceId": event.get("LogicalResourceId"),
        "NoEcho": False,
        "Data": data,
    }
    _put(str(event["ResponseURL"]), json.dumps(body).encode("utf-8"))
    return body


def _put(url: str, payload: bytes) -> None:
    # A pre-signed S3 URL: signed for an empty Content-Type.
    req = urllib.request.Request(
        url, data=payload, method="PUT", headers={"Content-Type": "", "Content-Length": str(len(payload))}
    )
    with urllib.request.urlopen(req, timeout=RESPONSE_TIMEOUT_S) as resp:  # noqa: S310 - CloudFormation's URL
        resp.read()
