"""The App's *Explore* tab: the calibration explorer of the session's statistics, made when it is seen.

The :class:`~trtwidgets.widgets.calib_explorer.CalibrationExplorer` holds three figures
and takes a few seconds to draw, so the tab makes it when it is opened (or when new
statistics arrive while it is open), not on every calibration. Its own module because
the explorer's is already long.
"""

from __future__ import annotations

import os
from typing import Any, Optional

import ipywidgets as widgets
import traitlets

from ..core.common.errors import UserError
from .app_tabs import CALIBRATE
from .step import StepWidget

#: The calibration explorer's Q/DQ model, in the app's output folder.
QDQ_NAME = "model.qdq.onnx"


class ExploreStep(StepWidget):
    """The calibration explorer, or a note saying why it is not drawn yet.

    Parameters
    ----------
    session : Session
    out_dir : str
        The explorer writes its calibration cache (unless the recipe names one) and its
        Q/DQ model (:data:`QDQ_NAME`) here.

    Attributes
    ----------
    explorer : CalibrationExplorer or None
        None until the tab was opened with statistics in the session. It draws TensorRT's
        own amax when a session build was calibrated by TensorRT.
    active : bool
        Whether the tab is open (set by the App).
    """

    active = traitlets.Bool(False)

    def __init__(self, session, out_dir: str = ".", **kwargs):
        self.out_dir = out_dir
        self.explorer: Any = None
        super().__init__(session, [widgets.HTML(f"<i>Collect statistics in step {CALIBRATE + 1} first.</i>")],
                         **kwargs)
        self.observe(self._on_active, names=["active"])
        session.observe(self._on_calibration, names=["calibration"])
        session.observe(self._on_graphs, names=["graphs"])
        if session.stats is not None:
            self._on_calibration()

    def explore(self):
        """The explorer of the session's statistics (made now if needed), or None without statistics."""
        if self.explorer is None and self.session.stats is not None:
            self._make_explorer()
        return self.explorer

    def trt_cache(self) -> Optional[str]:
        """The newest session build's cache written by TensorRT's own calibrator (its amax is drawn as a line)."""
        from ..core.engine.build_records import find_tensorrt_cache

        model = self.session.model
        return find_tensorrt_cache(self.session.builds, model.sha256 if model is not None else None)

    def _on_active(self, change) -> None:
        if change["new"] and self.explorer is None and self.session.stats is not None:
            # Three figures take a few seconds: say so first (the message reaches the page before the work).
            self.children = [widgets.HTML("<i>Drawing the explorer...</i>")]
            self._make_explorer()

    def _on_calibration(self, change=None) -> None:
        cal = self.session.calibration
        if cal is None:
            return
        stats = cal.stats
        if self.explorer is not None and self.explorer.stats is stats:
            # The same statistics, another method, percentile or overrides (set here or in another step).
            self.explorer.adopt(cal)
            return
        if self.explorer is not None or self.active:
            self._make_explorer()  # new statistics: a new explorer, not a stale copy
        else:
            self.children = [widgets.HTML(f"<i>Statistics of {int(stats.samples)} samples are ready: the explorer "
                                          "is drawn when this tab opens.</i>")]

    def _on_graphs(self, change=None) -> None:
        if self.explorer is not None:
            self.explorer.set_trt_cache(self.trt_cache())

    def _make_explorer(self) -> None:
        from .calib_explorer import CalibrationExplorer

        s = self.session
        cache = (None if s.recipe is None else s.recipe.calibrator.cache_path) \
            or os.path.join(self.out_dir, "calibration.cache")
        try:
            # The session's calibration as it is (method, percentile, overrides): what the Plan step and exports use.
            self.explorer = CalibrationExplorer(session=s, cache_path=cache,
                                                qdq_path=os.path.join(self.out_dir, QDQ_NAME),
                                                trt_cache=self.trt_cache())
        except UserError as err:
            self.show_error(err)
            return
        self.children = [self.explorer]
