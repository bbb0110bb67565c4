"""The keys the engine and services name: the run item's sort key, the run's aux items (what they pass to the run
store), and S3 object prefixes (constants only). The host table's layout is the storage's (``shared.storage``)."""

from __future__ import annotations

RUN_SK = "RUN"
TRIAL_PREFIX = "TRIAL#"
TRIAL_COUNT_PREFIX = "TCOUNT#"  # the ordinals of an external agent's trial's gateway calls
TRIAL_WAIT_PREFIX = "TWAIT#"  # an external agent's open trial: its gateway nonce, expiry and task token
FORK_SOURCE_SK = "FORKSOURCE"
EVAL_PLAN_SK = "EVALPLAN"
# Lineage links under a run: what its erasure must reach beyond its own keys.
CHILD_PREFIX = "CHILD#"  # a fork, or an eval run served from this run's record (erased with it, recursively)
IDEM_PREFIX = "IDEM#"  # an idempotency record whose stored answer names this run
HOST_ITEM_PREFIX = "HOSTITEM#"  # a host-table item naming this run (a webhook dead letter, a suite-version reference)
SUITE_LINK_PREFIX = "SUITELINK#"  # a suite version (or draft) one of whose tasks names this run as its source
SCOPE_CLAIM_PREFIX = "SCOPE#"  # an OpenWOP-Dedup scope claim naming this run (released by its erasure, if still its)
# Effects: a claimed outside effect under its run (sk EFFECT#<key>).
EFFECT_PREFIX = "EFFECT#"


def run_prefix(run_id: str) -> str:
    """S3 objects a run owns (large events, large tool calls, large state snapshots)."""
    return f"runs/{run_id}/"


def derived_prefix(source_run_id: str) -> str:
    """Derived fixture copies live under the SOURCE run, so erasing the source reaches them."""
    return f"derived/{source_run_id}/"


def derived_key(source_run_id: str, eval_run_id: str, task_id: str) -> str:
    return f"{derived_prefix(source_run_id)}{eval_run_id}/{task_id}.json"


# Under a run: the content-addressed model-call log, one item per (invocation, turn) in event order.
MODEL_CALL_PREFIX = "MCALL#"


def eval_summary_key(run_id: str) -> str:
    """An EvalSummary too large for the run item (thousands of tasks), under the run so erasure reaches it."""
    return f"{run_prefix(run_id)}eval-summary.json"


AUDIT_KEY = "audit"  # in an audit run's creation facts (shared.services.negotiations): no workflow ran, nothing to fork
