"""The ``openwop-serverless`` command line (argparse): every command and option, those that need AWS included
(``serve``, ``keys``, ``seed``, ``runs delete|reapply-erasures``, ``suites`` with a TARGET), so ``--help`` shows the whole tool.
``eval`` is only named here: its own parser is ``shared.cli.evalcli`` (typer)."""

from __future__ import annotations

import argparse

DEFAULT_DATA_DIR = ".openwop"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="openwop-serverless", description="OpenWOP v2 serverless host tools")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser(
        "eval",
        help="eval runs on any host over HTTP: run, compare; exit codes gate CI (see `openwop-serverless eval --help`)",
        add_help=False,
    )
    for name, text in (
        ("agents", "agents' releases over HTTP: promote with an eval as evidence, rollback, history, list"),
        ("tools", "register an HTTP tool over HTTP: tools add --http URL --id ID ..."),
        ("workflows", "register a workflow over HTTP: workflows add FILE"),
        ("session", "one production session of an external agent, driven by its command: session AGENT --exec CMD"),
        ("replay", "replay a session run with zero tool and model calls, the fork driven by the agent's command"),
    ):
        sub.add_parser(name, help=text + " (see `openwop-serverless " + name + " --help`)", add_help=False)

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
    reapply = target(
        runs.add_parser("reapply-erasures", help="after a restore: erase again every restored run that has a tombstone")
    )
    reapply.add_argument(
        "--tombstones-from", default="", help="the runs table the restore replaced: its tombstones are copied in first"
    )

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
