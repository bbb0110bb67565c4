"""The run store's create (a part of ``DynamoRunStore``, ``runs.py``, kept apart by subject): a run's items written in
one transaction (the run item, its creation facts, its state, its tenant-index entry, a large definition pinned
beside them, a fork's lineage link), with what other stores stage into it (its start marker, its tenant's slot)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shared.errors import ConflictError, RunGoneError, StagedRefusedError
from shared.keys import CHILD_PREFIX
from shared.ports import TASK_STAMP, RunRecord, StagedWrite
from shared.storage import runaux, runitems, schema
from shared.storage.ddb import dump, to_item, tombstone_check, transact

# Creates that met another transaction on a staged item (its tenant's counter) in a row before the create fails.
CREATE_CONFLICT_TRIES = 8


class RunCreate(runaux.RunAux):
    """``RunStore.create_run``."""

    def create_run(
        self,
        record: RunRecord,
        *,
        parent: str | None = None,
        fresh: bool = False,
        staged: Sequence[StagedWrite] = (),
    ) -> None:
        """Create the run's items in one transaction, only if no erasure tombstone forbids it (``RunGoneError``).

        ``parent``: the run this one is a fork of. Its lineage link (``CHILD#<id>``, how the parent's erasure reaches
        the fork) is written in the same transaction, which then holds only while the parent has no tombstone: the
        parent's erasure either finds the link or refuses the fork, so the fork's own id (new, and linked nowhere
        before this write) needs no check of its own. ``fresh``: the id was drawn for this create (a new ULID), so
        no tombstone can name it (an erasure of an id no run has writes none, and every lineage link is written
        with or after its run): the transaction checks none (2 WRU less; decision 0174). ``staged``: another store's
        writes, in the same transaction (its start marker, decision 0186; its tenant's slot taken, decision 0182); one
        whose condition fails refuses
        the create (``StagedRefusedError``: nothing written), and one that met another transaction on its item (a
        tenant's counter) is tried again, after a jittered pause, up to ``CREATE_CONFLICT_TRIES`` times."""
        checked = parent if parent is not None else None if fresh else record.run_id  # whose tombstone it checks
        facts = dict(record.data)
        definition = facts.pop("definition", None)
        extra: list[dict[str, Any]] = []
        if definition is not None and len(dump(definition).encode("utf-8")) <= schema.INLINE_DEFINITION_BYTES:
            facts["definition"] = definition  # small: with the facts, read with the run's items (decision 0178)
        elif definition is not None:
            facts["definitionPinned"] = True
            extra.append(self._definition_put(record, definition))
        # The run item: only what changes (each append rewrites it, billed at its whole size). The creation facts,
        # the state and the tenant-index entry are items of their own (shared/storage/runitems.py).
        item: dict[str, Any] = {
            "pk": record.run_id,
            "sk": schema.RUN_SK,
            "tenant": record.tenant,
            "status": record.status,
            "lastSeq": record.last_seq,
            "createdAt": record.created_at,
            "workflowId": record.data.get("workflowId"),
            schema.TTL_ATTRIBUTE: record.expires_at,
        }
        if record.task_stamp is not None:
            item[TASK_STAMP] = record.task_stamp
        if record.execution_arn is not None:  # known before it starts (decision 0175): no write after the start
            item["executionArn"] = record.execution_arn
        facts_item = self._facts_item(record, facts)
        state_item = {
            "pk": record.run_id,
            "sk": schema.RUN_STATE_SK,
            schema.TTL_ATTRIBUTE: record.expires_at,
            runitems.STATE: dump(record.state) if record.state is not None else None,
            schema.STATE_STAMP: runitems.stamp(dump(record.state) if record.state is not None else ""),
        }
        item[schema.STATE_STAMP] = state_item[schema.STATE_STAMP]  # written together: see ``get_run``
        listed = {"status": record.status, "workflowId": record.data.get("workflowId")}
        if record.started_at is not None:  # a run created running (a branch fork)
            item["startedAt"] = listed["startedAt"] = record.started_at
        index = _index_entry(record, listed)
        extra += [{"Put": {"TableName": self._t, "Item": to_item(it)}} for it in (facts_item, state_item, index)]
        if parent is not None:
            extra.append(
                self._aux_put(parent, f"{CHILD_PREFIX}{record.run_id}", {"runId": record.run_id}, record.expires_at)
            )
        # an id erased before its run exists is never created; a fork: while its parent is not erased
        checks = [tombstone_check(self._t, self._tombstones, checked)] if checked is not None else []
        own = [
            {"Put": {"TableName": self._t, "Item": to_item(item), "ConditionExpression": "attribute_not_exists(pk)"}}
        ]
        self._create(record.run_id, [*own, *checks, *extra], len(checks), staged)

    def _create(self, run_id: str, items: list[dict[str, Any]], checks: int, staged: Sequence[StagedWrite]) -> None:
        """The create's transaction: its items (the run item first, then ``checks`` tombstone checks), then the staged
        writes; a staged write that met another transaction is tried again (``create_run``)."""
        tries = CREATE_CONFLICT_TRIES if staged else 1  # only a staged item (a tenant's counter) is contended
        codes = transact(self._c, [*items, *(w.action for w in staged)], tries)
        if codes is None:
            return
        if "ConditionalCheckFailed" in codes[1 : 1 + checks]:
            self._blobs.delete_prefix(schema.run_prefix(run_id))
            raise RunGoneError(run_id)
        if "ConditionalCheckFailed" in codes[len(items) :]:
            raise StagedRefusedError("a staged write's condition failed")
        raise ConflictError("run exists")  # its run item's condition, or contended past its tries

    def _definition_put(self, record: RunRecord, definition: Any) -> dict[str, Any]:
        """The pinned definition's item: written once beside the run item (same transaction), never with it: the run
        item is rewritten by every append, and a definition can be ~1 MB (DEFINITION_SK in shared/keys.py)."""
        doc = dump(definition)
        aux: dict[str, Any] = {
            "pk": record.run_id,
            "sk": schema.DEFINITION_SK,
            schema.TTL_ATTRIBUTE: record.expires_at,
        }
        if len(doc.encode("utf-8")) > schema.MAX_INLINE_BYTES:
            self._blobs.put_json(schema.run_definition_key(record.run_id), definition)
            aux["blob"] = schema.run_definition_key(record.run_id)
        else:
            aux["doc"] = doc
        return {"Put": {"TableName": self._t, "Item": to_item(aux)}}

    def _facts_item(self, record: RunRecord, facts: dict[str, Any]) -> dict[str, Any]:
        """The run's creation facts item; large facts (inputs, metadata) live in S3, where erasure reaches the object
        through the run's prefix."""
        data = dump(facts)
        facts_item: dict[str, Any] = {
            "pk": record.run_id,
            "sk": schema.RUN_FACTS_SK,
            "data": data,
            schema.TTL_ATTRIBUTE: record.expires_at,
        }
        if len(data.encode("utf-8")) > schema.MAX_INLINE_RUN_DATA_BYTES:
            del facts_item["data"]
            facts_item["dataRef"] = schema.run_data_key(record.run_id)
            self._blobs.put_json(schema.run_data_key(record.run_id), facts)
        return facts_item


def _index_entry(record: RunRecord, listed: dict[str, Any]) -> dict[str, Any]:
    """The run's tenant-index entry. An eval run's is also in the tenant's sparse eval index, with its suite, agent and
    name for filters (``list_runs(evals=True)``; docs/decisions/0118-named-experiments.md)."""
    index = runitems.index_item(record.run_id, record.tenant, record.created_at, listed, record.expires_at)
    if record.data.get("kind") == "eval":
        index.update(gsi2pk=index["gsi1pk"], gsi2sk=index["gsi1sk"])
        for attr in schema.EVAL_INDEX_ATTRIBUTES:
            if record.data.get(attr) is not None:
                index[attr] = str(record.data[attr])
    return index
