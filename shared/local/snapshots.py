"""Snapshots of the local state: moto's kept data containers (``shared.local.moto_data``) pickled to
``snapshot.pickle`` — written beside, fsynced, renamed: whole or absent. The pickler's dispatch table leaves out
what is not data (locks, stream mappings) and reads an S3 object's bytes without its lock, so a forked child can
write it while the parent goes on serving."""

from __future__ import annotations

import copyreg
import gc
import io
import os
import pickle
import threading
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shared.local.datadir import DataDir, DataDirError, fsync_dir


def _rebuild_limited_dict(values: dict[str, Any]) -> Any:
    from moto.dynamodb.models.dynamo_type import LimitedSizeDict

    rebuilt = LimitedSizeDict.__new__(LimitedSizeDict)
    dict.update(rebuilt, values)  # the items passed the size check when written: not checked again, O(n) not O(n^2)
    return rebuilt


def _rebuild_key_store(values: dict[str, list[Any]]) -> Any:
    from moto.s3.utils import _VersionedKeyStore

    rebuilt = _VersionedKeyStore()
    for name, versions in values.items():
        dict.__setitem__(rebuilt, name, versions)  # every version, not just the latest (its items() view)
    return rebuilt


PICKLED_IN = "shared.local.persistence"
"""The module a snapshot names the two rebuilders in (a pickle refers to a function by module and name): format 1
wrote them there, before snapshots had a module of their own, and ``shared.local.persistence`` imports them, so a
folder written by a host before or after the split reads with the other."""
_rebuild_limited_dict.__module__ = _rebuild_key_store.__module__ = PICKLED_IN


def _key_value(key: Any) -> bytes:
    """An S3 object's bytes without its lock or moving its file offset: in a forked child, another thread of the
    parent may have held the lock at the fork, and a rolled-over buffer's file offset is shared with the parent."""
    buffer = key._value_buffer
    if buffer.closed:
        return b""
    inner = buffer._file
    if isinstance(inner, io.BytesIO):
        return inner.getvalue()
    size, chunks, offset = os.fstat(inner.fileno()).st_size, [], 0
    while offset < size:
        chunk = os.pread(inner.fileno(), size - offset, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _partitions(items: Any) -> Any:
    """A table's items without its empty partitions (``list`` copies the view at once: a reader of the running
    host may add an empty partition, moto's tables being ``defaultdict``s, while a snapshot is written in process)."""
    kept = type(items)(items.default_factory) if isinstance(items, defaultdict) else type(items)()
    kept.update((key, part) for key, part in list(items.items()) if not (isinstance(part, dict) and not part))
    return kept


def dispatch_table() -> dict[Any, Callable[[Any], Any]]:
    from moto.dynamodb.models.dynamo_type import LimitedSizeDict
    from moto.dynamodb.models.table import Table
    from moto.s3.models import FakeKey
    from moto.s3.utils import _VersionedKeyStore
    from moto.sqs.models import Queue

    def without(obj: Any, *names: str, **replaced: Any) -> tuple[Any, ...]:
        state = {k: v for k, v in obj.__dict__.items() if k not in names}
        state.update(replaced)
        return copyreg.__newobj__, (type(obj),), state  # type: ignore[attr-defined]

    def fake_key(key: Any) -> tuple[Any, ...]:
        return without(key, "lock", "_value_buffer", value=_key_value(key))  # FakeKey.__setstate__ rebuilds them

    table: dict[Any, Callable[[Any], Any]] = dict(copyreg.dispatch_table)
    table.update(
        {
            LimitedSizeDict: lambda d: (_rebuild_limited_dict, (dict(d),)),
            _VersionedKeyStore: lambda d: (_rebuild_key_store, (dict(dict.items(d)),)),
            FakeKey: fake_key,
            # Stream mappings point at Lambda functions, which bootstrap makes again: not data. A partition whose items
            # were all deleted stays in moto's table as an empty dict under its key (a run id, after its erasure): left out
            Table: lambda t: without(t, lambda_event_source_mappings={}, items=_partitions(t.items)),
            Queue: lambda q: without(
                q, "_messages_lock", lambda_event_source_mappings={}, _messages_lock=threading.Condition()
            ),
            type(threading.Lock()): lambda _: (threading.Lock, ()),
            type(threading.RLock()): lambda _: (threading.RLock, ()),
            threading.Condition: lambda _: (threading.Condition, ()),
        }
    )
    return table


def dump_snapshot(
    state: dict[str, Any], header: dict[str, Any], out: Any, dispatch: dict[Any, Callable[[Any], Any]] | None = None
) -> None:
    pickle.dump(header, out, protocol=5)
    pickler = pickle.Pickler(out, protocol=5)
    pickler.dispatch_table = dispatch or dispatch_table()  # type: ignore[assignment]
    pickler.dump(state)


def write_snapshot(
    data_dir: DataDir,
    header: dict[str, Any],
    state: dict[str, Any],
    dispatch: dict[Any, Callable[[Any], Any]] | None = None,
) -> int:
    """Write ``snapshot.pickle`` whole or not at all. Returns its size in bytes."""
    path = data_dir.snapshot
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds secrets: the owner's only
    with open(fd, "wb", buffering=1 << 20) as f:
        dump_snapshot(state, header, f, dispatch)
        f.flush()
        os.fsync(f.fileno())
        size = f.tell()
    os.replace(tmp, path)
    fsync_dir(path.parent)
    return size


def read_snapshot(path: Path) -> tuple[dict[str, Any], dict[str, Any]] | None:
    if not path.exists():
        return None
    gc_was = gc.isenabled()
    gc.disable()  # millions of small objects: the collector would rescan them all while they are made (4x slower)
    try:
        with open(path, "rb") as f:
            header = pickle.load(f)
            state = pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, TypeError) as exc:
        raise DataDirError(
            f"the snapshot {path} cannot be read ({type(exc).__name__}: {exc}); the folder was left as it is"
        ) from exc
    finally:
        if gc_was:
            gc.enable()
    return header, state
