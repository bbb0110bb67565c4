"""The ``RunSlots`` port on the host table: ``SLOTS#<tenant>`` holds the tenant's counter (sk ``count``, attribute
``count``), one item per run that holds a slot (sk ``run#<runId>``) and one per run that waits for one
(sk ``wait#<atMs>#<runId>``, its create's time zero-padded, so a Query reads them in creation order); and the
tenant's held requests of a kind started in a window (sk ``held#<kind>#<window>``, expiring with the window).

Taking a slot is one transaction: the counter's conditional add (below the cap), the run's slot put if absent, and
the waiting entry's delete if present; releasing is one transaction: the slot's delete if present and the counter's
add of minus one. So a slot is released at most once per take, whatever retries (decision 0160).

The counter item also counts the tenant's waiting entries (attribute ``waiting``): an entry's put, delete or take
moves it in the same transaction, once (each is conditioned on the entry). A release's counter update is
conditioned on none waiting, so a run that ends while none wait starts nothing and reads nothing; while some wait
it writes as before and its tenant's queue is read (decision 0176). A waiting entry put after that release is
started by its own create's read of the queue, which follows its put."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from shared.errors import StorageError
from shared.ports.runs import StagedWrite
from shared.ports.slots import Release, Take, Waiting
from shared.storage.ddb import error_code, from_item, partition_condition, query_all, staged, to_item, transact

PREFIX = "SLOTS#"
COUNT_SK = "count"
RUN_PREFIX = "run#"
WAIT_PREFIX = "wait#"
HELD_PREFIX = "held#"
WAITING = "waiting"  # the counter item's count of waiting entries
CONFLICT_TRIES = 8  # transactions on one tenant's counter that lost a race in a row before the write fails


def _pk(tenant: str) -> str:
    return f"{PREFIX}{tenant}"


def _wait_sk(waiting: Waiting) -> str:
    return f"{WAIT_PREFIX}{waiting.at_ms:015d}#{waiting.run_id}"


class DynamoRunSlots:
    def __init__(self, client: Any, table: str) -> None:
        self._c = client
        self._t = table

    def _key(self, tenant: str, sk: str) -> dict[str, Any]:
        return to_item({"pk": _pk(tenant), "sk": sk})

    def take(self, tenant: str, run_id: str, cap: int, *, waiting: Waiting | None = None) -> Take:
        failed = self._transact(self._take_items(tenant, run_id, cap, waiting))
        if failed is None:
            return "taken"
        if 2 in failed:
            return "gone"
        return "held" if 1 in failed else "full"

    def stage_take(self, tenant: str, run_id: str, cap: int) -> list[StagedWrite]:
        """The take's items for the transaction that creates the run (decision 0182): its counter's conditional add
        and its slot's put, written with the run or not at all."""
        return [staged(a) for a in self._take_items(tenant, run_id, cap, None)]

    def _take_items(self, tenant: str, run_id: str, cap: int, waiting: Waiting | None) -> list[dict[str, Any]]:
        """The take's transaction: the counter below ``cap`` plus one, the run's slot put if absent, and ``waiting``'s
        entry deleted (and counted waiting no more) when given."""
        count: dict[str, Any] = {
            "TableName": self._t,
            "Key": self._key(tenant, COUNT_SK),
            "UpdateExpression": "ADD #c :one",
            "ConditionExpression": "attribute_not_exists(#c) OR #c < :cap",
            "ExpressionAttributeNames": {"#c": "count"},
            "ExpressionAttributeValues": {":one": {"N": "1"}, ":cap": {"N": str(cap)}},
        }
        if waiting is not None:  # a waiting entry taken is counted waiting no more
            count["UpdateExpression"] += ", #w :minus"
            count["ExpressionAttributeNames"]["#w"] = WAITING
            count["ExpressionAttributeValues"][":minus"] = {"N": "-1"}
        items: list[dict[str, Any]] = [
            {"Update": count},
            {
                "Put": {
                    "TableName": self._t,
                    "Item": to_item({"pk": _pk(tenant), "sk": f"{RUN_PREFIX}{run_id}", "runId": run_id}),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        ]
        if waiting is not None:
            items.append(
                {
                    "Delete": {
                        "TableName": self._t,
                        "Key": self._key(tenant, _wait_sk(waiting)),
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                }
            )
        return items

    def stage_release(self, tenant: str, run_id: str) -> list[StagedWrite]:
        """The release's items for the transaction that ends the run (decision 0183), on the conditions of a release
        that finds none waiting: its slot held, no waiting entry counted."""
        return [staged(a) for a in self._release_items(tenant, run_id, idle=True)]

    def release(self, tenant: str, run_id: str) -> Release:
        failed = self._transact(self._release_items(tenant, run_id, idle=True))
        if failed is None:
            return "free"
        if 0 in failed:  # its slot is not held
            return "none"
        # runs wait: the release without that condition (a concurrent release of the same slot finds it gone)
        return "waited" if self._transact(self._release_items(tenant, run_id, idle=False)) is None else "none"

    def _release_items(self, tenant: str, run_id: str, *, idle: bool) -> list[dict[str, Any]]:
        """The release's transaction; ``idle``: its counter update conditioned on no waiting entry."""
        count: dict[str, Any] = {
            "TableName": self._t,
            "Key": self._key(tenant, COUNT_SK),
            "UpdateExpression": "ADD #c :minus",
            "ExpressionAttributeNames": {"#c": "count"},
            "ExpressionAttributeValues": {":minus": {"N": "-1"}},
        }
        if idle:
            count["ConditionExpression"] = "attribute_not_exists(#w) OR #w < :one"
            count["ExpressionAttributeNames"]["#w"] = WAITING
            count["ExpressionAttributeValues"][":one"] = {"N": "1"}
        return [
            {
                "Delete": {
                    "TableName": self._t,
                    "Key": self._key(tenant, f"{RUN_PREFIX}{run_id}"),
                    "ConditionExpression": "attribute_exists(pk)",
                }
            },
            {"Update": count},
        ]

    def _waiting_count(self, tenant: str, delta: int) -> dict[str, Any]:
        """The counter item's update that moves its count of waiting entries by ``delta``."""
        return {
            "Update": {
                "TableName": self._t,
                "Key": self._key(tenant, COUNT_SK),
                "UpdateExpression": "ADD #w :d",
                "ExpressionAttributeNames": {"#w": WAITING},
                "ExpressionAttributeValues": {":d": {"N": str(delta)}},
            }
        }

    def _transact(self, items: list[dict[str, Any]]) -> set[int] | None:
        """Write ``items`` in one transaction: None when written, else the items whose condition failed. A
        transaction that lost a race on the tenant's counter (``TransactionConflict``) is tried again."""
        codes = transact(self._c, items, CONFLICT_TRIES)
        if codes is None:
            return None
        failed = {i for i, code in enumerate(codes) if code == "ConditionalCheckFailed"}
        if not failed:
            raise StorageError(f"the tenant's slots stayed contended: {codes}")
        return failed

    def holders(self, tenant: str) -> list[str]:
        kwargs = {"TableName": self._t, **partition_condition(_pk(tenant), RUN_PREFIX), "ConsistentRead": True}
        return [str(from_item(raw)["runId"]) for raw in query_all(self._c, kwargs)]

    def in_flight(self, tenant: str) -> int:
        resp = self._c.get_item(TableName=self._t, Key=self._key(tenant, COUNT_SK), ConsistentRead=True)
        return int(resp.get("Item", {}).get("count", {"N": "0"})["N"])

    def put_waiting(self, tenant: str, waiting: Waiting, *, expires_at: int) -> None:
        from shared.storage import schema

        item = {
            "pk": _pk(tenant),
            "sk": _wait_sk(waiting),
            "runId": waiting.run_id,
            "machine": waiting.machine,
            "atMs": waiting.at_ms,
            schema.TTL_ATTRIBUTE: expires_at,
        }
        put = {"TableName": self._t, "Item": to_item(item), "ConditionExpression": "attribute_not_exists(pk)"}
        self._transact([{"Put": put}, self._waiting_count(tenant, 1)])  # queued before: counted once

    def read_waiting(self, tenant: str, limit: int) -> list[Waiting]:
        resp = self._c.query(
            TableName=self._t, **partition_condition(_pk(tenant), WAIT_PREFIX), ConsistentRead=True, Limit=limit
        )
        return [
            Waiting(run_id=str(it["runId"]), machine=str(it["machine"]), at_ms=int(it["atMs"]))
            for it in map(from_item, resp.get("Items", []))
        ]

    def drop_waiting(self, tenant: str, waiting: Waiting) -> None:
        delete = {
            "TableName": self._t,
            "Key": self._key(tenant, _wait_sk(waiting)),
            "ConditionExpression": "attribute_exists(pk)",
        }
        self._transact([{"Delete": delete}, self._waiting_count(tenant, -1)])  # dropped before: counted off once

    def hold(self, tenant: str, kind: str, window: int, cap: int, *, expires_at: int) -> bool:
        from shared.storage import schema

        try:
            self._c.update_item(
                TableName=self._t,
                Key=self._key(tenant, f"{HELD_PREFIX}{kind}#{window}"),
                UpdateExpression="ADD #c :one SET #e = if_not_exists(#e, :exp)",
                ConditionExpression="attribute_not_exists(#c) OR #c < :cap",
                ExpressionAttributeNames={"#c": "count", "#e": schema.TTL_ATTRIBUTE},
                ExpressionAttributeValues={":one": {"N": "1"}, ":cap": {"N": str(cap)}, ":exp": {"N": str(expires_at)}},
            )
            return True
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise

    def unhold(self, tenant: str, kind: str, window: int) -> None:
        self._c.update_item(
            TableName=self._t,
            Key=self._key(tenant, f"{HELD_PREFIX}{kind}#{window}"),
            UpdateExpression="ADD #c :minus",
            ConditionExpression="attribute_exists(#c)",
            ExpressionAttributeNames={"#c": "count"},
            ExpressionAttributeValues={":minus": {"N": "-1"}},
        )
