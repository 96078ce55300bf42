"""Help that teaches: every option says what it does, no reST markup shows,
and ``batch --help`` shows what a line of its input and of its output is."""

from __future__ import annotations

import click
from click.testing import CliRunner

from ferret.cli.main import cli


def _commands(command: click.Command, path: tuple[str, ...] = ()):
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield path, command


def test_every_option_of_every_command_has_help():
    missing = [(" ".join(path), option.opts[0]) for path, command in _commands(cli) for option in command.params
               if isinstance(option, click.Option) and not option.hidden and not option.help]
    assert missing == []


def test_no_help_shows_rest_markup():
    for path, _ in _commands(cli):
        shown = CliRunner().invoke(cli, [*path, "--help"]).output
        assert "``" not in shown and ":func:" not in shown, path


def test_batch_help_shows_an_input_line_and_an_output_line():
    shown = CliRunner().invoke(cli, ["batch", "--help"]).output
    assert '{"query": "when is the dinner with Anna?", "namespace": "alice",' in shown
    assert '{"line":1,"job_id":"fr-r-...","request_id":"q-17","status":"ok",' in shown


def test_loading_the_command_line_imports_neither_the_worker_nor_rq():
    """``ferret --help`` and every client command load the command line: the worker's modules and RQ (a
    second of CPU before anything runs) are imported by the commands that run a worker, not by all."""
    import subprocess
    import sys

    probe = ("import sys; import ferret.cli.main; "
             "print(sorted(m for m in sys.modules if m.startswith(('ferret.worker', 'ferret.rq_layer', 'rq')) "
             "and m != 'ferret.rq_layer'))")
    imported = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert imported.stdout.strip() == "[]", imported.stdout
