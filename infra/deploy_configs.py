"""The traffic shifts a deploy may use (CDK context ``deploymentConfig``), without importing CDK: what each moves
and for how long. ``infra/constructs/deployments.py`` maps them to CodeDeploy's configs; the state machines' retries
of a task refused by another engine version must outlast the longest (``tests/unit/test_asl_retries.py``)."""

from __future__ import annotations

# name -> minutes from the first shifted invocation to the last old one
SHIFT_MINUTES = {"canary": 5, "linear": 10, "allAtOnce": 0}
