"""Step 1 widget: pick an ONNX model, see its summary and lint findings.

Thin: loading and lint happen in :class:`~trtwidgets.widgets.session.Session`
(which calls :mod:`trtwidgets.core`); this module only renders the session.
:class:`LoadStep` is the App's first tab: the loader, and saving or loading the recipe.
"""

from __future__ import annotations

import os
from typing import Callable, List, Optional

import ipywidgets as widgets

from ..core.common.errors import UserError
from .html import error_html, esc, findings_html, summary_html
from .session import Session
from .step import StepWidget


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


class LoadStep(StepWidget):
    """The App's *Load* tab: the :class:`ModelLoader`, and the recipe saved or loaded as JSON.

    Parameters
    ----------
    session : Session
    path : str
        Initial text of the model path box.
    out_dir : str
        Where :meth:`save_recipe` writes ``recipe.json`` when no path is given.

    Attributes
    ----------
    loader : ModelLoader
    recipe_path : ipywidgets.Text
    save_recipe_button, load_recipe_button : ipywidgets.Button
    recipe_status : ipywidgets.HTML
        Where the recipe was saved (with the command that re-runs it) or loaded from.
    """

    def __init__(self, session: Session, path: str = "", out_dir: str = ".", **kwargs):
        self.out_dir = out_dir
        self.loader = ModelLoader(session, path=path)
        self.recipe_path = widgets.Text(placeholder="recipe.json", description="Recipe",
                                        layout=widgets.Layout(width="420px"))
        self.save_recipe_button = widgets.Button(description="Save recipe", icon="save")
        self.load_recipe_button = widgets.Button(description="Load recipe", icon="folder-open")
        self.recipe_status = widgets.HTML()
        self._loaded: List[Callable[[], None]] = []
        super().__init__(session, [self.loader, widgets.HBox([self.recipe_path, self.save_recipe_button,
                                                              self.load_recipe_button]), self.recipe_status],
                         **kwargs)
        self.save_recipe_button.on_click(lambda _: self.save_recipe())
        self.load_recipe_button.on_click(lambda _: self.load_recipe())

    def load(self, path: Optional[str] = None) -> bool:
        """Load a model (default: the path in the loader)."""
        return self.loader.load(path)

    def on_recipe_loaded(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` after a recipe file was loaded (the data it names has its own note)."""
        self._loaded.append(callback)

    def save_recipe(self, path: Optional[str] = None) -> Optional[str]:
        """Save the session's recipe as JSON (default: the path in the recipe field, else ``out_dir/recipe.json``)."""
        path = path or self.recipe_path.value.strip() or os.path.join(self.out_dir, "recipe.json")
        written = self.session.save_recipe(path)
        if written is None:
            self.show_error(self.session.error)
        else:
            self.recipe_status.value = f"saved to <code>{esc(written)}</code>; re-run it with " \
                                       f"<code>trtwidgets run {esc(written)} --report report.html</code>"
        return written

    def load_recipe(self, path: Optional[str] = None) -> bool:
        """Load a recipe JSON (and its model); nothing is lost when it is bad."""
        path = path or self.recipe_path.value.strip()
        if not path:
            self.show_error(UserError("No recipe file given.", None, "Type the path of a recipe.json."))
            return False
        ok = self.session.load_recipe(path)
        if not ok:
            self.show_error(self.session.error)
            return False
        self.recipe_status.value = f"loaded <code>{esc(path)}</code>"
        for callback in self._loaded:
            callback()
        return True
