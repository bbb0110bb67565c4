"""The EventStore port on DynamoDB: run event logs (partition runId), appended as pages put only where no item is,
most in transactions that move the run item's ``lastSeq``; events over the inline limit in S3 (the BlobStore).

**Pages** (``eventpages``): a log is stored as pages of up to ``MAX_EVENTS_PER_PAGE`` consecutive events, keyed by
their first sequence (decision 0170; logs written before are keyed by their last, decision 0133, and read the same
way). A page never changes once written. A reader finds the items holding ``lo..`` among those keyed from
``window_start(lo)`` on.

**Appends** (``append_events``): the page's conditional put is the ordering point. A transaction carries the run's
head, status guard and updates with it; a task's middle pages go plain, after its first transaction opened the tail
(``openTail`` on the run item), and its last transaction closes it; a reader of an open run reads past the head
(``tail_after``).

This is the seat of the era-2 reader (persistence.md §The seat): a row of a log in v1 vocabulary carries ``era`` = 2
(and its ``run.started`` the run's stored ``owner``), and every read of a row passes through ``_doc``, which
translates it through the codemap (a stream image of one is not decoded: ``events_from_image`` answers None for
it). The stored bytes are never rewritten."""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator, Mapping, Sequence
from typing import Any, NoReturn

from botocore.exceptions import ClientError

from shared.errors import ConflictError, RunGoneError, StagedRefusedError
from shared.ports import BlobStore, StagedWrite
from shared.protocol.codemap import ERA_V1, translate
from shared.storage import runclaims, runitems, schema
from shared.storage.ddb import (
    add_updates,
    batch_delete,
    batch_get,
    batch_write,
    dump,
    error_code,
    from_item,
    query_all,
    query_keys,
    reasons,
    refuse_too_large,
    to_item,
)
from shared.storage.eventpages import (
    PAGE,
    Page,
    bounds,
    inflate,
    keyed_by_first,
    pack_page,
    unpack_page,
    window_start,
)

READ_PAGE_BYTES = 1_000_000  # what one ``read_page`` answers at most, in event JSON (plus one page)


