"""Secrets at rest in the local host's data folder, and its embedded AWS endpoint answering its host only.

``openwop-serverless serve --data-dir D`` in a subprocess: a tenant's credential, registered through the API, is in
no file of the folder (raw, base64 at any alignment, or inside a compressed file) while it works, also after a
``kill -9`` and a restart; once its delete has answered, the folder does not hold it even sealed (every sealed value
opened with the folder's key). Another process reaches no table, secret or moto API through the endpoint without
the host's credential, while the host and a command given the credential file work. Loopback only.
"""

from __future__ import annotations

import base64
import bz2
import gzip
import json
import lzma
import os
import re
import stat
import subprocess
import sys
import uuid
import zlib
from pathlib import Path

import pytest

from tests.helpers import ServeProcess, eventually
from tests.wire import raw
from tests.workflows import definition, node, variable

BASE = "/host/openwop-serverless"
KEY = "dev-key-tenant-a"
TERMINAL = ("completed", "failed", "cancelled")


def _serve(tmp_path: Path, data: Path, name: str, **env: str) -> ServeProcess:
    serve = ServeProcess(tmp_path, "--port", "0", "--data-dir", str(data), name=name, env=env).start()
    assert serve.serving, serve.stderr[-3000:]
    return serve


def _needles(canary: str) -> list[bytes]:
    """The canary's bytes, and its base64 at each of the three alignments it can have inside a longer value (the
    characters that depend on the neighbouring bytes cut off)."""
    raw_bytes = canary.encode()
    found = [raw_bytes]
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw_bytes)
        head = (shift * 8 + 5) // 6  # characters touched by the padding bytes
        tail = len(encoded) - (4 if (shift + len(raw_bytes)) % 3 else 0)
        found.append(encoded[head:tail])
        found.append(base64.urlsafe_b64encode(b"\0" * shift + raw_bytes)[head:tail])
    return found


def _expanded(data: bytes) -> list[bytes]:
    """A file's bytes and, when it is compressed (gzip, zlib, bz2, xz), its decompressed contents."""
    out = [data]
    for opener in (gzip.decompress, zlib.decompress, bz2.decompress, lzma.decompress):
        try:
            out.append(opener(data))
        except Exception:  # noqa: BLE001,S112 - not that kind of compressed file
            continue
    return out


def _hits(folder: Path, canary: str) -> list[str]:
    """Every file of the data folder holding the canary: raw, base64, or in its decompressed contents."""
    needles = _needles(canary)
    return [
        p.name
        for p in sorted(folder.rglob("*"))
        if p.is_file() and any(n in blob for blob in _expanded(p.read_bytes()) for n in needles)
    ]


def _sealed_hits(folder: Path, canary: str) -> list[str]:
    """Every file holding the canary once its sealed values are opened with the folder's key."""
    from shared.local.sealing import opened

    return sorted({name for name, plain in opened(folder) if canary.encode() in plain})


def _tool_run(b: str, workflow_id: str) -> str:
    r = raw(b, "POST", "/runs", {"workflowId": workflow_id, "inputs": {"customer": "c-1"}}, key=KEY)
    assert r.status == 201, r.text
    run_id = str(r.json["runId"])
    wire = run_id.replace("/", "~2F")
    status = eventually(
        lambda: (s := raw(b, "GET", f"/runs/{wire}", key=KEY).json["status"]) in TERMINAL and s, timeout=120
    )
    assert status == "completed"
    return run_id


def _put_credential(b: str, ref: str, token: str) -> None:
    body = {"credential": {"type": "bearer", "token": token}}
    r = raw(b, "PUT", f"{BASE}/credentials/{ref}", body, key=KEY)
    assert r.status == 201, r.text


def test_the_needles_find_a_canary_in_every_form_they_claim(tmp_path):
    """The search below can fail: planted raw, base64 inside a longer value, and gzipped, each is found."""
    canary = "Canary" + uuid.uuid4().hex
    for i, blob in enumerate(
        (
            b"x" + canary.encode() + b"y",
            base64.b64encode(b"ab" + json.dumps({"token": canary}).encode()),
            gzip.compress(b"{" + canary.encode() + b"}"),
        )
    ):
        (tmp_path / f"f{i}").write_bytes(blob)
        assert _hits(tmp_path, canary) == [f"f{i}"]
        (tmp_path / f"f{i}").unlink()


