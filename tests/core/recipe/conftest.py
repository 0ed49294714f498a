from __future__ import annotations

import pytest

from trtwidgets.core.model.load import load_model


@pytest.fixture(scope="module")
def demo():
    """The bundled demo model, loaded."""
    from trtwidgets import demo as demo_pkg

    return load_model(demo_pkg.MODEL_PATH)
