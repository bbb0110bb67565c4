"""The embedded AWS: moto's ThreadedMotoServer in this process, patched, bootstrapped from ``shared.manifest``.

``LocalAws().start()`` starts the server and points every boto3 client of the process at it through the
environment; ``bootstrap()`` creates the tables, bucket, functions, state machines and stream mappings the CDK
stack would create (``shared.local.resources``), and exports the env vars ``shared.settings`` reads
(``shared.local.environment``). Both are idempotent.

``LocalAws()`` keeps everything in memory (the tests' host); ``LocalAws(data_dir=...)`` keeps the data in that folder
across restarts (``shared.local.persistence``): ``start()`` takes the folder (or raises ``DataDirError``) and loads
what it holds before anything else runs, and the first ``bootstrap()`` delivers the stream records a consumer had not
finished.

The endpoint answers this process only: ``start()`` makes a credential for it, which the process's boto3 clients
sign with and every request must carry (``shared.local.endpoint_auth``); ``credentials_path`` is the 0600 file that
hands it to an operator's commands.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3

from shared import manifest, settings
from shared.keys import RUN_SK
from shared.local import direct, endpoint_auth, resources
from shared.local.environment import REGION, endpoint_env, resource_env
from shared.local.patches import apply_patches

if TYPE_CHECKING:
    from shared.local.datadir import DataDir
    from shared.local.persistence import Journal, Recovery
    from shared.local.sealing import Sealer

STOP_STREAM_WAIT_S = 5.0  # at most this long, at stop, for the stream batches written so far to be delivered
MOTO_CONFIG: dict[str, Any] = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}


LOCAL_EGRESS_ALLOW = "127.0.0.0/8,::1/128"
LOCAL_MODEL_PROVIDERS = "bedrock,openai,mock"
LOCAL_WEBHOOK_RETRY_DIVISOR = 30


def local_policy_env() -> dict[str, str]:
    """Local-mode runtime policy: tools, MCP servers and OpenAI-compatible model servers on loopback (the demo and
    test servers, a local Ollama or vLLM) are reachable, and every model provider runs, the mock included (the
    credential-free default of the demo agent). An operator's own ``EGRESS_ALLOW`` / ``MODEL_PROVIDERS`` win."""
    return {
        "EGRESS_ALLOW": os.environ.get("EGRESS_ALLOW") or LOCAL_EGRESS_ALLOW,
        "MODEL_PROVIDERS": os.environ.get("MODEL_PROVIDERS") or LOCAL_MODEL_PROVIDERS,
        # Webhook retries keep the deployed schedule (8 attempts, 30 s doubling to 15 min) with every delay
        # divided by WEBHOOK_RETRY_DIVISOR (30: 1, 2, 4, ... 30 s, ~91 s in all): a local receiver down for a
        # minute still gets every event, and an exhausted delivery reaches the dead letters within two minutes.
        "WEBHOOK_RETRY_DIVISOR": os.environ.get("WEBHOOK_RETRY_DIVISOR") or str(LOCAL_WEBHOOK_RETRY_DIVISOR),
        # EMF metrics are CloudWatch's: locally they would only print JSON lines between the server's output
        "POWERTOOLS_METRICS_DISABLED": os.environ.get("POWERTOOLS_METRICS_DISABLED") or "true",
        # The per-tenant write bucket is on locally too, ten times the deployed default: one developer's
        # scripts and the test suite's loops run unthrottled, and every write still takes a token.
        "TENANT_WRITE_RATE": os.environ.get("TENANT_WRITE_RATE") or "200",
        "TENANT_WRITE_BURST": os.environ.get("TENANT_WRITE_BURST") or "400",
        # The conformance seams profile is on locally (the official suite drives it); a deployed stack only with
        # CDK context conformanceSeams=true. OPENWOP_CONFORMANCE_SEAMS=false turns it off here too.
        "OPENWOP_CONFORMANCE_SEAMS": os.environ.get("OPENWOP_CONFORMANCE_SEAMS") or "true",
    }


def _forget_clients() -> None:
    from shared.wiring import reset_ports

    reset_ports()


def _moto_server(host: str, port: int, wrap: Any) -> Any:
    """moto's ``ThreadedMotoServer`` whose WSGI application is ``wrap(moto's application)`` (the endpoint's guard,
    and the journal of kept state). Pinned to moto 5.2.5's ``_server_entry`` (it makes the application and serves)."""
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer

    class _Server(ThreadedMotoServer):
        def _server_entry(self) -> None:
            from moto.moto_server.threaded_moto_server import MotoRequestHandler, make_server
            from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

            app = self.app = wrap(DomainDispatcherApplication(create_backend_app))
            self._server = make_server(self._ip_address, self._port, app, True, request_handler=MotoRequestHandler)
            self._server_ready_event.set()
            self._server.serve_forever()

    return _Server(ip_address=host, port=port, verbose=False)


