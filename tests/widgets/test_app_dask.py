"""The App on a Dask client: its Calibrate step collects on the workers, the same calibration as in the kernel."""

from __future__ import annotations

import pytest

from trtwidgets import demo
from trtwidgets.widgets.app import App

pytest.importorskip("distributed")


def test_the_app_calibrates_on_the_client_as_in_the_kernel(tmp_path, dask_client):
    here = App(model_path=demo.MODEL_PATH, out_dir=str(tmp_path / "here"))
    there = App(model_path=demo.MODEL_PATH, out_dir=str(tmp_path / "there"), client=dask_client)
    assert there.session.client is dask_client and here.session.client is None
    assert here.calibrate(max_samples=8, progress=False) and there.calibrate(max_samples=8, progress=False)
    a, b = here.session.calibration, there.session.calibration
    assert b.stats.samples == a.stats.samples == 8 and b.amax.keys() == a.amax.keys()
    assert all(b.amax[k] == pytest.approx(a.amax[k], rel=1e-6) for k in a.amax)
