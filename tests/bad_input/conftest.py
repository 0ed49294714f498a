"""The user's folder every bad-input row starts from (a module whose ``ws`` needs more overrides ``user``)."""

from __future__ import annotations

import pytest

from .workspace import fresh_user_files


@pytest.fixture()
def user(ws):
    """A fresh copy of the user's files in this module's workspace ``ws``, made again for every row."""
    return fresh_user_files(ws)
