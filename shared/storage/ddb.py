"""The low-level DynamoDB helpers every store module shares (and only they use).

Serialisation (``to_item``/``from_item``, JSON text), error mapping (a ``ClientError``'s code, a transaction's
cancellation reasons, DynamoDB's 400 KB refusal as ``ItemTooLargeError``), the transaction items that make a write
conditional on its run (``writable_check``, ``tombstone_check``, ``effect_transaction``), paginated queries,
25-per-request batch writes, and the compressed document form of host items. The stores themselves live one per
port: ``runs``, ``events``, ``tool_calls``, ``host``, ``idempotency`` (and S3 in ``blobs``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import zlib
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from shared.clock import full_jitter_sleep
from shared.errors import ConflictError, ItemTooLargeError, StorageError
from shared.ports import WRITABLE, StagedWrite
from shared.storage import schema

_ser = TypeSerializer()
_de = TypeDeserializer()


# -- serialisation ----------------------------------------------------------------------------------------------------
def dump(value: Any) -> str:
    """Compact JSON text (the form every stored document takes)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def to_item(value: dict[str, Any]) -> dict[str, Any]:
    return {k: _ser.serialize(v) for k, v in value.items() if v is not None}


def from_item(item: dict[str, Any]) -> dict[str, Any]:
    out = {k: _de.deserialize(v) for k, v in item.items()}
    return {k: (int(v) if isinstance(v, Decimal) and v == v.to_integral_value() else v) for k, v in out.items()}


def add_updates(updates: dict[str, Any], sets: list[str], values: dict[str, Any], names: dict[str, str]) -> None:
    """Add ``SET #uJ = :uJ`` clauses for ``updates`` to an UpdateItem's parts (dicts and lists as JSON text)."""
    for j, (k, v) in enumerate(updates.items()):
        names[f"#u{j}"] = k
        values[f":u{j}"] = _ser.serialize(dump(v) if isinstance(v, dict | list) else v)
        sets.append(f"#u{j} = :u{j}")


def pack_doc(value: dict[str, Any], compress: bool) -> tuple[str, dict[str, Any]]:
    """How a host-table document is stored: JSON text in ``doc``, or zlib-compressed JSON in ``docz`` when large
    and the caller allows it (workflow definitions, read whole by the engine only)."""
    doc = dump(value)
    raw = doc.encode("utf-8")
    if not compress or len(raw) <= schema.MAX_INLINE_BYTES:
        return "doc", {"S": doc}
    return "docz", {"B": zlib.compress(raw, 6)}


def unpack_doc(it: dict[str, Any]) -> dict[str, Any]:
    """The document ``pack_doc`` stored in a (deserialised) item; the item itself when it holds neither form."""
    if "doc" in it:
        doc: dict[str, Any] = json.loads(it["doc"])
        return doc
    if "docz" in it:
        z = it["docz"]
        out: dict[str, Any] = json.loads(zlib.decompress(bytes(getattr(z, "value", z))).decode("utf-8"))
        return out
    return it


# -- error mapping ----------------------------------------------------------------------------------------------------
def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _too_large(exc: ClientError) -> bool:
    """DynamoDB's answer to an item over 400 KB (direct, or as a transaction's cancellation reason)."""
    texts = [str(exc.response.get("Error", {}).get("Message", ""))]
    texts += [str(r.get("Message", "")) for r in exc.response.get("CancellationReasons") or []]
    return any("size has exceeded" in t.lower() for t in texts)


def refuse_too_large(exc: ClientError) -> None:
    if _too_large(exc):
        raise ItemTooLargeError("an item over DynamoDB's 400 KB limit") from exc


def reasons(exc: ClientError) -> list[str]:
    """Per transaction item: the cancellation reason code ("None" for an item that passed)."""
    return [str(r.get("Code", "None")) for r in exc.response.get("CancellationReasons") or []]


# -- conditional transactions -----------------------------------------------------------------------------------------
def transact(client: Any, items: list[dict[str, Any]], tries: int) -> list[str] | None:
    """Write ``items`` in one transaction: None when written, else the cancellation reasons of the last try (an item
    over 400 KB raises ``ItemTooLargeError``). A transaction that only met another (``TransactionConflict``: none of
    its conditions failed) is tried again after a jittered pause, up to ``tries`` times in all; the caller tells a
    failed condition from a contention that outlasted them by the reasons it gets."""
    for attempt in range(1, tries + 1):
        try:
            client.transact_write_items(TransactItems=items)
            return None
        except ClientError as exc:
            refuse_too_large(exc)
            if error_code(exc) != "TransactionCanceledException":
                raise
            codes = reasons(exc)
        if "ConditionalCheckFailed" in codes or attempt == tries:
            return codes
        full_jitter_sleep(attempt)
    return None  # unreachable: the last try returns or raises


