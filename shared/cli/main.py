"""``openwop-serverless``: run the embedded host, a few operator commands, and the eval CLI.

    openwop-serverless serve [--host 127.0.0.1] [--port 8787] [--data-dir .openwop | --ephemeral]
    openwop-serverless suites put FILE | list | get SUITE [--version V]  [TARGET | TENANT]
    openwop-serverless runs delete RUN_ID --tenant T      [TARGET]
    openwop-serverless runs reapply-erasures [--tombstones-from TABLE]  [TARGET]
    openwop-serverless keys create --tenant T [--name N]  [TARGET]
    openwop-serverless keys list --tenant T               [TARGET]
    openwop-serverless keys revoke KEY_ID                 [TARGET]
    openwop-serverless keys rotate-pepper | finish-rotation [TARGET]
    openwop-serverless seed conformance[,demo] [--tenants T,U --demo-tools-url U --demo-mcp-url U] [TARGET]
    openwop-serverless eval run|compare ...               (HTTP to any host; ``eval --help``)
    openwop-serverless session AGENT --input J --exec CMD (HTTP: one session of an external agent)
    openwop-serverless replay RUN --exec CMD              (HTTP: a session's replay fork, driven by CMD)
    openwop-serverless agents promote|rollback|history|list ...  (HTTP to any host; ``agents --help``)
    openwop-serverless tools add --http URL --id ID ... | workflows add FILE  (HTTP to any host)
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
2 unverifiable, 3 usage or connection error). It is built with typer and rich (``shared/cli/evalcli.py``) and
dispatched from here, so there is one console script; the other commands keep their argparse parser
(``shared/cli/parser.py``).

``main`` runs the commands that talk HTTP (``eval``, ``webhooks listen``, ``suites`` as a tenant) and hands the others
(``serve``, and the operator commands on a TARGET) to the ``operator`` it is given: ``shared.local.commands``, the
console script's entry, passes its own (this package imports no AWS).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from shared.cli.parser import build_parser

Operator = Callable[[argparse.Namespace], int]
"""Runs a parsed command that needs AWS (``serve``, ``seed``, ``keys``, ``runs``, ``suites`` host-wide): its exit code."""


def main(argv: Sequence[str] | None, operator: Operator) -> int:
    """Run one command line (``sys.argv[1:]`` when ``argv`` is None); its exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["eval"]:
        from shared.cli import evalcli, suiterules

        suiterules.mount()  # ``eval suite rules|draft``
        return evalcli.main(argv[1:])
    if argv[:1] in (["session"], ["replay"]):
        from shared.cli import sessioncli

        return sessioncli.main(argv[1:], argv[0])
    if argv[:1] == ["agents"]:
        from shared.cli import agentcli

        return agentcli.main(argv[1:])
    if argv[:1] in (["tools"], ["workflows"]):
        from shared.cli import registercli

        return registercli.main(argv[0], argv[1:])
    args = build_parser().parse_args(argv)
    if args.command == "webhooks":
        from shared.cli.webhooks import listen

        return listen(args.host, args.port, args.secret)
    if args.command == "suites":
        from shared.cli import suitecli

        try:
            as_tenant = suitecli.tenant_target(args.base_url, args.api_key)
        except suitecli.SuiteCliError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        if as_tenant is not None:
            return suitecli.run_tenant(args.action, as_tenant, args)
    return operator(args)
