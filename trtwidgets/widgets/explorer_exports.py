"""The calibration explorer's exports: the calibration cache and the Q/DQ model, checked on held-back data.

A mixin of :class:`~trtwidgets.widgets.calib_explorer.CalibrationExplorer` (which holds the
calibration, the paths and the status and error panels these write to). Every export writes the
calibration's :attr:`~trtwidgets.core.calibration.calibration.Calibration.amax`, as
:func:`trtwidgets.export_qdq` does.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional

from ..core.common.errors import UserError
from .explorer_parts import as_user_error


class ExplorerExports:
    """:meth:`export_cache` and :meth:`export_qdq`, for the calibration explorer."""

    #: The last held-back check of an exported model (a QdqValidation), None when none was made.
    validation: Any = None

    if TYPE_CHECKING:  # the explorer's traits, widgets and methods this mixin uses
        model: Any
        session: Any
        calibration: Any
        overrides: Dict[str, Any]
        cache_path: Optional[str]
        qdq_path: Optional[str]
        last_export: Dict[str, str]
        status: Any
        _show_error: Callable[..., Any]
        _hide_error: Callable[..., Any]

        @property
        def method(self) -> str: ...



    def export_cache(self) -> Optional[str]:
        """Write the calibration cache for the export method plus overrides (atomic); its path, or None."""
        if not self.cache_path:
            return None
        from ..core.calibration.cache import write_cache

        write_cache(self.calibration.amax, self.cache_path)  # what every export writes
        self.last_export["cache"] = str(self.cache_path)
        return str(self.cache_path)

    def export_qdq(self) -> Optional[str]:
        """Write the Q/DQ model for the export method plus overrides; its path, or None when not configured.

        With the session's held-back folder, the written model is checked on it against the float model
        (:func:`~trtwidgets.core.qdq.validate.validate_qdq`, as ``export-qdq --data``); :attr:`validation`
        holds the result and the status says whether it passed.
        """
        from ..core.common.notes import collect_notes
        from .step import notes_html

        if not self._qdq_possible():
            return None
        # What the export and its check note (ONNX Runtime's errors among them) is shown with the result.
        with collect_notes() as notes:
            try:
                path = self._write_qdq()
                checked = self._check_export()
            except (UserError, OSError) as e:
                self._show_error(as_user_error(e, f"could not write the Q/DQ model {self.qdq_path}",
                                               "choose a writable path for the Q/DQ model"))
                self.status.value = notes_html(notes, "While exporting:")
                return None
        self._hide_error()
        self.status.value = (f"Q/DQ model written to <code>{html.escape(path)}</code>." + checked
                             + notes_html(notes, "While exporting:"))
        return path

    def _write_qdq(self) -> str:
        from ..core.qdq.export import export_qdq

        options = self.session.qdq_options() if self.session is not None else None
        # As trtwidgets.export_qdq: the same scales.
        self._export = export_qdq(self.model, self.calibration, self.qdq_path, options=options)
        self.last_export["qdq"] = str(self.qdq_path)
        return str(self.qdq_path)

    def _check_export(self) -> str:
        """The written model checked on the session's held-back samples, as HTML ('' without any)."""
        from ..core.model.trt_version import installed_trt_version
        from ..core.qdq.validate import validate_qdq

        self.validation = None
        feeds = self.session.held_back_feeds() if self.session is not None else None
        if not feeds:
            return ""
        # Linted for the TensorRT the export is for, as `export-qdq --data` does.
        trt = str(self.session.qdq_options().trt_version or installed_trt_version() or "8.6")

        self.validation = v = validate_qdq(self.model, self._export.model, feeds,
                                           precision=self._export.report.precision, trt_version=trt)
        color = "#188038" if v.passed else "#d93025"
        return (f"<pre style='white-space:pre-wrap;border-left:4px solid {color};padding:2px 8px'>"
                f"{html.escape(v.summary())}</pre>")

    def _write_cache_clicked(self) -> None:
        try:
            path = self.export_cache()
        except (UserError, OSError) as e:
            self._show_error(as_user_error(e, f"could not write the calibration cache {self.cache_path}",
                                           "choose a writable cache path"))
            return
        self._hide_error()
        if path:
            self.status.value = (f"cache written to <code>{html.escape(path)}</code> "
                                 f"({html.escape(self.method)} ranges, {len(self.overrides)} override(s)).")

    def _qdq_possible(self) -> bool:
        return self.model is not None and bool(self.qdq_path)
