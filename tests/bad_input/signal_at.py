"""Run the real ``trtwidgets`` CLI and send it a real signal at a point of its writing that can be named.

``python -m tests.bad_input.signal_at CALL N SIGNAL WATCH -- trtwidgets-args...``

The N-th call of ``CALL`` (``fdopen``: a temporary file was just created, nothing written yet;
``replace``: a complete temporary file is about to be moved into place; ``rename``: a folder is
about to be renamed; ``rmtree``: a folder is about to be removed) whose path lies under the
folder ``WATCH`` sends ``SIGNAL`` (``INT``, ``TERM`` or ``KILL``) to this very process, just before
the call. ``import`` is the N-th import of a module whose name starts with ``WATCH`` (the command
line's first seconds: Python loading the package, the parser importing each command's module); with
``-- -m trtwidgets ARGS`` the package runs as ``python -m trtwidgets`` does, else as the console
script does (``trtwidgets.cli.main``). Nothing of the code under test is replaced: the OS calls are passed through
unchanged, so what follows (Python's SIGINT handler, the CLI's SIGTERM handler, or an instant
death by SIGKILL) is what a user's Ctrl-C or ``kill`` at that moment would cause. Polling from
outside cannot hit a window of a millisecond reliably; this can.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys


class _ImportSignal:
    """A meta path finder that finds nothing and sends the signal at the N-th import under a name prefix."""

    def __init__(self, n: int, signum: int, prefix: str):
        self.n, self.signum, self.prefix, self.seen = n, signum, prefix, 0

    def find_spec(self, name, path=None, target=None):
        if name.startswith(self.prefix) and name not in sys.modules:
            self.seen += 1
            if self.seen == self.n:
                os.kill(os.getpid(), self.signum)
        return None


def _arm(call: str, n: int, signum: int, watch: str) -> None:
    if call == "import":
        sys.meta_path.insert(0, _ImportSignal(n, signum, watch))
        return
    counter = {"n": 0}
    module, name = (shutil, "rmtree") if call == "rmtree" else (os, call)
    real = getattr(module, name)
    watch = os.path.realpath(watch)

    def under_watch(args) -> bool:
        return any(isinstance(a, (str, os.PathLike)) and os.path.realpath(os.fspath(a)).startswith(watch)
                   for a in args)

    def wrapped(*args, **kwargs):
        # fdopen gets a descriptor: it is watched when its file lies under WATCH (read from /proc).
        paths = [os.readlink(f"/proc/self/fd/{args[0]}")] if call == "fdopen" else args
        if under_watch(paths):
            counter["n"] += 1
            if counter["n"] == n:
                os.kill(os.getpid(), signum)
        return real(*args, **kwargs)

    setattr(module, name, wrapped)


def main(argv) -> int:
    call, n, sig, watch = argv[0], int(argv[1]), argv[2], argv[3]
    assert argv[4] == "--"
    _arm(call, n, getattr(signal, f"SIG{sig}"), watch)
    if argv[5:7] == ["-m", "trtwidgets"]:
        import runpy

        sys.argv = ["trtwidgets"] + argv[7:]
        runpy.run_module("trtwidgets", run_name="__main__", alter_sys=True)  # ends with sys.exit
        return 0
    from trtwidgets.cli import main as cli

    return cli(argv[5:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
