"""``openwop-serverless``: run the embedded host, and a few operator commands.

    openwop-serverless serve [--host 127.0.0.1] [--port 8787] [--data-dir .openwop | --ephemeral]
    openwop-serverless suites put FILE | list | get SUITE [--version V]  [TARGET | TENANT]
    openwop-serverless runs delete RUN_ID --tenant T      [TARGET]
    openwop-serverless keys create --tenant T [--name N]  [TARGET]
    openwop-serverless keys list --tenant T               [TARGET]
    openwop-serverless keys revoke KEY_ID                 [TARGET]
    openwop-serverless keys rotate-pepper | finish-rotation [TARGET]
    openwop-serverless seed conformance[,demo] [--tenants T,U --demo-tools-url U --demo-mcp-url U] [TARGET]
    openwop-serverless eval run|compare ...               (HTTP to any host; ``eval --help``)
    openwop-serverless webhooks listen [--host 127.0.0.1] [--port 8790] [--secret S]...

    TENANT: --base-url URL --api-key KEY     (or OPENWOP_BASE_URL/OPENWOP_API_KEY: over HTTP, as that key's tenant;
                                              without them ``suites`` acts host-wide, as the operator)
    TARGET: --endpoint http://127.0.0.1:PORT  (a running local host: the moto endpoint ``serve`` prints)
          | --stack NAME [--region R]        (a deployed stack: resources read from its CloudFormation outputs)
          | nothing                          (resource names from the environment, e.g. inside AWS)

``serve`` starts moto in this process, bootstraps the stack from the manifest, seeds the API keys from
``OPENWOP_API_KEYS`` (``key=tenant,key=tenant``; two dev tenants when unset) and serves the API until Ctrl-C;
``OPENWOP_CORS_ORIGINS`` lists the origins its CORS configuration grants (unset: every origin; empty: none).
What the host stores is kept in ``--data-dir`` (default ``.openwop`` in the working directory) and is there again
at the next start, unfinished runs resuming where their log ends; ``--ephemeral`` keeps everything in memory only.
A folder another host holds, or one another version wrote, and a taken ``--port``, are one ``error:`` line and exit
2. The demo tool servers listen on the two ports after ``--port``, or on free ones when those are taken.
``webhooks listen`` runs a loopback webhook receiver: it answers endpoint verification, and prints one line per
delivery (event type, run, sequence) with ``verified``/``NOT VERIFIED`` under the given secrets (scheme v1 and, when
the delivery carries them, Standard Webhooks headers). Failures of the operator commands (no credentials, no region, no such stack, a refusal) print one ``error:``
line and exit non-zero.

``eval`` is a different kind of command: it talks HTTP to any host (``--endpoint URL --api-key KEY`` or
``OPENWOP_BASE_URL``/``OPENWOP_API_KEY``), never to AWS, and its exit codes gate CI (0 no regression, 1 regressed,
2 unverifiable, 3 usage or connection error). It is built with typer and rich (``shared/local/evalcli.py``) and
dispatched from here, so there is one console script; the operator commands keep their argparse parser.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from collections.abc import Sequence

from shared import manifest

DEFAULT_API_KEYS = "dev-key-tenant-a=tenant-a,dev-key-tenant-b=tenant-b"


def parse_api_keys(spec: str) -> dict[str, str]:
    """``"key=tenant,key=tenant"`` → ``{key: tenant}``."""
    keys: dict[str, str] = {}
    for pair in spec.split(","):
        if not pair.strip():
            continue
        key, sep, tenant = pair.partition("=")
        if not sep or not key.strip() or not tenant.strip():
            raise ValueError(f"OPENWOP_API_KEYS entry {pair!r} is not key=tenant")
        keys[key.strip()] = tenant.strip()
    return keys


def seed(api_keys: dict[str, str]) -> bool:
    """Seed the host (API key hashes, ...) through ``shared.services.seed.seed_host`` if it exists yet."""
    try:
        from shared.services.seed import seed_host
    except ImportError as exc:
        print(
            f"warning: shared.services.seed.seed_host is not available ({exc}); API keys were not seeded",
            file=sys.stderr,
        )
        return False
    from shared.wiring import get_ports

    seed_host(api_keys, get_ports())
    return True


DEFAULT_DATA_DIR = ".openwop"


def _port_taken(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on (``None``: it can), checked before the slow part of the start."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the front's server binds
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def _state_line(aws: object, resumed: object) -> str:
    from shared.local.resume import Resumed
    from shared.local.stack import LocalAws

    assert isinstance(aws, LocalAws) and isinstance(resumed, Resumed)
    if aws.data_dir_path is None:
        return "local state: in memory only (--ephemeral): nothing is kept when the host stops"
    line = f"local state: {aws.data_dir_path} (kept across restarts; --ephemeral keeps nothing)"
    found = aws.recovery
    if found is not None and (found.snapshot_bytes or found.records):
        line += (
            f"; loaded {found.snapshot_bytes // 1024} KiB snapshot + {found.records} journal records in "
            f"{found.seconds:.1f} s"
        )
    if len(resumed):
        line += f"; {len(resumed.runs)} unfinished run{'' if len(resumed.runs) == 1 else 's'} resumed"
        if resumed.cancelled:
            line += f", {len(resumed.cancelled)} cancellations finished"
    if resumed.failed:
        line += f"; {len(resumed.failed)} runs could not be restarted: {', '.join(resumed.failed[:3])}"
    return line


def _serve(
    host: str, port: int, stop: threading.Event | None = None, *, data_dir: str | None = DEFAULT_DATA_DIR
) -> int:
    from shared.local.datadir import DataDirError
    from shared.local.front import LocalFront
    from shared.local.stack import LocalAws

    api_keys = parse_api_keys(os.environ.get("OPENWOP_API_KEYS") or DEFAULT_API_KEYS)
    if port and (why := _port_taken(host, port)) is not None:
        print(
            f"error: cannot listen on {host}:{port} ({why}); stop what uses port {port} or choose another --port",
            file=sys.stderr,
        )
        return 2
    aws = LocalAws(data_dir=data_dir)
    try:
        aws.start()
    except DataDirError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    front = LocalFront(cors_origins=manifest.cors_origins(os.environ.get("OPENWOP_CORS_ORIGINS")))
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)  # stop cleanly on SIGTERM too (set before "Ctrl-C to stop.")
    demo = None
    try:
        aws.bootstrap()
        seed(api_keys)
        from shared.local.demo import start_demo
        from shared.local.resume import Resumed, resume_unfinished
        from shared.wiring import get_ports

        demo = start_demo(get_ports(), sorted(set(api_keys.values())), port)
        resumed = resume_unfinished(get_ports(), aws.journal.lock) if aws.journal is not None else Resumed()
        try:
            base_url = front.start(host, port)
        except OSError as exc:  # taken between the check and now
            print(
                f"error: cannot listen on {host}:{port} ({exc.strerror or exc}); choose another --port", file=sys.stderr
            )
            return 2
        print(f"openwop-serverless local host: {base_url}")
        print(f"moto endpoint (for --endpoint, boto3, the AWS CLI): {aws.endpoint}")
        print(_state_line(aws, resumed))
        for key, tenant in api_keys.items():
            print(f"  API key {key} -> tenant {tenant}")
        print(f"demo tool server (HTTP): {demo.tools_url}   demo MCP server: {demo.mcp_url}")
        for note in demo.notes:
            print(f"  note: {note}")
        keys = list(api_keys)
        exports = f"export OPENWOP_BASE_URL={base_url} OPENWOP_API_KEY={keys[0]}" if keys else ""
        if len(keys) > 1:
            exports += f" OPENWOP_TEST_TENANT_B_API_KEY={keys[1]}"
        if exports:
            print(f"{exports} DEMO_TOOLS_URL={demo.tools_url}")
        if keys:
            print(f"viewer (signed in as {api_keys[keys[0]]}): {viewer_url(base_url, keys[0])}")
        print("Ctrl-C to stop.", flush=True)
        (stop or threading.Event()).wait()
    except KeyboardInterrupt:
        pass
    finally:
        front.stop()
        if demo is not None:
            demo.stop()
        aws.stop()
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _use_endpoint(endpoint: str | None) -> None:
    if not endpoint:
        return
    from shared import settings
    from shared.local.environment import endpoint_env, resource_env

    os.environ.update(endpoint_env(endpoint))
    os.environ.update(resource_env())
    settings.get_settings.cache_clear()


def _use_stack(stack: str | None, region: str | None) -> None:
    """Point the runtime settings at a deployed stack's resources, read from its CloudFormation outputs."""
    if not stack:
        if region:
            os.environ["AWS_REGION"] = os.environ["AWS_DEFAULT_REGION"] = region
        return
    from shared import settings
    from shared.ports import StackLookupError
    from shared.wiring import build_stack_outputs

    try:
        outputs = build_stack_outputs(region).read_outputs(stack)
    except StackLookupError as exc:
        raise SystemExit(f"error: {exc.reason}") from exc
    env: dict[str, str] = {}
    for var in settings.resource_env_vars():
        key = settings.output_key(var)
        if key not in outputs:
            raise SystemExit(f"error: stack {stack} has no output {key} (deployed from an older version?)")
        env[var] = outputs[key]
    if region:
        env["AWS_REGION"] = env["AWS_DEFAULT_REGION"] = region
    os.environ.update(env)
    settings.get_settings.cache_clear()
    from shared.wiring import reset_ports

    reset_ports()


