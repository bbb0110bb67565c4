"""The deployed stateful resources: DynamoDB tables, the S3 bucket, Secrets Manager secrets, KMS keys and SQS queues.

Both the CDK stack (``infra/``) and the local bootstrap (``shared/local``) read them, so deployed and local resources
cannot drift. Plain data only: no AWS calls, no imports beyond the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

KeyType = Literal["S", "N"]

Access = Literal["read", "write", "readwrite", "write+replay"]
# The KMS encryption context of a value sealed only to be answered again (an idempotent replay): a role granted
# "write+replay" decrypts only values sealed with it.
REPLAY_CONTEXT = ("purpose", "idempotent-replay")


@dataclass(frozen=True)
class Index:
    name: str
    partition_key: tuple[str, KeyType]
    sort_key: tuple[str, KeyType]


@dataclass(frozen=True)
class Table:
    """A DynamoDB table. ``key`` is the logical name; the env var is ``<KEY>_TABLE``."""

    key: str
    partition_key: tuple[str, KeyType]
    sort_key: tuple[str, KeyType] | None
    ttl_attribute: str = "expiresAt"
    stream: bool = False
    indexes: tuple[Index, ...] = ()
    purpose: str = ""
    # in the DynamoDbThrottles alarm (a math alarm takes at most 10 metrics: two per table, five tables)
    throttle_alarm: bool = True

    @property
    def env_var(self) -> str:
        return f"{self.key.upper()}_TABLE"

    @property
    def local_name(self) -> str:
        return f"openwop-{self.key}"


@dataclass(frozen=True)
class Bucket:
    key: str
    purpose: str = ""

    @property
    def env_var(self) -> str:
        return f"{self.key.upper()}_BUCKET"

    @property
    def local_name(self) -> str:
        return f"openwop-{self.key}"


@dataclass(frozen=True)
class Secret:
    """A Secrets Manager secret with a generated value. Functions get its ARN (locally its name) in ``env_var``."""

    key: str
    purpose: str = ""
    json_key: str = ""  # when set, the generated value is stored as the JSON object {json_key: value}

    @property
    def env_var(self) -> str:
        return f"{self.key.upper()}_SECRET_ID"

    @property
    def local_name(self) -> str:
        return f"openwop-{self.key}"


@dataclass(frozen=True)
class Key:
    """A KMS key (symmetric, rotated yearly) for values encrypted in the application before they are stored.
    Functions get its ARN (locally its alias) in ``env_var``; ``Function.keys`` grants Encrypt (write), Decrypt
    (read) or both."""

    key: str
    purpose: str = ""

    @property
    def env_var(self) -> str:
        return f"{self.key.upper()}_KEY_ID"

    @property
    def local_name(self) -> str:
        return f"alias/openwop-{self.key}"


@dataclass(frozen=True)
class Queue:
    """An SQS FIFO queue with its dead-letter queue. Functions get its URL in ``env_var``.

    ``visibility_s`` is the first retry's delay; ``max_receives`` the attempts before SQS moves a message to the
    dead-letter queue (the redrive policy's maxReceiveCount)."""

    key: str
    purpose: str = ""
    visibility_s: int = 30
    max_receives: int = 8
    retention_days: int = 4

    @property
    def env_var(self) -> str:
        return f"{self.key.upper()}_QUEUE_URL"

    @property
    def local_name(self) -> str:
        return f"openwop-{self.key}.fifo"

    @property
    def dlq_local_name(self) -> str:
        return f"openwop-{self.key}-dlq.fifo"


RUNS = "runs"
EVENTS = "events"
TOOL_CALLS = "toolcalls"
IDEMPOTENCY = "idempotency"
HOST = "host"
SIGNING = "signing"

TABLES: tuple[Table, ...] = (
    Table(
        RUNS,
        ("pk", "S"),
        ("sk", "S"),
        stream=True,
        indexes=(
            Index("byTenant", ("gsi1pk", "S"), ("gsi1sk", "S")),
            Index("byTenantEval", ("gsi2pk", "S"), ("gsi2sk", "S")),
        ),
        purpose="run items (sk RUN), fork source outcomes, eval trial results, tombstones",
    ),
    Table(
        EVENTS,
        ("runId", "S"),
        ("seq", "N"),
        stream=True,
        purpose="the run event logs (the stream's INSERT records feed the webhook fan-out)",
    ),
    Table(TOOL_CALLS, ("runId", "S"), ("callKey", "S"), purpose="as-executed tool calls"),
    Table(
        IDEMPOTENCY,
        ("id", "S"),
        None,
        ttl_attribute="expiration",
        purpose="Powertools idempotency records",
    ),
    Table(HOST, ("pk", "S"), ("sk", "S"), purpose="API key hashes, eval suites, counters, effect ledger"),
    # A table of its own, so only the roles granted it (webhook registration and delivery) can read it at all; its
    # values are encrypted with the signing key besides (shared/services/webhook_secrets.py).
    # (Not in the throttle alarm: read once per delivery, a throttled read fails the delivery, which the queue retries
    # and the WebhooksDeadLetters alarm reports.)
    Table(
        SIGNING,
        ("pk", "S"),
        ("sk", "S"),
        purpose="webhook signing secrets, encrypted with the signing key",
        throttle_alarm=False,
    ),
)

FIXTURES = "fixtures"
BUCKETS: tuple[Bucket, ...] = (Bucket(FIXTURES, purpose="derived fixture copies and large payloads"),)

CURSOR = "cursor"
APIKEY_PEPPER = "pepper"
TOMBSTONE = "tombstone"
SECRETS: tuple[Secret, ...] = (
    Secret(CURSOR, purpose="HMAC key of the list cursors (GET /runs, GET /webhooks)"),
    Secret(
        APIKEY_PEPPER,
        purpose="HMAC key (pepper) of the stored API key hashes; current and previous",
        json_key="current",
    ),
    Secret(
        TOMBSTONE, purpose="HMAC key of erasure tombstones' keys (a tombstone never holds the run id); never rotated"
    ),
)

KEYS: tuple[Key, ...] = (Key(SIGNING, purpose="encrypts webhook signing secrets (registration and delivery only)"),)

WEBHOOKS = "webhooks"
QUEUES: tuple[Queue, ...] = (
    Queue(
        WEBHOOKS,
        purpose="webhook deliveries, one message per (subscription, event); FIFO, grouped per (subscription, run)",
    ),
)


def queue(key: str) -> Queue:
    for q in QUEUES:
        if q.key == key:
            return q
    raise KeyError(key)


def kms_key(key: str) -> Key:
    for k in KEYS:
        if k.key == key:
            return k
    raise KeyError(key)


def table(key: str) -> Table:
    for t in TABLES:
        if t.key == key:
            return t
    raise KeyError(key)
