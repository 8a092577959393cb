"""The `kvplan` command line.

Each subcommand lives in its own module and registers itself on `app`; this module only wires
them together. Exit codes: 0 ok, 1 a check failed (e.g. `lab`), 2 bad input (on stderr a
message naming the flag, or problem+json with --json or --request; never a traceback).
"""

from __future__ import annotations

import typer

app = typer.Typer(
    name="kvplan",
    help="KV-cache capacity planner for LLM inference.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _each_command() -> None:
    """Runs before every subcommand: errors are problem+json until a command says otherwise
    (planner.cli.output.error_style), so no style leaks from one invocation to the next."""
    from planner.cli.output import error_style

    error_style("kvplan", {}, as_json=True)


def _register() -> None:
    # Imported here so `planner.cli` stays cheap to import and each command owns its module.
    from planner.cli import lab as _lab
    from planner.cli import plan as _plan
    from planner.cli import probe as _probe
    from planner.cli import recommend as _recommend
    from planner.cli import reconcile as _reconcile
    from planner.cli import serve as _serve

    for module in (_plan, _lab, _serve, _probe, _reconcile, _recommend):
        module.register(app)


_register()


def main() -> None:
    app()