@pytest.mark.timeout(600)
def test_a_credential_is_never_in_the_folder_in_clear_and_its_delete_leaves_nothing(tmp_path, server):
    tools, tools_url = server
    data = tmp_path / "state"
    org = "t" + uuid.uuid4().hex[:8]
    ref, canary = f"crm-{uuid.uuid4().hex[:6]}", "Canary" + uuid.uuid4().hex
    tool_id, workflow_id = f"{org}.crm:lookup", f"{org}-lookup"
    host = _serve(tmp_path, data, "first")
    try:
        b = host.base_url
        # Given a credential with a canary value, a tool that uses it, and a workflow calling the tool
        _put_credential(b, ref, canary)
        tool = {
            "toolId": tool_id,
            "description": "Look a customer up",
            "source": {"kind": "http", "url": tools_url + "/crm/lookup"},
            "inputSchema": {"type": "object", "required": ["customerId"]},
            "credentialRef": ref,
        }
        assert raw(b, "POST", f"{BASE}/tools", tool, key=KEY).status == 201
        lookup = node("t", "core.tool", config={"tool": tool_id}, inputs={"customerId": variable("customer")})
        flow = definition(workflow_id, [lookup], variables=[{"name": "customer", "type": "string", "required": True}])
        assert raw(b, "POST", f"{BASE}/workflows", flow, key=KEY).status == 201
        _tool_run(b, workflow_id)
        assert tools.hits[-1].headers["authorization"] == f"Bearer {canary}"
        # When another credential is put and deleted (its delete answers after a snapshot: the canary's secret is
        # in it, sealed)
        _put_credential(b, "decoy", "Decoy" + uuid.uuid4().hex)
        assert raw(b, "DELETE", f"{BASE}/credentials/decoy", key=KEY).status == 204
        # Then the folder holds the canary only sealed: in no file raw, base64 or compressed, in the snapshot sealed
        assert (data / "snapshot.pickle").exists()
        assert _hits(data, canary) == []
        assert "snapshot.pickle" in _sealed_hits(data, canary)
        assert stat.S_IMODE((data / "secrets.key").stat().st_mode) == 0o600
        host.kill()
    finally:
        if host.proc.poll() is None:
            host.kill()
    # And after a kill -9 and a start on the folder the credential is applied again (the host opened its value)
    again = _serve(tmp_path, data, "second")
    try:
        b = again.base_url
        hits = len(tools.hits)
        _tool_run(b, workflow_id)
        assert len(tools.hits) == hits + 1 and tools.hits[-1].headers["authorization"] == f"Bearer {canary}"
        assert _hits(data, canary) == []
        # When it is deleted
        assert raw(b, "DELETE", f"{BASE}/credentials/{ref}", key=KEY).status == 204
        # Then as soon as the delete answered, no file holds it: not in clear, and not sealed either
        assert _hits(data, canary) == []
        assert _sealed_hits(data, canary) == []
        assert raw(b, "GET", f"{BASE}/credentials/{ref}", key=KEY).status == 404
        again.kill()
    finally:
        if again.proc.poll() is None:
            again.kill()
    # And a start after a kill brings none of it back
    third = _serve(tmp_path, data, "third")
    try:
        assert raw(third.base_url, "GET", f"{BASE}/credentials/{ref}", key=KEY).status == 404
        assert _hits(data, canary) == [] and _sealed_hits(data, canary) == []
    finally:
        assert third.stop() == 0, third.stderr[-3000:]


