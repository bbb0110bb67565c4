"""Every kind of stored object, by key family, and how a run's erasure reaches the ones that can hold its content.

A key family is a partition or sort-key prefix (or a whole key) in one table, or an S3 key prefix in the fixtures
bucket. ``FAMILIES`` is the one declared inventory (issue 37 item 2, docs/decisions/0158): a unit test
(``tests/unit/test_erasure_inventory.py``) finds every key spelled under ``shared/storage/`` and in ``shared/keys.py``
and fails when one is not listed here, so a new kind of stored object is made with its answer to "what does
``DELETE /runs/R`` do to it" or not at all. How the hook itself works: ``shared/services/erasure.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from shared import keys
from shared.manifest import resources as manifest
from shared.storage import (
    agents,
    apikeys,
    limits,
    ratelimit,
    sampling,
    schema,
    slots,
    starts,
    suites,
    webhooks,
    workflows,
)


class Reach(StrEnum):
    """How a run's erasure reaches a family's items."""

    OWN = "own"  # under the run's own key: its partition, its runId, or runs/<runId>/; deleted by the hook
    SOURCE = "source"  # under the SOURCE run's key (derived/<sourceRunId>/), also listed in the user's plan
    CHILD = "child"  # a run made from the run (fork, eval served from it): CHILD# link, erased the same way
    IDEM_LINK = "idem-link"  # an IDEM# link under the run names the record; the hook deletes it
    HOST_LINK = "host-link"  # a HOSTITEM# link under the run names the (pk, sk); the hook deletes it
    SUITE_LINK = "suite-link"  # a SUITELINK# link names the version or draft; the hook tombstones the tasks naming it
    SCOPE_LINK = "scope-link"  # a SCOPE# link holds the claim as written; the hook deletes it while it is unchanged
    QUERY = "query"  # found by the hook with a query on the run's id (sort key <runId>#...) and deleted
    TRANSIENT = "transient"  # names the run only while it is created; cleared by the create or the start sweep
    NO_CONTENT = "no-content"  # holds nothing of any run


@dataclass(frozen=True)
class Family:
    table: str  # a manifest table name, or the fixtures bucket
    key: str  # the partition or sort-key prefix (or whole key) as the code spells it; an S3 key prefix
    reach: Reach
    why: str


RUNS, EVENTS, TOOL_CALLS, IDEMPOTENCY, HOST, SIGNING = (
    manifest.RUNS,
    manifest.EVENTS,
    manifest.TOOL_CALLS,
    manifest.IDEMPOTENCY,
    manifest.HOST,
    manifest.SIGNING,
)
BUCKET = manifest.FIXTURES
# The S3 key families: a run's own objects, and the fixture copies derived from a source run.
RUNS_PREFIX = keys.run_prefix("").removesuffix("/")
DERIVED_PREFIX = keys.derived_prefix("").removesuffix("/")
OWN, SOURCE, CHILD, QUERY = Reach.OWN, Reach.SOURCE, Reach.CHILD, Reach.QUERY

FAMILIES: tuple[Family, ...] = (
    # ------------------------------------------------------------------ the runs table: pk = the run id
    Family(RUNS, keys.RUN_SK, OWN, "the run item"),
    Family(RUNS, schema.RUN_FACTS_SK, OWN, "creation facts: the run's inputs"),
    Family(RUNS, schema.RUN_STATE_SK, OWN, "folded state"),
    Family(RUNS, schema.RUN_INDEX_SK, OWN, "the tenant-index entry"),
    Family(RUNS, schema.DEFINITION_SK, OWN, "the pinned workflow definition"),
    Family(RUNS, keys.EVAL_PLAN_SK, OWN, "an eval run's plan (its sources, its derived copies' keys)"),
    Family(RUNS, keys.FORK_SOURCE_SK, OWN, "a fork's index of its source's prefix and tool calls"),
    Family(RUNS, keys.TRIAL_PREFIX, OWN, "an eval trial's result (the agent's answer)"),
    Family(RUNS, keys.TRIAL_COUNT_PREFIX, OWN, "an external agent's gateway-call ordinals"),
    Family(RUNS, keys.TRIAL_WAIT_PREFIX, OWN, "an external agent's open trial (nonce, task token)"),
    Family(RUNS, keys.EFFECT_PREFIX, OWN, "a claimed outside effect (a tool call's, a model call's)"),
    Family(RUNS, keys.MODEL_CALL_PREFIX, OWN, "the model-call log"),
    Family(RUNS, keys.CHILD_PREFIX, CHILD, "the link itself: a fork or served eval, erased recursively"),
    Family(RUNS, keys.IDEM_PREFIX, OWN, "the link itself (a record id)"),
    Family(RUNS, keys.HOST_ITEM_PREFIX, OWN, "the link itself (a host item's key)"),
    Family(RUNS, keys.SUITE_LINK_PREFIX, OWN, "the link itself (a suite version's ref)"),
    Family(RUNS, keys.SCOPE_CLAIM_PREFIX, OWN, "the link itself (a scope claim as written)"),
    Family(RUNS, schema.TOMBSTONE_SK, Reach.NO_CONTENT, "the tombstone's sort key: tenant and time, no id"),
    Family(RUNS, schema.TOMBSTONE_PK_PREFIX, Reach.NO_CONTENT, "the tombstone's partition: a keyed hash, not the id"),
    # ------------------------------------------------------------------ the run-keyed tables
    Family(EVENTS, "runId", OWN, "the event log's pages (zlib-compressed): the hook's events.delete_all"),
    Family(TOOL_CALLS, "runId", OWN, "as-executed tool calls: the hook's tool_calls.delete_all"),
    Family(IDEMPOTENCY, "id", Reach.IDEM_LINK, "a stored answer naming a run (create, fork, verbs): IDEM#"),
    # ------------------------------------------------------------------ the fixtures bucket
    Family(BUCKET, RUNS_PREFIX, OWN, "large events, tool calls, state, plans, trials, model calls"),
    Family(BUCKET, DERIVED_PREFIX, SOURCE, "derived fixture copies, under their source run"),
    # ------------------------------------------------------------------ the host table: what derives from runs
    Family(HOST, schema.SUITE_PK_PREFIX, Reach.SUITE_LINK, "versions and drafts (from-runs, accept, sampling)"),
    Family(HOST, suites.PAGE_PREFIX, Reach.SUITE_LINK, "a large version's task pages: rewritten with it"),
    Family(HOST, suites.REF_PREFIX, Reach.HOST_LINK, "an eval run's pin of a version (names the eval run)"),
    Family(HOST, webhooks.DL_PK, Reach.HOST_LINK, "a webhook dead letter (names the run, holds its event)"),
    Family(HOST, schema.LEDGER_PK_PREFIX, QUERY, "effect-ledger rows, sort key <runId>#<nodeId>#<n>"),
    Family(HOST, starts.STARTS_PREFIX, Reach.TRANSIENT, "a start marker (the id only): cleared once started"),
    Family(
        HOST,
        slots.PREFIX,
        Reach.TRANSIENT,
        "a tenant's runs in flight and waiting (ids only): released when the run ends or is erased, a waiting one "
        "dropped by the tenant's next pump or its TTL",
    ),
    Family(HOST, limits.DEDUP_PREFIX, Reach.SCOPE_LINK, "an OpenWOP-Dedup scope claim (names the run holding it)"),
    # ------------------------------------------------------------------ the host table: registrations and counters
    Family(HOST, suites.INDEX_PREFIX, Reach.NO_CONTENT, "a version's index row: ids, counts, times"),
    Family(HOST, suites.LIST_PREFIX, Reach.NO_CONTENT, "a suite's listing row: its versions"),
    Family(HOST, sampling.RULE_PK, Reach.NO_CONTENT, "sampling rules: what the tenant configured"),
    Family(HOST, schema.COUNTER_PK_PREFIX, Reach.NO_CONTENT, "tenant counters (a value; markers live under the run)"),
    Family(HOST, schema.APIKEY_PK, Reach.NO_CONTENT, "API key hashes"),
    Family(HOST, apikeys.KEYID_PK, Reach.NO_CONTENT, "API key ids"),
    Family(HOST, apikeys.TENANT_KEYS_PREFIX, Reach.NO_CONTENT, "a tenant's API keys"),
    Family(HOST, schema.TOOL_PREFIX, Reach.NO_CONTENT, "registered tools"),
    Family(HOST, schema.MCP_SERVER_PREFIX, Reach.NO_CONTENT, "registered MCP servers"),
    Family(HOST, schema.CREDENTIAL_PREFIX, Reach.NO_CONTENT, "credentials (sealed values)"),
    Family(HOST, schema.AGENT_VERSION_PREFIX, Reach.NO_CONTENT, "agent versions"),
    Family(HOST, schema.AGENT_DEPLOYMENT_PREFIX, Reach.NO_CONTENT, "agent deployments"),
    Family(HOST, schema.AGENT_CHANNEL_PREFIX, Reach.NO_CONTENT, "agent channels"),
    Family(HOST, agents.SCRIPTED_AGENT_PREFIX, Reach.NO_CONTENT, "scripted agents"),
    Family(HOST, workflows.WORKFLOW_PREFIX, Reach.NO_CONTENT, "workflow definitions"),
    Family(HOST, workflows.WORKFLOW_VERSION_PREFIX, Reach.NO_CONTENT, "workflow versions"),
    Family(HOST, workflows.WORKFLOW_INDEX_PREFIX, Reach.NO_CONTENT, "the workflow listing"),
    Family(HOST, webhooks.SUB_PK, Reach.NO_CONTENT, "webhook subscriptions and their rules version"),
    Family(HOST, limits.QUOTA_PREFIX, Reach.NO_CONTENT, "run-start counts per minute"),
    Family(HOST, ratelimit.PREFIX, Reach.NO_CONTENT, "token buckets"),
    # ------------------------------------------------------------------ the signing table
    Family(SIGNING, webhooks.SUB_PK, Reach.NO_CONTENT, "webhook signing secrets (sealed)"),
)


def families(reach: Reach | None = None) -> tuple[Family, ...]:
    return tuple(f for f in FAMILIES if reach is None or f.reach is reach)
