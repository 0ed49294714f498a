"""Errors that are meant to be read by a person.

Every failure a user can cause (a wrong path, a corrupt file, a recipe that does
not fit the model) is raised as a :class:`UserError`: it says what went wrong,
why, and what to do. The CLI prints it without a traceback and the widgets show
it in a panel; both keep whatever the user had (recipe, statistics, builds).
"""

from __future__ import annotations

from typing import Optional, Sequence


class UserError(Exception):
    """A failure caused by input, explained in three parts.

    Parameters
    ----------
    what : str
        One line: what went wrong, naming the file, input or tensor concerned.
    why : str, optional
        The cause, as far as it is known.
    fix : str, optional
        What the user can do about it.
    """

    def __init__(self, what: str, why: Optional[str] = None, fix: Optional[str] = None) -> None:
        self.what = what
        self.why = why
        self.fix = fix
        super().__init__(self.message)

    @property
    def message(self) -> str:
        """The whole explanation as plain text, one part per line."""
        parts = [self.what]
        if self.why:
            parts.append(f"Why: {self.why}")
        if self.fix:
            parts.append(f"Fix: {self.fix}")
        return "\n".join(parts)

    def to_dict(self) -> dict:
        """The error as a JSON-serialisable mapping (used by ``--json`` outputs)."""
        return {"error": type(self).__name__, "what": self.what, "why": self.why, "fix": self.fix}


class ModelLoadError(UserError):
    """The ONNX model could not be read or is unusable."""


class CalibrationDataError(UserError):
    """Calibration data is missing, empty, or does not fit the model's inputs."""


class RecipeError(UserError):
    """A recipe is invalid or does not fit the model."""


class InspectorError(UserError):
    """Engine-inspector JSON could not be parsed or lacks needed detail."""


class StatsError(UserError):
    """Activation statistics or a calibration cache could not be read or used."""


class TensorRTUnavailable(UserError):
    """TensorRT is not installed, or lacks the feature asked for."""


#: What the ``lab`` extra installs beside JupyterLab: the widgets and the figures (``pip install 'trtwidgets[lab]'``).
#: The command line and the computing steps run without them.
LAB_PACKAGES = ("plotly", "ipywidgets", "anywidget")


class LabExtraMissing(UserError, ModuleNotFoundError):
    """A widget or a figure asked for where the ``lab`` extra is not installed (a headless install)."""

    def __init__(self, what: str, package: str) -> None:
        UserError.__init__(self, f"{what} needs {package}, which is not installed here.",
                           "A plain `pip install trtwidgets` installs the command line and the computing steps; the "
                           "widgets and the figures come with the lab extra.",
                           "pip install 'trtwidgets[lab]'")
        self.name = package


def lab_extra_missing(err: ImportError, what: str) -> Optional[LabExtraMissing]:
    """A :class:`LabExtraMissing` for ``err`` when it is a lab package that is missing, else None."""
    name = err.name or ""  # ImportError always has the attribute (None when unknown)
    root = name.split(".")[0]
    return LabExtraMissing(what, root) if isinstance(err, ModuleNotFoundError) and root in LAB_PACKAGES else None


class BuildError(UserError):
    """A TensorRT build failed.

    Parameters
    ----------
    what, why, fix : str
        As for :class:`UserError`.
    log_lines : sequence of str, optional
        The decisive TensorRT log lines (errors first).
    codes : sequence of str, optional
        Lint codes that explain the failure, where one is known.
    """

    def __init__(self, what, why=None, fix=None, log_lines=(), codes=()) -> None:
        self.log_lines = tuple(log_lines)
        self.codes = tuple(codes)
        self.log: Sequence[object] = ()  # the whole build log, where the build got that far
        super().__init__(what, why, fix)


    @property
    def message(self) -> str:
        text = super().message
        if self.log_lines:
            text += "\nTensorRT said:\n" + "\n".join(f"  {line}" for line in self.log_lines)
        return text

    def to_dict(self) -> dict:
        d = super().to_dict()
        d.update(log_lines=list(self.log_lines), codes=list(self.codes))
        return d
