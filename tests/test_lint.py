"""ruff passes on the repository, with the rules of pyproject.toml's ``[tool.ruff]``.

Part of the test command so that CI and a contributor's ``pytest`` run the same linter
(.pre-commit-config.yaml runs it before a commit too). A bare ``# noqa`` fails it (PGH004),
and so does one that silences nothing (RUF100).
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def _ruff():
    try:
        import ruff  # noqa: F401 - only to know the test extra's ruff is here
    except ImportError:
        exe = shutil.which("ruff")
        if exe is None:
            pytest.skip("ruff is not installed: pip install -e '.[test]'")
        return [exe]
    return [sys.executable, "-m", "ruff"]


def test_ruff_check_passes_on_the_repository():
    proc = subprocess.run(
        [*_ruff(), "check", "--no-cache", "--output-format", "concise", "."],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, f"ruff check found problems (fix them, or `ruff check --fix .`):\n{proc.stdout}{proc.stderr}"

