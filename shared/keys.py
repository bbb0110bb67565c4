"""Item and object key layout shared by storage, services and the engine (constants only)."""

from __future__ import annotations

RUN_SK = "RUN"
# The run's other items (one BatchGetItem reads a run: run, facts and state items by key). The run item
# (``RUN``) holds only what changes and is small; each append rewrites it. Its creation facts (written once), its
# folded state (written when it changes) and its tenant-index entry (written when a listed field changes: status,
# times) are items of their own, so an append pays for none of them (issue 27; docs/decisions/0109).
RUN_FACTS_SK = "RUN#FACTS"
RUN_STATE_SK = "RUN#STATE"
RUN_INDEX_SK = "RUN#INDEX"
TOMBSTONE_SK = "TOMBSTONE"
TRIAL_PREFIX = "TRIAL#"
FORK_SOURCE_SK = "FORKSOURCE"
EVAL_PLAN_SK = "EVALPLAN"
# A run's pinned workflow definition: written once with the run item (same transaction), never rewritten; the run
# item itself carries only a marker, so the item each 99-event append rewrites stays small (issue 15).
DEFINITION_SK = "DEFINITION"
# Lineage links under a run: what its erasure must reach beyond its own keys.
CHILD_PREFIX = "CHILD#"  # a fork, or an eval run served from this run's record (erased with it, recursively)
IDEM_PREFIX = "IDEM#"  # an idempotency record whose stored answer names this run
HOST_ITEM_PREFIX = "HOSTITEM#"  # a host-table item naming this run (a webhook dead letter, a suite-version reference)
# Effects: a claimed outside effect under its run (sk EFFECT#<key>); a side-effect node's ledger row in the host
# table (pk LEDGER#<tenant>, sk <runId>#<nodeId>#<ordinal>).
EFFECT_PREFIX = "EFFECT#"
LEDGER_PK_PREFIX = "LEDGER#"


def run_prefix(run_id: str) -> str:
    """S3 objects a run owns (large events, large tool calls, large state snapshots)."""
    return f"runs/{run_id}/"


def derived_prefix(source_run_id: str) -> str:
    """Derived fixture copies live under the SOURCE run, so erasing the source reaches them."""
    return f"derived/{source_run_id}/"


def derived_key(source_run_id: str, eval_run_id: str, task_id: str) -> str:
    return f"{derived_prefix(source_run_id)}{eval_run_id}/{task_id}.json"


# Host-table partitions of what a tenant registers (pk = prefix + tenant, sk = the id).
TOOL_PREFIX = "TOOL#"  # also read by the embedded demo (shared.local.demo); the rest are in shared.storage.schema
AGENT_VERSION_PREFIX = "AGENTV#"  # sk = "<agentId>#<version>"; also read by the engine's kernel (storage.agents)
# Under a run: the content-addressed model-call log, one item per (invocation, turn) in event order.
MODEL_CALL_PREFIX = "MCALL#"


def eval_summary_key(run_id: str) -> str:
    """An EvalSummary too large for the run item (thousands of tasks), under the run so erasure reaches it."""
    return f"{run_prefix(run_id)}eval-summary.json"


AUDIT_KEY = "audit"  # in an audit run's creation facts (shared.services.negotiations): no workflow ran, nothing to fork
