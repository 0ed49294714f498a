"""Step 4's data box: where the samples are, what shapes they have, and how odd ones are adapted.

The box holds the folder typed by the user, a note on the profiles taken from
the data (see :mod:`trtwidgets.core.recipe.data_defaults`), and, for each input
whose samples do not all have the calibration opt shape, a pad / truncate /
resize choice with a one-line explanation of each. It computes nothing: the
app asks the core and calls :meth:`DataBox.show`.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Mapping, Optional, Sequence

import ipywidgets as widgets

from ..core.model.dim_text import shape_text
from ..core.recipe.data_defaults import ADAPT_CHOICES
from .html import esc

#: The adaptation offered first: the one that works for samples of any size.
DEFAULT_ADAPT = "resize"


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
