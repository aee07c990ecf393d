"""The ``convbench`` command line: a thin click group over :mod:`convbench.commands`.

Commands are discovered from that package and imported only when invoked (or listed), and
:class:`~convbench.errors.ConvbenchError` is turned into a one-line message and exit code 2
here, once; any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import warnings

import click

from convbench import __version__
from convbench.errors import ConvbenchError
from convbench.textsafe import one_line


class _LazyGroup(click.Group):
    def _names(self) -> list[str]:
        import convbench.commands as pkg

        return sorted(m.name.replace("_", "-") for m in pkgutil.iter_modules(pkg.__path__)
                      if not m.name.startswith("_"))

    def list_commands(self, ctx: click.Context) -> list[str]:
        return self._names()

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self._names():
            return None
        module = importlib.import_module(f"convbench.commands.{cmd_name.replace('-', '_')}")
        return module.command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="convbench")
def cli() -> None:
    """Benchmark and cache-profile CNN convolution kernels on CPUs.

    \b
    Typical use:
      convbench suites                       list the shipped suites
      convbench show resnet50                the layers of a suite with FLOPs
      convbench check suites/smoke.yaml      verify every kernel against the reference
      convbench run suites/smoke.yaml        time the sweep, write results/<suite>-<time>/
    """


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Our warnings already say where (file:line, layer, field): print just that."""
    click.echo(f"convbench: warning: {message}", err=True)


def main(argv: list[str] | None = None) -> None:
    warnings.showwarning = _show_warning
    try:
        rv = cli.main(args=argv, prog_name="convbench", standalone_mode=False)
    except click.exceptions.Abort as exc:
        # click turns EOFError into Abort as well as Ctrl-C; convbench never prompts, so
        # an EOFError is a reader's bug (a truncated gzip file was one) and keeps its
        # traceback instead of passing for an interrupt (exit 130)
        if isinstance(exc.__context__, EOFError):
            raise exc.__context__ from None
        click.echo("convbench: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except ConvbenchError as exc:
        # one line, whatever the message quotes (a path or layer name with a newline or
        # an escape sequence in it)
        click.echo(f"convbench: error: {one_line(str(exc), 2000)}", err=True)
        sys.exit(exc.exit_code)
    sys.exit(rv if isinstance(rv, int) else 0)
