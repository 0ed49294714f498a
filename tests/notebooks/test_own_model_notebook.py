"""notebooks/07_your_own_model.ipynb on a model with dynamic N, H and W built here, and a folder of real samples.

The parameters cell is replaced as papermill would (model path, data folder, a saved build of that
model), and the notebook must run top to bottom with no error and no profile typed by hand.
"""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import ROOT
from tests.notebooks.executed import CELL_TIMEOUT
from tests.notebooks.test_notebooks import kernel_name  # noqa: F401 - a fixture this module's tests take
from tests.own_models import dynamic_hw_model, image_samples, own_saved_build, save

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK = ROOT / "notebooks" / "07_your_own_model.ipynb"


def _set_parameters(nb, **values) -> None:
    (cell,) = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    cell.source += "\n# injected by the test\n" + "".join(f"{k} = {v!r}\n" for k, v in values.items())


def _outputs(cell) -> str:
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            out.append(o.get("text", ""))
        elif o.get("output_type") in ("execute_result", "display_data"):
            out.append(str(o.get("data", {}).get("text/html", "")) + str(o.get("data", {}).get("text/plain", "")))
    return "".join(out)


@pytest.mark.slow
def test_your_own_model_notebook_runs_on_a_dynamic_hw_model(tmp_path, kernel_name):  # noqa: F811
    pytest.importorskip("ipykernel")
    from trtwidgets.core.model.load import load_model
    from trtwidgets.core.recipe.data_defaults import fill_recipe_from_data
    from trtwidgets.core.calibration.data import spec_for
    from trtwidgets.core.recipe.recipe import CalibratorSpec, Recipe

    model_path = save(dynamic_hw_model(), tmp_path / "detector.onnx")
    data = image_samples(tmp_path / "samples", n=6, sizes=[(96, 128)])
    model = load_model(model_path)
    # The app's own recipe (FP16+INT8, the toolkit's entropy ranges), saved and built on a GPU machine.
    recipe, _, _ = fill_recipe_from_data(Recipe.for_model(
        model, flags=("fp16", "int8"), calibrator=CalibratorSpec(kind="toolkit", method="entropy"),
        calibration_data=spec_for(str(data))), model)
    build = own_saved_build(tmp_path / "builds", recipe)

    work = tmp_path / NOTEBOOK.name
    shutil.copy(NOTEBOOK, work)
    nb = nbformat.read(str(work), as_version=4)
    _set_parameters(nb, model_path=str(model_path), data_dir=str(data), saved_build=str(build),
                    out_dir=str(tmp_path / "out"))
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name=kernel_name,
                                     resources={"metadata": {"path": str(tmp_path)}}, allow_errors=True,
                                     shutdown_kernel="immediate")  # a graceful shutdown once hung for minutes
    client.execute()
    errors = [f"cell {i}: {o.get('ename')}: {o.get('evalue')}" for i, c in enumerate(nb.cells)
              for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, "\n".join(errors)
    text = "\n".join(_outputs(c) for c in nb.cells if c.cell_type == "code")
    # The profile came from the data, and lint is content with it (it was not without data).
    assert "opt 1x3x96x128 is the calibration data's shape" in text
    assert "opt (1, 3, 96, 128)" in text
    with_data, _, without = text.partition("without data, lint would say:")
    assert "'PROFILE_OPT_TOO_SMALL'" in without.splitlines()[0]
    assert "PROFILE_OPT_TOO_SMALL" not in with_data
    assert "6 samples" in text
    # The layer table of the build folder, INT8 rows included.
    assert "trtw-layers" in text and "INT8" in text and "detector_int8" in text
    assert (tmp_path / "out" / "model.qdq.onnx").is_file() and (tmp_path / "out" / "recipe.json").is_file()
