"""The workflow run kind: a workflow run, and its replay and branch forks, advanced step by step from its folded
state.

``advance`` is one Advance task (``kernel.advance``, what the Step Functions task calls, hands a workflow run to
it). It takes steps from the run's stored state, appends their events in pages of up to 99 (the task's first and
last in a transaction with the run's head, conditioned on the run still being writable, the last also storing the
new snapshot; those between as plain puts past the open tail, decision 0170; every page only where none is), and
returns what the state machine does next: ``continue`` (loop), ``wait`` (a Wait state, for holds), ``park`` (an
interrupt) or ``done``. A retried task starts from the log's tail, so nothing is appended twice; effects are keyed by
(run, node, ordinal) or (run, call key), so nothing fires twice either. A fork's first tasks copy its prefix
(``forkindex.copy_prefix``); a replay compares each event with its source's (``forkindex.reproduces``).

Here: the run's next step (``next_step``) and the loop that applies, compares and appends its events. What each node
kind does is ``workflownodes`` (the nodes that act outside the run: ``nodeeffects``); what a task knows of its run,
``workflowcontext``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from typing import Any

from shared.engine import forkindex, spans
from shared.engine import state as st
from shared.engine.canonical import same_json
from shared.engine.forkindex import reproduces
from shared.engine.kernel import (
    FLUSH_AT,
    LEFT,
    RELEASED,
    TASK_EVENTS,
    EffectInFlightError,
    discard_late_writes,
    halt,
    load_state,
    make_event,
    snapshot_seq,
    snapshot_updates,
)
from shared.engine.runcore import Step, comparable, divergence, run_step
from shared.engine.tools import ToolTally
from shared.engine.version import plain_appends
from shared.engine.workflow import Workflow
from shared.engine.workflowcontext import RunContext, build_context
from shared.engine.workflownodes import continue_node, restart_node, start_node
from shared.errors import ConflictError, RunGoneError, StagedRefusedError
from shared.ports import TASK_STAMP, WRITABLE, Ports, RunRecord, StagedWrite
from shared.protocol import codes as c

SHORT_WAIT_MS = 1500
# A task's plain pages check no status: every this many, once this long has passed since it last read the run (its own
# read at its start, or its last check), it reads the run's status (0.5 RRU), so a cancel cut before its events or an
# erasure stops it within about a second or that many pages, whichever is later (decisions 0170, 0174). A cancel
# or a pause that writes its events stops it at its next page without a read.
STATUS_EVERY_PAGES = 10
STATUS_EVERY_MS = 1_000


# --------------------------------------------------------------------------- steps


def next_step(ctx: RunContext, state: dict[str, Any]) -> Step:
    """The run's next step from its folded state: the run's own (``runcore.run_step``: it starts, times out, fails,
    skips a node, completes), else its active node's (``workflownodes``) or the next ready node's start."""
    now = ctx.ports.clock.now_ms()
    restart, ctx.restart = ctx.restart, False  # only the first step after the prefix copy
    step = run_step(ctx.wf, ctx.record.data, state, now)
    if step is not None:
        return step
    active = state.get("active")
    if active and restart:
        return restart_node(ctx, state, active["nodeId"])
    if active:
        return continue_node(ctx, state, active, now)
    return start_node(ctx, state, state["ready"][0])


# --------------------------------------------------------------------------- events and the loop


def _divergence(ctx: RunContext, state: dict[str, Any], ev: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    if ctx.mode != "replay" or state.get("diverged") or ctx.source_run_id is None:
        return None
    seq = int(ev["sequence"]) - int(state.get("inserted", 0))
    if ctx.source_digests is not None:  # compare digests; read the source event only at a mismatch
        same, src = reproduces(ctx.ports, ctx.source_digests, ctx.source_run_id, seq, ev, ctx.run_id)
        if same:
            return None
    else:  # an index built before digests were stored: compare with the source's events
        src = ctx.source_event(seq)
        if src is not None and same_json(comparable(src), comparable(ev)):
            return None
    return c.REPLAY_DIVERGED, divergence(ctx.source_run_id, ev, src)


def _terminal_updates(ports: Ports, state: dict[str, Any], last_event: dict[str, Any]) -> dict[str, Any]:
    upd: dict[str, Any] = {"status": state["status"]}
    if state["status"] in c.TERMINAL_STATUSES:
        upd["completedAt"] = last_event["timestamp"]
        if state["status"] == "failed":
            upd["error"] = (last_event.get("payload") or {}).get("error")
    return upd


class _Appender:
    """A task's appends: its events buffered and appended in batches, each with the run item's updates (the snapshot
    on a final append, unless the log behind it is still short; the status when it changes; ``startedAt`` once)."""

    def __init__(
        self,
        ports: Ports,
        rec: RunRecord,
        state: dict[str, Any],
        stamp: str = "",
        release: Sequence[StagedWrite] = (),
    ) -> None:
        self.ports, self.rec, self.state = ports, rec, state
        self.release = release  # the run's slot, given back by the append that ends it (decision 0183)
        # the run's first own event's sequence (a fork's first after its prefix): the append from it opens the run's
        # own log and deletes its start marker in its transaction (decision 0186)
        self.first_own = int((rec.data.get("fork") or {}).get("fromSeq", 0))
        self.released = False
        self.stamp = stamp  # the task's: its closing append names it (``TASK_STAMP``; kernel.task_stamp)
        self.inputs = rec.data.get("inputs")
        self.buffer: list[dict[str, Any]] = []
        self.next_seq = rec.last_seq + 1
        self.wrote = 0
        self.deferred = False  # the state was not stored by an append of this task: the task's last write stores it
        self.stored_seq = snapshot_seq(rec.state or {})  # the stored snapshot's seq
        self.stored_status = rec.status  # the run item's: an append names the status only when it changes it
        self.open = False  # this task's first append opened the log's tail: its middle pages go plain (decision 0170)
        self.may_open = plain_appends(rec.data)  # a run stamped before: transactions only
        self.plain_pages = 0
        self.checked_ms = ports.clock.now_ms()  # when the task last read its run's status (its read at its start)
        self.stored_state = rec.state  # the run item's state as this task's appends left it
        self.named = False  # an append of this task named it (``TASK_STAMP``): its last write

    def behind(self, events: list[dict[str, Any]]) -> int | None:
        """Estimated bytes of the log after the stored snapshot up to the last of ``events`` (their mean size times
        the count); None (store it) once terminal or with nothing to measure. Once per task: its last append."""
        if self.state["status"] in c.TERMINAL_STATUSES or not events:
            return None
        size = sum(len(json.dumps(e, separators=(",", ":"))) for e in events)
        return (int(events[-1]["sequence"]) - self.stored_seq) * size // len(events)

    def flush(self, final: bool = True) -> None:
        if not self.buffer:
            if final and (self.deferred or self.open):
                self._store_deferred()
            return
        rec, state, buffer = self.rec, self.state, self.buffer
        last = int(buffer[-1]["sequence"])
        # An append that leaves the run no longer writable (its end, a park) is the task's last write whatever
        # called it (a page full mid-step): it stores the state, which nothing could store after it.
        final = final or state["status"] not in WRITABLE
        updates = (
            snapshot_updates(self.ports, rec.run_id, state, last, self.inputs, behind_bytes=self.behind(buffer))
            if final
            else {}
        )
        # (a short log behind the snapshot leaves it for the task's last write; none follows a run's end or park)
        self.deferred = "state" not in updates and state["status"] in WRITABLE
        updates.update(_terminal_updates(self.ports, state, buffer[-1]))
        if updates["status"] == self.stored_status:
            del updates["status"]
        if rec.started_at is None and state["status"] != "pending":
            updates["startedAt"] = (
                next(e["timestamp"] for e in buffer if e["type"] == c.RUN_STARTED)
                if any(e["type"] == c.RUN_STARTED for e in buffer)
                else buffer[0]["timestamp"]
            )
            rec.started_at = updates["startedAt"]
        # A middle append with nothing but events, once the tail is open, is plain; the task's first opens the tail,
        # its last (``final``, which one that leaves the run no longer writable is: nothing could close it after)
        # closes it, each in a transaction with the head.
        closing = final
        if closing and self.stamp:
            updates[TASK_STAMP] = self.stamp
        plain = self.open and not closing and not updates
        if plain:
            self._check_writable()
        opening = [self.ports.starts.stage_clear(rec.run_id)] if self.next_seq == self.first_own else []
        ending = self.release if state["status"] in c.TERMINAL_STATUSES else ()
        open_tail = True if self.may_open and not closing and not plain else None
        self._append(buffer, updates, plain, open_tail, opening, ending)
        self.open = self.may_open and not closing
        self.named = self.named or TASK_STAMP in updates
        if "state" in updates:
            self.stored_seq, self.stored_state = last, updates["state"]
        self.stored_status = updates.get("status", self.stored_status)
        self.next_seq += len(buffer)
        self.wrote += len(buffer)
        self.buffer = []

    def _append(
        self,
        buffer: list[dict[str, Any]],
        updates: dict[str, Any],
        plain: bool,
        open_tail: bool | None,
        opening: Sequence[StagedWrite],
        release: Sequence[StagedWrite],
    ) -> None:
        """Append ``buffer`` from ``next_seq`` with the run ``updates`` (and ``opening``, the start marker's delete,
        none of whose conditions can fail); the run's end with its slot given back (``release``) when its conditions
        hold, else without it (the caller's ``run_ended`` gives it back)."""

        def append(first: int, events: list[dict[str, Any]], staged: Sequence[StagedWrite]) -> None:
            self.ports.events.append_events(
                self.rec.run_id,
                first,
                events,
                run_updates=updates,
                require_status=WRITABLE,
                expires_at=self.rec.expires_at,
                staged=staged,
                plain=plain,
                open_tail=open_tail,
            )

        try:
            append(self.next_seq, buffer, [*opening, *release])
            self.released = bool(release)
        except StagedRefusedError as exc:  # runs of its tenant wait, or it held no slot: the end goes alone
            done = self.next_seq if exc.appended is None else exc.appended + 1
            append(done, buffer[done - self.next_seq :], opening)

    def _check_writable(self) -> None:
        """Every ``STATUS_EVERY_PAGES``-th plain page once ``STATUS_EVERY_MS`` have passed since the task last read
        it, first the run's status (a plain put checks none): a cancel (``cancelling``, set before its events) or an
        erasure stops the task, as a conflict. Paced by time as well as pages: a fast task's pages cost no reads, and a
        slow one's every tenth page a read, as before. Eventually consistent (0.5 RRU): a read that lags stops it a
        check later; what must hold does not rest on it (a cancel's events collide with the task's next page)."""
        self.plain_pages += 1
        if self.plain_pages % STATUS_EVERY_PAGES:
            return
        now = self.ports.clock.now_ms()
        if now - self.checked_ms < STATUS_EVERY_MS:
            return
        self.checked_ms = now
        status = self.ports.runs.get_status(self.rec.run_id, consistent=False)
        if status is None:
            raise RunGoneError(self.rec.run_id)
        if status not in WRITABLE:
            raise ConflictError("the run is no longer writable")

    def _store_deferred(self) -> None:
        """The task's last write appended no events: store the snapshot its earlier appends left out (and close the
        tail its first opened: a middle append never stores the state, so an open tail always leaves one to store)."""
        rec = self.rec
        updates = snapshot_updates(self.ports, rec.run_id, self.state, self.next_seq - 1, self.inputs)
        if updates or self.open:
            if self.stamp:
                updates[TASK_STAMP] = self.stamp
            self.ports.events.append_events(
                rec.run_id,
                self.next_seq,
                [],
                require_status=WRITABLE,
                expires_at=rec.expires_at,
                run_updates=updates,
                open_tail=False if self.open else None,  # closed by the writer that opened it
            )
            self.stored_seq = self.next_seq - 1
            self.stored_state = updates.get("state", self.stored_state)
            self.named = self.named or TASK_STAMP in updates
        self.deferred = self.open = False

    def left(self) -> RunRecord | None:
        """The run as this task's last write left it, for the next task of its execution (decision 0177): its head,
        status, state and stamp as stored (a copy: nothing of this task's is shared). None unless that write named
        this task with the tail closed."""
        if not self.named or self.open or self.deferred:
            return None
        state = json.loads(json.dumps(self.stored_state)) if self.stored_state is not None else None
        return dataclasses.replace(
            self.rec, last_seq=self.next_seq - 1, status=self.stored_status, state=state, task_stamp=self.stamp
        )


def _take_step(ctx: RunContext, state: dict[str, Any], out: _Appender) -> Step:
    """Take the run's next step in its span: each event folded into the state, compared with the source's in a
    replay (a divergence follows the event that made it) and buffered."""
    ports, run_id = ctx.ports, ctx.record.run_id
    with ports.tracing.span(spans.STEP_SPAN) as span:
        active = (state.get("active") or {}).get("nodeId")
        step = next_step(ctx, state)
        spans.name_step(span, step.events, step.wait_ms is not None, ctx.wf.nodes, active)
        for t, payload, node_id in step.events:
            ev = make_event(ports, run_id, out.next_seq + len(out.buffer), t, payload, node_id)
            st.apply(state, ev, ctx.wf)
            out.buffer.append(ev)
            div = _divergence(ctx, state, ev)
            if div is not None:
                span.set(spans.DIVERGED, True)  # replay.md §7: the diverging step's span says so
                span.set(spans.DIVERGED_SEQ, int(ev["sequence"]))
                dev = make_event(ports, run_id, out.next_seq + len(out.buffer), div[0], div[1], None)
                dev["causationId"] = ev["eventId"]
                st.apply(state, dev, ctx.wf)
                out.buffer.append(dev)
            if len(out.buffer) >= FLUSH_AT:
                out.flush(final=False)
    return step


def _wait(ports: Ports, run_id: str, out: _Appender, wait_ms: int) -> dict[str, Any] | None:
    """A step that waits: a short wait sleeps in the task (None: step on, unless the run stopped meanwhile), a long
    one ends the task in a Wait state."""
    out.flush(final=wait_ms > SHORT_WAIT_MS)
    if wait_ms > SHORT_WAIT_MS:
        return {"runId": run_id, "next": "wait", "waitSeconds": max(1, math.floor(wait_ms / 1000))}
    ports.clock.sleep(wait_ms / 1000)
    fresh = ports.runs.get_run(run_id)  # a cancel, pause or erasure may have landed meanwhile
    if fresh is None or fresh.status not in WRITABLE:
        return halt(run_id, fresh)
    return None


def _after_conflict(ports: Ports, run_id: str, opened: bool = False) -> dict[str, Any]:
    """Cancelled, paused, erased, or another writer moved the log: nothing of ours is half-written. Erased while
    this task's plain pages landed (``opened``: it opened the tail): the log is deleted again, with them."""
    fresh = ports.runs.get_run(run_id)
    if fresh is None and opened:
        discard_late_writes(ports, run_id)
    if fresh is None or fresh.status not in WRITABLE:
        return halt(run_id, fresh)
    return {"runId": run_id, "next": "continue", "waitSeconds": 0}


def _copy_prefix(
    ports: Ports, rec: RunRecord, wf: Workflow, *, max_events: int, max_ms: int, tally: ToolTally | None, stamp: str
) -> dict[str, Any]:
    """A fork's task that copies its prefix, and once it is whole, takes the fork's first steps in the same task
    while at least half its time is left (the run as the copy left it: no read of it, no task more)."""
    began = ports.clock.now_ms()

    def go_on(copied: RunRecord) -> dict[str, Any]:
        left = max_ms - (ports.clock.now_ms() - began)
        if left <= max_ms // 2:
            return {"runId": rec.run_id, "next": "continue", "waitSeconds": 0}
        return advance(ports, copied, max_events=max_events, max_ms=left, tally=tally, stamp=stamp)

    return forkindex.copy_prefix(ports, rec, wf, stamp=stamp, then=go_on)


def advance(
    ports: Ports,
    rec: RunRecord,
    *,
    max_events: int = TASK_EVENTS,
    max_ms: int = 60_000,
    tally: ToolTally | None = None,
    stamp: str = "",
    release: Sequence[StagedWrite] = (),
) -> dict[str, Any]:
    """One Advance task of the writable workflow run ``rec``: steps until it parks, ends or waits long, or the task
    has appended ``max_events`` events or spent ``max_ms``; a fork's first tasks copy its prefix instead. Its last
    append names it by ``stamp``; the one that ends the run gives its slot back with ``release`` (``kernel.RunKind``)."""
    run_id = rec.run_id
    fork = rec.data.get("fork") or {}
    ctx = build_context(ports, rec)
    ctx.tally = tally
    if fork and rec.last_seq < int(fork.get("fromSeq", 0)) - 1:
        return _copy_prefix(ports, rec, ctx.wf, max_events=max_events, max_ms=max_ms, tally=tally, stamp=stamp)
    state = load_state(ports, rec, ctx.wf)
    # Right after the prefix copy, a node the prefix left in flight is restarted, never resumed mid-way.
    ctx.restart = bool(fork) and int(fork.get("fromSeq", 0)) > 0 and rec.last_seq == int(fork["fromSeq"]) - 1
    began = ports.clock.now_ms()
    out = _Appender(ports, rec, state, stamp, release)
    try:
        while True:
            step = _take_step(ctx, state, out)
            if state["status"] in c.PARKED_STATUSES:  # an interrupt was requested: wait on a task token
                out.flush()
                return {"runId": run_id, "next": "park", "waitSeconds": 0}
            if step.done or state["status"] in c.TERMINAL_STATUSES:
                out.flush()
                return {"runId": run_id, "next": "done", "waitSeconds": 0, **({RELEASED: True} if out.released else {})}
            if step.wait_ms is not None:
                waited = _wait(ports, run_id, out, step.wait_ms)
                if waited is not None:
                    return waited
                continue
            if out.wrote + len(out.buffer) >= max_events or ports.clock.now_ms() - began >= max_ms:
                out.flush()
                return {"runId": run_id, "next": "continue", "waitSeconds": 0, LEFT: out.left()}
    except EffectInFlightError as exc:
        # Another delivery of this work holds an effect's claim: nothing of ours is written; look again later (that
        # delivery has usually finished the run by then; if it died, its claim is taken over once it is stale).
        return {"runId": run_id, "next": "wait", "waitSeconds": exc.wait_s}
    except (ConflictError, RunGoneError):
        return _after_conflict(ports, run_id, out.open)
