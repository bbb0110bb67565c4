"""Key names and item layout constants shared by the DAL, the local bootstrap, tests and CDK."""

from __future__ import annotations

from shared.keys import (  # noqa: F401 - re-exported: the run's keys the engine and services also name
    EFFECT_PREFIX,
    EVAL_PLAN_SK,
    FORK_SOURCE_SK,
    RUN_SK,
    TRIAL_PREFIX,
    derived_key,
    derived_prefix,
    run_prefix,
)
from shared.ports import EVENTS_PER_PAGE

# The run's other items (one BatchGetItem reads a run: run, facts and state items by key). The run item
# (``RUN``) holds only what changes and is small; each append rewrites it. Its creation facts (written once), its
# folded state (written when it changes) and its tenant-index entry (written when a listed field changes: status,
# times) are items of their own, so an append pays for none of them (issue 27; docs/decisions/0109).
RUN_FACTS_SK = "RUN#FACTS"
RUN_STATE_SK = "RUN#STATE"
RUN_INDEX_SK = "RUN#INDEX"
# The token every write of the state item puts on both the run item and the state item, in the same transaction: a
# consistent BatchGetItem whose two items carry different tokens met an append between its reads (decision 0161).
STATE_STAMP = "stateStamp"
TOMBSTONE_SK = "TOMBSTONE"
# A run's pinned workflow definition: written once with the run item (same transaction), never rewritten; the run
# item itself carries only a marker, so the item each 99-event append rewrites stays small (issue 15).
DEFINITION_SK = "DEFINITION"

TENANT_INDEX = "byTenant"
# A sparse index of the tenant's eval runs only (gsi2pk/gsi2sk are written on eval run items, with gsi1's values).
EVAL_INDEX = "byTenantEval"
TTL_ATTRIBUTE = "expiresAt"
# Creation facts an eval run's item also carries top-level, for filters on the eval index.
EVAL_INDEX_ATTRIBUTES = ("suiteId", "agentId", "name")

# An erasure tombstone's partition: this prefix and a keyed hash of the run id (``ddb.Tombstones``), never the id.
TOMBSTONE_PK_PREFIX = "ERASED#"

APIKEY_PK = "APIKEY"
SUITE_PK_PREFIX = "SUITE#"
COUNTER_PK_PREFIX = "COUNTER#"
LEDGER_PK_PREFIX = "LEDGER#"  # a side-effect node's ledger row: sk <runId>#<nodeId>#<ordinal> (storage.counters)

# Host-table partitions of what a tenant registers (pk = prefix + tenant, sk = the id): ``storage.registrations``.
TOOL_PREFIX = "TOOL#"
MCP_SERVER_PREFIX = "MCPSERVER#"
CREDENTIAL_PREFIX = "CRED#"
AGENT_VERSION_PREFIX = "AGENTV#"  # sk = "<agentId>#<version>": an immutable model-backed version (storage.agents)
AGENT_DEPLOYMENT_PREFIX = "AGENTDEP#"  # sk = "<agentId>#<version>": the version's deployment record (RFC 0082)
AGENT_CHANNEL_PREFIX = "AGENTCHAN#"  # sk = "<agentId>#<channel>#<n:08d>": the n-th change of what a channel serves

# DynamoDB's item limit is 400 KB; anything larger than this goes to S3 with a pointer.
MAX_INLINE_BYTES = 350_000
# What a host item's keys and document may hold (the rest of the 400 KB is left to attribute names and a TTL).
MAX_ITEM_BYTES = 400_000
# A run item keeps its creation facts inline up to this size; larger go to S3 (room for the state snapshot).
MAX_INLINE_RUN_DATA_BYTES = 64_000
# A pinned definition up to this size (its JSON) stays in the run's creation facts, read with the run's items (one
# Query: decision 0178); a larger one is the run's ``DEFINITION`` item (decision 0082).
INLINE_DEFINITION_BYTES = 2_048
# A page of the event log (one item: its events' JSON, compressed) holds at most this many events and this much
# event JSON; a transaction carries as many pages as fit in TransactWriteItems' 100 items and 4 MB.
MAX_EVENTS_PER_PAGE = EVENTS_PER_PAGE
MAX_PAGE_BYTES = MAX_INLINE_BYTES
# On a run item: pages may follow its ``lastSeq`` (a task's plain appends, decision 0170); a reader reads past it.
OPEN_TAIL = "openTail"
MAX_TRANSACTION_ITEMS = 100
MAX_TRANSACTION_BYTES = 3_000_000


def run_data_key(run_id: str) -> str:
    return f"runs/{run_id}/data.json"


def run_definition_key(run_id: str) -> str:
    return f"runs/{run_id}/definition.json"


def run_state_key(run_id: str, seq: int) -> str:
    return f"runs/{run_id}/state/{seq:012d}.json"


def large_event_key(run_id: str, seq: int) -> str:
    return f"runs/{run_id}/events/{seq:012d}.json"


def large_call_key(run_id: str, call_key: str) -> str:
    return f"runs/{run_id}/toolcalls/{call_key}.json"
