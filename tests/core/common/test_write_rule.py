"""The write rule's parts: partial names, same-file tests, refusals and the explanation of a failed write."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trtwidgets.core.common.atomic import process_alive, remove_stale_temps, write_text_atomic
from trtwidgets.core.common.errors import UserError
from trtwidgets.core.common.write_rule import (WriteError, check_replaceable, partial_path, refuse_inputs, same_file,
                                               write_error)


@pytest.mark.parametrize("name, partial", [("stats.npz", "stats.partial.npz"), ("old.cache", "old.partial.cache"),
                                           ("out", "out.partial"), (".hidden", ".hidden.partial"),
                                           ("stats.partial.npz", "stats.partial.npz"), ("o.partial", "o.partial"),
                                           ("a.tar.gz", "a.tar.partial.gz")])
def test_partial_names(tmp_path, name, partial):
    assert partial_path(tmp_path / name) == tmp_path / partial


def test_same_file_sees_through_spellings_and_links(tmp_path):
    a = tmp_path / "a.onnx"
    a.write_text("x")
    (tmp_path / "sub").mkdir()
    os.link(a, tmp_path / "hard.onnx")
    os.symlink(a, tmp_path / "soft.onnx")
    (tmp_path / "other.onnx").write_text("x")
    assert same_file(a, tmp_path / "sub" / ".." / "a.onnx")
    assert same_file(a, tmp_path / "hard.onnx") and same_file(tmp_path / "soft.onnx", tmp_path / "hard.onnx")
    assert not same_file(a, tmp_path / "other.onnx") and not same_file(a, tmp_path / "missing.onnx")


def test_refuse_inputs_names_the_input_and_takes_objects_with_a_path(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_text("x")

    class Loaded:
        path = str(model)

    with pytest.raises(UserError) as info:
        refuse_inputs(model, {"the model": Loaded()}, "out_path m.onnx")
    assert "the model" in info.value.what and info.value.why and info.value.fix
    refuse_inputs(tmp_path / "new.onnx", {"the model": Loaded(), "nothing": None})


def test_only_regular_files_are_replaceable(tmp_path):
    check_replaceable(tmp_path / "missing")
    (tmp_path / "f").write_text("x")
    check_replaceable(tmp_path / "f")
    os.mkfifo(tmp_path / "p")
    for path, phrase in ((tmp_path, "is a folder"), (tmp_path / "p", "named pipe"), ("/dev/null", "character device")):
        with pytest.raises(WriteError) as info:
            check_replaceable(path)
        assert phrase in info.value.what and info.value.fix


@pytest.mark.parametrize("code, phrase", [(errno.ENOSPC, "full"), (errno.EACCES, "permission"),
                                          (errno.EROFS, "read-only"), (errno.EFBIG, "larger"), (errno.EIO, "OSError")])
def test_a_failed_write_is_explained_and_still_an_oserror(tmp_path, code, phrase):
    (tmp_path / "kept").write_text("x")
    err = write_error(OSError(code, os.strerror(code)), tmp_path / "kept")
    assert isinstance(err, UserError) and isinstance(err, OSError) and err.errno == code
    assert phrase in err.why and "kept as it was" in err.why and err.fix and str(err) == err.message
    assert "nothing was written" in write_error(OSError(code, "x"), tmp_path / "new").why


def test_stale_temporary_files_go_only_when_their_process_is_gone(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    target = tmp_path / "x.npz"
    dead = tmp_path / f".x.npz.{p.pid}.abc.tmp"
    live = tmp_path / f".x.npz.{os.getpid()}.abc.tmp"
    legacy = tmp_path / ".x.npz.abcdef.tmp"  # no process id: not ours to judge, left alone
    other = tmp_path / f".y.npz.{p.pid}.abc.tmp"
    for f in (dead, live, legacy, other):
        f.write_bytes(b"")
    assert not process_alive(p.pid) and process_alive(os.getpid())
    assert remove_stale_temps(target) == [dead]
    write_text_atomic(target, "new")
    assert sorted(f.name for f in tmp_path.iterdir()) == sorted(Path(f).name for f in (live, legacy, other, target))
