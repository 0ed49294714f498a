"""QdqOptions: the Q/DQ export's choices as one value, with one set of defaults (issue 20)."""

from __future__ import annotations

import argparse

import pytest

from trtwidgets.core.qdq.options import QdqExportError, QdqOptions


def test_one_set_of_defaults_everywhere():
    from trtwidgets.cli import export_qdq as export_cli
    from trtwidgets.cli import plan as plan_cli

    from trtwidgets.core.model.trt_version import installed_trt_version

    defaults = QdqOptions()
    assert defaults.dense_int8 is True and defaults.trt_version is None
    # export-qdq writes for a TensorRT: the one asked for, the installed one, else 10 and 11 (issue 34).
    installed = installed_trt_version()
    from trtwidgets.core.model.trt_version import DEFAULT_TARGET

    export_target = str(installed) if installed is not None else DEFAULT_TARGET
    for cli, argv, target in ((export_cli, ["m.onnx", "--calibration", "c.npz", "--out", "q.onnx"], export_target),
                              (plan_cli, ["m.onnx", "--data", "d", "--out", "o"], None)):
        parser = argparse.ArgumentParser()
        cli.add_arguments(parser)
        opts = cli.options(parser.parse_args(argv))
        assert (opts.dense_int8, opts.high_precision, opts.trt_version) == (True, "auto", target), cli.NAME
        off = cli.options(parser.parse_args(argv + ["--no-dense-int8"]))
        assert off.dense_int8 is False


def test_round_trip_and_replace():
    opts = QdqOptions(exclude=["conv1"], trt_version="10.16", dense_int8=False)
    assert opts.exclude == ("conv1",) and opts.resolved_high_precision() == "fp16"
    assert QdqOptions.from_dict(opts.to_dict()) == opts
    assert opts.replace(dense_int8=None, precision="fp8") == QdqOptions(exclude=("conv1",), trt_version="10.16",
                                                                        dense_int8=False, precision="fp8")
    assert QdqOptions(trt_version="8.6").resolved_high_precision() == "fp32"


@pytest.mark.parametrize("changes, match", [
    ({"precision": "int4"}, "Unknown precision"), ({"high_precision": "fp64"}, "high-precision"),
])
def test_bad_choices_are_clear_errors(changes, match):
    with pytest.raises(QdqExportError, match=match):
        QdqOptions(**changes)


def test_options_a_newer_version_wrote_are_refused_by_name():
    with pytest.raises(QdqExportError, match="Unknown Q/DQ options: future_rule"):
        QdqOptions.from_dict({"dense_int8": True, "future_rule": 1})


def test_the_range_method_is_not_an_option_and_older_plans_still_load():
    # The method and percentile belong to the Calibration; a plan.json of before holds them among its options.
    assert "method" not in QdqOptions().to_dict() and "percentile" not in QdqOptions().to_dict()
    with pytest.raises(TypeError):
        QdqOptions(method="max")
    older = dict(QdqOptions(dense_int8=False).to_dict(), method="max", percentile=99.9)
    assert QdqOptions.from_dict(older) == QdqOptions(dense_int8=False)
