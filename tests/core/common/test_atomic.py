"""Atomic writes: a failed write keeps the earlier file and leaves no temporary file behind."""

from __future__ import annotations

import os

import pytest

from trtwidgets.core.common.atomic import atomic_write, write_bytes_atomic, write_text_atomic


def test_failed_write_keeps_the_old_file(tmp_path):
    path = write_text_atomic(tmp_path / "sub" / "report.html", "old")
    assert path.read_text() == "old"

    def boom(f):
        f.write(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write(path, boom)
    assert path.read_text() == "old"
    assert sorted(os.listdir(path.parent)) == ["report.html"]


def test_written_files_get_the_usual_permissions(tmp_path):
    mask = os.umask(0o022)
    try:
        path = write_bytes_atomic(tmp_path / "engine.plan", b"\x00\x01")
    finally:
        os.umask(mask)
    assert path.read_bytes() == b"\x00\x01"
    assert os.stat(path).st_mode & 0o777 == 0o644
