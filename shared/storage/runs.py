"""The RunStore port on DynamoDB: the run item and its facts, state and tenant-index items (``runitems``), its
auxiliary items (definition, effect claims, pages), its erasure tombstone (under a keyed hash of the id:
``ddb.Tombstones``); large creation facts and definitions in S3 (the BlobStore)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from botocore.exceptions import ClientError

from shared.errors import ConflictError, RunGoneError
from shared.ports import TASK_STAMP, BlobStore, Clock, ListPage, RunRecord
from shared.protocol.codes import TERMINAL_STATUSES
from shared.storage import runclaims, runcreate, runitems, runrestore, schema
from shared.storage.ddb import (
    Tombstones,
    add_updates,
    batch_delete,
    batch_get,
    error_code,
    from_item,
    query_all,
    query_keys,
    reasons,
    refuse_too_large,
    to_item,
)

# Consistent reads of a run's items (Queries) before its TransactGetItems, when their state stamps disagree.
CONSISTENT_BATCH_READS = 2

# The statuses of a run whose execution a cancel or an erasure has stopped or is stopping: no new one is stored.
_STOPPING = tuple(sorted({*TERMINAL_STATUSES, "cancelling"}))


def _whole(raws: Sequence[dict[str, Any]]) -> bool:
    """Whether a run's items read one by one (``RUN``, ``RUN#FACTS``, ``RUN#STATE``) are the items of one instant.

    No run item: no run (a read before its create, or after its erasure). A run item without its facts: a create
    or an erasure in flight. A stamped run item: its state item must carry the same stamp (the same state write).
    An unstamped one (written before stamps, state never written since by a stamping writer): its state item must
    be unstamped too, or absent (the older layout keeps the state on the run item)."""
    by_sk = {raw["sk"]["S"]: raw for raw in raws}
    run = by_sk.get(schema.RUN_SK)
    if run is None:
        return True
    if schema.RUN_FACTS_SK not in by_sk and "data" not in run and "dataRef" not in run:
        return False
    state = by_sk.get(schema.RUN_STATE_SK)
    stamp = run.get(schema.STATE_STAMP)
    if stamp is not None:
        return state is not None and state.get(schema.STATE_STAMP) == stamp
    return state is None or schema.STATE_STAMP not in state


def _ended(raws: Sequence[dict[str, Any]]) -> bool:
    """Whether a run's items hold its run item with a terminal status."""
    run = next((raw for raw in raws if raw["sk"]["S"] == schema.RUN_SK), None)
    return run is not None and (run.get("status") or {}).get("S") in TERMINAL_STATUSES


def _written_by(raws: Sequence[dict[str, Any]], stamp: str) -> bool:
    """Whether a run's items hold its run item as the Advance task ``stamp`` left it: named by that task's last
    write (``TASK_STAMP``) and its tail closed (that write closed it; an open one is a task's that may still append)."""
    run = next((raw for raw in raws if raw["sk"]["S"] == schema.RUN_SK), None)
    return run is not None and (run.get(TASK_STAMP) or {}).get("S") == stamp and schema.OPEN_TAIL not in run


