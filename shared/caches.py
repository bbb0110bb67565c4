"""A warm process's bounded caches, safe when several invocations of one process run side by side.

On Lambda one container serves one request at a time, but the local host runs a consumer's batches, a state
machine's tasks and the HTTP front on several threads of one process, and ``cachetools`` caches are not
thread-safe: an eviction racing a read raised ``KeyError`` from inside ``popitem``. Every operation here holds
the cache's own lock."""

from __future__ import annotations

import threading
from typing import Any, TypeVar

from cachetools import LRUCache, TTLCache

_K = TypeVar("_K")
_V = TypeVar("_V")


class _Locked:
    """Each mapping operation of the cache below it in the MRO, under one re-entrant lock."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._lock = threading.RLock()
        super().__init__(*args, **kwargs)

    def __getitem__(self, key: Any) -> Any:
        with self._lock:
            return super().__getitem__(key)  # type: ignore[misc]

    def __setitem__(self, key: Any, value: Any) -> None:
        with self._lock:
            super().__setitem__(key, value)  # type: ignore[misc]

    def __delitem__(self, key: Any) -> None:
        with self._lock:
            super().__delitem__(key)  # type: ignore[misc]

    def __contains__(self, key: Any) -> bool:
        with self._lock:
            return bool(super().__contains__(key))  # type: ignore[misc]

    def __len__(self) -> int:
        with self._lock:
            return int(super().__len__())  # type: ignore[misc]

    def get(self, key: Any, default: Any = None) -> Any:
        with self._lock:
            return super().get(key, default)  # type: ignore[misc]

    def pop(self, key: Any, *default: Any) -> Any:
        with self._lock:
            return super().pop(key, *default)  # type: ignore[misc]

    def popitem(self) -> Any:
        with self._lock:
            return super().popitem()  # type: ignore[misc]

    def setdefault(self, key: Any, default: Any = None) -> Any:
        with self._lock:
            return super().setdefault(key, default)  # type: ignore[misc]

    def clear(self) -> None:
        with self._lock:
            super().clear()  # type: ignore[misc]


class LockedLRUCache(_Locked, LRUCache[_K, _V]):
    """``cachetools.LRUCache``, every operation under the cache's lock."""


class LockedTTLCache(_Locked, TTLCache[_K, _V]):
    """``cachetools.TTLCache``, every operation under the cache's lock."""