_PROBE = """
import json, sys, urllib.request
import boto3
from botocore.config import Config
endpoint, key, secret = sys.argv[1], sys.argv[2], sys.argv[3]
kwargs = dict(endpoint_url=endpoint, region_name="us-east-1", config=Config(retries={"max_attempts": 1}))
if key:
    kwargs.update(aws_access_key_id=key, aws_secret_access_key=secret)
else:
    from botocore import UNSIGNED
    kwargs["config"] = Config(signature_version=UNSIGNED, retries={"max_attempts": 1})
out = {}
def attempt(name, call):
    try:
        out[name] = ["ok", json.dumps(call(), default=str)]
    except Exception as exc:
        status = getattr(exc, "code", None) or getattr(exc, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode")
        out[name] = ["refused", str(status or exc)]
attempt("scan", lambda: boto3.client("dynamodb", **kwargs).scan(TableName="openwop-host", Limit=5))
attempt("secrets", lambda: boto3.client("secretsmanager", **kwargs).list_secrets())
attempt("secret", lambda: boto3.client("secretsmanager", **kwargs).get_secret_value(SecretId=sys.argv[4]))
def moto_api():
    with urllib.request.urlopen(endpoint + "/moto-api/data.json", timeout=10) as r:
        return r.read()[:100]
attempt("moto-api", moto_api)
print(json.dumps(out))
"""


def _probe(endpoint: str, key: str, secret: str, secret_id: str) -> dict[str, list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, endpoint, key, secret, secret_id],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=True,
    )
    return dict(json.loads(done.stdout))


