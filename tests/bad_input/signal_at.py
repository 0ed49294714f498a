"""Run the real ``trtwidgets`` CLI and send it a real signal at a point of its writing that can be named.

``python -m tests.bad_input.signal_at CALL N SIGNAL WATCH -- trtwidgets-args...``

The N-th call of ``CALL`` (``fdopen``: a temporary file was just created, nothing written yet;
``replace``: a complete temporary file is about to be moved into place; ``rename``: a folder is
about to be renamed; ``rmtree``: a folder is about to be removed) whose path lies under the
folder ``WATCH`` sends ``SIGNAL`` (``INT``, ``TERM`` or ``KILL``) to this very process, just before
the call. Nothing of the code under test is replaced: the OS calls are passed through
unchanged, so what follows (Python's SIGINT handler, the CLI's SIGTERM handler, or an instant
death by SIGKILL) is what a user's Ctrl-C or ``kill`` at that moment would cause. Polling from
outside cannot hit a window of a millisecond reliably; this can.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys


def _arm(call: str, n: int, signum: int, watch: str) -> None:
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
    from trtwidgets.cli import main as cli

    return cli(argv[5:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