def _ops(command: str, *args: str) -> int:
    try:
        cli_ops = importlib.import_module("shared.services.cli_ops")
    except ImportError as exc:
        print(
            f"error: shared.services.cli_ops is not available ({exc}); this command is not implemented yet",
            file=sys.stderr,
        )
        return 2
    operation = getattr(cli_ops, command, None)
    if operation is None:
        print(f"error: shared.services.cli_ops.{command} is not available", file=sys.stderr)
        return 2
    from botocore.exceptions import BotoCoreError, ClientError

    from shared.wiring import get_ports

    try:
        result = operation(get_ports(), *args)  # services never build clients: the CLI hands them their ports
    except BotoCoreError as exc:  # no credentials, no region, endpoint unreachable: one line, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except ClientError as exc:
        err = exc.response.get("Error", {})
        print(f"error: AWS refused {exc.operation_name}: {err.get('Code')}: {err.get('Message')}", file=sys.stderr)
        return 1
    if result is not None:
        print(result)
    return 0


def viewer_url(base_url: str, key: str) -> str:
    """The viewer signed in with ``key``: the key rides in the URL fragment, which a browser never sends to the
    server (the page keeps it in sessionStorage and clears the fragment)."""
    from urllib.parse import quote

    return f"{base_url.rstrip('/')}/host/openwop-serverless/ui/#key={quote(key, safe='')}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="openwop-serverless", description="OpenWOP v2 serverless host tools")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser(
        "eval",
        help="eval runs on any host over HTTP: run, compare; exit codes gate CI (see `openwop-serverless eval --help`)",
        add_help=False,
    )

    serve = sub.add_parser("serve", help="run the embedded local host (moto in-process + HTTP front)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8787)
    kept = serve.add_mutually_exclusive_group()
    kept.add_argument(
        "--data-dir",
        default=DEFAULT_DATA_DIR,
        help="folder that keeps the host's state across restarts (default: .openwop in the working directory)",
    )
    kept.add_argument("--ephemeral", action="store_true", help="keep nothing: all state in memory, gone at stop")

    def target(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        group = p.add_mutually_exclusive_group()
        group.add_argument("--endpoint", help="moto endpoint of a running local host (printed by serve)")
        group.add_argument(
            "--stack", help="a deployed stack's name (e.g. OpenWopHost-prod): its outputs locate the resources"
        )
        p.add_argument("--region", help="AWS region of --stack (default: the AWS environment's)")
        return p

    def tenant(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument(
            "--base-url", help="a host's base URL: act as the --api-key's tenant over HTTP (default: OPENWOP_BASE_URL)"
        )
        p.add_argument("--api-key", help="a tenant API key (default: OPENWOP_API_KEY)")
        return target(p)

    suites = sub.add_parser("suites", help="eval suites").add_subparsers(dest="action", required=True)
    put = tenant(suites.add_parser("put", help="store an eval suite from a JSON file"))
    put.add_argument("file")
    tenant(suites.add_parser("list", help="the suites (a tenant's, or the host-wide ones)"))
    got = tenant(suites.add_parser("get", help="a suite's versions, or one version's document"))
    got.add_argument("suite_id")
    got.add_argument("--version")

    runs = sub.add_parser("runs", help="runs").add_subparsers(dest="action", required=True)
    delete = target(runs.add_parser("delete", help="erase a run"))
    delete.add_argument("run_id")
    delete.add_argument("--tenant", required=True)

    keys = sub.add_parser("keys", help="tenants' API keys").add_subparsers(dest="action", required=True)
    create = target(keys.add_parser("create", help="create an API key (printed once)"))
    create.add_argument("--tenant", required=True)
    create.add_argument("--name", default="")
    listing = target(keys.add_parser("list", help="a tenant's keys (ids and metadata, never the keys)"))
    listing.add_argument("--tenant", required=True)
    revoke = target(keys.add_parser("revoke", help="revoke a key by id (effective within 60 s)"))
    revoke.add_argument("key_id")
    target(keys.add_parser("rotate-pepper", help="new pepper for key hashes; keys under the old one keep working"))
    target(keys.add_parser("finish-rotation", help="drop the previous pepper (its keys stop working)"))

    seeding = target(
        sub.add_parser("seed", help="seed the conformance fixtures and/or the demo (refused for a -prod stack)")
    )
    seeding.add_argument("sets", help="conformance, demo, or conformance,demo")
    seeding.add_argument("--tenants", default="", help="tenants the demo is registered for (comma-separated)")
    seeding.add_argument("--demo-tools-url", default="", help="base URL of the demo HTTP tool server")
    seeding.add_argument("--demo-mcp-url", default="", help="URL of the demo MCP server (listed when registered)")
    webhooks = sub.add_parser("webhooks", help="webhooks").add_subparsers(dest="action", required=True)
    listen = webhooks.add_parser("listen", help="a loopback receiver that prints verified deliveries")
    listen.add_argument("--host", default="127.0.0.1")
    listen.add_argument("--port", type=int, default=8790)
    listen.add_argument(
        "--secret",
        action="append",
        default=[],
        help="a subscription secret to verify with (repeatable; from the 201 of POST /webhooks)",
    )
    return parser


def stack_stage(stack: str | None) -> str:
    """The stage of a stack named ``OpenWopHost-<stage>`` (the CDK app's naming); empty for any other target."""
    prefix = "OpenWopHost-"
    return stack[len(prefix) :] if stack and stack.startswith(prefix) else ""


def describe_hit(hit: object, secrets: Sequence[str]) -> str:
    """One printed line for a received request (``webhooks listen``)."""
    from shared.local.webhook_receiver import Hit, verify_standard, verify_v1

    assert isinstance(hit, Hit)
    if hit.verification:
        return "verification challenge answered"
    try:
        body = hit.json()
        what = f"{hit.headers.get('openwop-event-type')} run={body.get('runId')} seq={body['event'].get('sequence')}"
    except (ValueError, KeyError, TypeError, AttributeError):
        return f"not a delivery ({len(hit.body)} bytes)"
    checks = []
    if secrets:
        checks.append("v1 " + ("verified" if any(verify_v1(s, hit) for s in secrets) else "NOT VERIFIED"))
        if "webhook-signature" in hit.headers:
            ok = any(verify_standard(s, hit) for s in secrets)
            checks.append("standard-webhooks " + ("verified" if ok else "NOT VERIFIED"))
    else:
        checks.append("unverified (no --secret)")
    return f"{what} webhook={hit.headers.get('openwop-webhook-id')} {' '.join(checks)}"


def _listen(host: str, port: int, secrets: Sequence[str]) -> int:
    from shared.local.webhook_receiver import WebhookReceiver

    receiver = WebhookReceiver(host, port, on_hit=lambda hit: print(describe_hit(hit, secrets), flush=True))
    url = receiver.start()
    print(f"listening on {url}/ (register it with POST /webhooks; Ctrl-C stops)", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    receiver.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["eval"]:
        from shared.local import evalcli

        return evalcli.main(argv[1:])
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args.host, args.port, data_dir=None if args.ephemeral else args.data_dir)
    if args.command == "seed":  # checked before any AWS call (a -prod stack is refused without a lookup)
        from shared.services.seed import SeedPlanError, seed_plan

        try:
            seed_plan(
                args.sets,
                tenants=args.tenants,
                demo_tools_url=args.demo_tools_url,
                demo_mcp_url=args.demo_mcp_url,
                stage=stack_stage(args.stack) or None,
            )
        except SeedPlanError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    if args.command == "webhooks":
        return _listen(args.host, args.port, args.secret)
    if args.command == "suites":
        from shared.local import suitecli

        try:
            as_tenant = suitecli.tenant_target(args.base_url, args.api_key)
        except suitecli.SuiteCliError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        if as_tenant is not None:
            return suitecli.run_tenant(args.action, as_tenant, args)
    _use_endpoint(args.endpoint)
    try:
        _use_stack(args.stack, args.region)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 1
    if args.command == "suites":
        if args.action == "list":
            return _ops("list_suites")
        if args.action == "get":
            return _ops("get_suite", args.suite_id, *([args.version] if args.version else []))
        return _ops("put_suite", args.file)
    if args.command == "runs":
        return _ops("erase_run", args.run_id, args.tenant)
    if args.command == "seed":
        return _ops("seed", args.sets, args.tenants, args.demo_tools_url, args.demo_mcp_url, stack_stage(args.stack))
    if args.action == "create":
        return _ops("create_key", args.tenant, args.name)
    if args.action == "list":
        return _ops("list_keys", args.tenant)
    if args.action == "revoke":
        return _ops("revoke_key", args.key_id)
    if args.action == "rotate-pepper":
        return _ops("rotate_pepper")
    return _ops("finish_pepper_rotation")


if __name__ == "__main__":
    sys.exit(main())
