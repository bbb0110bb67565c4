"""The items of an event log's pages (decisions 0133, 0170), apart from how they are read and written.

A page holds a run of consecutive events (at most ``schema.MAX_EVENTS_PER_PAGE`` and ``schema.MAX_PAGE_BYTES`` of
their JSON), their JSON array zlib-compressed in ``page`` (an event stored out of line is ``null`` there). Two
layouts are stored, and one log can hold both (a run that began before the second and went on after it):

- **keyed by the first sequence** (written now, decision 0170): ``seq`` is the page's first event, ``last`` its
  last. Every writer of a position writes the same key, so a put conditioned on ``attribute_not_exists`` is the
  ordering and idempotency point of the log: one writer of a position wins;
- **keyed by the last sequence** (written before): ``seq`` is the page's last event and ``first`` its first, absent
  when the page holds one event. A row of one event (``doc`` or ``docRef``, as the era-2 seeding stores it) is such
  an item of one event.

Either way the items sort in log order (an older page ends where the next begins), and every page starts within
``MAX_EVENTS_PER_PAGE - 1`` of any event it holds: the items holding events ``lo..`` are among those keyed from
``window_start(lo)`` on."""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shared.storage import schema

PAGE = "page"  # a page's events: their JSON array, zlib-compressed (binary)
FIRST = "first"  # keyed by the last sequence: the page's first (absent: the page holds the one event ``seq``)
LAST = "last"  # keyed by the first sequence: the page's last
PAGE_LEVEL = 6  # zlib's default level


@dataclass
class Page:
    item: dict[str, Any]  # the page item, in DynamoDB's wire form
    size: int  # its compressed bytes (what DynamoDB counts of it)

    @property
    def last(self) -> int:
        return int(self.item[LAST]["N"])


def _binary(value: Any) -> bytes:
    """A binary attribute's bytes: as the SDK answers them, or base64 text as a stream record carries them."""
    if isinstance(value, str):
        return base64.b64decode(value)
    return bytes(getattr(value, "value", value))


def pack_page(run_id: str, first: int, texts: Sequence[str | None], expires_at: int) -> Page:
    """The item of a page of events ``first..`` (their JSON texts; None: stored out of line), keyed by ``first``."""
    raw = ("[" + ",".join("null" if t is None else t for t in texts) + "]").encode("utf-8")
    blob = zlib.compress(raw, PAGE_LEVEL)
    item: dict[str, Any] = {
        "runId": {"S": run_id},
        "seq": {"N": str(first)},
        LAST: {"N": str(first + len(texts) - 1)},
        schema.TTL_ATTRIBUTE: {"N": str(expires_at)},
        PAGE: {"B": blob},
    }
    return Page(item, len(blob))


def bounds(item: dict[str, Any]) -> tuple[int, int]:
    """The first and last sequence an item (wire form: a read's or a stream record's) holds, in either layout."""
    key = int(item["seq"]["N"])
    if LAST in item:
        return key, int(item[LAST]["N"])
    return (int(item[FIRST]["N"]) if FIRST in item else key), key


def keyed_by_first(item: dict[str, Any]) -> bool:
    return LAST in item


def window_start(lo: int) -> int:
    """The least key an item holding event ``lo`` can have, in either layout."""
    return max(0, lo - (schema.MAX_EVENTS_PER_PAGE - 1))


def inflate(item: dict[str, Any]) -> tuple[int, bytes]:
    """A page item's first sequence and its events' JSON array."""
    return bounds(item)[0], zlib.decompress(_binary(item[PAGE]["B"]))


def unpack_page(item: dict[str, Any]) -> tuple[int, list[dict[str, Any] | None]]:
    """A page item's (first sequence, events); an event stored out of line is None."""
    first, data = inflate(item)
    return first, json.loads(data)
