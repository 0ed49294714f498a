"""What every tab of the App shares: the session, a quiet switch, and one way to report an error.

A step is one tab of :class:`~trtwidgets.widgets.app.App` (Load, Flags, Profiles,
Calibrate, Plan, Build, Inspect, Explore): a widget that owns its child widgets and
its handlers and talks only to the shared :class:`~trtwidgets.widgets.session.Session`.
Steps never call each other: the App composes them and wires the few events that
cross tabs (one error panel for all, the inspected build, the open tab). That an
earlier step's change makes later results stale is the Session's business
(:attr:`Session.stale`), not a step's.

What the core says while a step works (a file skipped, ONNX Runtime's errors and warnings, see
:mod:`trtwidgets.core.common.notes`) is shown in the step itself (:meth:`StepWidget.noting`), not
only in the server's log.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, List, Sequence

import ipywidgets as widgets
import traitlets

from ..core.common.errors import UserError
from .html import esc


def notes_html(notes: Sequence[str], head: str = "Notes") -> str:
    """Notes as an escaped list ('' when there are none)."""
    if not notes:
        return ""
    items = "".join(f"<li>{esc(n)}</li>" for n in notes)
    return (f'<div class="trtw-notes" style="border-left:4px solid #1a73e8;padding:2px 8px;margin:4px 0;'
            f'font-size:12px"><b>{esc(head)}</b><ul style="margin:2px 0">{items}</ul></div>')


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
    notes_view : ipywidgets.HTML
        The notes of the step's last action (the last child of the step).
    notes : list of str
        Those notes.
    """

    quiet = traitlets.Bool(False)

    def __init__(self, session, children: Sequence[widgets.Widget] = (), **kwargs):
        self.session = session
        self._error_callbacks: List[Callable[[Any], None]] = []
        self.notes: List[str] = []
        self.notes_view = widgets.HTML()
        super().__init__(list(children) + [self.notes_view], **kwargs)

    # ------------------------------------------------------------------ notes

    @contextlib.contextmanager
    def noting(self, action: str = "") -> Iterator[List[str]]:
        """Collect the notes made inside the block (this thread) and show them in the step afterwards.

        They still reach the log as before (:func:`~trtwidgets.core.common.notes.collect_notes`).
        ``action`` names what made them ("While collecting statistics").
        """
        from ..core.common.notes import collect_notes

        with collect_notes() as found:
            try:
                yield found
            finally:
                self.show_notes(found, action)

    def show_notes(self, notes: Sequence[str], action: str = "") -> None:
        """Show ``notes`` (replacing the previous action's; none clears the panel)."""
        self.notes = list(notes)
        self.notes_view.value = notes_html(self.notes, f"{action}:" if action else "Notes")

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
