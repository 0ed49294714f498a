"""What every tab of the App shares: the session, a quiet switch, and one way to report an error.

A step is one tab of :class:`~trtwidgets.widgets.app.App` (Load, Flags, Profiles,
Calibrate, Plan, Build, Inspect, Explore): a widget that owns its child widgets and
its handlers and talks only to the shared :class:`~trtwidgets.widgets.session.Session`.
Steps never call each other: the App composes them and wires the few events that
cross tabs (one error panel for all, the inspected build, the open tab). That an
earlier step's change makes later results stale is the Session's business
(:attr:`Session.stale`), not a step's.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, List, Sequence

import ipywidgets as widgets
import traitlets

from ..core.common.errors import UserError


class StepWidget(widgets.VBox):
    """Base of the App's steps.

    Parameters
    ----------
    session : Session
        The shared session.
    children : sequence of Widget
        What the step shows.

    Attributes
    ----------
    session : Session
    quiet : bool
        True while the step shows the session's state in its controls: their change
        events are then not the user's, and must not be written back to the session.
    """

    quiet = traitlets.Bool(False)

    def __init__(self, session, children: Sequence[widgets.Widget] = (), **kwargs):
        self.session = session
        self._error_callbacks: List[Callable[[Any], None]] = []
        super().__init__(list(children), **kwargs)

    # ------------------------------------------------------------------ errors

    def on_error(self, callback: Callable[[Any], None]) -> None:
        """Call ``callback(error)`` when the step has an error to show (``""``: the last action worked)."""
        self._error_callbacks.append(callback)

    def show_error(self, err: Any) -> None:
        """Report ``err`` (a UserError, a message, or ``""`` to clear) to whoever shows errors."""
        for callback in self._error_callbacks:
            callback(err)

    # ------------------------------------------------------------------ session <-> controls

    @contextlib.contextmanager
    def quietly(self) -> Iterator[None]:
        """Within the block, the step's controls change without writing back to the session."""
        before = self.quiet
        self.quiet = True
        try:
            yield
        finally:
            self.quiet = before

    def apply(self, picker: Any) -> bool:
        """Write a picker's choice into the session's recipe (``picker.to_recipe(recipe)``).

        Ignored while :attr:`quiet` or without a model; a refused recipe is reported
        with :meth:`show_error` and the session keeps its recipe.
        """
        s = self.session
        if self.quiet or s.model is None:
            return False
        try:
            new = picker.to_recipe(s.recipe or s.default_recipe())
        except UserError as err:
            self.show_error(err)
            return False
        ok = s.set_recipe(new)
        self.show_error("" if ok else s.error)
        return ok
