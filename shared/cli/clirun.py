"""Running a typer command group as one ``openwop-serverless`` command: its exit code, whatever happens.

Every group (``eval``, ``agents``, ``tools``, ``workflows``) runs through ``run``: the framework in its standalone mode
(it prints usage errors itself and exits 2, help exits 0), a command's outcome leaving as ``Verdict`` (so the
framework's own 2 can only mean a usage error, -> 3), and every other failure one ``error:`` line and exit 3."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import typer
from openwop_client import WopError

from shared.cli.evalhost import CliError, wire_error
from shared.cli.suitecli import SuiteCliError

OK = 0
USAGE = 3


class Verdict(Exception):  # noqa: N818 - not an error: how a command hands its exit code to main()
    """A command's outcome: its exit code (raised so it passes through the CLI framework untouched)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def run(app: typer.Typer, argv: Sequence[str], prog: str, errors: tuple[type[Exception], ...] = ()) -> int:
    """Run ``app`` on ``argv``; ``errors`` are the group's own one-line failures (exit 3) beside the common ones."""
    command = typer.main.get_command(app)
    failures: tuple[type[Exception], ...] = (CliError, SuiteCliError, OSError, *errors)
    try:
        command.main(args=list(argv), prog_name=prog, standalone_mode=True)
    except Verdict as v:
        return v.code
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else USAGE)
        return OK if code == 0 else USAGE
    except WopError as exc:
        print(f"error: {wire_error(exc)}", file=sys.stderr)
        return USAGE
    except failures as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE
    return OK


def group(name: str, text: str) -> typer.Typer:
    """A command group as this CLI makes them: its help without it asked for, no shell completion, plain text."""
    return typer.Typer(name=name, help=text, no_args_is_help=True, add_completion=False, rich_markup_mode=None)


def pairs(values: list[str], flag: str) -> dict[str, str]:
    """Repeated ``NAME=VALUE`` flags as a mapping; one that is not is a usage error naming the flag."""
    out: dict[str, str] = {}
    for v in values:
        name, sep, value = v.partition("=")
        if not sep or not name:
            raise CliError(f"{flag} {v!r} is not NAME=VALUE")
        out[name] = value
    return out
