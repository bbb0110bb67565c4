"""The embedded AWS endpoint answers its host only: a credential made at each start, checked on every request.

``LocalAws.start`` makes a random access key id and secret (``EndpointCredential``), exports them to its own
process's environment (every boto3 client of the host signs with them), and writes them to a file only the user can
read (``credentials_file``: mode 0600 in a 0700 folder of the user's). ``Guard``, in front of moto's application,
answers 403 to a request whose SigV4 signature (header or presigned query) does not name that access key id: an
unsigned request, another key, moto's own ``/moto-api`` without it. So another local process, another user or a
web page on this machine reads no table, secret or queue through the port; an operator's command gets the
credential from the file (``--endpoint`` finds it by port) or from sourcing it.

What is checked is the access key id (128 random bits, never sent off loopback), not the signature: a process that
can read the host's environment or the file (the same user, root) can use the endpoint, as it could read the data
folder. Decision 0152.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import stat
import tempfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SIGNED_BY = re.compile(r"(?:Credential=|X-Amz-Credential=)([A-Za-z0-9]+)(?:/|%2F)", re.IGNORECASE)
FILE_PREFIX = "moto-"


@dataclass(frozen=True)
class EndpointCredential:
    access_key_id: str
    secret_access_key: str

    @classmethod
    def new(cls) -> EndpointCredential:
        return cls("OWL" + secrets.token_hex(16).upper(), secrets.token_urlsafe(30))


class Guard:
    """WSGI: ``app`` behind the check that a request is signed with the endpoint's access key id."""

    def __init__(self, credential: EndpointCredential, app: Any) -> None:
        self.credential = credential
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        signed = f"{environ.get('HTTP_AUTHORIZATION', '')} {environ.get('QUERY_STRING', '')}"
        if self.credential.access_key_id in set(_SIGNED_BY.findall(signed)):
            return self.app(environ, start_response)  # type: ignore[no-any-return]
        body = json.dumps(
            {
                "__type": "AccessDeniedException",
                "message": "this local endpoint answers only the host that started it (its credentials are in the "
                "file `serve` prints)",
            }
        ).encode()
        start_response(
            "403 Forbidden",
            [("Content-Type", "application/x-amz-json-1.1"), ("Content-Length", str(len(body)))],
        )
        return [body]


def guarded(credential: EndpointCredential, inner: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    """The ``wrap`` for moto's server: the guard in front of ``inner(app)`` (the journal) or of moto's app."""
    return lambda app: Guard(credential, inner(app) if inner is not None else app)


def credentials_dir() -> Path:
    """The user's folder for the endpoints' credential files: ``$XDG_RUNTIME_DIR/openwop-serverless``, else
    ``openwop-serverless-<uid>`` in the temporary folder; made 0700, and refused (``OSError``) when it is not a
    folder of this user's that only they can open."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    folder = (
        Path(runtime) / "openwop-serverless"
        if runtime
        else Path(tempfile.gettempdir()) / f"openwop-serverless-{os.getuid()}"
    )
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700, parents=False)
    found = os.lstat(folder)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & 0o077:
        raise OSError(f"{folder} is not a folder only this user can open")
    return folder


def credentials_file(port: int | str) -> Path:
    return credentials_dir() / f"{FILE_PREFIX}{port}.env"


def write_credentials(endpoint: str, port: int, credential: EndpointCredential, region: str) -> Path:
    """The file an operator sources (``. FILE``) to reach the endpoint with the AWS CLI or boto3: mode 0600."""
    path = credentials_file(port)
    text = (
        f"# openwop-serverless: the local AWS endpoint's credentials (host pid {os.getpid()}; new at each start)\n"
        f"export AWS_ENDPOINT_URL={endpoint}\n"
        f"export AWS_ACCESS_KEY_ID={credential.access_key_id}\n"
        f"export AWS_SECRET_ACCESS_KEY={credential.secret_access_key}\n"
        f"export AWS_REGION={region} AWS_DEFAULT_REGION={region}\n"
    )
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with open(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
    return path


def read_credentials(port: int | str) -> dict[str, str]:
    """The variables of the endpoint's credential file (empty when there is none)."""
    try:
        text = credentials_file(port).read_text(encoding="utf-8")
    except OSError:
        return {}
    found: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("export "):
            for pair in line[len("export ") :].split():
                name, _, value = pair.partition("=")
                found[name] = value
    return found


def remove_credentials(path: Path | None, credential: EndpointCredential) -> None:
    """Remove the file at stop, if it is still this start's (a later host on the same port wrote its own)."""
    if path is None:
        return
    with contextlib.suppress(OSError):
        if credential.access_key_id in path.read_text(encoding="utf-8"):
            path.unlink()


_current: list[EndpointCredential] = []
"""The credential of the endpoint this process serves (``LocalAws`` sets it at start and clears it at stop)."""


def set_current(credential: EndpointCredential | None) -> None:
    _current[:] = [credential] if credential is not None else []


_SFN_CLIENTS_MAX = 64
_SFN_POOL_CONNECTIONS = 64
_sfn_clients: dict[tuple[Any, ...], Any] = {}
_sfn_clients_lock = threading.Lock()


def patch_sfn_boto_clients() -> None:
    """moto 5.2.5's Step Functions interpreter calls the server with a fixed key (``ak``) from
    ``moto.stepfunctions.parser.asl.utils.boto_client``: its clients sign with the endpoint's credential instead.

    It also made a new boto3 client (and so a new connection) for every task it ran: 12% of an eval test's CPU. A
    client is kept per service, region, endpoint, credential and configuration (boto3 clients are thread-safe; the
    default session that makes them is not, so they are made under a lock)."""
    import boto3
    from botocore.config import Config
    from moto.stepfunctions.parser.asl.utils import boto_client

    class _Boto3:
        def client(self, *args: Any, **kwargs: Any) -> Any:
            credential = _current[0] if _current else None
            if credential is not None:
                kwargs["aws_access_key_id"] = credential.access_key_id
                kwargs["aws_secret_access_key"] = credential.secret_access_key
            config = kwargs.get("config")
            options = sorted((getattr(config, "_user_provided_options", None) or {}).items(), key=repr)
            key = (args, tuple(sorted((k, repr(v)) for k, v in kwargs.items() if k != "config")), repr(options))
            with _sfn_clients_lock:
                made = _sfn_clients.get(key)
                if made is None:
                    if len(_sfn_clients) >= _SFN_CLIENTS_MAX:
                        _sfn_clients.clear()
                    if config is not None:  # a kept client serves a Map's many tasks at once: room for them
                        kwargs["config"] = config.merge(Config(max_pool_connections=_SFN_POOL_CONNECTIONS))
                    made = _sfn_clients[key] = boto3.client(*args, **kwargs)
            return made

    boto_client.boto3 = _Boto3()  # type: ignore[assignment]
