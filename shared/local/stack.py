"""The embedded AWS: moto's ThreadedMotoServer in this process, patched, bootstrapped from ``shared.manifest``.

``LocalAws().start()`` starts the server and points every boto3 client of the process at it through the
environment; ``bootstrap()`` creates the tables, bucket, functions, state machines and stream mappings the CDK
stack would create, and exports the env vars ``shared.settings`` reads. Both are idempotent.

``LocalAws()`` keeps everything in memory (the tests' host); ``LocalAws(data_dir=...)`` keeps the data in that folder
across restarts (``shared.local.persistence``): ``start()`` takes the folder (or raises ``DataDirError``) and loads
what it holds before anything else runs, and the first ``bootstrap()`` delivers the stream records a consumer had not
finished.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import secrets
import urllib.request
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3

from shared import manifest, settings
from shared.keys import RUN_SK
from shared.local.context import DEFAULT_ACCOUNT, DEFAULT_REGION, function_arn
from shared.local.patches import apply_patches

if TYPE_CHECKING:
    from shared.local.datadir import DataDir
    from shared.local.persistence import Journal, Recovery

REGION = DEFAULT_REGION
ACCOUNT = DEFAULT_ACCOUNT
ROLE_NAME = "openwop-local-role"
STOP_STREAM_WAIT_S = 5.0  # at most this long, at stop, for the stream batches written so far to be delivered
MOTO_CONFIG: dict[str, Any] = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_]+)\}")
_TRUST_POLICY = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": ["lambda.amazonaws.com", "states.amazonaws.com"]},
                "Action": "sts:AssumeRole",
            }
        ],
    }
)


def state_machine_arn(sm: manifest.StateMachine) -> str:
    return f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{sm.local_name}"


def resource_env() -> dict[str, str]:
    """The env vars the runtime reads to find the local resources (same names CDK sets on the functions)."""
    env = {t.env_var: t.local_name for t in manifest.TABLES}
    env.update({b.env_var: b.local_name for b in manifest.BUCKETS})
    env.update({sm.env_var: state_machine_arn(sm) for sm in manifest.STATE_MACHINES})
    env.update({sec.env_var: sec.local_name for sec in manifest.SECRETS})
    env.update({k.env_var: k.local_name for k in manifest.KEYS})
    endpoint = os.environ.get("AWS_ENDPOINT_URL", "http://127.0.0.1")
    env.update({q.env_var: f"{endpoint}/{ACCOUNT}/{q.local_name}" for q in manifest.QUEUES})  # moto's URL form
    return env


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


def endpoint_env(endpoint: str) -> dict[str, str]:
    """The env vars that point boto3 (and moto's Step Functions interpreter) at a local moto endpoint."""
    port = endpoint.rsplit(":", 1)[-1].split("/", 1)[0]
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "MOTO_PORT": port,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    }


def substitute(definition: str, sm: manifest.StateMachine) -> str:
    """Replace ``${Name}`` placeholders as CloudFormation ``DefinitionSubstitutions`` would for the local stack."""

    def value(ref: str) -> str:
        kind, _, key = ref.partition(":")
        if kind == "function":
            return function_arn(manifest.function(key).local_name, REGION, ACCOUNT)
        if kind == "table":
            return manifest.table(key).local_name
        if kind == "bucket":
            return next(b.local_name for b in manifest.BUCKETS if b.key == key)
        if kind == "setting":
            env_var, default = manifest.ASL_SETTINGS[key]
            return str(int(os.environ.get(env_var) or default))
        raise ValueError(f"{sm.key}: unknown substitution kind in {ref!r}")

    values = {name: value(ref) for name, ref in sm.substitutions.items()}

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise ValueError(f"{sm.file}: placeholder ${{{name}}} has no substitution in the manifest")
        return values[name]

    return _PLACEHOLDER.sub(replace, definition)


def asl_path(relative: str) -> Path:
    """Find an ASL file of the manifest: relative to the repository (checkout) first, then the working dir."""
    for base in (Path(manifest.__file__).resolve().parents[1], Path.cwd()):
        candidate = base / relative
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"state machine definition {relative} not found beside the package or in {Path.cwd()}")


def _forget_clients() -> None:
    from shared.wiring import reset_ports

    reset_ports()


def _dummy_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("README.txt", "openwop local: handlers run in-process from the checkout\n")
    return buf.getvalue()


