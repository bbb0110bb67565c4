"""The ``openwop-serverless`` console script's entry: ``serve`` (the embedded host) and the operator commands that
reach AWS (``suites`` host-wide, ``runs delete``, ``keys``, ``seed`` on a TARGET: a running local host's moto
endpoint, a deployed stack, or the environment's resources), composed with the command line and the HTTP commands
of ``shared.cli`` (``shared/cli/main.py`` describes every command). They live here, not in ``shared.cli``, because
they build AWS clients (``shared.wiring``) or start moto.
"""

from __future__ import annotations

import argparse
import dataclasses
import faulthandler
import importlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from shared import manifest
from shared.cli import main as cli
from shared.cli.parser import DEFAULT_DATA_DIR

if TYPE_CHECKING:
    from shared.local.demo import Demo
    from shared.local.resume import Resumed
    from shared.local.stack import LocalAws

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


def _credentials_line(aws: object) -> str:
    from shared.local.stack import LocalAws

    assert isinstance(aws, LocalAws)
    if aws.credentials_path is None:
        return "  it answers this host only (a credential made at this start; no file could hold it for you)"
    return (
        f"  it answers this host's credential only (new at each start): --endpoint finds it; for boto3 or the AWS CLI, "
        f"`. {aws.credentials_path}` (mode 0600)"
    )


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
        if resumed.failed_starts:
            line += f", {len(resumed.failed_starts)} runs whose create was cut failed"
    if resumed.failed:
        line += f"; {len(resumed.failed)} runs could not be restarted: {', '.join(resumed.failed[:3])}"
    return line


def _port_free(host: str, port: int) -> bool:
    """Whether ``port`` looks free to listen on (0 picks one); says why on stderr when it is not."""
    if port and (why := _port_taken(host, port)) is not None:
        print(
            f"error: cannot listen on {host}:{port} ({why}); stop what uses port {port} or choose another --port",
            file=sys.stderr,
        )
        return False
    return True


def _print_banner(aws: LocalAws, resumed: Resumed, demo: Demo, api_keys: dict[str, str], base_url: str) -> None:
    """What the serving host tells its operator: URLs, state, keys, the exports a client needs."""
    print(f"openwop-serverless local host: {base_url}")
    print(f"moto endpoint (for --endpoint, boto3, the AWS CLI): {aws.endpoint}")
    print(_state_line(aws, resumed))
    print(_credentials_line(aws))
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


def _serve(
    host: str, port: int, stop: threading.Event | None = None, *, data_dir: str | None = DEFAULT_DATA_DIR
) -> int:
    from shared.local.datadir import DataDirError
    from shared.local.front import LocalFront
    from shared.local.stack import LocalAws

    api_keys = parse_api_keys(os.environ.get("OPENWOP_API_KEYS") or DEFAULT_API_KEYS)
    if not _port_free(host, port):
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
        faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1`: where every thread is, on stderr
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
        ports = get_ports()  # an eval trial's endpoint is handed gateway URLs under the host's own base URL
        ports.settings = dataclasses.replace(ports.settings, gateway_url=ports.settings.gateway_url or base_url)
        _print_banner(aws, resumed, demo, api_keys, base_url)
        _wait_for(stop or threading.Event())
    except KeyboardInterrupt:
        pass
    finally:
        front.stop()
        if demo is not None:
            demo.stop()
        aws.stop()
    return 0


def _wait_for(stop: threading.Event) -> None:
    """Block until ``stop`` is set or a signal's handler raises (SIGTERM, Ctrl-C). In slices of a second: the kernel
    may deliver SIGTERM to any of the host's threads, and Python runs the handler only once the main thread runs
    again, which a wait with no timeout, blocked in the lock, never did (the host then ignored SIGTERM)."""
    while not stop.wait(1.0):
        pass


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _use_endpoint(endpoint: str | None) -> None:
    if not endpoint:
        return
    from shared import settings
    from shared.local.endpoint_auth import read_credentials
    from shared.local.environment import endpoint_env, resource_env

    port = endpoint.rstrip("/").rsplit(":", 1)[-1]
    found = read_credentials(port)  # the file the host serving that port wrote (else what the environment holds)
    os.environ.update(
        endpoint_env(
            endpoint,
            found.get("AWS_ACCESS_KEY_ID") or os.environ.get("AWS_ACCESS_KEY_ID", ""),
            found.get("AWS_SECRET_ACCESS_KEY") or os.environ.get("AWS_SECRET_ACCESS_KEY", ""),
        )
    )
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


def stack_stage(stack: str | None) -> str:
    """The stage of a stack named ``OpenWopHost-<stage>`` (the CDK app's naming); empty for any other target."""
    prefix = "OpenWopHost-"
    return stack[len(prefix) :] if stack and stack.startswith(prefix) else ""


def _seed_plan_refused(args: argparse.Namespace) -> bool:
    """Whether ``seed``'s plan is refused (checked before any AWS call: a -prod stack is refused without a lookup)."""
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
        return True
    return False


def _suite_operation(args: argparse.Namespace) -> tuple[Any, ...]:
    if args.action == "list":
        return ("list_suites",)
    if args.action == "get":
        return ("get_suite", args.suite_id, *([args.version] if args.version else []))
    return ("put_suite", args.file)


_KEY_OPERATIONS: dict[str, Callable[[argparse.Namespace], tuple[Any, ...]]] = {
    "create": lambda args: ("create_key", args.tenant, args.name),
    "list": lambda args: ("list_keys", args.tenant),
    "revoke": lambda args: ("revoke_key", args.key_id),
    "rotate-pepper": lambda args: ("rotate_pepper",),
}


def _operation(args: argparse.Namespace) -> tuple[Any, ...]:
    """The ``shared.services.cli_ops`` operation a parsed command names, with its arguments."""
    if args.command == "suites":
        return _suite_operation(args)
    if args.command == "runs" and args.action == "reapply-erasures":
        return ("reapply_erasures", args.tombstones_from)
    if args.command == "runs":
        return ("erase_run", args.run_id, args.tenant)
    if args.command == "seed":
        return ("seed", args.sets, args.tenants, args.demo_tools_url, args.demo_mcp_url, stack_stage(args.stack))
    key_operation = _KEY_OPERATIONS.get(args.action)
    return key_operation(args) if key_operation is not None else ("finish_pepper_rotation",)


def operator(args: argparse.Namespace) -> int:
    """Run a parsed command that needs AWS (``shared.cli.main`` hands every other one to its own module)."""
    if args.command == "serve":
        return _serve(args.host, args.port, data_dir=None if args.ephemeral else args.data_dir)
    if args.command == "seed" and _seed_plan_refused(args):
        return 1
    _use_endpoint(args.endpoint)
    try:
        _use_stack(args.stack, args.region)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 1
    return _ops(*_operation(args))


def main(argv: Sequence[str] | None = None) -> int:
    """The ``openwop-serverless`` console script."""
    return cli.main(argv, operator)


if __name__ == "__main__":
    sys.exit(main())