class LocalAws:
    """moto in server mode, in this process (so the Lambda registry patch can call our handlers). With
    ``data_dir``, its data is kept in that folder (see the module's docstring)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        data_dir: str | os.PathLike[str] | None = None,
        snapshot_bytes: int | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self._server: Any = None
        self._saved_env: dict[str, str | None] = {}
        self._clients: dict[str, Any] = {}
        self._session: boto3.session.Session | None = None
        self.pollers: dict[str, Any] = {}
        self.data_dir_path = Path(data_dir).resolve() if data_dir is not None else None
        self._snapshot_bytes = snapshot_bytes
        self.data_dir: DataDir | None = None
        self.journal: Journal | None = None
        self.recovery: Recovery | None = None
        self._stream_backlog = False
        self.credential = endpoint_auth.EndpointCredential.new()
        """The endpoint's credential for this start (``shared.local.endpoint_auth``)."""
        self._sealer: Sealer | None = None
        self.credentials_path: Path | None = None
        """The 0600 file holding it for an operator (None when the user's folder for it could not be used)."""

    @property
    def kept(self) -> bool:
        """Whether the data is kept in a folder (False: in memory only)."""
        return self.data_dir_path is not None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def client(self, service: str) -> Any:
        """A boto3 client for the local endpoint (cached; boto3 clients are thread-safe)."""
        if service not in self._clients:
            if self._session is None:
                self._session = boto3.session.Session()
            self._clients[service] = self._session.client(service, region_name=REGION, endpoint_url=self.endpoint)
        return self._clients[service]

    # -- lifecycle --------------------------------------------------------------------------------------------------

    def start(self) -> str:
        """Start the server, point this process at it, configure moto and apply the patches. Returns the endpoint."""
        if self._server is not None:
            return self.endpoint
        for name in ("moto", "werkzeug", "botocore.credentials"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        journal = None
        if self.data_dir_path is not None:
            from shared.local.datadir import DataDir

            self.data_dir = DataDir.open(self.data_dir_path)  # DataDirError before anything starts
            journal = self._journal_for
        self.credential = endpoint_auth.EndpointCredential.new()
        wrap = endpoint_auth.guarded(self.credential, journal)
        try:
            if self.data_dir is not None:
                from shared.local.sealing import Sealer

                self._sealer = Sealer.for_folder(self.data_dir)  # the folder's key (DataDirError: refused)
            self._start_server(wrap)
        except BaseException:
            self.stop()  # a folder it could not read: the server stops, the environment and the folder are released
            if self.data_dir is not None:
                self.data_dir.close()
                self.data_dir = None
            raise
        return self.endpoint

    def _journal_for(self, app: Any) -> Any:
        from shared.local.ddb_streams import pending_stream_batches
        from shared.local.persistence import Journal

        assert self.data_dir is not None
        assert self._sealer is not None
        self.journal = Journal(
            self.data_dir,
            app,
            sealer=self._sealer,
            snapshot_bytes=self._snapshot_bytes,
            pending_streams=pending_stream_batches,
        )
        return self.journal

    def _start_server(self, wrap: Any) -> None:
        server = _moto_server(self.host, self.port, wrap)
        server.start()
        self._server = server
        self.port = server.get_host_and_port()[1]
        direct.serve_in_process(f"{self.host}:{self.port}", server.app)  # patch 16: this process skips the socket
        credential = self.credential
        self._set_env(endpoint_env(self.endpoint, credential.access_key_id, credential.secret_access_key))
        endpoint_auth.set_current(credential)
        request = urllib.request.Request(
            f"{self.endpoint}/moto-api/config",
            data=json.dumps(MOTO_CONFIG).encode(),
            headers={
                "Content-Type": "application/json",
                "Authorization": f"AWS4-HMAC-SHA256 Credential={credential.access_key_id}/moto-api",
            },
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
        apply_patches()
        endpoint_auth.patch_sfn_boto_clients()
        try:
            self.credentials_path = endpoint_auth.write_credentials(self.endpoint, self.port, credential, REGION)
        except OSError as exc:  # the host still works; the operator is told there is no file
            logging.getLogger("shared.local").warning("the endpoint's credentials file was not written: %s", exc)
        if self.journal is not None:
            self.recovery = self.journal.recover()  # before any client: the kept data is there when they come
            self._stream_backlog = True
            self._listen_for_idle_streams()

    def _listen_for_idle_streams(self) -> None:
        from shared.local.ddb_streams import on_stream_idle

        journal = self.journal
        assert journal is not None
        consumers = {
            manifest.function(fn).local_name: manifest.table(t).local_name for t, fn in manifest.STREAM_CONSUMERS
        }

        erasure = manifest.function("erase_run").local_name

        def idle(worker: Any) -> None:
            table = consumers.get(worker.name)
            if table is not None:
                journal.mark_idle(worker.name, table, worker.idle)
            if worker.name == erasure:  # every erasure hook delivered so far has finished: keep nothing of them
                journal.erased(
                    {
                        keys["pk"]["S"]
                        for keys in worker.take_removed()
                        if keys.get("sk", {}).get("S") == RUN_SK and "S" in keys.get("pk", {})
                    }
                )

        on_stream_idle(idle)

    def stop(self) -> None:
        """Stop running Step Functions executions (their threads would call a dead endpoint), then the server;
        restore the environment as it was before ``start()``."""
        if self._server is None:
            return
        try:
            self._stop_pollers()
            self.stop_running_executions()
            from shared.local.ddb_streams import wait_for_stream_idle

            wait_for_stream_idle(STOP_STREAM_WAIT_S)  # batches written so far reach consumers while the env is here
        finally:
            if self.journal is not None:
                from shared.local.ddb_streams import on_stream_idle

                on_stream_idle(None)
                self.journal.close()  # later writes are refused (503), never half-kept
            direct.stop_serving(f"{self.host}:{self.port}")
            self._server.stop()
            self._server = None
            endpoint_auth.remove_credentials(self.credentials_path, self.credential)
            self.credentials_path = None
            endpoint_auth.set_current(None)
            self.journal = None
            if self.data_dir is not None:
                self.data_dir.close()
                self.data_dir = None
            self._clients = {}
            for name, old in self._saved_env.items():
                if old is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = old
            self._saved_env = {}
            settings.get_settings.cache_clear()
            _forget_clients()

    def __enter__(self) -> LocalAws:
        self.start()
        self.bootstrap()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _set_env(self, values: dict[str, str]) -> None:
        for name, value in values.items():
            self._saved_env.setdefault(name, os.environ.get(name))
            os.environ[name] = value

    # -- bootstrap --------------------------------------------------------------------------------------------------

    def bootstrap(self) -> None:
        """Create every manifest resource that does not exist yet and export the settings env vars."""
        if self._server is None:
            raise RuntimeError("LocalAws.start() first")
        self._set_env({**resource_env(), **local_policy_env()})
        settings.get_settings.cache_clear()
        _forget_clients()  # clients built against an earlier endpoint must not be reused
        resources.create_tables(self.client)
        resources.create_buckets(self.client)
        resources.create_secrets(self.client)
        from shared.local.kms_keys import ensure_keys

        ensure_keys(self.client("kms"), self.client("secretsmanager"))
        role_arn = resources.ensure_role(self.client)
        resources.create_functions(self.client, role_arn)
        resources.create_state_machines(self.client, role_arn)
        resources.create_stream_mappings(self.client)
        self._set_env(resources.create_queues(self.client))
        settings.get_settings.cache_clear()
        _forget_clients()
        self._start_pollers()
        if self._stream_backlog:
            self._deliver_stream_backlog()

    def _deliver_stream_backlog(self) -> None:
        """Once, after the first bootstrap on kept data: the stream batches the snapshot found undelivered, then
        the records replaying the journal made again (both as the consumers would have had them)."""
        from shared.local.ddb_streams import deliver_stream_batch
        from shared.local.moto_data import flush_stream_backlog

        self._stream_backlog = False
        assert self.recovery is not None
        for function_name, event in self.recovery.stream_batches:
            deliver_stream_batch(function_name, event)
        flush_stream_backlog()
        if self.recovery.compact and self.journal is not None:  # an erasure's snapshot the last stop did not write
            self.journal.snapshot_when_streams_idle()

    def _start_pollers(self) -> None:
        from shared.local.sqs_poller import QueuePoller

        sqs = self.client("sqs")
        for fn in manifest.FUNCTIONS:
            if fn.consumes is None or fn.name in self.pollers:
                continue
            q = manifest.queue(fn.consumes)
            url = os.environ[q.env_var]
            arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
            poller = QueuePoller(sqs, fn, url, arn, REGION)
            poller.start()
            self.pollers[fn.name] = poller

    def _stop_pollers(self) -> None:
        for poller in self.pollers.values():
            poller.stop()
        self.pollers = {}

    # -- maintenance ------------------------------------------------------------------------------------------------

    def stop_running_executions(self) -> int:
        """Stop every RUNNING Step Functions execution (of any state machine). Returns how many were stopped."""
        sfn = self.client("stepfunctions")
        stopped = 0
        for machine in sfn.list_state_machines()["stateMachines"]:
            pages = sfn.get_paginator("list_executions").paginate(
                stateMachineArn=machine["stateMachineArn"], statusFilter="RUNNING"
            )
            for page in pages:
                for execution in page["executions"]:
                    sfn.stop_execution(executionArn=execution["executionArn"], cause="openwop local: stopping")
                    stopped += 1
        return stopped

    def reset_data(self) -> None:
        """Drop all data: stop executions, delete and recreate the manifest tables, empty the buckets."""
        self.stop_running_executions()
        ddb = self.client("dynamodb")
        for t in manifest.TABLES:
            ddb.delete_table(TableName=t.local_name)
        s3 = self.client("s3")
        for b in manifest.BUCKETS:
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=b.local_name):
                keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
                if keys:
                    s3.delete_objects(Bucket=b.local_name, Delete={"Objects": keys})
        self.bootstrap()
