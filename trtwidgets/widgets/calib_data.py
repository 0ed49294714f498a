"""Step 4's data box: where the samples are, what shapes they have, and how odd ones are adapted.

The box holds the folder typed by the user, a note on the profiles taken from
the data (see :mod:`trtwidgets.core.recipe.data_defaults`), and, for each input
whose samples do not all have the calibration opt shape, a pad / truncate /
resize choice with a one-line explanation of each. It computes nothing: the
step asks the core and calls :meth:`DataBox.show`.

:class:`CalibrateStep` is the App's *Calibrate* tab: the data box, the held-back folder beside
it, the sample count and the button that collects statistics into the session, and their summary.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import ipywidgets as widgets

from ..core.model.dim_text import shape_text
from ..core.recipe.data_defaults import ADAPT_CHOICES
from .app_tabs import calibration_html, held_back_html
from .html import esc
from .step import StepWidget

#: The adaptation offered first: the one that works for samples of any size.
DEFAULT_ADAPT = "resize"
#: The core's mismatch error names a Python argument; in the app the choice is a control.
_MISMATCH = re.compile(r"Input '(?P<name>[^']+)'[^:]*: shape (?P<shape>[\dx]+) differs")
_PYTHON_FIX = re.compile(r"Choose adapt=\{.*?\}")


class DataBox(widgets.VBox):
    """The calibration data of step 4.

    Attributes
    ----------
    path : ipywidgets.Text
        A folder of ``.npy``/``.npz`` samples or images, or ``demo``; read on Enter or when it loses focus.
    note : ipywidgets.HTML
        What the data set (profiles from its shapes), in a sentence.
    adapt : dict
        Input name -> ToggleButtons (``pad``, ``truncate``, ``resize``), only for inputs whose
        samples differ from the opt shape.
    adapt_box : ipywidgets.VBox
    """

    def __init__(self, **kwargs):
        self.path = widgets.Text(placeholder="folder of .npy/.npz samples or images, or 'demo'", description="Data",
                                 continuous_update=False, layout=widgets.Layout(width="520px"))
        self.note = widgets.HTML()
        self.adapt: Dict[str, widgets.ToggleButtons] = {}
        self.adapt_box = widgets.VBox()
        self._callbacks: List[Callable[[Dict[str, str]], None]] = []
        super().__init__([self.path, self.note, self.adapt_box], **kwargs)

    @property
    def adapt_value(self) -> Dict[str, str]:
        """Input name -> the adaptation chosen."""
        return {name: w.value for name, w in self.adapt.items()}

    def on_adapt(self, callback: Callable[[Dict[str, str]], None]) -> None:
        """Call ``callback(adapt_value)`` when an adaptation is chosen."""
        self._callbacks.append(callback)

    def show(self, note: str = "", mismatched: Optional[Mapping[str, Sequence[Sequence[int]]]] = None,
             opt_shapes: Optional[Mapping[str, Sequence[int]]] = None, chosen: Optional[Mapping[str, str]] = None
             ) -> None:
        """Show the data's note and one adaptation choice per mismatched input.

        Parameters
        ----------
        note : str
            Plain text (escaped here).
        mismatched : mapping
            Input name -> sample shapes that differ from its opt shape.
        opt_shapes : mapping
            Input name -> the calibration opt shape.
        chosen : mapping
            Input name -> the adaptation already in the recipe (kept).
        """
        mismatched = dict(mismatched or {})
        chosen = dict(chosen or {})
        opt_shapes = dict(opt_shapes or {})
        self.note.value = (f'<div class="trtw-data-note" style="border-left:4px solid #1a73e8;padding:2px 8px;'
                           f'margin:4px 0;font-size:12px">{esc(note)}</div>') if note else ""
        rows = []
        adapt = {}
        for name, shapes in mismatched.items():
            value = chosen.get(name) or self.adapt.get(name, None) and self.adapt[name].value or DEFAULT_ADAPT
            buttons = widgets.ToggleButtons(options=list(ADAPT_CHOICES), value=value,
                                            tooltips=[ADAPT_CHOICES[m] for m in ADAPT_CHOICES],
                                            style={"button_width": "80px"})
            buttons.observe(self._changed, names="value")
            adapt[name] = buttons
            seen = ", ".join(shape_text(s) for s in list(shapes)[:4]) + (" ..." if len(shapes) > 4 else "")
            head = (f"<b>Samples of another shape</b> for input <code>{esc(name)}</code>: {esc(seen)}; calibration "
                    f"runs at the opt shape {esc(shape_text(opt_shapes.get(name, ())))}. Bring them to it by:")
            explain = "".join(f"<li>{esc(text)}</li>" for text in ADAPT_CHOICES.values())
            rows.append(widgets.VBox([widgets.HTML(head), buttons,
                                      widgets.HTML(f"<ul style='margin:0;font-size:12px'>{explain}</ul>")],
                                     layout=widgets.Layout(border_left="4px solid #e37400", padding="2px 8px",
                                                           margin="4px 0")))
        self.adapt = adapt
        self.adapt_box.children = rows

    def _changed(self, change=None) -> None:
        for cb in self._callbacks:
            cb(self.adapt_value)


class CalibrateStep(StepWidget):
    """The App's *Calibrate* tab: collect activation statistics into the session.

    Typing a folder in the data box (Enter, or leaving the box) reads the data's shapes at
    once, so the profiles show them before calibrating (:meth:`use_data`).

    Parameters
    ----------
    session : Session

    Attributes
    ----------
    data_box : DataBox
    data_path : ipywidgets.Text
        The data box's folder field.
    held_back_path : ipywidgets.Text
        Held-back samples (a folder kept out of calibration): the Plan step measures accuracy on them
        and the explorer checks its Q/DQ export on them. Empty: the Plan step holds back a seeded
        share of the data (the plan lists which files).
    held_back_note : ipywidgets.HTML
        What the held-back data is.
    max_samples : ipywidgets.BoundedIntText
        At most this many samples (0: all).
    calibrate_button : ipywidgets.Button
    calibrate_output : ipywidgets.Output
        Where the progress bar renders.
    calibration_view : ipywidgets.HTML
        The statistics collected, and the tensors with the lowest SQNR.
    """

    def __init__(self, session, **kwargs):
        self.data_box = DataBox()
        self.data_path = self.data_box.path
        self.held_back_path = widgets.Text(placeholder="held-back folder (optional)", description="Held back",
                                           continuous_update=False, layout=widgets.Layout(width="420px"))
        self.held_back_note = widgets.HTML()
        self.max_samples = widgets.BoundedIntText(value=0, min=0, max=10 ** 9, description="Samples (0: all)",
                                                  style={"description_width": "initial"},
                                                  layout=widgets.Layout(width="220px"))
        self.calibrate_button = widgets.Button(description="Collect statistics", button_style="primary", icon="play")
        self.calibrate_output = widgets.Output()  # tqdm's progress bar renders here
        self.calibration_view = widgets.HTML()
        self._late_mismatch: dict = {}  # inputs whose odd samples only the calibration found (past the peek)
        super().__init__(session, [
            widgets.HTML("Runs the float model with ONNX Runtime on the CPU over the calibration data, at the "
                         "calibration profile's opt shapes, and keeps a histogram of every activation."),
            widgets.HBox([self.data_path, self.max_samples, self.calibrate_button]),
            self.data_box.note, self.data_box.adapt_box, self.held_back_path, self.held_back_note,
            self.calibrate_output, self.calibration_view], **kwargs)
        self.calibrate_button.on_click(lambda _: self.calibrate())
        self.data_path.observe(lambda c: self._data_typed(c["new"]), names="value")
        self.held_back_path.observe(lambda c: self._held_back_typed(c["new"]), names="value")
        self.data_box.on_adapt(self._adapt_chosen)
        session.observe(self._on_recipe, names=["recipe"])
        session.observe(self._on_calibration, names=["calibration"])
        session.observe(self._on_held_back, names=["held_back", "model"])
        self._on_recipe()
        self._on_calibration()
        self._on_held_back()

    # ------------------------------------------------------------------ actions

    def use_data(self, data: Any) -> bool:
        """Calibrate on ``data`` (a folder, ``"demo"`` or a spec): open profile dims take its shapes, said in a note.

        Where samples differ from the opt shape, the data box offers pad / truncate / resize.
        Unreadable data is refused with a clear error; the recipe stays.
        """
        ok = self.session.use_data(data)
        if ok:
            self._late_mismatch = {}
        self.show_error("" if ok else self.session.error)
        self.render_data()
        return ok

    def use_held_back(self, folder: Any) -> bool:
        """Hold back the samples of ``folder`` ('' for none): the Plan step and the explorer's export check use them.

        The field shows it; an unreadable folder is refused with a clear error, and the previous one stays.
        """
        text = "" if folder is None else str(folder).strip()
        ok = self.session.use_held_back(text)
        self.show_error("" if ok else self.session.error)
        if ok:
            self._on_held_back()
        else:
            with self.quietly():
                self.held_back_path.value = text  # kept as typed, to be corrected
        return ok

    def calibrate(self, data: Any = None, max_samples: Optional[int] = None, progress: bool = True) -> bool:
        """Collect statistics with the data in the data field (or ``data``); its notes are shown in the step."""
        s = self.session
        text = self.data_path.value.strip()
        if data is None and text and text != self.recipe_data_text() and not self.use_data(text):
            return False
        n = max_samples if max_samples is not None else (self.max_samples.value or None)
        self.calibrate_button.disabled = True
        self.calibrate_output.clear_output()
        try:
            with self.calibrate_output, self.noting("While collecting statistics"):
                ok = s.calibrate(data=data, progress=progress, max_samples=n)
        finally:
            self.calibrate_button.disabled = False
        if not ok:
            self.show_error(self._mismatch_in_app(s.error))
            return False
        self.show_error("")
        self._on_calibration()
        return True

    def recipe_data_text(self) -> str:
        """The recipe's calibration data as the data field shows it ('' when none)."""
        spec = self.session.calibration_data
        if spec is None:
            return ""
        return spec.path or spec.kind

    def render_data(self) -> None:
        """The data box: the note on profiles from the data, and an adaptation choice per mismatched input."""
        from ..core.recipe.data_defaults import mismatched_inputs

        s = self.session
        spec = s.calibration_data
        opt = {} if s.recipe is None else dict(s.recipe.calibration_shapes)
        chosen = {} if spec is None else dict(spec.adapt)
        odd = mismatched_inputs(opt, s.data_shapes) if spec is not None else {}
        odd.update({k: v for k, v in self._late_mismatch.items() if k in opt and k not in odd})
        with self.quietly():
            self.data_box.show(s.data_note if spec is not None else "", odd, opt, chosen)
        missing = {k: v for k, v in self.data_box.adapt_value.items() if chosen.get(k) != v}
        if missing and spec is not None:
            # The choice shown is the one used: a mismatch never waits for a click the user cannot see.
            s.set_adapt(dict(spec.adapt, **missing))

    # ------------------------------------------------------------------ handlers

    def _on_recipe(self, change=None) -> None:
        if self.session.recipe is None:
            return
        with self.quietly():
            self.data_path.value = self.recipe_data_text()
        self.render_data()

    def _on_calibration(self, change=None) -> None:
        if self.session.stats is not None:
            self.calibration_view.value = calibration_html(self.session)

    def _on_held_back(self, change=None) -> None:
        s = self.session
        with self.quietly():
            self.held_back_path.value = s.held_back
        self.held_back_note.value = held_back_html(s.held_back, s.model is not None)

    def _held_back_typed(self, text: str) -> None:
        # Enter or leaving the box: check the folder now, so the Plan step and the explorer use it.
        if not self.quiet and (text or "").strip() != self.session.held_back:
            self.use_held_back(text)

    def _data_typed(self, text: str) -> None:
        # Enter or leaving the box: read the data's shapes now, so the profiles show them before calibrating.
        text = (text or "").strip()
        if not self.quiet and text and text != self.recipe_data_text() and self.session.model is not None:
            self.use_data(text)

    def _adapt_chosen(self, adapt) -> None:
        if not self.quiet and not self.session.set_adapt(adapt):
            self.show_error(self.session.error)

    def _mismatch_in_app(self, message: str) -> str:
        """The core's shape-mismatch error, pointing at the data box's control instead of a Python argument."""
        found = _MISMATCH.search(message or "")
        if not found:
            return message
        shape = tuple(int(d) for d in found.group("shape").split("x"))
        self._late_mismatch[found.group("name")] = (shape,)
        self.render_data()
        return _PYTHON_FIX.sub("Choose pad, truncate or resize under the data box (resize is selected now), then "
                               "collect again", message)
