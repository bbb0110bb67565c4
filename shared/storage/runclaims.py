"""The run store's claims (a part of ``DynamoRunStore``, ``runs.py``, kept apart by subject): a counter's next
ordinal, an outside effect's intent, and (decision 0149) an ordinal claimed at an expected value together with the
intent of the effect it is for, in one write; and an auxiliary item staged for the append that records a call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from botocore.exceptions import ClientError

from shared.errors import ConflictError, OrdinalTakenError
from shared.ports import StagedWrite
from shared.storage import schema
from shared.storage.ddb import dump, effect_transaction, error_code, to_item, writable_check

COUNTER_PREFIX = "counter_"  # a run item's counter ``name`` is its attribute ``counter_<name>``


def counters(item: dict[str, Any]) -> dict[str, int]:
    """The counters a run item (as ``from_item`` reads it) holds: ``{name: next ordinal}``."""
    return {k[len(COUNTER_PREFIX) :]: int(v) for k, v in item.items() if k.startswith(COUNTER_PREFIX)}


def counter_update(counter: str, expected: int, names: dict[str, str], values: dict[str, Any]) -> tuple[str, str]:
    """The SET clause and the condition that move ``counter`` from ``expected`` to ``expected + 1`` (a counter
    never claimed reads 0), their names and values added to ``names`` and ``values``."""
    names["#ctr"] = f"{COUNTER_PREFIX}{counter}"
    values[":ctrOld"] = {"N": str(expected)}
    values[":ctrNew"] = {"N": str(expected + 1)}
    cond = "#ctr = :ctrOld" if expected else "(attribute_not_exists(#ctr) OR #ctr = :ctrOld)"
    return "#ctr = :ctrNew", cond


class RunClaims:
    """Ordinals and effect intents claimed on a run (``RunStore``'s claims)."""

    _c: Any
    _t: str

    def claim_counter(self, run_id: str, counter: str, *, require_status: Sequence[str]) -> int:
        """``ADD`` 1 to the run item's counter while the run's status is one of ``require_status``: the claimed
        0-based ordinal (``ConflictError`` when the run is gone or not in such a status)."""
        values: dict[str, Any] = {":one": {"N": "1"}, **{f":a{i}": {"S": s} for i, s in enumerate(require_status)}}
        try:
            resp = self._c.update_item(
                TableName=self._t,
                Key=to_item({"pk": run_id, "sk": schema.RUN_SK}),
                UpdateExpression="ADD #c :one",
                ConditionExpression=f"attribute_exists(pk) AND #st IN ({', '.join(v for v in values if v != ':one')})",
                ExpressionAttributeNames={"#c": f"counter_{counter}", "#st": "status"},
                ExpressionAttributeValues=values,
                ReturnValues="UPDATED_NEW",
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                raise ConflictError("run not writable") from exc
            raise
        return int(resp["Attributes"][f"counter_{counter}"]["N"]) - 1

    def claim_aux_counter(self, run_id: str, sk: str, counter: str) -> int:
        resp = self._c.update_item(
            TableName=self._t,
            Key=to_item({"pk": run_id, "sk": sk}),
            UpdateExpression="ADD #c :one",
            ExpressionAttributeNames={"#c": f"counter_{counter}"},
            ExpressionAttributeValues={":one": {"N": "1"}},
            ReturnValues="UPDATED_NEW",
        )
        return int(resp["Attributes"][f"counter_{counter}"]["N"]) - 1

    def claim_effect(
        self, run_id: str, effect_key: str, value: dict[str, Any], expires_at: int, *, stale_before: str | None = None
    ) -> bool:
        """Record the intent of an outside effect under the run, only while the run is writable (one transaction).

        True when newly claimed, False when this effect key was claimed before (a retried step);
        ``ConflictError`` when the run is no longer writable: the caller must not perform the effect.
        With ``stale_before`` (an ISO time) a claim made before it, or one that names no time, is taken over in the
        same write (its claimant is gone), and the claim records ``value["at"]`` as its time.
        """
        item: dict[str, Any] = {
            "pk": run_id,
            "sk": f"{schema.EFFECT_PREFIX}{effect_key}",
            "doc": dump(value),
            schema.TTL_ATTRIBUTE: expires_at,
        }
        put: dict[str, Any] = {"TableName": self._t, "ConditionExpression": "attribute_not_exists(pk)"}
        if stale_before is not None:
            item["claimedAt"] = str(value["at"])
            put["ConditionExpression"] = (
                "attribute_not_exists(pk) OR attribute_not_exists(claimedAt) OR claimedAt < :stale"
            )
            put["ExpressionAttributeValues"] = {":stale": {"S": stale_before}}
        put["Item"] = to_item(item)
        return effect_transaction(self._c, [{"Put": put}, writable_check(self._t, run_id)], run_id)

    def claim_ordinal(
        self,
        run_id: str,
        counter: str,
        expected: int,
        *,
        require_status: Sequence[str],
        effect: tuple[str, dict[str, Any], int] | None = None,
    ) -> None:
        names: dict[str, str] = {"#st": "status"}
        values: dict[str, Any] = {f":a{i}": {"S": s} for i, s in enumerate(require_status)}
        status = f"#st IN ({', '.join(values)})"
        set_clause, cond = counter_update(counter, expected, names, values)
        update = {
            "Update": {
                "TableName": self._t,
                "Key": to_item({"pk": run_id, "sk": schema.RUN_SK}),
                "UpdateExpression": f"SET {set_clause}",
                "ConditionExpression": f"attribute_exists(pk) AND {status} AND {cond}",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        items: list[dict[str, Any]] = [update]
        if effect is not None:
            key, value, expires_at = effect
            item: dict[str, Any] = {"pk": run_id, "sk": f"{schema.EFFECT_PREFIX}{key}", "doc": dump(value)}
            item[schema.TTL_ATTRIBUTE] = expires_at  # the intent as ``claim_effect`` writes it: the effect ledger's row
            new = "attribute_not_exists(pk)"
            items.append({"Put": {"TableName": self._t, "Item": to_item(item), "ConditionExpression": new}})
        try:
            self._c.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise
            reasons = exc.response.get("CancellationReasons") or []
            if any(r.get("Code") == "TransactionConflict" for r in reasons):  # an append in flight: try again
                raise OrdinalTakenError(expected) from exc
            old = (reasons[0].get("Item") or {}) if reasons else {}
            if reasons and reasons[0].get("Code") == "ConditionalCheckFailed" and old:
                current = int((old.get(f"{COUNTER_PREFIX}{counter}") or {}).get("N", "0"))
                if old.get("status", {}).get("S") in require_status and current != expected:
                    raise OrdinalTakenError(current) from exc
            raise ConflictError(f"run {run_id} is not writable") from exc

    def stage_aux(self, run_id: str, sk: str, value: dict[str, Any], expires_at: int) -> StagedWrite:
        item = {"pk": run_id, "sk": sk, "doc": dump(value), schema.TTL_ATTRIBUTE: expires_at}
        put = {"TableName": self._t, "Item": to_item(item), "ConditionExpression": "attribute_not_exists(pk)"}
        return StagedWrite({"Put": put}, len(dump(item)))
