"""mypy passes on the package, with the settings of pyproject.toml's ``[tool.mypy]``.

Part of the test command, as tests/test_lint.py is for ruff: CI and a contributor's ``pytest`` run
the same type checker. The whole package is checked with ``check_untyped_defs``; ``trtwidgets.core``
more strictly (its section in pyproject.toml says which flags). A ``# type: ignore`` names its code
and is needed (``warn_unused_ignores``).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT


def test_mypy_passes_on_the_package(tmp_path):
    try:
        import mypy  # noqa: F401 - only to know the test extra's mypy is here
    except ImportError:
        pytest.skip("mypy is not installed: pip install -e '.[test]'")
    # A cache of its own: a fresh run each time, and nothing written into the checkout.
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy_cache"), "--no-error-summary"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, f"mypy found problems (see pyproject.toml's [tool.mypy]):\n{proc.stdout}{proc.stderr}"
