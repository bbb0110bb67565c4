"""The local state's data folder (``serve --data-dir``): its ``FORMAT`` file, its ``lock``, the names of its
snapshot and journal segments. ``DataDir.open`` takes the folder for this host or refuses it with one line for the
operator (``DataDirError``); ``shared.local.persistence`` describes what the folder holds and why."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

FORMAT = 2
"""The data folder's format. Change it (and teach ``DataDir.open`` to read or refuse the older one) whenever what a
snapshot or a journal record holds changes meaning. 2: Secrets Manager sealed (``shared.local.sealing``); a format-1
folder is read (its clear records and snapshot load as they are) and compacted at start, so it holds them sealed."""
READABLE = (1, 2)

FORMAT_FILE = "FORMAT"
LOCK_FILE = "lock"
SNAPSHOT_FILE = "snapshot.pickle"
SEGMENT_RE = re.compile(r"^journal-(\d{8})\.log$")


class DataDirError(Exception):
    """The data folder cannot be used (in use, another format, damaged): one line for the operator."""


def host_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("openwop-serverless")
    except PackageNotFoundError:
        return "unknown"


def moto_version() -> str:
    import moto

    return str(moto.__version__)


@dataclass
class DataDir:
    path: Path
    _lock_fd: int = -1
    written_format: int = FORMAT
    """The format the folder was in when this host opened it (an older one is rewritten: compact it at start)."""

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> DataDir:
        """Take the folder for this host: create it (and its ``FORMAT``) if new, refuse it if another host holds it,
        if it is another format or moto version, or if it is not empty and not a data folder."""
        folder = Path(path).resolve()
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise DataDirError(f"data folder {folder} cannot be used: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise DataDirError(
                    f"data folder {folder} is in use by another openwop-serverless host (pid {holder});"
                    " stop it, or start this one with another --data-dir or --ephemeral"
                ) from exc
            raise DataDirError(f"data folder {folder} cannot be locked: {exc.strerror or exc}") from exc
        data_dir = cls(folder, fd)
        try:
            data_dir._check_format()
        except BaseException:
            data_dir.close()
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return data_dir

    def _check_format(self) -> None:
        fmt = self.path / FORMAT_FILE
        ours = {"format": FORMAT, "host": host_version(), "moto": moto_version()}
        if not fmt.exists():
            others = [p.name for p in self.path.iterdir() if p.name not in (LOCK_FILE,) and not p.name.startswith(".")]
            if others:
                raise DataDirError(
                    f"{self.path} is not an openwop-serverless data folder (it has no {FORMAT_FILE} "
                    f"file but holds {', '.join(sorted(others)[:3])}); choose an empty or new folder"
                )
            _write_atomically(fmt, (json.dumps(ours, indent=1) + "\n").encode())
            return
        try:
            found = json.loads(fmt.read_text(encoding="utf-8"))
            found_format = int(found["format"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DataDirError(
                f"{fmt} is unreadable; this host writes format {FORMAT} "
                f"(openwop-serverless {ours['host']}); move the folder away to start empty"
            ) from exc
        found_host, found_moto = found.get("host", "unknown"), found.get("moto", "unknown")
        if found_format not in READABLE or found_moto != ours["moto"]:
            raise DataDirError(
                f"data folder {self.path} was written in format {found_format} by openwop-serverless {found_host} "
                f"(moto {found_moto}); this is openwop-serverless {ours['host']} (format {FORMAT}, moto "
                f"{ours['moto']}), which cannot read it: start the version that wrote it, or use another --data-dir "
                f"or --ephemeral (the folder was left as it is)"
            )
        self.written_format = found_format
        if found_host != ours["host"] or found_format != FORMAT:  # readable: the file names the newest writer
            _write_atomically(fmt, (json.dumps(ours, indent=1) + "\n").encode())

    def close(self) -> None:
        if self._lock_fd >= 0:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = -1

    @property
    def snapshot(self) -> Path:
        return self.path / SNAPSHOT_FILE

    def segment(self, number: int) -> Path:
        return self.path / f"journal-{number:08d}.log"

    def segments(self) -> list[int]:
        return sorted(int(m.group(1)) for p in self.path.iterdir() if (m := SEGMENT_RE.match(p.name)))

    def remove_stale(self) -> None:
        """Leftovers of a snapshot that died half-written."""
        for p in self.path.glob(f"{SNAPSHOT_FILE}.*.tmp"):
            with contextlib.suppress(OSError):
                p.unlink()


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
