"""Reserved concurrency: the run-advancing tasks always have room, and the long polls never take the account's.

A Lambda account has one pool of concurrent executions (1,000 by default) shared by every stack in a region. Without
reservations, long polls held at the API stage's rate (100 requests a second x 25 s = 2,500 executions) would exhaust
it, and the Step Functions tasks that advance runs would be throttled. A reservation is both a floor (the function
always has that many) and a ceiling (it never has more): the tasks get a floor, the long polls a ceiling.
The agent gateway's function URL has no API stage throttle in front of it, so its reservation is its ceiling.
Reservations cost nothing.

The defaults reserve 400 executions per stage, so two stages (say ``qa`` and ``prod``) fit one account of 1,000 and
leave 200 unreserved for their API handlers, streams and queues (Lambda refuses a reservation that leaves less than
100: the second stage's deploy would fail half-way).

CDK context ``reservedConcurrency``: ``off`` (no reservation: for an account whose quota is below the sum plus the
100 Lambda keeps unreserved), or a JSON object of function name -> executions merged over the defaults
(``{"advance_run": 300}``; 0 removes one). ``accountConcurrency`` (default 1,000) is the account's quota and
``stagesPerAccount`` (default 2) the stages deployed to it with these reservations: synthesis stops, saying what it
assumed, when that many stages would leave less than 100 unreserved.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from constructs import Construct

from shared import manifest

# Defaults: 400 per stage, so two stages leave 200 of an account's 1,000 for the API handlers, streams and queues
# (the table is the manifest's, so the local Lambda runner enforces the same ceilings).
DEFAULT_RESERVED: Mapping[str, int] = manifest.RESERVED_CONCURRENCY
TASKS = ("advance_run", "run_eval_trial", "finish_eval", "fail_run", "park_run")
LONG_POLLS = ("poll_run_events", "stream_run_events")
PUBLIC_URLS = ("agent_gateway",)  # functions served by a function URL: a ceiling bounds a flood
UNRESERVED_MINIMUM = 100  # what Lambda keeps unreserved in every account
DEFAULT_ACCOUNT_CONCURRENCY = 1000
DEFAULT_STAGES_PER_ACCOUNT = 2


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
    account = _positive(scope, "accountConcurrency", DEFAULT_ACCOUNT_CONCURRENCY)
    stages = _positive(scope, "stagesPerAccount", DEFAULT_STAGES_PER_ACCOUNT)
    total = sum(reserved.values())
    if stages * total > account - UNRESERVED_MINIMUM:
        raise ValueError(
            f"context reservedConcurrency: {total} reserved executions per stage, assuming {stages} stages in an "
            f"account of {account} (stagesPerAccount, accountConcurrency), leave {account - stages * total} "
            f"unreserved where Lambda keeps at least {UNRESERVED_MINIMUM} (lower the reservations, set the "
            "account's figures, or reservedConcurrency=off)"
        )
    return reserved


def _positive(scope: Construct, key: str, default: int) -> int:
    raw = scope.node.try_get_context(key)
    try:
        value = default if raw in (None, "") else int(str(raw))
        if value < 1:
            raise ValueError
    except ValueError:
        raise ValueError(f"context {key}={raw!r}: expected a positive integer") from None
    return value
