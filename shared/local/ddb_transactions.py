"""moto 5.2.5 patch: TransactWriteItems without deep-copying whole tables.

moto's ``DynamoDBBackend.transact_write_items`` backs up each touched table with
``copy.deepcopy`` once per transaction ITEM, so a 100-item append to a table of
N items costs O(100 * N): an event log grows slower with every transaction (1.4 s
per append at ~50k items). This replacement keeps DynamoDB's semantics and is
closer to them than moto's: every condition is evaluated against the state before
the transaction, any failure cancels the whole transaction with per-item reasons
(``TransactionCanceledException``), and writes are applied only when all pass; a
validation error during the writes rolls back the touched items from per-key
snapshots. Canary: tests/integration/test_local_patches.py (a transaction with a
failing condition leaves nothing written; a 99-item append deep-copies no table).
Remove when moto stops deep-copying tables in transact_write_items.

moto's server answers requests on many threads and checks a condition and applies the write as separate
Python steps, so two racing conditional writes could both pass. DynamoDB serializes writes to an item; the
patch does the same (more coarsely) by taking one process-wide lock around every write of the backend:
transactions, and single-item put/update/delete with their conditions. Canary: the racing-writers contract test.
TransactGetItems takes the same lock, so it never sees half of a transaction (canary: the torn-read test), and so
do the single reads (GetItem, Query, Scan, BatchGetItem): on DynamoDB a committed transaction is seen whole by every
read after it, so a read that saw its first write (a run head's new ``lastSeq``) must see its last (the page of those
events); without the lock a poll answered a finished run with no events (canary: the read-after-commit test).
"""

from __future__ import annotations

import copy
import functools
import threading
from typing import Any

_applied = False
_write_lock = threading.RLock()


def _serialized(fn: Any) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _write_lock:
            return fn(*args, **kwargs)

    return wrapper


def _key_of(backend: Any, op_type: str, op: dict[str, Any]) -> dict[str, Any]:
    """The primary key an operation touches (a Put carries it inside its item)."""
    if op_type != "Put":
        return op["Key"]  # type: ignore[no-any-return]
    table = backend.get_table(op["TableName"])
    attrs = op["Item"]
    key = {table.hash_key_attr: attrs[table.hash_key_attr]}
    if table.range_key_attr is not None:
        key[table.range_key_attr] = attrs[table.range_key_attr]
    return key


def _plan(backend: Any, transact_items: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], str, dict[str, Any]]]:
    """Validate the request's shape and list (op type, op, table, key) per item, in order."""
    from moto.dynamodb.exceptions import (
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactWriteSingleOpException,
    )

    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    planned: list[tuple[str, dict[str, Any], str, dict[str, Any]]] = []
    seen: set[tuple[str, str]] = set()
    for item in transact_items:
        if len(list(item.keys())) > 1:
            raise TransactWriteSingleOpException
        op_type, op = next(iter(item.items()))
        if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
            raise ValueError("Unsupported transaction operation")
        table_name = op["TableName"]
        key = _key_of(backend, op_type, op)
        marker = (str(table_name), str(dict(sorted(key.items()))))
        if marker in seen:
            raise MultipleTransactionsException()
        seen.add(marker)
        planned.append((op_type, op, table_name, key))
    return planned


def _condition_reason(backend: Any, op: dict[str, Any], table_name: str, key: dict[str, Any]) -> tuple[Any, Any, Any]:
    """One item's cancellation reason against the state before the transaction ((None, None, None) when it passes)."""
    from moto.dynamodb.models import get_filter_expression  # the parser moto's own transaction code uses

    current = backend.get_item(table_name, key)
    cond = op.get("ConditionExpression")
    if cond is None:
        return (None, None, None)
    expr = get_filter_expression(cond, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues"))
    if expr.expr(current):
        return (None, None, None)
    old = None
    if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
        old = current.to_json()["Attributes"]
    return ("ConditionalCheckFailed", "The conditional request failed", old)


def _check_conditions(backend: Any, planned: list[tuple[str, dict[str, Any], str, dict[str, Any]]]) -> None:
    """Every condition against the state before the transaction; any failure cancels it with per-item reasons."""
    from moto.dynamodb.exceptions import MockValidationException, TransactionCanceledException

    errors: list[tuple[Any, Any, Any]] = []
    for _op_type, op, table_name, key in planned:
        try:
            errors.append(_condition_reason(backend, op, table_name, key))
        except MockValidationException:
            raise
        except Exception as e:  # noqa: BLE001 - reported per item, as moto does
            errors.append((type(e).__name__, str(e), None))
    if any(code is not None for code, _, _ in errors):
        raise TransactionCanceledException(errors)


def _write(backend: Any, op_type: str, op: dict[str, Any], table_name: str, key: dict[str, Any]) -> None:
    names, values = op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
    if op_type == "Put":
        backend.put_item(table_name, op["Item"], expression_attribute_names=names, expression_attribute_values=values)
    elif op_type == "Delete":
        backend.delete_item(table_name, key, expression_attribute_names=names, expression_attribute_values=values)
    else:
        backend.update_item(
            table_name,
            key,
            update_expression=op["UpdateExpression"],
            expression_attribute_names=names,
            expression_attribute_values=values,
        )


def _roll_back(backend: Any, snapshots: list[tuple[str, dict[str, Any], Any]]) -> None:
    for table_name, key, before in reversed(snapshots):
        if before is None:
            try:
                backend.delete_item(table_name, key)
            except Exception:  # noqa: BLE001
                pass
        else:
            backend.put_item(table_name, before.to_json()["Attributes"])


def _apply_writes(backend: Any, planned: list[tuple[str, dict[str, Any], str, dict[str, Any]]]) -> None:
    """The writes, with per-key snapshots to roll back a mid-way validation error."""
    snapshots: list[tuple[str, dict[str, Any], Any]] = []
    try:
        for op_type, op, table_name, key in planned:
            if op_type == "ConditionCheck":
                continue
            snapshots.append((table_name, key, copy.deepcopy(backend.get_item(table_name, key))))
            _write(backend, op_type, op, table_name, key)
    except Exception:
        _roll_back(backend, snapshots)
        raise


def _transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
    planned = _plan(self, transact_items)
    _check_conditions(self, planned)
    _apply_writes(self, planned)


def apply_transaction_patch() -> None:
    global _applied
    if _applied:
        return
    from moto.dynamodb import models as ddb_models

    DynamoDBBackend = ddb_models.DynamoDBBackend
    DynamoDBBackend.transact_write_items = _serialized(_transact_write_items)  # type: ignore[method-assign]
    for name in ("put_item", "update_item", "delete_item", "get_item", "query", "scan"):
        setattr(DynamoDBBackend, name, _serialized(getattr(DynamoDBBackend, name)))
    # TransactGetItems is isolated from TransactWriteItems on DynamoDB; moto answers it with one get_item per key, so
    # without the lock it could read a transaction's first writes and miss its last (a run's new status with its
    # old state)
    from moto.dynamodb.responses import DynamoHandler

    DynamoHandler.transact_get_items = _serialized(DynamoHandler.transact_get_items)  # type: ignore[method-assign]
    DynamoHandler.batch_get_item = _serialized(DynamoHandler.batch_get_item)  # type: ignore[method-assign]
    _applied = True
