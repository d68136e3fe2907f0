"""`bridge`: the only place that talks to a terminal.

Human output, progress bars and logs go to stderr; `--json` prints one JSON document to stdout.
Exit 0 ok, 1 error (one line saying what to do next), 2 usage error.
"""

from __future__ import annotations

import sys

import typer

from bridge.cli.common import console, fail
from bridge.errors import BridgeError
from bridge.extras import missing_extra
from index.errors import IndexingError

__all__ = ["app", "main"]

app = typer.Typer(
    name="bridge",
    help="Hybrid code retrieval for small local models, served over MCP.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        from bridge import __version__

        sys.stdout.write(f"mcp-retrieval-bridge {__version__}\n")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
) -> None:
    pass


def _register() -> None:
    # Each module imports its heavy dependencies inside its commands, so this stays fast.
    from bridge.cli import chat_cmds, compare_cmds, eval_cmds, index_cmds, model_cmds, serve_cmds

    for module in (index_cmds, serve_cmds, chat_cmds, model_cmds, compare_cmds, eval_cmds):
        module.register(app)


_register()


def main(argv: list[str] | None = None) -> None:
    try:
        app(args=argv, standalone_mode=True)
    except (IndexingError, BridgeError) as exc:
        fail(str(exc))
    except ImportError as exc:  # an optional package of an extra that is not installed: say which extra
        missing = missing_extra(exc)
        if missing is None:
            raise
        fail(str(missing))
    except OSError as exc:  # disk full, permissions: one line, not a traceback
        where = f" {exc.filename}" if exc.filename else ""
        fail(f"cannot access{where} ({exc.strerror or exc}): check free disk space and permissions, then run it again")
    except KeyboardInterrupt:
        console.print("interrupted")
        sys.exit(130)
