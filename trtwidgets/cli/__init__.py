"""``trtwidgets`` command line.

Each sub-command is a module of this package that defines ``NAME`` (the command
word), ``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``.
Modules are discovered, so a new command is one new file. Only the chosen
command's module is imported, keeping ``trtwidgets lint`` free of pandas,
plotly and TensorRT start-up costs.

A module may also define ``OUTPUTS = {"dest": "file" | "dir"}``: the options that
name what it writes, and ``OUTPUT_FILES = {"dest": ("name", ...)}``: the files it
writes inside an output folder. They follow one rule (see :mod:`._outputs` and
:mod:`trtwidgets.core.common.write_rule`): a missing parent folder is created and said
so on stderr; a path that cannot be written, or whose writing would replace an input
of the run or something other than a regular file, is refused with exit 2 before any
work starts. SIGTERM stops a command as Ctrl-C does (exit 130, temporary files removed).

Exit codes: 0 success, 1 the command found problems (e.g. lint errors), 2 bad
input (the explanation goes to stderr, never a traceback), 130 interrupted.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import pkgutil
import sys
from typing import Dict, List, Optional, Tuple

from ..core.common.errors import UserError
from ..core.common.notes import notes_to

EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


def _command_modules():
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            yield info.name


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with one sub-parser per command module."""
    from .. import __version__

    parser = argparse.ArgumentParser(prog="trtwidgets", description="Exploratory TensorRT quantization, headless.")
    parser.add_argument("--version", action="version", version=f"trtwidgets {__version__}")
    # No command given: nothing to run (the subparsers set these for their own commands).
    parser.set_defaults(_run=None, _outputs={}, _output_files={}, _positionals=())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for modname in _command_modules():
        mod = importlib.import_module(f"{__name__}.{modname}")
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=getattr(mod, "DESCRIPTION", mod.HELP))
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run, _outputs=dict(getattr(mod, "OUTPUTS", {})),
                       _output_files=dict(getattr(mod, "OUTPUT_FILES", {})),
                       _positionals=tuple(a.dest for a in p._actions if not a.option_strings))
    return parser


#: Two-word spellings of a command: ``trtwidgets plan measure DIR`` is ``trtwidgets plan-measure DIR``.
ALIASES: Dict[Tuple[str, ...], str] = {("plan", "measure"): "plan-measure", ("plan", "export"): "plan-export"}



def _aliased(argv: List[str]) -> List[str]:
    return [ALIASES[tuple(argv[:2])]] + argv[2:] if tuple(argv[:2]) in ALIASES else argv


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the ``trtwidgets`` console script.

    Everything it prints goes through :func:`._terminal.safe_streams`: names from the user's files reach the
    terminal with their control characters escaped (and undecodable bytes of file names as ``\\xff``), a
    terminal encoding without ``×`` does not fail, and a closed standard output (``>&-``) discards what is
    printed instead of failing after the work is done.
    """
    try:
        from ._terminal import open_standard_descriptors, safe_streams

        open_standard_descriptors()
        with safe_streams():
            return _main(argv)
    except KeyboardInterrupt:
        # Ctrl-C before a command's own handler is in place (imports, building the parser): one line, no traceback.
        return interrupted_at_start()


def interrupted_at_start() -> int:
    """Say that Ctrl-C came before the command started (nothing was written); the exit status 130."""
    try:
        print("trtwidgets: interrupted before the command started; nothing was written.", file=sys.stderr)
    except (OSError, ValueError, KeyboardInterrupt):  # a closed stderr, or a second Ctrl-C: the status says it
        pass
    return EXIT_INTERRUPTED


def _check_working_folder() -> None:
    """Refuse to start in a current folder that was deleted: every relative path would fail, some after the work."""
    try:
        os.getcwd()
    except OSError as exc:
        raise UserError("The current folder no longer exists (it was deleted or moved after this shell entered it).",
                        f"Relative paths are found from the current folder, and it is gone ({exc.strerror or exc}).",
                        "cd to an existing folder (e.g. `cd ~`), then run the command again.") from None


def _main(argv: Optional[List[str]]) -> int:
    parser = build_parser()
    args = parser.parse_args(_aliased(list(sys.argv[1:] if argv is None else argv)))
    if args._run is None:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    from ._outputs import check_outputs, created_notes

    to_create = {}
    restore = _sigterm_interrupts()
    try:
        _check_working_folder()
        to_create = check_outputs(args, args._outputs, args._output_files)
        _absolute_outputs(args, args._outputs)
        with notes_to(_note_printer()):
            code = int(args._run(args) or 0)
        # Flush here so that a reader that went away (``| head -1``) is noticed inside this try, not at exit.
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        return _reader_gone()
    except UserError as err:
        print(f"trtwidgets {args.command}: {err.message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ModuleNotFoundError as err:  # a figure or a page on a headless install: the lab extra brings it
        from ..core.common.errors import lab_extra_missing

        missing = lab_extra_missing(err, f"trtwidgets {args.command}")
        if missing is None:
            raise
        print(f"trtwidgets {args.command}: {missing.message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        # A name given on the command line (an input's: outputs are checked before the work) that no file system
        # takes: bad input, wherever it was first used.
        print(f"trtwidgets {args.command}: {_name_too_long(exc).message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"trtwidgets {args.command}: interrupted. Files are replaced only when complete: each output is "
              "either as it was before this run or complete.", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        restore()
        for note in created_notes(args.command, to_create):
            print(note, file=sys.stderr)


def _name_too_long(exc: OSError) -> UserError:
    from ..core.common.write_rule import check_name_length

    name = exc.filename if isinstance(exc.filename, str) else ""
    try:
        check_name_length(name or ".")
    except UserError as err:  # says which name, how long, and the limit
        return err
    return UserError(f"{name or 'A path given'}: a name is longer than the file system allows.",
                     f"{exc.strerror or 'File name too long'}.", "Give a shorter name.")


def _absolute_outputs(args, outputs) -> None:
    """Each output option as an absolute path, before any code of the user's runs (a metric's module, its calls).

    Code that changes the working folder (``os.chdir``) must not move where the outputs go: ``--out p`` is ``p``
    in the folder the command was started in. Joined, not normalized: ``link/..`` keeps meaning what the OS says.
    """
    cwd = os.getcwd()
    for dest in outputs:
        value = getattr(args, dest)  # every OUTPUTS dest is an option add_arguments defines
        if isinstance(value, str) and value.strip():
            setattr(args, dest, os.path.join(cwd, os.path.expanduser(value)))


def _sigterm_interrupts():
    """Make SIGTERM (``kill``, a job scheduler) stop a command the way Ctrl-C does; returns the undo.

    Python's default for SIGTERM ends the process at once, skipping ``finally`` blocks, so a
    temporary file would stay behind and an interrupted calibration would not keep its samples.
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
        return lambda: None  # only the main thread may set handlers (tests call main() from threads)

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    return lambda: signal.signal(signal.SIGTERM, previous)


def _note_printer():
    """A sink for :func:`~trtwidgets.core.common.notes.note`: ``note: ...`` on stderr, each text once."""
    seen = set()

    def show(text: str) -> None:
        if text not in seen:
            seen.add(text)
            print(f"note: {text}", file=sys.stderr)

    return show


def _reader_gone() -> int:
    # The reader of stdout closed the pipe (``trtwidgets ... | head -1``): it has what it wanted, so this is no
    # error. Point stdout at devnull so that Python's flush at exit does not raise BrokenPipeError again.
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # a replaced stdout (tests, notebooks) has no descriptor
        return EXIT_OK
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
