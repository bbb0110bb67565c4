"""moto 5.2.5 patch: sending a message to a FIFO queue costs the same however many messages the queue holds.

moto sends each message of a ``SendMessage`` / ``SendMessageBatch`` in time linear in the queue's depth, twice over:

- ``SQSBackend.send_message`` and ``_validate_message`` read ``Queue.attributes`` up to three times for one setting
  (``ContentBasedDeduplication``), and that property computes every attribute, including the three approximate
  counts, each a walk of every message held;
- ``Queue.add_message`` of a FIFO message with a deduplication id walks every held message for one with the same id.

So a queue that holds n messages takes O(n²) to fill: the webhook fan-out of a 100,000-event run with a subscriber
(100,000 messages, held while deliveries are measured apart) did not finish queuing within an hour. SQS's own cost
of a send does not depend on the queue's depth. The patch:

- while this thread is inside a send, ``Queue.attributes`` is the FIFO settings only (all a send reads), not the
  counts; every other reader (``GetQueueAttributes``, queue creation) gets moto's whole dict;
- a queue remembers, per process, the deduplication ids added to it (those it held when first seen included), so
  a message whose id it has never held is appended at once; one whose id it has held goes through moto's own
  ``add_message`` (its walk decides, as before: a duplicate within the 5-minute window is dropped). A queue with a
  moto Lambda event-source mapping (none of ours: ``shared.local.sqs_poller`` delivers) keeps moto's path.

Results are moto's own: the same messages accepted and dropped, in the same order. Canary:
``tests/integration/test_local_patches.py`` (a send to a deep queue walks none of its messages, and duplicates are
still dropped). Remove when moto's sends no longer scan the queue.
"""

from __future__ import annotations

import functools
import threading
import weakref
from typing import Any

_applied = False
_sending = threading.local()  # depth of the sends this thread is in
_lock = threading.Lock()
_seen: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()  # queue -> deduplication ids added


def _in_send(method: Any) -> Any:
    @functools.wraps(method)
    def sending(self: Any, *args: Any, **kwargs: Any) -> Any:
        _sending.depth = getattr(_sending, "depth", 0) + 1
        try:
            return method(self, *args, **kwargs)
        finally:
            _sending.depth -= 1

    return sending


def apply_send_patch() -> None:
    global _applied
    if _applied:
        return
    from moto.core.utils import camelcase_to_underscores
    from moto.sqs.models import Queue, SQSBackend

    whole = Queue.attributes

    def attributes(self: Any) -> dict[str, Any]:
        if not getattr(_sending, "depth", 0):
            return whole.fget(self)  # type: ignore[attr-defined,no-any-return]
        if not self.fifo_queue:
            return {}
        out: dict[str, Any] = {}
        for name in Queue.FIFO_ATTRIBUTES:
            value = getattr(self, camelcase_to_underscores(name))
            out[name] = str(value).lower() if isinstance(value, bool) else value
        return out

    moto_add = Queue.add_message

    @functools.wraps(moto_add)
    def add_message(self: Any, message: Any) -> None:
        dedup = message.deduplication_id
        if not self.fifo_queue or not dedup or self.lambda_event_source_mappings:
            return moto_add(self, message)  # type: ignore[no-any-return]
        with _lock:
            seen = _seen.get(self)
            if seen is None:  # first seen in this process (a kept queue's messages came back without add_message)
                seen = _seen[self] = {m.deduplication_id for m in list(self._messages) if m.deduplication_id}
            held_before = dedup in seen
            seen.add(dedup)
        if held_before:
            return moto_add(self, message)  # type: ignore[no-any-return]
        with self._messages_lock:  # moto's own append, past its walk: no message held has this id
            self._messages.append(message)
            self._messages_lock.notify_all()
        return None

    Queue.attributes = property(attributes)  # type: ignore[method-assign,assignment]
    Queue.add_message = add_message  # type: ignore[method-assign]
    SQSBackend.send_message = _in_send(SQSBackend.send_message)  # type: ignore[method-assign]
    SQSBackend.send_message_batch = _in_send(SQSBackend.send_message_batch)  # type: ignore[method-assign]
    _applied = True
