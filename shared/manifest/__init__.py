"""The resource manifest: what the CDK stack deploys and the local stack bootstraps, read by both.

``resources`` (tables, the bucket, secrets, KMS keys, queues), ``compute`` (functions, state machines, stream
consumers), ``cors`` (the HTTP API's CORS configuration), ``routes`` (the route table, derived from the protocol's
operation table) and ``matching`` (a path's allowed methods). This package re-exports the first three's names; the
route table is imported from its own modules (``shared.manifest.routes``, ``shared.manifest.matching``), so importing
the manifest does not load the operation table.
"""

from __future__ import annotations

from shared.manifest.compute import (
    ASL_SETTINGS,
    FUNCTIONS,
    RUNTIME,
    STATE_MACHINES,
    STREAM_CONSUMERS,
    STREAM_EVENT_NAMES,
    Function,
    StateMachine,
    function,
    secrets_of,
)
from shared.manifest.cors import (
    CORS,
    CORS_ANY_ORIGIN,
    Cors,
    cors_origins,
)
from shared.manifest.resources import (
    APIKEY_PEPPER,
    BUCKETS,
    CURSOR,
    EVENTS,
    FIXTURES,
    HOST,
    IDEMPOTENCY,
    KEYS,
    QUEUES,
    REPLAY_CONTEXT,
    RUNS,
    SECRETS,
    SIGNING,
    TABLES,
    TOMBSTONE,
    TOOL_CALLS,
    WEBHOOKS,
    Access,
    Bucket,
    Index,
    Key,
    KeyType,
    Queue,
    Secret,
    Table,
    kms_key,
    queue,
    table,
)

__all__ = [
    "APIKEY_PEPPER",
    "ASL_SETTINGS",
    "Access",
    "BUCKETS",
    "Bucket",
    "CORS",
    "CORS_ANY_ORIGIN",
    "CURSOR",
    "Cors",
    "EVENTS",
    "FIXTURES",
    "FUNCTIONS",
    "Function",
    "HOST",
    "IDEMPOTENCY",
    "Index",
    "KEYS",
    "Key",
    "KeyType",
    "QUEUES",
    "Queue",
    "REPLAY_CONTEXT",
    "RUNS",
    "RUNTIME",
    "SECRETS",
    "SIGNING",
    "STATE_MACHINES",
    "STREAM_CONSUMERS",
    "STREAM_EVENT_NAMES",
    "Secret",
    "StateMachine",
    "TABLES",
    "TOMBSTONE",
    "TOOL_CALLS",
    "Table",
    "WEBHOOKS",
    "cors_origins",
    "function",
    "kms_key",
    "queue",
    "secrets_of",
    "table",
]
