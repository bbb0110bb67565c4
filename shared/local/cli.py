"""``openwop-serverless``: run the embedded host, and a few operator commands.

    openwop-serverless serve [--host 127.0.0.1] [--port 8787]
    openwop-serverless suites put FILE [--endpoint http://127.0.0.1:PORT]
    openwop-serverless runs delete RUN_ID --tenant T [--endpoint http://127.0.0.1:PORT]

``serve`` starts moto in this process, bootstraps the stack from the manifest, seeds the API keys from
``OPENWOP_API_KEYS`` (``key=tenant,key=tenant``; two dev tenants when unset) and serves the API until Ctrl-C.
The operator commands talk to a running local host through its moto endpoint (``--endpoint``, printed by
``serve``) or, without ``--endpoint``, to a deployed stack through the normal AWS environment.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from collections.abc import Sequence

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


def _serve(host: str, port: int, stop: threading.Event | None = None) -> int:
    from shared.local.front import LocalFront
    from shared.local.stack import LocalAws

    api_keys = parse_api_keys(os.environ.get("OPENWOP_API_KEYS") or DEFAULT_API_KEYS)
    aws = LocalAws()
    aws.start()
    front = LocalFront()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)  # stop cleanly on SIGTERM too (set before "Ctrl-C to stop.")
    demo = None
    try:
        aws.bootstrap()
        seed(api_keys)
        from shared.local.demo import start_demo
        from shared.wiring import get_ports

        demo = start_demo(get_ports(), sorted(set(api_keys.values())), port)
        base_url = front.start(host, port)
        print(f"openwop-serverless local host: {base_url}")
        print(f"moto endpoint (for --endpoint, boto3, the AWS CLI): {aws.endpoint}")
        for key, tenant in api_keys.items():
            print(f"  API key {key} -> tenant {tenant}")
        print(f"demo tool server (HTTP): {demo.tools_url}   demo MCP server: {demo.mcp_url}")
        keys = list(api_keys)
        exports = f"export OPENWOP_BASE_URL={base_url} OPENWOP_API_KEY={keys[0]}" if keys else ""
        if len(keys) > 1:
            exports += f" OPENWOP_TEST_TENANT_B_API_KEY={keys[1]}"
        if exports:
            print(f"{exports} DEMO_TOOLS_URL={demo.tools_url}")
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
    from shared.local.stack import endpoint_env, resource_env

    os.environ.update(endpoint_env(endpoint))
    os.environ.update(resource_env())
    settings.get_settings.cache_clear()


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
    from shared.wiring import get_ports

    result = operation(get_ports(), *args)  # services never build clients: the CLI hands them their ports
    if result is not None:
        print(result)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="openwop-serverless", description="OpenWOP v2 serverless host tools")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the embedded local host (moto in-process + HTTP front)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8787)

    endpoint_help = "moto endpoint of a running local host (printed by serve); default: the AWS environment"
    suites = sub.add_parser("suites", help="eval suites").add_subparsers(dest="action", required=True)
    put = suites.add_parser("put", help="store an eval suite from a JSON file")
    put.add_argument("file")
    put.add_argument("--endpoint", help=endpoint_help)

    runs = sub.add_parser("runs", help="runs").add_subparsers(dest="action", required=True)
    delete = runs.add_parser("delete", help="erase a run")
    delete.add_argument("run_id")
    delete.add_argument("--tenant", required=True)
    delete.add_argument("--endpoint", help=endpoint_help)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args.host, args.port)
    _use_endpoint(args.endpoint)
    if args.command == "suites":
        return _ops("put_suite", args.file)
    return _ops("erase_run", args.run_id, args.tenant)


if __name__ == "__main__":
    sys.exit(main())
