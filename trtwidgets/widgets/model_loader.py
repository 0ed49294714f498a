"""Step 1 widget: pick an ONNX model, see its summary and lint findings.

Thin: loading and lint happen in :class:`~trtwidgets.widgets.session.Session`
(which calls :mod:`trtwidgets.core`); this module only renders the session.
"""

from __future__ import annotations

from typing import Optional

import ipywidgets as widgets

from .html import error_html, findings_html, summary_html
from .session import Session


class ModelLoader(widgets.VBox):
    """Path entry + Load button, the model summary, the lint findings and an error panel.

    Parameters
    ----------
    session : Session, optional
        The shared session (a new one if omitted).
    path : str, optional
        Initial text of the path box.
    """

    def __init__(self, session: Optional[Session] = None, path: str = "", **kwargs):
        self.session = session if session is not None else Session()
        self.path = widgets.Text(value=str(path), placeholder="path/to/model.onnx", description="Model",
                                 layout=widgets.Layout(width="70%"))
        self.load_button = widgets.Button(description="Load", button_style="primary", icon="folder-open")
        self.error = widgets.HTML()
        self.summary = widgets.HTML()
        self.findings = widgets.HTML()
        super().__init__([widgets.HBox([self.path, self.load_button]), self.error, self.summary, self.findings],
                         **kwargs)
        self.load_button.on_click(lambda _: self.load())
        self.session.observe(self._render, names=["model", "findings", "error"])
        self._render()

    def load(self, path: Optional[str] = None) -> bool:
        """Load ``path`` (or the path box's text) into the session."""
        if path is not None:
            self.path.value = str(path)
        self.load_button.disabled = True
        self.load_button.description = "Loading…"
        try:
            return self.session.load(self.path.value.strip())
        finally:
            self.load_button.disabled = False
            self.load_button.description = "Load"

    def _render(self, change=None):
        s = self.session
        with self.hold_sync():
            self.error.value = error_html(s.error)
            self.summary.value = summary_html(s.model.summary) if s.model is not None else ""
            self.findings.value = findings_html(s.findings) if s.model is not None else ""
