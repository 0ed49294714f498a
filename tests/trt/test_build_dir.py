"""Build directories: new, atomic, never overwriting an earlier build."""

from __future__ import annotations

import os

import pytest

from trtwidgets.core.common.atomic import write_bytes_atomic
from trtwidgets.core.common.errors import BuildError
from trtwidgets.trt.build_dir import check_out_dir, default_build_dir, discard, publish, recipe_hash, staging_dir


def test_default_name_is_time_and_recipe_hash_and_unique(tmp_path):
    now = 1_700_000_000.0
    first = default_build_dir('{"a": 1}', tmp_path, now)
    assert first.parent == tmp_path and first.name.endswith("-" + recipe_hash('{"a": 1}'))
    assert recipe_hash('{"a": 1}') != recipe_hash('{"a": 2}')
    first.mkdir()
    second = default_build_dir('{"a": 1}', tmp_path, now)
    assert second != first and second.name == first.name + "-2"


def test_env_var_sets_the_root(tmp_path, monkeypatch):
    monkeypatch.setenv("TRTWIDGETS_BUILDS", str(tmp_path / "elsewhere"))
    assert default_build_dir("{}").parent == tmp_path / "elsewhere"


def test_out_dir_must_be_new_or_empty(tmp_path):
    assert check_out_dir(tmp_path / "new") == tmp_path / "new"
    (tmp_path / "empty").mkdir()
    assert check_out_dir(tmp_path / "empty") == tmp_path / "empty"
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "engine.plan").write_bytes(b"old")
    with pytest.raises(BuildError, match="already exists and is not empty") as info:
        check_out_dir(tmp_path / "full")
    assert "never overwritten" in info.value.why
    (tmp_path / "file").write_text("x")
    with pytest.raises(BuildError, match="is a file"):
        check_out_dir(tmp_path / "file")


def test_publish_moves_the_whole_folder_at_once(tmp_path):
    final = tmp_path / "builds" / "b1"
    st = staging_dir(final)
    assert st.parent == final.parent and st.name.startswith(".b1.") and not final.exists()
    (st / "engine.plan").write_bytes(b"plan")
    publish(st, final)
    assert (final / "engine.plan").read_bytes() == b"plan" and not st.exists()


def test_publish_onto_an_empty_folder_works_but_never_onto_a_build(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    st = staging_dir(empty)
    (st / "a").write_text("new")
    publish(st, empty)
    assert (empty / "a").read_text() == "new"
    # Another build took the name meanwhile: the earlier build stays, the new one is kept aside.
    st2 = staging_dir(empty)
    (st2 / "a").write_text("newer")
    with pytest.raises(BuildError) as info:
        publish(st2, empty)
    assert (empty / "a").read_text() == "new" and (st2 / "a").read_text() == "newer"
    assert str(st2) in info.value.fix
    discard(st2)
    assert not st2.exists()


def test_write_bytes_atomic_replaces_and_leaves_no_temp(tmp_path):
    p = tmp_path / "sub" / "timing.cache"
    write_bytes_atomic(p, b"one")
    write_bytes_atomic(p, b"two")
    assert p.read_bytes() == b"two" and os.listdir(p.parent) == ["timing.cache"]
