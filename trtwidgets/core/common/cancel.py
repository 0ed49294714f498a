"""Stopping long work from another thread: a cancel token, checked between units of work and inside ORT runs.

A cancel token is anything with ``is_set()`` (a :class:`threading.Event`).
Work that can be stopped runs inside :func:`cancel_scope`: :func:`check` between units of work raises
:class:`Cancelled` once the token is set, and an ONNX Runtime run in flight (through
:class:`~.ort.OrtSession`) is stopped by ORT's own terminate flag, so a cancel takes effect within a
fraction of a second even in the middle of a long run on a slow machine.

:class:`Cancelled` is a :class:`KeyboardInterrupt`: work that keeps what it found on Ctrl-C keeps it on a
cancel too, and no ``except Exception`` swallows it.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator, Optional, Set

__all__ = ["Cancelled", "cancel_scope", "check", "cancelled", "run_options"]

#: How often (seconds) the watcher looks at the token while work is in flight.
POLL_S = 0.05

_local = threading.local()


class Cancelled(KeyboardInterrupt):
    """The work was cancelled through its cancel token (a KeyboardInterrupt: kept-so-far handling applies)."""


class _Scope:
    """The token of this thread's stoppable work, and the ORT runs in flight that a cancel terminates."""

    def __init__(self, token) -> None:
        self.token = token
        self.lock = threading.Lock()
        self.in_flight: Set[Any] = set()
        self.done = threading.Event()

    def watch(self) -> None:
        while not self.done.wait(POLL_S):
            if self.token.is_set():
                self.terminate()
                return

    def terminate(self) -> None:
        with self.lock:
            for opts in self.in_flight:
                opts.terminate = True


def _scope() -> Optional[_Scope]:
    return getattr(_local, "scope", None)


@contextmanager
def cancel_scope(token) -> Iterator[None]:
    """Make ``token`` (None: nothing to watch) the cancel token of the work this thread does inside the block.

    A watcher thread terminates ORT runs in flight once the token is set; it ends with the block.
    """
    if token is None:
        yield
        return
    if not callable(getattr(token, "is_set", None)):
        from .errors import UserError

        raise UserError(f"cancel= takes a token with is_set() (a threading.Event), not a {type(token).__name__}.",
                        "The work checks the token between units of work.",
                        "Pass a threading.Event() and call its set() to stop the work.")
    outer = _scope()
    scope = _Scope(token)
    _local.scope = scope
    watcher = threading.Thread(target=scope.watch, name="trtwidgets-cancel", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        scope.done.set()
        watcher.join()
        _local.scope = outer


def cancelled() -> bool:
    """Whether this thread's cancel token (if any) is set."""
    scope = _scope()
    return scope is not None and bool(scope.token.is_set())


def check() -> None:
    """Raise :class:`Cancelled` when this thread's cancel token is set (a no-op outside :func:`cancel_scope`)."""
    if cancelled():
        raise Cancelled()


@contextmanager
def run_options(ort) -> Iterator[Optional[Any]]:
    """ORT ``RunOptions`` that a cancel terminates (None outside a cancel scope: run as usual).

    A run that ORT stopped because of the cancel raises :class:`Cancelled` on the caller's side
    (see :meth:`~.ort.OrtSession.run`).
    """
    scope = _scope()
    if scope is None:
        yield None
        return
    check()
    opts = ort.RunOptions()
    with scope.lock:
        scope.in_flight.add(opts)
        if scope.token.is_set():  # set between check() and here: the watcher may have gone already
            opts.terminate = True
    try:
        yield opts
    finally:
        with scope.lock:
            scope.in_flight.discard(opts)