def staged(action: dict[str, Any]) -> StagedWrite:
    """A transaction ``action`` of one store, for another store's transaction (``StagedWrite``, sized as sent)."""
    return StagedWrite(action=action, size=len(dump(action)))


def writable_check(runs_table: str, run_id: str) -> dict[str, Any]:
    """A transaction item that holds only while the run item exists with a writable status.

    Every effect is written in one transaction with this check, so an effect is performed only if the run is
    writable at that instant: a cancel (status ``cancelling``) or an erasure (run item deleted after its
    tombstone) that lands first makes the effect's write fail, and one that lands later sees it done.
    """
    values: dict[str, Any] = {f":w{i}": {"S": s} for i, s in enumerate(WRITABLE)}
    return {
        "ConditionCheck": {
            "TableName": runs_table,
            "Key": to_item({"pk": run_id, "sk": schema.RUN_SK}),
            "ConditionExpression": f"attribute_exists(pk) AND #st IN ({', '.join(values)})",
            "ExpressionAttributeNames": {"#st": "status"},
            "ExpressionAttributeValues": values,
        }
    }


class Tombstones:
    """Where the erasure tombstone of a run id lives: pk ``ERASED#`` + the hex HMAC-SHA-256 of the id under the
    deployment's tombstone secret, sk ``TOMBSTONE``; never under the id itself, so an erased run's id is not kept
    in the clear, and a reader without the secret cannot tell which id a tombstone stands for. The secret is read
    on first use (``secret``: the SecretStore's cached read) and must never change: a new value would leave every
    tombstone unreachable."""

    def __init__(self, secret: Callable[[], str]) -> None:
        self._secret = secret

    def key(self, run_id: str) -> dict[str, Any]:
        mac = hmac.new(self._secret().encode("utf-8"), run_id.encode("utf-8"), hashlib.sha256).hexdigest()
        return to_item({"pk": schema.TOMBSTONE_PK_PREFIX + mac, "sk": schema.TOMBSTONE_SK})


