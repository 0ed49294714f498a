"""A model without inputs has nothing to calibrate: said before any data is looked at.

Calibration feeds samples to the model's inputs and records the tensors they
produce. A model with no graph inputs (its inputs folded into initializers by
the exporter, or a constant-only graph) computes the same values on every run;
without this check the first sample file met the model's input list and got an
unrelated complaint (a ``.npy`` file "cannot say which input it is for").
"""

from __future__ import annotations

from ..common.errors import CalibrationDataError

__all__ = ["require_inputs"]


def require_inputs(model) -> None:
    """Raise :class:`CalibrationDataError` when ``model`` (a LoadedModel) has no graph inputs."""
    if model.summary.inputs:
        return
    where = model.path or "The model"
    raise CalibrationDataError(
        f"{where} has no inputs: there is nothing to calibrate.",
        "Calibration feeds samples to a model's inputs and records the tensors they produce; a model without "
        "graph inputs computes the same constants on every run (its inputs may have been folded into "
        "initializers at export, e.g. an example input passed as a constant).",
        "Re-export the model with its real inputs (torch.onnx.export(..., input_names=[...]) with the inputs as "
        "arguments, not captured constants); `trtwidgets summary MODEL` lists the inputs it has.")
