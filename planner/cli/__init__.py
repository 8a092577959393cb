"""The `kvplan` command line.

Each subcommand lives in its own module and registers itself on `app`; this module only wires
them together. Exit codes: 0 ok, 1 a check failed (e.g. `lab`), 2 bad input (on stderr a
message naming the flag, or problem+json with --json or --request; never a traceback).
"""

from __future__ import annotations

import sys
from importlib import import_module
from typing import Any

import typer

# Which module defines each subcommand: `kvplan plan …` imports only planner.cli.plan, so a
# plan does not pay for numpy, the probe or the server (help and unknown names load all).
COMMANDS = {
    "plan": "plan",
    "models": "plan",
    "gpus": "plan",
    "lab": "lab",
    "serve": "serve",
    "probe": "probe",
    "reconcile": "reconcile",
    "recommend": "recommend",
}


def _each_command() -> None:
    """Runs before every subcommand: errors are problem+json until a command says otherwise
    (planner.cli.output.error_style), so no style leaks from one invocation to the next."""
    from planner.cli.output import error_style

    error_style("kvplan", {}, as_json=True)


def build_app(only: str | None = None) -> typer.Typer:
    """The CLI with every subcommand, or with only the module that defines `only`."""
    cli = typer.Typer(
        name="kvplan",
        help="KV-cache capacity planner for LLM inference.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    cli.callback()(_each_command)
    names = [COMMANDS[only]] if only in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in names:
        import_module(f"planner.cli.{name}").register(cli)
    return cli


def __getattr__(name: str) -> Any:
    # `from planner.cli import app` (tests, `python -m planner`) gets the whole CLI, built once.
    if name == "app":
        full = build_app()
        globals()["app"] = full
        return full
    raise AttributeError(name)


def main() -> None:
    build_app(sys.argv[1] if len(sys.argv) > 1 else None)()