def tombstone_check(runs_table: str, tombstones: Tombstones, run_id: str) -> dict[str, Any]:
    """A transaction item that holds only while the run has no erasure tombstone: a late write for an erased run
    (or the creation of an id erased before it existed) fails."""
    return {
        "ConditionCheck": {
            "TableName": runs_table,
            "Key": tombstones.key(run_id),
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }


def effect_transaction(client: Any, items: list[dict[str, Any]], run_id: str) -> bool:
    """Write ``items`` (the first one carries the effect's own condition) with the run's writable check last.

    True when written; False when only the effect's own condition failed (already performed: a retried step);
    ``ConflictError`` when the run is no longer writable (cancelled, finished or erased): nothing is written.
    """
    try:
        client.transact_write_items(TransactItems=items)
        return True
    except ClientError as exc:
        if error_code(exc) != "TransactionCanceledException":
            raise
        codes = reasons(exc)
        if len(codes) == len(items) and codes[-1] == "None" and codes[0] == "ConditionalCheckFailed":
            return False
        raise ConflictError(f"run {run_id} is not writable") from exc


# -- queries ----------------------------------------------------------------------------------------------------------
def partition_condition(pk: str, prefix: str) -> dict[str, Any]:
    """A Query's key condition: the whole partition, or the sort keys that start with ``prefix``."""
    if not prefix:  # begins_with(sk, "") is refused by DynamoDB
        return {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": pk}}}
    return {
        "KeyConditionExpression": "pk = :p AND begins_with(sk, :s)",
        "ExpressionAttributeValues": {":p": {"S": pk}, ":s": {"S": prefix}},
    }


def query_all(client: Any, kwargs: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every item a Query matches, one request per 1 MB page (``kwargs`` is the Query's, updated as it pages)."""
    while True:
        resp = client.query(**kwargs)
        yield from resp.get("Items", [])
        if not resp.get("LastEvaluatedKey"):
            return
        kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]


def query_keys(client: Any, table: str, hash_name: str, hash_value: str, projection: str) -> list[dict[str, Any]]:
    """Every key under one partition (paginated), for erasure."""
    return list(
        query_all(
            client,
            {
                "TableName": table,
                "KeyConditionExpression": "#h = :h",
                "ExpressionAttributeNames": {"#h": hash_name},
                "ExpressionAttributeValues": {":h": {"S": hash_value}},
                "ProjectionExpression": projection,
            },
        )
    )


# -- batch writes -----------------------------------------------------------------------------------------------------
BATCH_WRITE_SIZE = 25
BATCH_WRITE_ATTEMPTS = 8


def batch_write(
    client: Any,
    table: str,
    requests: Sequence[dict[str, Any]],
    *,
    pause: Callable[[int], object] = full_jitter_sleep,
    max_attempts: int = BATCH_WRITE_ATTEMPTS,
) -> int:
    """Send Put/Delete requests 25 per BatchWriteItem; resend what DynamoDB leaves unprocessed.

    Each resend waits ``pause(attempt)`` first (exponential backoff with full jitter, from ``shared.clock``), and a
    chunk gets at most ``max_attempts`` requests: if items are still unprocessed then, ``StorageError`` is raised
    (the items already written stay written; every caller's writes are idempotent). Returns the request count.
    """
    for i in range(0, len(requests), BATCH_WRITE_SIZE):
        pending: dict[str, Any] = {table: list(requests[i : i + BATCH_WRITE_SIZE])}
        attempt = 1
        while True:
            resp = client.batch_write_item(RequestItems=pending)
            pending = resp.get("UnprocessedItems") or {}
            if not pending:
                break
            if attempt >= max_attempts:
                left = sum(len(v) for v in pending.values())
                raise StorageError(f"{left} items of {table} still unprocessed after {attempt} BatchWriteItem requests")
            pause(attempt)
            attempt += 1
    return len(requests)


BATCH_GET_SIZE = 100


def batch_get(
    client: Any,
    table: str,
    keys: Sequence[dict[str, Any]],
    *,
    consistent: bool = True,
    pause: Callable[[int], object] = full_jitter_sleep,
    max_attempts: int = BATCH_WRITE_ATTEMPTS,
) -> list[dict[str, Any]]:
    """The items of ``keys`` (DynamoDB JSON) that exist: 100 keys per BatchGetItem, keys left unprocessed sent again
    after ``pause(attempt)``, at most ``max_attempts`` requests a chunk (then ``StorageError``)."""
    out: list[dict[str, Any]] = []
    for i in range(0, len(keys), BATCH_GET_SIZE):
        chunk = {table: {"Keys": list(keys[i : i + BATCH_GET_SIZE]), "ConsistentRead": consistent}}
        out.extend(batch_get_tables(client, chunk, pause=pause, max_attempts=max_attempts).get(table, []))
    return out


def batch_get_tables(
    client: Any,
    request: dict[str, dict[str, Any]],
    *,
    pause: Callable[[int], object] = full_jitter_sleep,
    max_attempts: int = BATCH_WRITE_ATTEMPTS,
) -> dict[str, list[dict[str, Any]]]:
    """One BatchGetItem ``RequestItems`` (up to 100 keys, over one table or several), the keys left unprocessed
    sent again after ``pause(attempt)``, at most ``max_attempts`` requests (then ``StorageError``): the items that
    exist, by table."""
    out: dict[str, list[dict[str, Any]]] = {}
    pending = request
    attempt = 1
    while True:
        resp = client.batch_get_item(RequestItems=pending)
        for table, items in resp.get("Responses", {}).items():
            out.setdefault(table, []).extend(items)
        pending = resp.get("UnprocessedKeys") or {}
        if not pending:
            return out
        if attempt >= max_attempts:
            raise StorageError(
                f"keys of {', '.join(sorted(pending))} still unprocessed after {attempt} BatchGetItem requests"
            )
        pause(attempt)
        attempt += 1


def batch_delete(client: Any, table: str, keys: Sequence[dict[str, Any]]) -> int:
    """Delete keys (already in DynamoDB JSON) 25 per request (``batch_write``)."""
    return batch_write(client, table, [{"DeleteRequest": {"Key": k}} for k in keys])
