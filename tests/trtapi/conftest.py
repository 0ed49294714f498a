"""API-surface tests: real TensorRT 10 and 11 Python bindings over load-time stubs.

Every test here carries the ``trtapi`` marker. The bindings wheels are downloaded
once into ``~/.cache/trtwidgets-tests`` (or ``$TRTWIDGETS_TEST_CACHE``); without
network the tests skip, unless ``TRTWIDGETS_REQUIRE_TRT_BINDINGS`` is set (CI),
in which case they fail. See DEVELOPERS.md.
"""

from __future__ import annotations

import pytest

from tests.conftest import require_or_skip

from . import stubs

REQUIRE = "TRTWIDGETS_REQUIRE_TRT_BINDINGS"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/trtapi/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.trtapi)


_prepared = {}


def _bindings(key: str) -> stubs.Bindings:
    if key not in _prepared:
        try:
            _prepared[key] = stubs.prepare(key)
        except Exception as exc:
            _prepared[key] = exc
    result = _prepared[key]
    if isinstance(result, Exception):
        dist, version = stubs.WHEELS[key]
        require_or_skip(REQUIRE, f"{dist}=={version} could not be prepared: {result}")
    return result


@pytest.fixture(scope="session")
def bindings10() -> stubs.Bindings:
    """TensorRT 10.16 bindings (tensorrt-cu12-bindings), importable in a subprocess."""
    return _bindings("10")


@pytest.fixture(scope="session")
def bindings11() -> stubs.Bindings:
    """TensorRT 11.4 bindings (tensorrt-cu13-bindings), importable in a subprocess."""
    return _bindings("11")


@pytest.fixture(scope="session")
def features10(bindings10):
    """``features()`` of the real 10.16 module, read in its own process, as a dict."""
    return stubs.real_features("10")


@pytest.fixture(scope="session")
def features11(bindings11):
    """``features()`` of the real 11.4 module, read in its own process, as a dict."""
    return stubs.real_features("11")


@pytest.fixture(scope="session")
def features86():
    """``features()`` of the local TensorRT 8.6 on Python 3.9, or skip (CI has none)."""
    f = stubs.local_features86()
    if f is None:
        pytest.skip("no local Python 3.9 + TensorRT 8.6 bundle (/work/trtb/env.sh or $TRTWIDGETS_TRT86_ENV)")
    return f
