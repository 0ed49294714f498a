"""The fuzz set as a whole: at least 10,000 cases per CI run (issue 16)."""

from __future__ import annotations

import importlib
import pkgutil

from . import fuzzing


def test_the_fuzz_tests_ask_for_at_least_ten_thousand_cases():
    import tests.fuzz as package

    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("test_fuzz_") and info.name != "test_fuzz_budget":
            importlib.import_module(f"tests.fuzz.{info.name}")
    assert sum(fuzzing.REQUESTED) >= 10_000, sum(fuzzing.REQUESTED)