class DynamoEventStore:
    """Run event logs in pages keyed (runId, first seq), each put only where no item is (decision 0170)."""

    def __init__(self, client: Any, table: str, runs_table: str, blobs: BlobStore) -> None:
        self._c = client
        self._t = table
        self._runs = runs_table
        self._blobs = blobs

    def _event_item(self, run_id: str, ev: dict[str, Any], expires_at: int) -> dict[str, Any]:
        """A row of one event (the era-2 seeding's form)."""
        doc = dump(ev)
        item: dict[str, Any] = {"runId": run_id, "seq": int(ev["sequence"]), schema.TTL_ATTRIBUTE: expires_at}
        if len(doc.encode("utf-8")) > schema.MAX_INLINE_BYTES:
            key = schema.large_event_key(run_id, int(ev["sequence"]))
            self._blobs.put_json(key, ev)
            item["docRef"] = key
        else:
            item["doc"] = doc
        return item

    def _pages(
        self, run_id: str, events: Sequence[dict[str, Any]], expires_at: int, per_page: int = schema.MAX_EVENTS_PER_PAGE
    ) -> list[Page]:
        """``events`` as page items of at most ``per_page`` events, in order; an event over the inline limit is written
        to S3 here."""
        pages: list[Page] = []
        texts: list[str | None] = []
        size = first = 0
        for ev in events:
            seq = int(ev["sequence"])
            doc = dump(ev)
            data = doc.encode("utf-8")
            text: str | None = doc
            n = len(data)
            if n > schema.MAX_INLINE_BYTES:
                self._blobs.put_bytes(schema.large_event_key(run_id, seq), data, "application/json")
                text, n = None, len("null")
            if texts and (len(texts) >= per_page or size + n > schema.MAX_PAGE_BYTES):
                pages.append(pack_page(run_id, first, texts, expires_at))
                texts, size = [], 0
            if not texts:
                first = seq
            texts.append(text)
            size += n + 1
        if texts:
            pages.append(pack_page(run_id, first, texts, expires_at))
        return pages

    def append_events(
        self,
        run_id: str,
        expected_next_seq: int,
        events: Sequence[dict[str, Any]],
        *,
        run_updates: dict[str, Any] | None = None,
        require_status: Sequence[str] | None = None,
        expires_at: int = 0,
        staged: Sequence[StagedWrite] = (),
        claim: tuple[str, int] | None = None,
        plain: bool = False,
        open_tail: bool | None = None,
    ) -> int:
        """Append ``events`` (their ``sequence`` must run from ``expected_next_seq``, the log's tail as the caller
        read it, plus one). Returns the new last sequence.

        Each page is keyed by its first sequence and put only where no item is (``attribute_not_exists``): every
        writer of a position writes the same key, so two writers racing for a sequence get one win and one
        ``ConflictError``, and a writer whose tail is stale collides with the page that began there (a tail is
        always where a page ended). No gap, no duplicate (decision 0170).

        By default the pages ride transactions with the run item's Update (its head: ``lastSeq`` moved to their
        end, guarded by ``lastSeq <= expected - 1``, the run's existence (erasure) and optionally its status): the
        status guard, the erasure's and the run updates hold with the events or not at all. ``staged`` items
        (another store's, each with its own condition) and the ``claim`` of a counter's ordinal
        (``runclaims.counter_update``) ride the last transaction; a staged item whose condition alone fails refuses
        it (``StagedRefusedError``, ``appended`` the last sequence the earlier ones wrote). An append of no events is
        the Update alone.

        ``plain``: each page a conditional ``PutItem`` of its own, the head not written (1 write unit per KB where a
        transaction bills 2, and no head rewritten per page). Only a writer whose earlier transaction of the same
        task opened the tail (``open_tail``: the run item's ``openTail`` set) appends plainly, with no run updates:
        a reader of an open run reads the pages after ``lastSeq`` (``tail_after``). ``open_tail`` None (the
        default): a transaction that writes pages closes the tail (its writer read the tail, and a task still
        appending collides with its first page); one that writes none leaves it as it is. False: it closes it (the
        writer that opened it, ending with no events)."""
        if plain and (run_updates or staged or claim is not None or open_tail is not None):
            raise ValueError("a plain append carries events only")
        if not events and not run_updates and not staged and claim is None and open_tail is None:
            return expected_next_seq - 1
        for i, ev in enumerate(events):
            if int(ev["sequence"]) != expected_next_seq + i:
                raise ValueError("events must be contiguous from expected_next_seq")
        if plain:
            return self._put_pages(run_id, self._pages(run_id, events, expires_at), expected_next_seq)
        # The run updates ride the last transaction; those of its state or listed fields write the run's state or
        # index item in the same transaction (runitems), so that one holds as many fewer pages.
        parts = runitems.split(self._runs, run_id, dict(run_updates or {}), expires_at)
        groups = self._groups(run_id, events, expires_at, parts, staged)
        nxt = expected_next_seq
        for gi, group in enumerate(groups):
            last = group[-1].last if group else nxt - 1
            final = gi == len(groups) - 1
            tail = False if group and open_tail is None else open_tail  # pages written: the tail closed unless opened
            update = self._head_update(run_id, nxt, last, parts if final else None, claim, require_status, tail)
            items: list[dict[str, Any]] = [{"Update": update}, *(parts.items if final else [])]
            at = len(items)  # where the staged writes are, in the last transaction
            items += [w.action for w in staged] if final else []
            items += [{"Put": self._put(page)} for page in group]
            try:
                self._transact(run_id, items, range(at, at + len(staged)) if final else range(0))
            except StagedRefusedError as exc:
                exc.appended = nxt - 1  # what the earlier transactions wrote
                raise
            nxt = last + 1
        return nxt - 1

    def _put(self, page: Page) -> dict[str, Any]:
        """A page's put, only where no item is: the log's ordering and idempotency point."""
        return {"TableName": self._t, "Item": page.item, "ConditionExpression": "attribute_not_exists(seq)"}

    def _put_pages(self, run_id: str, pages: Sequence[Page], nxt: int) -> int:
        """Plain appends: each page its own conditional put, in order."""
        for page in pages:
            try:
                self._c.put_item(**self._put(page))
            except ClientError as exc:
                refuse_too_large(exc)
                if error_code(exc) != "ConditionalCheckFailedException":
                    raise
                self._refuse(run_id, exc)
            nxt = page.last + 1
        return nxt - 1

    def _groups(
        self,
        run_id: str,
        events: Sequence[dict[str, Any]],
        expires_at: int,
        parts: runitems.Split,
        staged: Sequence[StagedWrite],
    ) -> list[list[Page]]:
        """The event pages in transactions: each within the item and byte limits beside the run item's Update, the
        last also beside the run updates' items and the staged writes (its last page moves on when they do not fit)."""
        room = schema.MAX_TRANSACTION_ITEMS - 1
        groups: list[list[Page]] = [[]]
        size = 0
        for page in self._pages(run_id, events, expires_at):
            if groups[-1] and (len(groups[-1]) >= room or size + page.size > schema.MAX_TRANSACTION_BYTES):
                groups.append([])
                size = 0
            groups[-1].append(page)
            size += page.size
        extra = (len(dump(parts.items)) if parts.items else 0) + sum(w.size for w in staged)
        if len(groups[-1]) > 1 and (
            len(groups[-1]) + len(parts.items) + len(staged) > room or size + extra > schema.MAX_TRANSACTION_BYTES
        ):
            groups.append([groups[-1].pop()])
        return groups

    def _head_update(
        self,
        run_id: str,
        nxt: int,
        last: int,
        final: runitems.Split | None,
        claim: tuple[str, int] | None,
        require_status: Sequence[str] | None,
        open_tail: bool | None,
    ) -> dict[str, Any]:
        """The run item's Update of one transaction: ``lastSeq`` to ``last``, guarded by the head not past ``nxt - 1``
        (a head behind it: an open tail the caller read past) and by the run status when required; the tail opened,
        closed or left (``open_tail`` True, False, None); the last transaction's (``final``: the run updates) also
        carries them and the claim."""
        sets = ["lastSeq = :last"]
        values: dict[str, Any] = {":last": {"N": str(last)}, ":prev": {"N": str(nxt - 1)}}
        names: dict[str, str] = {}
        removes = []
        if open_tail is not None:  # True: opened; False: closed; None: left as it is
            names["#open"] = schema.OPEN_TAIL
            if open_tail:
                sets.append("#open = :open")
                values[":open"] = {"BOOL": True}
            else:
                removes.append("#open")
        add_updates(final.run if final is not None else {}, sets, values, names)
        cond = "attribute_exists(pk) AND lastSeq <= :prev"
        if final is not None and claim is not None:
            set_clause, claimed = runclaims.counter_update(claim[0], claim[1], names, values)
            sets.append(set_clause)
            cond += f" AND {claimed}"
        if require_status:
            names["#st"] = "status"
            alts = []
            for j, s in enumerate(require_status):
                values[f":r{j}"] = {"S": s}
                alts.append(f":r{j}")
            cond += f" AND #st IN ({', '.join(alts)})"
        split = final if final is not None else runitems.Split({})
        update: dict[str, Any] = {
            "TableName": self._runs,
            "Key": to_item({"pk": run_id, "sk": schema.RUN_SK}),
            "UpdateExpression": split.run_expression(sets, names, removes),
            "ConditionExpression": cond,
            "ExpressionAttributeValues": values,
        }
        if names:  # DynamoDB refuses an empty map
            update["ExpressionAttributeNames"] = names
        return update

    def _transact(self, run_id: str, items: list[dict[str, Any]], staged: range = range(0)) -> None:
        """One transaction of the append; a failed condition is a conflict, or the run's erasure (S3 writes undone);
        one of the ``staged`` items' only (at those places): ``StagedRefusedError``."""
        try:
            self._c.transact_write_items(TransactItems=items)
        except ClientError as exc:
            refuse_too_large(exc)
            if error_code(exc) not in ("TransactionCanceledException", "ConditionalCheckFailedException"):
                raise
            codes = reasons(exc)
            if codes[:1] == ["ConditionalCheckFailed"]:  # the head's: the run erased, or its status or tail moved
                self._refuse(run_id, exc)
            if "ConditionalCheckFailed" in codes[staged.start : staged.stop]:
                raise StagedRefusedError("a staged write's condition failed") from exc
            raise ConflictError("sequence or run state moved") from exc  # a page's position was taken

    def _refuse(self, run_id: str, exc: Exception) -> NoReturn:
        """An append's condition failed: the run's erasure (``RunGoneError``, our S3 writes undone) or a conflict."""
        if not self._run_exists(run_id):
            self._blobs.delete_prefix(schema.run_prefix(run_id))  # erased: undo our S3 writes
            raise RunGoneError(run_id) from exc
        raise ConflictError("sequence or run state moved") from exc

    def _run_exists(self, run_id: str) -> bool:
        resp = self._c.get_item(
            TableName=self._runs,
            Key=to_item({"pk": run_id, "sk": schema.RUN_SK}),
            ProjectionExpression="pk",
            ConsistentRead=True,
        )
        return "Item" in resp

    def _doc(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The event of a row (its era-2 translation)."""
        it = from_item(raw)
        if "doc" in it:
            doc: dict[str, Any] = json.loads(it["doc"])
        else:
            got = self._blobs.get_json(it["docRef"])
            if got is None:
                raise RunGoneError(str(it.get("runId")))
            doc = dict(got)
        return _read(it, doc)

    def _decode(self, raw: dict[str, Any], lo: int, hi: int | None) -> tuple[list[dict[str, Any]], int]:
        """The events ``lo <= seq <= hi`` (``hi`` None: no end) of a stored item (a page or a row), and how many
        bytes of event JSON the item holds."""
        if PAGE not in raw:
            seq = int(raw["seq"]["N"])
            if seq < lo or (hi is not None and seq > hi):
                return [], 0
            return [self._doc(raw)], len((raw.get("doc") or {}).get("S", ""))
        run_id = raw["runId"]["S"]
        first, data = inflate(raw)
        size = len(data)
        out: list[dict[str, Any]] = []
        for seq, doc in enumerate(json.loads(data), first):
            if seq < lo or (hi is not None and seq > hi):
                continue
            if doc is None:
                doc = self._blobs.get_json(schema.large_event_key(run_id, seq))
                if doc is None:
                    raise RunGoneError(run_id)
                size += len(dump(doc))
            out.append(doc)
        return out, size

    def _covering(self, run_id: str, lo: int, hi: int | None, *, consistent: bool = True) -> Iterator[dict[str, Any]]:
        """The stored items holding events ``lo..hi`` (``hi`` None: to the log's end), in order: the items keyed from
        ``window_start(lo)`` to ``hi`` (one Query per 1 MB; an item there that ends before ``lo`` is passed over)
        and, when the last of them is keyed by its last sequence (the older layout) and ends before ``hi``, the
        next item (one Query of one item), which may hold ``hi``. ``consistent`` False: every read eventually
        consistent."""
        base: dict[str, Any] = {"TableName": self._t, "ConsistentRead": consistent}
        values: dict[str, Any] = {":r": {"S": run_id}, ":lo": {"N": str(window_start(lo))}}
        cond = "runId = :r AND seq >= :lo"
        if hi is not None:
            cond = "runId = :r AND seq BETWEEN :lo AND :hi"
            values[":hi"] = {"N": str(hi)}
        end, older = lo - 1, True
        for raw in query_all(self._c, {**base, "KeyConditionExpression": cond, "ExpressionAttributeValues": values}):
            last = bounds(raw)[1]
            if last < lo:
                continue
            end, older = last, not keyed_by_first(raw)
            yield raw
        if hi is None or end >= hi or not older:
            return
        resp = self._c.query(
            **base,
            KeyConditionExpression="runId = :r AND seq > :c",
            Limit=1,
            ExpressionAttributeValues={":r": {"S": run_id}, ":c": {"N": str(hi)}},
        )
        yield from resp.get("Items", [])

    def tail_after(self, run_id: str, head: int) -> int:
        """The log's last sequence, read past ``head`` (an open tail's ``lastSeq``): the last page keyed after it, by
        one consistent Query of one item; ``head`` when none is."""
        resp = self._c.query(
            TableName=self._t,
            KeyConditionExpression="runId = :r AND seq > :h",
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
            ExpressionAttributeValues={":r": {"S": run_id}, ":h": {"N": str(head)}},
        )
        items = resp.get("Items", [])
        return max(head, bounds(items[0])[1]) if items else head

    def seed_log(self, run_id: str, events: Sequence[dict[str, Any]], expires_at: int, owner: dict[str, Any]) -> int:
        """Store a log a v1 host wrote (era 2): each row verbatim, marked ``era`` = 2, its ``run.started`` with the
        run's owner; read back only through the codemap. Batched writes; the run item is the caller's."""
        reqs = []
        for ev in events:
            item = self._event_item(run_id, ev, expires_at)
            item["era"] = ERA_V1
            if ev.get("type") == "run.started":
                item["owner"] = dump(owner)
            reqs.append({"PutRequest": {"Item": to_item(item)}})
        return batch_write(self._c, self._t, reqs)

    def iter_events(
        self,
        run_id: str,
        after_seq: int = -1,
        upto_seq: int | None = None,
        *,
        limit: int | None = None,
        settled: bool = False,
    ) -> Iterator[list[dict[str, Any]]]:
        """Events with ``after_seq < seq <= upto_seq``, a stored page at a time; with ``limit``, at most that many
        (a log's sequences are contiguous: the range ends at ``after_seq + limit``), so no page is read that holds
        none of them.

        ``settled``: the caller knows the range was written before it asked (it ends at or before a ``lastSeq`` the
        caller read): it is read eventually consistently, and from the first event not seen there (a page written
        too recently to show, or the range's end past the log's) consistently. A page never changes once written,
        so a page an eventually consistent read shows is the page (decision 0168)."""
        if limit is not None:
            if limit < 1:
                return
            upto_seq = after_seq + limit if upto_seq is None else min(upto_seq, after_seq + limit)
        if upto_seq is not None and upto_seq <= after_seq:
            return
        lo = after_seq + 1
        if settled and upto_seq is not None:
            lo = yield from self._shown(run_id, lo, upto_seq)
            if lo > upto_seq:
                return
        for raw in self._covering(run_id, lo, upto_seq):
            page, _ = self._decode(raw, lo, upto_seq)
            if page:
                lo = int(page[-1]["sequence"]) + 1  # never an event twice, whatever the pages' bounds
                yield page

    def read_logs(self, last_seqs: Mapping[str, int]) -> dict[str, list[dict[str, Any]]]:
        """The whole logs of several runs whose last sequence is known (``{runId: lastSeq}``): the item keyed 0 of
        each (its first page) read by key, 100 to a BatchGetItem whatever run it belongs to; a short run's whole log
        is that one page. What follows it (a longer log, or a log keyed by last sequences) is read by Query
        (``iter_events``)."""
        keys = [to_item({"runId": run_id, "seq": 0}) for run_id, last in last_seqs.items() if last >= 0]
        firsts = {raw["runId"]["S"]: raw for raw in batch_get(self._c, self._t, keys)}
        out: dict[str, list[dict[str, Any]]] = {}
        for run_id, last in last_seqs.items():
            raw, end = firsts.get(run_id), -1
            events: list[dict[str, Any]] = []
            if raw is not None:  # a page keyed by its first sequence, or an item of event 0 alone (older layouts)
                events, _ = self._decode(raw, 0, last)
                end = bounds(raw)[1]
            if end < last:
                events += [ev for page in self.iter_events(run_id, end, last) for ev in page]
            out[run_id] = events
        return out

    def _shown(self, run_id: str, lo: int, hi: int) -> Generator[list[dict[str, Any]], None, int]:
        """The pages of events ``lo..hi`` an eventually consistent read shows, up to the first event it does not;
        returns that event's sequence (``hi + 1``: all shown)."""
        for raw in self._covering(run_id, lo, hi, consistent=False):
            page, _ = self._decode(raw, lo, hi)
            if not page:
                continue
            if int(page[0]["sequence"]) != lo:
                break  # an item not shown yet
            lo = int(page[-1]["sequence"]) + 1
            yield page
        return lo

    def read_events(
        self, run_id: str, after_seq: int = -1, *, limit: int | None = None, settled: bool = False
    ) -> list[dict[str, Any]]:
        return [ev for page in self.iter_events(run_id, after_seq, limit=limit, settled=settled) for ev in page]

    def read_page(
        self, run_id: str, after_seq: int, limit: int | None = None, *, settled: bool = False
    ) -> list[dict[str, Any]]:
        """Events after ``after_seq``: with ``limit``, at most that many (``iter_events``, ``settled`` as there);
        without, whole pages from there, read consistently a Query response at a time, up to ``READ_PAGE_BYTES`` of
        event JSON (a poll's answer stays under Lambda's 6 MB)."""
        if limit is not None:
            return self.read_events(run_id, after_seq, limit=limit, settled=settled)
        out: list[dict[str, Any]] = []
        size = 0
        for raw in self._covering(run_id, after_seq + 1, None):
            if size >= READ_PAGE_BYTES:
                break
            page, n = self._decode(raw, after_seq + 1, None)
            out += page
            size += n
        return out

    def events_from_image(self, image: dict[str, Any]) -> list[tuple[int, dict[str, Any] | None]]:
        """The (sequence, event) pairs an item image holds (a stream record's NewImage); the event is None when it
        is stored out of line or in v1 vocabulary (read it with ``read_events``, which translates it)."""
        if PAGE in image:
            first, docs = unpack_page(image)
            return list(enumerate(docs, first))
        it = from_item(image)
        seq = int(it["seq"])
        if "doc" not in it or it.get("era") == ERA_V1:
            return [(seq, None)]
        return [(seq, json.loads(it["doc"]))]

    def copy_events(self, run_id: str, events: Sequence[dict[str, Any]], expires_at: int) -> int:
        """Bulk-write a fork's copied prefix as pages: ceil(pages/25) BatchWriteItem requests. Returns the events
        written."""
        batch_write(
            self._c, self._t, [{"PutRequest": {"Item": p.item}} for p in self._pages(run_id, events, expires_at)]
        )
        return len(events)

    def delete_all(self, run_id: str) -> int:
        """Delete the run's log; returns the items deleted (pages and rows)."""
        return batch_delete(self._c, self._t, self.all_keys(run_id))

    def all_keys(self, run_id: str) -> list[dict[str, Any]]:
        return query_keys(self._c, self._t, "runId", run_id, "runId, seq")


def _read(item: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    """A stored row as v2: an era-2 row through the codemap, any other as stored."""
    if item.get("era") != ERA_V1:
        return doc
    return translate(doc, json.loads(item["owner"]) if "owner" in item else None)
