"""The run store's writes that a gateway call makes durable in one request each (decision 0149): an ordinal claimed
at an expected value together with the intent of the outside effect it is for, and an auxiliary item staged for
the append that records the call's outcome. A part of ``DynamoRunStore`` (``runs.py``), kept apart by subject."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from botocore.exceptions import ClientError

from shared.errors import ConflictError, OrdinalTakenError
from shared.ports import StagedWrite
from shared.storage import schema
from shared.storage.ddb import dump, error_code, to_item

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
    _c: Any
    _t: str

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