class DynamoRunStore(runcreate.RunCreate, runclaims.RunClaims, runrestore.RunRestore):
    def __init__(
        self,
        client: Any,
        table: str,
        clock: Clock,
        blobs: BlobStore,
        tombstones: Tombstones,
        tail_after: Callable[[str, int], int],
    ) -> None:
        self._c = client
        self._t = table
        self._clock = clock
        self._blobs = blobs
        self._tombstones = tombstones
        self._tail_after = tail_after  # the log's last sequence past an open tail's head (the event store's)

    def _expired(self, expires_at: int) -> bool:
        return bool(expires_at) and expires_at <= self._clock.now_ms() // 1000

    def _facts(self, facts: dict[str, Any]) -> dict[str, Any] | None:
        """A run's creation facts from the item that holds them (``RUN#FACTS``, or the run item of the older layout):
        inline, or the S3 object it names; None when they are gone (erased)."""
        if "dataRef" in facts:
            data = self._blobs.get_json(facts["dataRef"])
            return data if isinstance(data, dict) else None
        return dict(json.loads(facts["data"])) if "data" in facts else None

    def _record(self, raws: Sequence[dict[str, Any]], tail: bool = True) -> RunRecord | None:
        """The record of one run from its items (``RUN`` and, in this layout, ``RUN#FACTS`` / ``RUN#STATE``); None
        without a run item. ``RunGoneError`` when its creation facts are gone (being erased)."""
        by_sk = {raw["sk"]["S"]: raw for raw in raws}
        if schema.RUN_SK not in by_sk:
            return None
        it = from_item(by_sk[schema.RUN_SK])
        data = self._facts(from_item(by_sk[schema.RUN_FACTS_SK]) if schema.RUN_FACTS_SK in by_sk else it)  # or inline
        if data is None:
            raise RunGoneError(it["pk"])  # its facts (item or object) are already erased
        state_of = from_item(by_sk[schema.RUN_STATE_SK]) if schema.RUN_STATE_SK in by_sk else it
        last_seq = int(it["lastSeq"])
        if tail and it.get(schema.OPEN_TAIL):  # a task's plain appends may follow the head (decision 0170)
            last_seq = self._tail_after(it["pk"], last_seq)  # the log's tail is read
        return RunRecord(
            run_id=it["pk"],
            tenant=it["tenant"],
            status=it["status"],
            last_seq=last_seq,
            created_at=it["createdAt"],
            data=data,
            state=json.loads(state_of["state"]) if state_of.get("state") else None,
            error=json.loads(it["error"]) if it.get("error") else None,
            started_at=it.get("startedAt"),
            completed_at=it.get("completedAt"),
            execution_arn=it.get("executionArn"),
            expires_at=int(it.get(schema.TTL_ATTRIBUTE, 0)),
            summary=json.loads(it["summary"]) if it.get("summary") else None,
            cursor=json.loads(it["cursor"]) if it.get("cursor") else None,
            counters=runclaims.counters(it),
            task_stamp=it.get(TASK_STAMP),
        )

    @staticmethod
    def _run_keys(run_id: str, state: bool = True) -> list[dict[str, Any]]:
        sks = (
            (schema.RUN_SK, schema.RUN_FACTS_SK, schema.RUN_STATE_SK) if state else (schema.RUN_SK, schema.RUN_FACTS_SK)
        )
        return [to_item({"pk": run_id, "sk": sk}) for sk in sks]

    def get_run(
        self,
        run_id: str,
        *,
        consistent: bool = True,
        include_expired: bool = False,
        settled: bool = False,
        written_by: str | None = None,
    ) -> RunRecord | None:
        # the run item and its facts and state items in one Query of their key range (``_run_items``), strongly
        # consistent or not (``_consistent_items``). Eventually consistent first, and kept only when whole and,
        # ``settled``, ended (a terminal run's log and status are final: decision 0168), or, ``written_by``, last
        # written by that Advance task with its tail closed (the next task of its execution: decision 0173); else
        # read again consistently
        if consistent and not settled and written_by is None:
            raws = self._consistent_items(run_id)
        else:
            raws = self._run_items(run_id, consistent=False)
            if (
                not _whole(raws)  # replicas at different writes
                or (settled and not _ended(raws))  # not final yet
                or (written_by is not None and not _written_by(raws, written_by))  # not that task's write (yet)
            ):
                raws = self._consistent_items(run_id)
        try:
            rec = self._record(raws)
        except RunGoneError:
            return None  # its creation facts are gone: being erased
        if rec is None:
            return None
        if self._expired(rec.expires_at) and not include_expired:
            return None  # TTL deletion can lag for days: an expired run reads as gone
        return rec

    def _run_items(self, run_id: str, *, consistent: bool = True) -> list[dict[str, Any]]:
        """The run's ``RUN``, ``RUN#FACTS``, ``RUN#INDEX`` and ``RUN#STATE`` items: one Query of the sort keys
        ``RUN`` to ``RUN#STATE`` (no other item of the partition sorts between them), billed on their sizes together
        rounded up once: 1 RRU for a run under 4 KB, where reading them by key bills each item's 4 KB (decision
        0171)."""
        return list(
            query_all(
                self._c,
                {
                    "TableName": self._t,
                    "KeyConditionExpression": "pk = :p AND sk BETWEEN :a AND :b",
                    "ExpressionAttributeValues": {
                        ":p": {"S": run_id},
                        ":a": {"S": schema.RUN_SK},
                        ":b": {"S": schema.RUN_STATE_SK},
                    },
                    "ConsistentRead": consistent,
                },
            )
        )

    def _consistent_items(self, run_id: str) -> list[dict[str, Any]]:
        """The run's items as of one instant, at the price of a plain consistent read (decision 0161).

        A Query reads its items one by one (read-committed), so an append's transaction (run item and state item)
        can fall between two of its reads. Every state write stamps both items with a digest of the state (``runitems.split``),
        so a read whose items agree (``_whole``) holds the state its run item was written with. Otherwise (an append in between, or a
        create or an erasure in flight) it reads again, and after ``CONSISTENT_BATCH_READS`` reads asks one
        TransactGetItems (isolated from every transaction, at twice the price)."""
        for _ in range(CONSISTENT_BATCH_READS):
            raws = self._run_items(run_id)
            if _whole(raws):
                return raws
        keys = self._run_keys(run_id)
        resp = self._c.transact_get_items(TransactItems=[{"Get": {"TableName": self._t, "Key": key}} for key in keys])
        return [r["Item"] for r in resp.get("Responses", []) if r.get("Item")]

    def get_runs(
        self, run_ids: Sequence[str], *, include_expired: bool = False, state: bool = True, tails: bool = True
    ) -> dict[str, RunRecord]:
        """``get_run`` for many runs: their items (run, facts and, unless ``state`` is False, state) in BatchGetItem
        requests of 100 keys, strongly consistent, unprocessed keys asked again (``ddb.batch_get``); a run whose items
        are not of one instant is read again as ``get_run`` reads it. Runs absent, being erased or (unless
        ``include_expired``) expired are left out; without ``state`` a record's is None; without ``tails`` a
        record's ``last_seq`` is its head as stored, not read past an open tail (a lower bound: for a caller that
        does not use it)."""
        ids = list(dict.fromkeys(run_ids))
        by_run: dict[str, list[dict[str, Any]]] = {r: [] for r in ids}
        for raw in batch_get(self._c, self._t, [k for r in ids for k in self._run_keys(r, state)]):
            by_run[raw["pk"]["S"]].append(raw)
        out: dict[str, RunRecord] = {}
        for run_id, raws in by_run.items():
            if state and not _whole(raws):  # a write landed between its item reads: read it again (``get_run``)
                raws = self._consistent_items(run_id)
            try:
                rec = self._record(raws, tails)
            except RunGoneError:
                continue
            if rec is not None and (include_expired or not self._expired(rec.expires_at)):
                out[run_id] = rec
        return out

    def get_facts(self, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The creation facts (``RunRecord.data``) of many runs: their facts items by key, 100 to a BatchGetItem,
        eventually consistent (written once, by the create), those it does not show read again strongly consistent
        (a create of a moment before); a run of the older layout (its facts on its run item) as ``get_runs`` reads
        it. Runs absent or being erased are left out."""
        ids = list(dict.fromkeys(run_ids))
        keys = {r: to_item({"pk": r, "sk": schema.RUN_FACTS_SK}) for r in ids}
        found = {raw["pk"]["S"]: raw for raw in batch_get(self._c, self._t, list(keys.values()), consistent=False)}
        unseen = [keys[r] for r in ids if r not in found]
        found |= {raw["pk"]["S"]: raw for raw in batch_get(self._c, self._t, unseen)} if unseen else {}
        out = {run_id: data for run_id, raw in found.items() if (data := self._facts(from_item(raw))) is not None}
        older = [r for r in ids if r not in found]
        if older:
            out |= {
                r: rec.data for r, rec in self.get_runs(older, include_expired=True, state=False, tails=False).items()
            }
        return out

    def list_runs(
        self,
        tenant: str,
        limit: int,
        start_key: dict[str, Any] | None,
        filters: dict[str, str],
        *,
        created_between: tuple[str, str] | None = None,
        evals: bool = False,
    ) -> ListPage:
        """The tenant's runs, newest first (the tenant index; with ``evals`` its eval runs only, the sparse eval
        index); ``created_between`` (low, high) narrows the index's key condition to those ``createdAt`` range (its
        sort key starts with it). Start and next keys name the tenant index's attributes either way."""
        found, next_key = self.list_run_ids(
            tenant, limit, start_key, filters, created_between=created_between, evals=evals
        )
        # The index entries are small (keys and listed fields); the runs themselves: one BatchGetItem per 33 runs
        got = self.get_runs(found, tails=False)  # erased or expired runs are left out; a listing names no sequence
        runs = [got[run_id] for run_id in found if run_id in got]
        return ListPage(runs=runs, next_key=next_key)

    def list_run_ids(
        self,
        tenant: str,
        limit: int,
        start_key: dict[str, Any] | None,
        filters: dict[str, str],
        *,
        created_between: tuple[str, str] | None = None,
        evals: bool = False,
    ) -> tuple[list[str], dict[str, Any] | None]:
        """``list_runs`` without reading the runs: the ids of one page of the index, and the next page's key."""
        gsi = "gsi2" if evals else "gsi1"
        kwargs: dict[str, Any] = {
            "TableName": self._t,
            "IndexName": schema.EVAL_INDEX if evals else schema.TENANT_INDEX,
            "KeyConditionExpression": f"{gsi}pk = :t",
            "ExpressionAttributeValues": {":t": {"S": tenant}, ":now": {"N": str(self._clock.now_ms() // 1000)}},
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if created_between is not None:
            kwargs["KeyConditionExpression"] = f"{gsi}pk = :t AND {gsi}sk BETWEEN :lo AND :hi"
            kwargs["ExpressionAttributeValues"].update(
                {":lo": {"S": created_between[0]}, ":hi": {"S": created_between[1]}}
            )
        conds = [f"{schema.TTL_ATTRIBUTE} > :now"]
        names: dict[str, str] = {}
        for i, (k, v) in enumerate(sorted(filters.items())):
            names[f"#f{i}"] = k
            kwargs["ExpressionAttributeValues"][f":f{i}"] = {"S": v}
            conds.append(f"#f{i} = :f{i}")
        kwargs["FilterExpression"] = " AND ".join(conds)
        if names:
            kwargs["ExpressionAttributeNames"] = names
        if start_key:
            kwargs["ExclusiveStartKey"] = to_item({k.replace("gsi1", gsi): v for k, v in start_key.items()})
        found: list[tuple[str, dict[str, Any]]] = []  # (runId, its index entry's key as gsi1 names it), in order
        next_key: dict[str, Any] | None = None
        # A filter can leave a page short: keep reading until the page is full or the index ends.
        while True:
            resp = self._c.query(**kwargs)
            for raw in resp.get("Items", []):
                found.append(
                    (
                        raw["pk"]["S"],
                        {
                            "pk": raw["pk"]["S"],
                            "sk": raw["sk"]["S"],
                            "gsi1pk": raw[f"{gsi}pk"]["S"],
                            "gsi1sk": raw[f"{gsi}sk"]["S"],
                        },
                    )
                )
            lek = resp.get("LastEvaluatedKey")
            if not lek:
                next_key = None
                break
            if len(found) >= limit:
                next_key = {k.replace("gsi2", "gsi1"): v for k, v in from_item(lek).items()}
                break
            kwargs["ExclusiveStartKey"] = lek
            # the eval index reads whole pages (a selective filter would otherwise cost a request per few items)
            kwargs["Limit"] = limit if evals else limit - len(found)
        if len(found) > limit:
            found = found[:limit]
            next_key = found[-1][1]
        return [run_id for run_id, _ in found], next_key

    def set_execution(self, run_id: str, execution_arn: str) -> bool:
        ended = {f":e{i}": {"S": s} for i, s in enumerate(_STOPPING)}
        try:
            self._c.update_item(
                TableName=self._t,
                Key=to_item({"pk": run_id, "sk": schema.RUN_SK}),
                UpdateExpression="SET executionArn = :a",
                ConditionExpression=f"attribute_exists(pk) AND NOT (#st IN ({', '.join(ended)}))",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues={":a": {"S": execution_arn}, **ended},
            )
            return True
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise

    def get_status(self, run_id: str, *, consistent: bool = True) -> str | None:
        """The run's status (one GetItem of its run item's status: 1 RRU, 0.5 eventually consistent); None without
        a run item."""
        resp = self._c.get_item(
            TableName=self._t,
            Key=to_item({"pk": run_id, "sk": schema.RUN_SK}),
            ProjectionExpression="#st",
            ExpressionAttributeNames={"#st": "status"},
            ConsistentRead=consistent,
        )
        item = resp.get("Item")
        return str(item["status"]["S"]) if item else None

    def update_status(self, run_id: str, status: str, *, allowed_from: Sequence[str]) -> bool:
        values: dict[str, Any] = {":s": {"S": status}}
        conds = []
        for i, s in enumerate(allowed_from):
            values[f":a{i}"] = {"S": s}
            conds.append(f":a{i}")
        update = {
            "Update": {
                "TableName": self._t,
                "Key": to_item({"pk": run_id, "sk": schema.RUN_SK}),
                "UpdateExpression": "SET #st = :s",
                "ConditionExpression": f"attribute_exists(pk) AND #st IN ({', '.join(conds)})",
                "ExpressionAttributeNames": {"#st": "status"},
                "ExpressionAttributeValues": values,
            }
        }
        try:  # the status is a listed field: its index entry moves in the same transaction
            self._c.transact_write_items(
                TransactItems=[update, *runitems.split(self._t, run_id, {"status": status}).items]
            )
            return True
        except ClientError as exc:
            if error_code(exc) == "TransactionCanceledException" and reasons(exc)[:1] == ["ConditionalCheckFailed"]:
                return False
            raise

    def set_progress(self, run_id: str, expected_last_seq: int, new_last_seq: int, updates: dict[str, Any]) -> None:
        """Move lastSeq forward after a bulk copy (a fork's prefix), conditioned on where it was."""
        parts = runitems.split(self._t, run_id, updates)
        sets = ["lastSeq = :new"]
        values: dict[str, Any] = {":new": {"N": str(new_last_seq)}, ":old": {"N": str(expected_last_seq)}}
        names: dict[str, str] = {}
        add_updates(parts.run, sets, values, names)
        update: dict[str, Any] = {
            "TableName": self._t,
            "Key": to_item({"pk": run_id, "sk": schema.RUN_SK}),
            "UpdateExpression": parts.run_expression(sets, names),
            "ConditionExpression": "attribute_exists(pk) AND lastSeq = :old",
            "ExpressionAttributeValues": values,
            **({"ExpressionAttributeNames": names} if names else {}),
        }
        try:
            if parts.items:  # a state or a listed field: their items move in the same transaction
                self._c.transact_write_items(TransactItems=[{"Update": update}, *parts.items])
            else:
                self._c.update_item(**update)
        except ClientError as exc:
            refuse_too_large(exc)
            if error_code(exc) == "ConditionalCheckFailedException" or (
                error_code(exc) == "TransactionCanceledException" and reasons(exc)[:1] == ["ConditionalCheckFailed"]
            ):
                raise ConflictError("run moved") from exc
            raise

    @staticmethod
    def live_in_image(image: dict[str, Any] | None) -> bool:
        """Whether a run item's stream image (a REMOVE record's OldImage) shows a run that had not ended; no image
        (a mapping that sends none) reads as one that had not."""
        return ((image or {}).get("status") or {}).get("S") not in TERMINAL_STATUSES

    def tombstoned(self, run_ids: Sequence[str]) -> set[str]:
        """Which of the runs have an erasure tombstone (``is_tombstoned`` for many: BatchGetItem, 100 keys each)."""
        keys = {r: self._tombstones.key(r) for r in dict.fromkeys(run_ids)}
        by_pk = {key["pk"]["S"]: r for r, key in keys.items()}
        return {by_pk[raw["pk"]["S"]] for raw in batch_get(self._c, self._t, list(keys.values()))}

    def is_tombstoned(self, run_id: str) -> bool:
        resp = self._c.get_item(TableName=self._t, Key=self._tombstones.key(run_id), ConsistentRead=True)
        return "Item" in resp

    # -- erasure ---------------------------------------------------------------
    def all_keys(self, run_id: str) -> list[dict[str, Any]]:
        return query_keys(self._c, self._t, "pk", run_id, "pk, sk")

    def delete_run_item(self, run_id: str) -> str | None:
        """Delete the run item (the stream REMOVE record then drives the rest of the erasure)."""
        resp = self._c.delete_item(
            TableName=self._t, Key=to_item({"pk": run_id, "sk": schema.RUN_SK}), ReturnValues="ALL_OLD"
        )
        old = resp.get("Attributes")
        return None if old is None else str((old.get("executionArn") or {}).get("S", ""))

    def delete_aux_all(self, run_id: str) -> int:
        """Every item under the run's key (its tombstone lives elsewhere: ``ddb.Tombstones``)."""
        return batch_delete(self._c, self._t, self.all_keys(run_id))

    def delete_tombstone(self, run_id: str) -> None:
        self._c.delete_item(TableName=self._t, Key=self._tombstones.key(run_id))

    def write_tombstone(self, run_id: str, tenant: str, at: str, expires_at: int) -> None:
        """The run's erasure tombstone: its keyed-hash key (``ddb.Tombstones``), its tenant, when, and its TTL;
        never the run id."""
        self._c.put_item(
            TableName=self._t,
            Item={
                **self._tombstones.key(run_id),
                **to_item({"tenant": tenant, "erasedAt": at, schema.TTL_ATTRIBUTE: expires_at}),
            },
        )