def _moto_server(host: str, port: int, wrap: Any) -> Any:
    """moto's ``ThreadedMotoServer`` whose WSGI application is ``wrap(moto's application)`` (the journal of kept
    state) when ``wrap`` is given. Pinned to moto 5.2.5's ``_server_entry`` (it makes the application and serves)."""
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer

    if wrap is None:
        return ThreadedMotoServer(ip_address=host, port=port, verbose=False)

    class _Server(ThreadedMotoServer):
        def _server_entry(self) -> None:
            from moto.moto_server.threaded_moto_server import MotoRequestHandler, make_server
            from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

            app = wrap(DomainDispatcherApplication(create_backend_app))
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
        wrap = None
        if self.data_dir_path is not None:
            from shared.local.datadir import DataDir

            self.data_dir = DataDir.open(self.data_dir_path)  # DataDirError before anything starts
            wrap = self._journal_for
        try:
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
        self.journal = Journal(
            self.data_dir, app, snapshot_bytes=self._snapshot_bytes, pending_streams=pending_stream_batches
        )
        return self.journal

    def _start_server(self, wrap: Any) -> None:
        server = _moto_server(self.host, self.port, wrap)
        server.start()
        self._server = server
        self.port = server.get_host_and_port()[1]
        self._set_env(endpoint_env(self.endpoint))
        request = urllib.request.Request(
            f"{self.endpoint}/moto-api/config",
            data=json.dumps(MOTO_CONFIG).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
        apply_patches()
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
            self._server.stop()
            self._server = None
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
        self._tables()
        self._buckets()
        self._secrets()
        from shared.local.kms_keys import ensure_keys

        ensure_keys(self.client("kms"), self.client("secretsmanager"))
        role_arn = self._role()
        self._functions(role_arn)
        self._state_machines(role_arn)
        self._stream_mappings()
        self._queues()
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

    def _tables(self) -> None:
        ddb = self.client("dynamodb")
        existing: set[str] = set()
        for page in ddb.get_paginator("list_tables").paginate():
            existing.update(page["TableNames"])
        for t in manifest.TABLES:
            if t.local_name not in existing:
                ddb.create_table(**_table_spec(t))
            else:
                self._add_indexes(ddb, t)
            ttl = ddb.describe_time_to_live(TableName=t.local_name)["TimeToLiveDescription"]
            if ttl.get("TimeToLiveStatus") != "ENABLED":
                ddb.update_time_to_live(
                    TableName=t.local_name,
                    TimeToLiveSpecification={"Enabled": True, "AttributeName": t.ttl_attribute},
                )

    @staticmethod
    def _add_indexes(ddb: Any, t: manifest.Table) -> None:
        """A kept local state made before an index was added to the manifest gets it (existing items stay out)."""
        have = {
            ix["IndexName"]
            for ix in ddb.describe_table(TableName=t.local_name)["Table"].get("GlobalSecondaryIndexes", [])
        }
        spec = _table_spec(t)
        for ix in spec.get("GlobalSecondaryIndexes", []):
            if ix["IndexName"] not in have:
                ddb.update_table(
                    TableName=t.local_name,
                    AttributeDefinitions=spec["AttributeDefinitions"],
                    GlobalSecondaryIndexUpdates=[{"Create": ix}],
                )

    def _buckets(self) -> None:
        s3 = self.client("s3")
        existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
        for b in manifest.BUCKETS:
            if b.local_name in existing:
                continue
            s3.create_bucket(Bucket=b.local_name)
            s3.put_bucket_encryption(
                Bucket=b.local_name,
                ServerSideEncryptionConfiguration={
                    "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
                },
            )
            s3.put_public_access_block(
                Bucket=b.local_name,
                PublicAccessBlockConfiguration={
                    "BlockPublicAcls": True,
                    "IgnorePublicAcls": True,
                    "BlockPublicPolicy": True,
                    "RestrictPublicBuckets": True,
                },
            )

    def _secrets(self) -> None:
        """Each manifest secret once, with a generated value (as CDK's generated secret string on AWS)."""
        sm = self.client("secretsmanager")
        for sec in manifest.SECRETS:
            try:
                sm.describe_secret(SecretId=sec.local_name)
            except sm.exceptions.ResourceNotFoundException:
                value = secrets.token_urlsafe(48)
                if sec.json_key:  # as CDK's SecretStringGenerator with generate_string_key
                    value = json.dumps({sec.json_key: value})
                sm.create_secret(Name=sec.local_name, Description=sec.purpose, SecretString=value)

    def _role(self) -> str:
        iam = self.client("iam")
        try:
            arn: str = iam.get_role(RoleName=ROLE_NAME)["Role"]["Arn"]
        except iam.exceptions.NoSuchEntityException:
            arn = iam.create_role(RoleName=ROLE_NAME, AssumeRolePolicyDocument=_TRUST_POLICY)["Role"]["Arn"]
        return arn

    def _functions(self, role_arn: str) -> None:
        lam = self.client("lambda")
        existing: set[str] = set()
        for page in lam.get_paginator("list_functions").paginate():
            existing.update(f["FunctionName"] for f in page["Functions"])
        env = resource_env()
        code = _dummy_zip()
        for fn in manifest.FUNCTIONS:
            if fn.local_name in existing:
                continue
            lam.create_function(
                FunctionName=fn.local_name,
                Runtime=manifest.RUNTIME,
                Role=role_arn,
                Handler=f"{fn.module}.lambda_handler",
                Code={"ZipFile": code},
                Timeout=fn.timeout_s,
                MemorySize=fn.memory_mb,
                Environment={"Variables": env},
            )

    def _state_machines(self, role_arn: str) -> None:
        sfn = self.client("stepfunctions")
        existing = {m["stateMachineArn"] for m in sfn.list_state_machines()["stateMachines"]}
        for sm in manifest.STATE_MACHINES:
            definition = substitute(asl_path(sm.file).read_text(encoding="utf-8"), sm)
            arn = state_machine_arn(sm)
            if arn in existing:
                if sfn.describe_state_machine(stateMachineArn=arn)["definition"] != definition:
                    sfn.update_state_machine(stateMachineArn=arn, definition=definition)
            else:
                sfn.create_state_machine(name=sm.local_name, definition=definition, roleArn=role_arn)

    def _stream_mappings(self) -> None:
        ddb = self.client("dynamodb")
        lam = self.client("lambda")
        for table_key, function_name in manifest.STREAM_CONSUMERS:
            stream_arn = ddb.describe_table(TableName=manifest.table(table_key).local_name)["Table"]["LatestStreamArn"]
            fn = manifest.function(function_name)
            mappings = lam.list_event_source_mappings(FunctionName=fn.local_name)["EventSourceMappings"]
            if any(m["EventSourceArn"] == stream_arn for m in mappings):
                continue
            lam.create_event_source_mapping(
                EventSourceArn=stream_arn,
                FunctionName=fn.local_name,
                StartingPosition="LATEST",
                BatchSize=100,
                Enabled=True,
            )

    def _queues(self) -> None:
        """Each manifest queue as on AWS: FIFO, content-free dead-letter queue behind it (redrive after the
        configured attempts); their URLs exported as the runtime reads them."""
        sqs = self.client("sqs")
        attempts = os.environ.get("WEBHOOK_MAX_ATTEMPTS")
        for q in manifest.QUEUES:
            dlq_url = sqs.create_queue(
                QueueName=q.dlq_local_name, Attributes={"FifoQueue": "true", "MessageRetentionPeriod": str(14 * 86400)}
            )["QueueUrl"]
            dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
            redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": int(attempts or q.max_receives)})
            url = sqs.create_queue(
                QueueName=q.local_name,
                Attributes={
                    "FifoQueue": "true",
                    "VisibilityTimeout": "30",
                    "MessageRetentionPeriod": str(q.retention_days * 86400),
                },
            )["QueueUrl"]
            sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": redrive})
            self._set_env({q.env_var: url, f"{q.key.upper()}_DLQ_URL": dlq_url})

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


def _table_spec(t: manifest.Table) -> dict[str, Any]:
    attributes: dict[str, str] = {t.partition_key[0]: t.partition_key[1]}
    schema = [{"AttributeName": t.partition_key[0], "KeyType": "HASH"}]
    if t.sort_key is not None:
        attributes[t.sort_key[0]] = t.sort_key[1]
        schema.append({"AttributeName": t.sort_key[0], "KeyType": "RANGE"})
    indexes = []
    for ix in t.indexes:
        attributes[ix.partition_key[0]] = ix.partition_key[1]
        attributes[ix.sort_key[0]] = ix.sort_key[1]
        indexes.append(
            {
                "IndexName": ix.name,
                "KeySchema": [
                    {"AttributeName": ix.partition_key[0], "KeyType": "HASH"},
                    {"AttributeName": ix.sort_key[0], "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        )
    spec: dict[str, Any] = {
        "TableName": t.local_name,
        "AttributeDefinitions": [{"AttributeName": k, "AttributeType": v} for k, v in attributes.items()],
        "KeySchema": schema,
        "BillingMode": "PAY_PER_REQUEST",
    }
    if indexes:
        spec["GlobalSecondaryIndexes"] = indexes
    if t.stream:
        spec["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    return spec
