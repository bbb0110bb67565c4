"""Reserved concurrency: the run-advancing tasks always have room, and the long polls never take the account's.

A Lambda account has one pool of concurrent executions (1,000 by default). Without reservations, long polls held at
the API stage's rate (100 requests a second x 25 s = 2,500 executions) would exhaust it, and the Step Functions tasks
that advance runs would be throttled. A reservation is both a floor (the function always has that many) and a
ceiling (it never has more): the tasks get a floor, the long polls a ceiling. Reservations cost nothing.

CDK context ``reservedConcurrency``: ``off`` (no reservation: for an account whose quota is below the sum plus the
100 Lambda keeps unreserved), or a JSON object of function name -> executions merged over the defaults
(``{"advance_run": 400}``; 0 removes one). ``accountConcurrency`` (default 1,000) is the account's quota: synthesis
stops when the reservations would leave less than 100 unreserved, as Lambda would refuse them at deploy.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from constructs import Construct

from shared import manifest

# Defaults: 480 of the account's 1,000, leaving 520 for the API handlers, streams and queues.
DEFAULT_RESERVED: Mapping[str, int] = {
    "advance_run": 200,  # runs and forks: one execution per run between holds
    "run_eval_trial": 100,  # eval trials: evalMaxConcurrency (4) per eval run
    "finish_eval": 10,
    "fail_run": 10,  # the state machines' Catch: must run when everything else fails
    "park_run": 10,
    "poll_run_events": 100,  # long polls: at most 100 held at once (4 a second at the 25 s hold)
    "stream_run_events": 50,  # SSE bodies: at most 50 held at once (5 a second at the 10 s hold)
}
TASKS = ("advance_run", "run_eval_trial", "finish_eval", "fail_run", "park_run")
LONG_POLLS = ("poll_run_events", "stream_run_events")
UNRESERVED_MINIMUM = 100  # what Lambda keeps unreserved in every account
DEFAULT_ACCOUNT_CONCURRENCY = 1000


def reserved_concurrency(scope: Construct) -> dict[str, int]:
    """Function name -> reserved concurrent executions, from the defaults and CDK context (checked)."""
    raw = scope.node.try_get_context("reservedConcurrency")
    if raw is not None and str(raw).strip().lower() == "off":
        return {}
    reserved = dict(DEFAULT_RESERVED)
    if raw not in (None, ""):
        try:
            given = raw if isinstance(raw, dict) else json.loads(str(raw))
            if not isinstance(given, dict):
                raise ValueError
            names = {f.name for f in manifest.FUNCTIONS}
            for name, value in given.items():
                if name not in names or isinstance(value, bool) or int(value) != value or int(value) < 0:
                    raise ValueError
                reserved[name] = int(value)
        except (ValueError, TypeError):
            raise ValueError(
                f"context reservedConcurrency={raw!r}: expected off or a JSON object of function "
                "name -> a non-negative integer"
            ) from None
    reserved = {k: v for k, v in reserved.items() if v > 0}
    account = int(scope.node.try_get_context("accountConcurrency") or DEFAULT_ACCOUNT_CONCURRENCY)
    if sum(reserved.values()) > account - UNRESERVED_MINIMUM:
        raise ValueError(
            f"context reservedConcurrency: {sum(reserved.values())} reserved executions leave less "
            f"than {UNRESERVED_MINIMUM} of the account's {account} unreserved (set accountConcurrency "
            "to the account's quota, or reservedConcurrency=off)"
        )
    return reserved