@pytest.mark.timeout(600)
def test_another_process_reads_nothing_through_the_endpoint_without_the_hosts_credential(tmp_path):
    data = tmp_path / "state"
    canary = "Canary" + uuid.uuid4().hex
    host = _serve(tmp_path, data, "guarded")
    try:
        b = host.base_url
        _put_credential(b, "crm", canary)
        endpoint = re.search(r"moto endpoint .*: (http://127\.0\.0\.1:\d+)", host.out).group(1)  # type: ignore
        sourced = re.search(r"`\. (\S+)` \(mode 0600\)", host.out)
        assert sourced, host.out
        credentials = Path(sourced.group(1))
        # The printed file is the user's only, and names this endpoint
        assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
        assert stat.S_IMODE(credentials.parent.stat().st_mode) == 0o700
        exported = dict(
            pair.split("=", 1)
            for line in credentials.read_text().splitlines()
            if line.startswith("export ")
            for pair in line.split()[1:]
        )
        assert exported["AWS_ENDPOINT_URL"] == endpoint
        # and a process given the printed credential reads the tables and the secret (so a probe can find it)
        allowed = _probe(endpoint, exported["AWS_ACCESS_KEY_ID"], exported["AWS_SECRET_ACCESS_KEY"], "none")
        assert allowed["scan"][0] == "ok" and allowed["secrets"][0] == "ok", allowed
        names = [s["Name"] for s in json.loads(allowed["secrets"][1])["SecretList"] if "crm" in s["Name"]]
        assert len(names) == 1, allowed
        allowed = _probe(endpoint, exported["AWS_ACCESS_KEY_ID"], exported["AWS_SECRET_ACCESS_KEY"], names[0])
        assert allowed["secret"][0] == "ok" and canary in allowed["secret"][1], allowed
        # When another process asks without a signature, and with another key
        for key, secret in (("", ""), ("testing", "testing"), ("OWL" + "0" * 32, exported["AWS_SECRET_ACCESS_KEY"])):
            got = _probe(endpoint, key, secret, names[0])
            # Then it reads no table, no secret, no moto state: 403 every time, and never the canary
            assert {name: result[0] for name, result in got.items()} == dict.fromkeys(got, "refused"), got
            assert {result[1] for result in got.values()} == {"403"}, got
            assert canary not in json.dumps(got)
        # While the host works (its API reads and writes the tables and the secrets)
        assert raw(b, "GET", f"{BASE}/credentials/crm", key=KEY).status == 200
        _put_credential(b, "other", "Other" + uuid.uuid4().hex)
        assert raw(b, "DELETE", f"{BASE}/credentials/other", key=KEY).status == 204
        # And an operator's command in another process, given only --endpoint, finds the credential by port
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        listed = subprocess.run(
            [
                sys.executable,
                "-m",
                "shared.local.commands",
                "keys",
                "list",
                "--tenant",
                "tenant-a",
                "--endpoint",
                endpoint,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )
        assert listed.returncode == 0, listed.stderr[-2000:]
        assert [json.loads(line)["pepper"] for line in listed.stdout.splitlines()] == ["current"], listed.stdout
    finally:
        assert host.stop() == 0, host.stderr[-3000:]
    # And the file is gone with the host
    assert not credentials.exists()


# -- the journal's sealed records (no host) ----------------------------------------------------------------------------


def _secrets_request(body: bytes) -> dict[str, object]:
    import io

    return {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/",
        "QUERY_STRING": "",
        "CONTENT_TYPE": "application/x-amz-json-1.1",
        "CONTENT_LENGTH": str(len(body)),
        "HTTP_X_AMZ_TARGET": "secretsmanager.CreateSecret",
        "HTTP_AUTHORIZATION": "AWS4-HMAC-SHA256 Credential=OWLX/20260101/us-east-1/secretsmanager/aws4_request, "
        "SignedHeaders=host, Signature=abc",
        "wsgi.input": io.BytesIO(body),
    }


class _Recording:
    """Stands in for moto: answers 200 and keeps the bodies it was sent."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def __call__(self, environ, start_response):
        self.bodies.append(environ["wsgi.input"].read())
        start_response("200 OK", [("Content-Type", "application/x-amz-json-1.1")])
        return [b"{}"]


def test_a_secrets_request_is_journaled_sealed_and_replayed_clear(tmp_path):
    from shared.local.datadir import DataDir, DataDirError
    from shared.local.persistence import Journal

    canary = "Canary" + uuid.uuid4().hex
    body = json.dumps({"Name": "tenant-a/crm", "SecretString": json.dumps({"token": canary})}).encode()
    # Given a journal in front of an application
    folder = DataDir.open(tmp_path / "d")
    try:
        journal = Journal(folder, _Recording())
        journal.recover()
        # When a Secrets Manager write goes through it
        journal(_secrets_request(body), lambda status, headers: None)
        journal.close()
    finally:
        folder.close()
    # Then the segment holds it only sealed
    assert list((tmp_path / "d").glob("journal-*.log")) and _hits(tmp_path / "d", canary) == []
    assert b"tenant-a/crm" not in b"".join(p.read_bytes() for p in (tmp_path / "d").glob("journal-*.log"))
    assert _sealed_hits(tmp_path / "d", canary) == ["journal-00000001.log"]
    # And a start replays the request as it was received
    folder = DataDir.open(tmp_path / "d")
    try:
        again = _Recording()
        journal = Journal(folder, again)
        journal.recover()
        journal.close()
    finally:
        folder.close()
    assert again.bodies == [body]
    # And without its key the folder is refused, not read as empty, and left as it was (no new key written)
    (tmp_path / "d" / "secrets.key").rename(tmp_path / "kept.key")
    folder = DataDir.open(tmp_path / "d")
    try:
        with pytest.raises(DataDirError, match="holds sealed secrets but its key secrets.key is missing"):
            Journal(folder, _Recording()).recover()
    finally:
        folder.close()
    assert not (tmp_path / "d" / "secrets.key").exists()


def test_a_format_1_folder_is_read_and_compacted_at_start(tmp_path):
    import pickle

    from shared.local.datadir import DataDir, host_version, moto_version
    from shared.local.journal_records import frame
    from shared.local.persistence import Journal

    # Given a folder format 1 wrote: a Secrets Manager write journaled in clear
    body = json.dumps({"Name": "old", "SecretString": "Canary-old"}).encode()
    environ = {k: v for k, v in _secrets_request(body).items() if k != "wsgi.input"}
    (tmp_path / "d").mkdir(mode=0o700)
    (tmp_path / "d" / "FORMAT").write_text(json.dumps({"format": 1, "host": host_version(), "moto": moto_version()}))
    (tmp_path / "d" / "journal-00000001.log").write_bytes(frame(pickle.dumps(("http", environ, body, None))))
    # When a host opens it
    folder = DataDir.open(tmp_path / "d")
    try:
        app = _Recording()
        journal = Journal(folder, app)
        report = journal.recover()
        journal.close()
    finally:
        folder.close()
    # Then it replays the clear record, names format 2, and is told to take a snapshot (which seals the secret and
    # drops the segment that held it in clear)
    assert app.bodies == [body] and report.compact
    assert json.loads((tmp_path / "d" / "FORMAT").read_text())["format"] == 2
