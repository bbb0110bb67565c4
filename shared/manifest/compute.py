"""The deployed compute: Lambda functions (what each may reach), Step Functions state machines, stream consumers.

Both the CDK stack (``infra/``) and the local bootstrap (``shared/local``) read them, so deployed and local functions
and state machines cannot drift. Plain data only: no AWS calls, no imports beyond the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from shared.manifest.resources import (
    APIKEY_PEPPER,
    CURSOR,
    EVENTS,
    FIXTURES,
    HOST,
    IDEMPOTENCY,
    RUNS,
    SIGNING,
    TOMBSTONE,
    TOOL_CALLS,
    WEBHOOKS,
    Access,
)

# The Lambda runtime of every function (infra/runtimes.py holds AWS's support dates; the layer is built for it).
RUNTIME = "python3.13"


@dataclass(frozen=True)
class Function:
    """One Lambda function. ``module`` exposes ``lambda_handler``."""

    name: str
    module: str
    # setup: a CloudFormation custom resource; schedule: invoked by an EventBridge rule every ``every_minutes``
    kind: Literal["api", "task", "stream", "setup", "queue", "schedule"]
    tables: tuple[tuple[str, Access], ...] = ()
    bucket: Access | None = None
    starts: tuple[str, ...] = ()  # state machines it may start / stop
    secrets: tuple[str, ...] = ()  # secrets it may read
    credentials: Access | None = None  # tenants' tool credentials (Secrets Manager, under the credentials prefix)
    egress: bool = False  # calls tools / MCP servers outside AWS (egress settings apply)
    resumes: tuple[str, ...] = ()  # state machines whose waiting (task token) tasks it may resume
    # state machines on which its task continues a run (continue-as-new): it names the machine from the
    # task's input, and its role may start executions there (no ARN in its environment: that would close a cycle)
    continues: tuple[str, ...] = ()
    models: bool = False  # calls model providers (Bedrock with its role; others through egress and credentials)
    sends: tuple[str, ...] = ()  # queues it may send to
    consumes: str | None = None  # the queue whose messages it is invoked with (event source mapping)
    keys: tuple[tuple[str, Access], ...] = ()  # KMS keys it may use: read = Decrypt, write = Encrypt,
    # write+replay = Encrypt, and Decrypt only of what was sealed for an idempotent replay (REPLAY_CONTEXT)
    url: bool = False  # served by a Lambda function URL of its own too (on AWS; locally the front routes it)
    gateway_url: bool = False  # hands out agent-gateway URLs: GATEWAY_URL, the gateway's function URL on AWS
    timeout_s: int = 30
    memory_mb: int = 512
    every_minutes: int = 0  # a ``schedule`` function's period

    @property
    def local_name(self) -> str:
        return f"openwop-{self.name.replace('_', '-')}"


@dataclass(frozen=True)
class StateMachine:
    """A Step Functions state machine defined by an ASL file with ``${Name}`` placeholders.

    ``substitutions`` maps a placeholder to ``function:<name>`` (the function's ``live`` alias on AWS, the function
    locally), ``table:<key>`` (the table name), ``bucket:<key>`` (the bucket name), ``setting:<name>`` (an
    operator setting of ``ASL_SETTINGS``: CDK context on AWS, the environment locally) or ``machine:<key>`` (the ARN
    of a machine listed before it). ``construct``: its CDK construct id's stem where it is not the key's (a deployed
    machine keeps its resource when its key moves: decision 0191).
    """

    key: str
    file: str
    substitutions: dict[str, str] = field(default_factory=dict)
    invokes: tuple[str, ...] = ()
    construct: str = ""

    @property
    def env_var(self) -> str:
        return f"{self.key.upper()}_STATE_MACHINE_ARN"

    @property
    def local_name(self) -> str:
        return f"openwop-{self.key}"


_RW_ALL: tuple[tuple[str, Access], ...] = (
    (RUNS, "readwrite"),
    (EVENTS, "readwrite"),
    (TOOL_CALLS, "readwrite"),
    (HOST, "readwrite"),
)
_READ: tuple[tuple[str, Access], ...] = ((RUNS, "read"), (EVENTS, "read"), (HOST, "read"))
_HELD: tuple[tuple[str, Access], ...] = ((RUNS, "read"), (EVENTS, "read"), (HOST, "readwrite"))

FUNCTIONS: tuple[Function, ...] = (
    Function("get_capabilities", "functions.get_capabilities.handler", "api", ((HOST, "read"),)),
    Function("get_openapi", "functions.get_openapi.handler", "api"),
    Function(
        "create_run",
        "functions.create_run.handler",
        "api",
        _RW_ALL + ((IDEMPOTENCY, "readwrite"),),
        bucket="readwrite",
        starts=("run", "eval"),
    ),
    Function("list_runs", "functions.list_runs.handler", "api", _READ, secrets=(CURSOR,)),
    Function("get_run", "functions.get_run.handler", "api", _READ),
    Function(
        "run_actions",
        "functions.run_actions.handler",
        "api",
        _RW_ALL + ((IDEMPOTENCY, "readwrite"),),
        bucket="readwrite",
        starts=("fork",),
        resumes=("run_hold", "fork_hold"),
        gateway_url=True,  # POST /runs/{runId}/session
    ),
    Function(
        "delete_run",
        "functions.delete_run.handler",
        "api",
        _RW_ALL,
        bucket="readwrite",
        starts=("run", "eval", "fork", "timer", "run_hold", "fork_hold"),  # stop a holding execution too
    ),
    Function(
        "cancel_run",
        "functions.cancel_run.handler",
        "api",
        _RW_ALL + ((IDEMPOTENCY, "readwrite"),),
        starts=("run", "eval", "fork", "timer", "run_hold", "fork_hold"),  # stop a holding execution too
    ),
    # A held poll or stream counts itself in its tenant's held requests (decision 0160): the host table, read-write.
    # Each is billed for the whole time it holds (an SSE body 10 s, a poll up to 30): 256 MB, twice what it uses at
    # most (63 and 65 MB streaming or polling a 10,000-event run: bench.bench_memory), half the cost of 512 (0193)
    Function("stream_run_events", "functions.stream_run_events.handler", "api", _HELD, bucket="read", memory_mb=256),
    Function("poll_run_events", "functions.poll_run_events.handler", "api", _HELD, bucket="read", memory_mb=256),
    Function("get_eval_summary", "functions.get_eval_summary.handler", "api", _READ),
    Function(
        "get_eval_report",
        "functions.get_eval_report.handler",
        "api",
        ((RUNS, "read"), (EVENTS, "read"), (TOOL_CALLS, "read"), (HOST, "read")),
        bucket="read",
        gateway_url=True,  # the waiting trials of an external agent's eval
    ),
    Function("get_ui", "functions.get_ui.handler", "api", memory_mb=128),
    Function("get_workflow", "functions.get_workflow.handler", "api", ((HOST, "read"),)),
    Function("get_effect_seams", "functions.get_effect_seams.handler", "api", ((HOST, "read"),)),
    # Registration checks a task's source run (its record, its log) and links the run to the version: up to 10,000
    # sources in one request, read and checked inside API Gateway's 30 s on one full vCPU, 1,769 MB (decision 0121).
    Function("put_eval_suite", "functions.put_eval_suite.handler", "api", _RW_ALL, bucket="read", memory_mb=1769),
    Function(
        "manage_eval_suites", "functions.manage_eval_suites.handler", "api", _RW_ALL, bucket="read", memory_mb=1769
    ),
    Function(
        "advance_run",
        "functions.tasks.advance_run.handler",
        "task",
        _RW_ALL,
        bucket="readwrite",
        continues=("run", "fork", "run_hold", "fork_hold"),
        timeout_s=300,
        credentials="read",
        egress=True,
        models=True,
    ),
    Function(
        "run_eval_trial",
        "functions.tasks.run_eval_trial.handler",
        "task",
        _RW_ALL,
        bucket="readwrite",
        timeout_s=300,
        credentials="read",
        egress=True,
        models=True,
        gateway_url=True,  # an endpoint trial hands its agent the trial's gateway URLs
    ),
    Function("finish_eval", "functions.tasks.finish_eval.handler", "task", _RW_ALL, bucket="readwrite", timeout_s=300),
    # The state machines' Catch, and the timer state machine's Act task (decision 0189): a session expires (0143), and
    # a run erased while a task of it could still write has its log and objects deleted again once none can (0179).
    Function("fail_run", "functions.tasks.fail_run.handler", "task", _RW_ALL, bucket="readwrite"),
    Function("not_found", "functions.not_found.handler", "api", memory_mb=128),
    Function(
        "erase_run",
        "functions.erase_run.handler",
        "stream",
        _RW_ALL + ((IDEMPOTENCY, "readwrite"),),
        bucket="readwrite",
        timeout_s=300,
        starts=("run", "eval", "fork", "timer", "run_hold", "fork_hold"),  # stop a holding execution too
    ),
    Function("get_tools", "functions.get_tools.handler", "api", ((HOST, "read"),)),
    # Registering an MCP server negotiates with it: the outcome's audit run (runs, events).
    Function(
        "manage_tools",
        "functions.manage_tools.handler",
        "api",
        ((HOST, "readwrite"), (RUNS, "readwrite"), (EVENTS, "readwrite")),
        credentials="read",
        egress=True,
    ),
    Function(
        "manage_credentials",
        "functions.manage_credentials.handler",
        "api",
        ((HOST, "readwrite"),),
        credentials="readwrite",
    ),
    # A session of an external agent is a run (decision 0143): its item, its first events, its expiry execution.
    Function(
        "manage_agents",
        "functions.manage_agents.handler",
        "api",
        _RW_ALL,
        bucket="readwrite",
        starts=("timer",),
        gateway_url=True,  # a session's gateway URLs
    ),
    # The agent gateway (decision 0143): token-authenticated (its key derives from the API-key pepper), it records a
    # session's tool and model calls as executed, calling tools and model providers as the Advance task does. On AWS
    # its own function URL serves it (no API Gateway 30 s cap on a model or tool call); it never needs that URL.
    Function(
        "agent_gateway",
        "functions.agent_gateway.handler",
        "api",
        _RW_ALL,
        bucket="readwrite",
        secrets=(APIKEY_PEPPER,),
        credentials="read",
        egress=True,
        models=True,
        resumes=("eval",),  # complete ends a waiting trial: the eval Map's WaitAgent task token
        url=True,
        timeout_s=300,
    ),
    Function("register_workflow", "functions.register_workflow.handler", "api", ((HOST, "readwrite"),)),
    Function("list_workflows", "functions.list_workflows.handler", "api", ((HOST, "read"),)),
    Function("delete_workflow", "functions.delete_workflow.handler", "api", ((HOST, "readwrite"),)),
    # The conformance seams (certification stage only): seed an era-2 log (runs, events), fire an effect seam (a run).
    # The MCP invoke seam calls the caller's MCP server (egress) and writes an audit run.
    Function(
        "conformance_seams",
        "functions.conformance_seams.handler",
        "api",
        _RW_ALL,
        bucket="readwrite",
        starts=("run",),
        egress=True,
    ),
    # Events read: a read of a run whose log's tail is open reads past its head (decision 0170).
    Function(
        "park_run", "functions.tasks.park_run.handler", "task", ((RUNS, "readwrite"), (EVENTS, "read")), memory_mb=256
    ),
    Function(
        "interrupts",
        "functions.interrupts.handler",
        "api",
        _RW_ALL + ((IDEMPOTENCY, "readwrite"),),
        secrets=(CURSOR,),
        resumes=("run_hold", "fork_hold"),
    ),
    # Deploy-time seeding (CDK context ``seed``): the conformance fixtures and the demo; dials the demo MCP server
    # (registering it negotiates: the outcome's audit run, runs and events).
    Function(
        "seed_host",
        "functions.seed_host.handler",
        "setup",
        ((HOST, "readwrite"), (RUNS, "readwrite"), (EVENTS, "readwrite")),
        egress=True,
        timeout_s=120,
        memory_mb=256,
    ),
    # Signing secrets: registration encrypts them (it decrypts only an idempotent answer it sealed), delivery decrypts
    # them (and encrypts a subscription's cleartext secret of before the signing table once, when it first delivers).
    Function(
        "manage_webhooks",
        "functions.manage_webhooks.handler",
        "api",
        ((HOST, "readwrite"), (IDEMPOTENCY, "readwrite"), (SIGNING, "readwrite")),
        secrets=(CURSOR,),
        egress=True,
        keys=((SIGNING, "write+replay"),),
    ),
    # The events stream's consumer: webhook fan-out, and the sampling rules (a completed run's task into a draft).
    Function(
        "fanout_webhooks",
        "functions.fanout_webhooks.handler",
        "stream",
        ((RUNS, "readwrite"), (EVENTS, "read"), (HOST, "readwrite"), (TOOL_CALLS, "read")),
        bucket="read",
        sends=(WEBHOOKS,),
        memory_mb=256,
        timeout_s=60,
    ),
    # The runs table: a delivery reads its run's item (an erased run's message is dropped), and a dead letter is
    # linked under its run (its erasure deletes it).
    Function(
        "deliver_webhooks",
        "functions.tasks.deliver_webhooks.handler",
        "queue",
        ((HOST, "readwrite"), (EVENTS, "read"), (SIGNING, "readwrite"), (RUNS, "readwrite")),
        bucket="read",  # events too large to travel in the message
        consumes=WEBHOOKS,
        egress=True,
        memory_mb=256,
        timeout_s=60,
        keys=((SIGNING, "readwrite"),),
    ),
    # The start outbox's sweep (decision 0150): runs written but never started (a create cut by a timeout or a lost
    # instance) are started, or failed persistence_failed when what they need was never stored. It reads its markers
    # and the runs they name, appends a failed run's run.failed (a state snapshot may go to the bucket), and starts or
    # finishes what the create would have.
    Function(
        "sweep_starts",
        "functions.sweep_starts.handler",
        "schedule",
        ((RUNS, "readwrite"), (EVENTS, "readwrite"), (HOST, "readwrite")),
        bucket="readwrite",
        starts=("run", "eval", "fork", "timer", "run_hold", "fork_hold"),  # a run from before 0191 on its loop
        timeout_s=120,
        memory_mb=256,
        every_minutes=1,
    ),
)

# Seconds after which no task of a run can write anymore once its execution is stopped: the longest a task function
# runs, and a minute for a request it sent to land. A run erased while a task of it may still write has its log and
# objects deleted again that long after its erasure (decision 0179).
TASK_WRITES_END_S = max(f.timeout_s for f in FUNCTIONS if f.kind == "task") + 60

# Operator settings the ASL files read through a placeholder: name (the CDK context key) -> (the env var the local
# stack reads, the default). ``parkedTimeout``: seconds a run may stay paused or waiting in the Park task before it
# fails ``run_timeout`` (7 days; at most the run's retention, checked at synthesis).
# Reserved concurrency per function (decision 0160 and ``infra/constructs/concurrency.py``, which deploys it and says
# why): 400 per stage, so two stages leave 200 of an account's 1,000 for the API handlers, streams and queues. Also
# the ceilings the local Lambda runner enforces (``shared.local.reserved``), so a saturation is modelled locally.
RESERVED_CONCURRENCY: dict[str, int] = {
    "advance_run": 120,  # runs and forks: one execution per run between holds
    "run_eval_trial": 80,  # eval trials: evalMaxConcurrency (4) per eval run
    "finish_eval": 10,
    "fail_run": 10,  # the state machines' Catch: must run when everything else fails
    "park_run": 10,
    "poll_run_events": 90,  # long polls: at most 90 held at once (3.6 a second at the 25 s hold)
    "stream_run_events": 40,  # SSE bodies: at most 40 held at once (4 a second at the 10 s hold)
    # the agent gateway's public function URL, which no stage throttle guards: at most 40 model or tool calls at once
    # (a ceiling against a flood; an external agent's loop runs outside advance_run, hence its 40 fewer)
    "agent_gateway": 40,
}

ASL_SETTINGS: dict[str, tuple[str, int]] = {"parkedTimeout": ("PARKED_TIMEOUT_SECONDS", 7 * 86_400)}

# A run and a fork execute chained (decision 0191): their creates start ``run`` and ``fork``, whose every execution is
# one Advance task; a task that waits or parks continues on ``run_hold`` / ``fork_hold``, the looping machines, which
# keep the resources (``construct``) that ``run`` and ``fork`` were before 0191: a build from before it starts them
# from its own environment during a traffic shift, and its runs end there as they began.
_HOLDING = {
    "AdvanceRunFunction": "function:advance_run",
    "FailRunFunction": "function:fail_run",
    "ParkRunFunction": "function:park_run",
    "ParkedTimeoutSeconds": "setting:parkedTimeout",
}


def _chained_with_hold(key: str, looping: str, chained: str, construct: str) -> tuple[StateMachine, StateMachine]:
    """``key``'s hold machine (``<key>_hold``: the looping ASL, the resource ``construct`` that ``key`` was before
    0191), then ``key`` itself (the chained ASL, told its hold machine's ARN; no Park: it never waits)."""
    hold = f"{key}_hold"
    chained_subs = {k: v for k, v in _HOLDING.items() if k != "ParkRunFunction"}
    return (
        StateMachine(hold, looping, _HOLDING, invokes=("advance_run", "fail_run", "park_run"), construct=construct),
        StateMachine(
            key,
            chained,
            {**chained_subs, f"{construct}HoldStateMachine": f"machine:{hold}"},
            invokes=("advance_run", "fail_run"),
            construct=f"{construct}Chain",
        ),
    )


STATE_MACHINES: tuple[StateMachine, ...] = (
    *_chained_with_hold("run", "statemachines/run.asl.json", "statemachines/run-chain.asl.json", "Run"),
    *_chained_with_hold("fork", "statemachines/fork-replay.asl.json", "statemachines/fork-chain.asl.json", "Fork"),
    StateMachine(
        "eval",
        "statemachines/eval-run.asl.json",
        {
            "RunEvalTrialFunction": "function:run_eval_trial",
            "FinishEvalFunction": "function:finish_eval",
            "FailRunFunction": "function:fail_run",
            "FixturesBucket": f"bucket:{FIXTURES}",
        },
        invokes=("run_eval_trial", "finish_eval", "fail_run"),
    ),
    StateMachine(
        "timer",
        "statemachines/timer.asl.json",
        {"FailRunFunction": "function:fail_run"},
        invokes=("fail_run",),
    ),
)

# The DynamoDB stream of the runs table feeds the erasure hook (REMOVE records only); the events table's stream
# feeds the webhook fan-out (INSERT records only: an event is fanned out once it is durably stored).
STREAM_CONSUMERS: tuple[tuple[str, str], ...] = ((RUNS, "erase_run"), (EVENTS, "fanout_webhooks"))
STREAM_EVENT_NAMES: dict[tuple[str, str], str] = {(RUNS, "erase_run"): "REMOVE", (EVENTS, "fanout_webhooks"): "INSERT"}
# Records a stream mapping hands one invocation at most (the deployed mappings and the local stream worker alike).
STREAM_BATCH_SIZE = 100
# Seconds a mapping waits to fill a batch (up to its batch size) after a shard's first waiting record: the fan-out
# takes many pages per invocation, at most this much later (decision 0151); the erasure hook takes each at once.
STREAM_BATCHING_WINDOW_S: dict[tuple[str, str], int] = {(EVENTS, "fanout_webhooks"): 3}


def function(name: str) -> Function:
    for f in FUNCTIONS:
        if f.name == name:
            return f
    raise KeyError(name)


def secrets_of(fn: Function) -> tuple[str, ...]:
    """The secrets ``fn`` may read: its declared ones, plus the API-key pepper when it serves an authenticated
    route (it resolves callers) or the operator commands need it (none: the CLI runs with the operator's rights),
    and the tombstone key when it uses the runs table."""
    from shared.manifest.routes import ROUTES  # the route table, only where grants are computed (not in a handler)

    authenticates = any(r.function == fn.name and r.auth for r in ROUTES)
    runs = any(t == RUNS for t, _ in fn.tables)  # a function of the runs table may meet a tombstone: its key's key
    return (
        fn.secrets
        + ((APIKEY_PEPPER,) if authenticates and APIKEY_PEPPER not in fn.secrets else ())
        + ((TOMBSTONE,) if runs and TOMBSTONE not in fn.secrets else ())
    )
