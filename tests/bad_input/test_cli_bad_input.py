"""Bad input on the command line (issue 16): each entry of the table must end with exit 2, a message with
what, why and fix and no traceback, quickly (nothing hangs), and leave every file the user had unchanged."""

from __future__ import annotations


import pytest


from .workspace import MODEL, fingerprint, make_bad_inputs, fill_argv, run_cli

M = str(MODEL)
CAL = ["calibrate", M, "--no-progress"]
PRE_OK = '{"input": "x", "resize": [48, 192], "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]}'

#: (id, argv with {bad}/{user}/{ws} placeholders, a phrase the message must hold)
CASES = [
    # the model
    ("model-missing", ["summary", "{ws}/missing.onnx"], "missing.onnx"),
    ("model-folder", ["summary", "{bad}/folder.onnx"], "folder.onnx"),
    ("model-empty", ["summary", "{bad}/empty.onnx"], "empty.onnx"),
    ("model-random-bytes", ["summary", "{bad}/random.onnx"], "random.onnx"),
    ("model-truncated", ["summary", "{bad}/truncated.onnx"], "truncated.onnx"),
    ("model-text", ["lint", "{bad}/text.onnx"], "text.onnx"),
    ("model-unknown-home", ["summary", "~no_such_user_16/m.onnx"], "~no_such_user_16/m.onnx"),
    ("lint-unknown-flag", ["lint", M, "--flags", "fp16,bogus"], "bogus"),
    ("lint-bad-version", ["lint", M, "--trt-version", "abc"], "abc"),
    # calibration shapes and counts (issue 16: a zero dim hung)
    ("shape-zero-batch", CAL + ["--data", "demo", "--shape", "x:0x3x48x192"], "below 1"),
    ("shape-zero-width", CAL + ["--data", "demo", "--shape", "x:1x3x48x0"], "below 1"),
    ("shape-wrong-rank", CAL + ["--data", "demo", "--shape", "x:1x3x48"], "has 3 dims"),
    ("shape-unknown-input", CAL + ["--data", "demo", "--shape", "y:1x3x48x192"], "does not have"),
    ("shape-not-dims", CAL + ["--data", "demo", "--shape", "x=1x3x48x192"], "not INPUT:DIMS"),
    ("shape-absurd", CAL + ["--data", "demo", "--shape", "x:99999x99999x99999x99"], "elements"),
    ("shape-twice", CAL + ["--data", "demo", "--shape", "x:1x3x48x192", "--shape", "x:2x3x48x192"], "twice"),
    ("batch-size-zero", CAL + ["--data", "demo", "--batch-size", "0"], "not positive"),
    ("max-samples-zero", CAL + ["--data", "demo", "--max-samples", "0"], "not positive"),
    ("max-samples-negative", CAL + ["--data", "demo", "--max-samples", "-3"], "not positive"),
    ("adapt-unknown", CAL + ["--data", "demo", "--adapt", "x:stretch"], "INPUT:MODE"),
    ("percentile-zero", CAL + ["--data", "demo", "--percentile", "0"], "--percentile"),
    # calibration data
    ("data-missing", CAL + ["--data", "{ws}/nowhere"], "No calibration data"),
    ("data-empty-folder", CAL + ["--data", "{bad}/data_empty"], "holds no"),
    ("data-no-samples", CAL + ["--data", "{bad}/data_text_only"], "holds no"),
    ("data-pickled", CAL + ["--data", "{bad}/data_pickled"], "never unpickled"),
    ("data-float64", CAL + ["--data", "{bad}/data_float64"], "expected dtype float32"),
    ("data-int32", CAL + ["--data", "{bad}/data_int_data"], "expected dtype float32"),
    ("data-rank3", CAL + ["--data", "{bad}/data_rank3"], "expected rank 4"),
    ("data-all-nan", CAL + ["--data", "{bad}/data_nan", "--cache", "{user}/old.cache"], "NaN"),
    ("data-some-inf", CAL + ["--data", "{bad}/data_inf", "--stats", "{user}/stats.npz"], "Inf"),
    ("nan-inside-the-model", ["calibrate", "{bad}/nan_model.onnx", "--data", "{bad}/data_negative", "--no-progress",
                              "--cache", "{user}/old.cache"], "No cache written"),
    ("run-nan-inside-the-model", ["run", "{bad}/nan_run/nan_model.recipe.json", "--data", "{bad}/data_negative",
                                  "--report", "{user}/report.html", "--build-dir", "{user}/build"], "No cache written"),
    ("data-empty-batch", CAL + ["--data", "{bad}/data_empty_batch"], "empty"),
    ("data-corrupt-npy", CAL + ["--data", "{bad}/data_corrupt_npy"], "could not be read as .npy"),
    ("data-corrupt-npz", CAL + ["--data", "{bad}/data_corrupt_npz"], "could not be read as .npz"),
    ("data-wrong-names", CAL + ["--data", "{bad}/data_wrong_name_npz"], "does not name the model's inputs"),
    ("data-images-no-preprocess", CAL + ["--data", "{bad}/data_images"], "needs a declared preprocessing"),
    ("data-bad-image", CAL + ["--data", "{bad}/data_bad_image", "--preprocess", PRE_OK], "could not be read as an image"),
    ("preprocess-not-json", CAL + ["--data", "{bad}/data_images", "--preprocess", "{'input': 'x'}"], "not valid JSON"),
    ("preprocess-std-zero", CAL + ["--data", "{bad}/data_images", "--preprocess", '{"std": [0, 1, 1]}'], "divides by zero"),
    ("preprocess-resize-zero", CAL + ["--data", "{bad}/data_images", "--preprocess", '{"resize": [0, 192]}'], "resize"),
    ("preprocess-unknown-key", CAL + ["--data", "{bad}/data_images", "--preprocess", '{"colour": "RGB"}'], "colour"),
    ("preprocess-binary-file", CAL + ["--data", "{bad}/data_images", "--preprocess", "{bad}/pre_binary.json"],
     "could not be read as text"),
    ("resume-random-bytes", CAL + ["--data", "demo", "--resume", "{bad}/random_stats.npz"], "not a trtwidgets statistics"),
    ("resume-damaged", CAL + ["--data", "demo", "--resume", "{bad}/damaged_stats.npz"], "damaged statistics"),
    ("resume-calibration-member-of-objects", CAL + ["--data", "demo", "--resume", "{bad}/objects_calibration.npz",
                                                    "--stats", "{user}/stats.npz"], "Python objects"),
    ("resume-calibration-member-not-json", CAL + ["--data", "demo", "--resume", "{bad}/text_calibration.npz"],
     "damaged calibration"),
    ("cache-version-text", CAL + ["--data", "demo", "--max-samples", "1", "--cache", "{user}/old.cache",
                                  "--trt-version", "latest"], "not a version"),
    # where outputs go
    ("output-is-a-folder", CAL + ["--data", "demo", "--cache", "{user}/build"], "is a folder"),
    ("output-under-a-file", CAL + ["--data", "demo", "--stats", "{user}/old.cache/s.npz"], "is a file"),
    ("outputs-collide", CAL + ["--data", "demo", "--cache", "{ws}/o", "--stats", "{ws}/o"], "both name"),
    ("output-over-the-model", ["export-qdq", "{user}/old.qdq.onnx", "--stats", "{user}/stats.npz", "--out",
                               "{user}/old.qdq.onnx"], "own input"),
    # export-qdq (issue 16: a malformed cache line was skipped and a model of nothing written)
    ("qdq-cache-malformed", ["export-qdq", M, "--cache", "{bad}/malformed_line.cache", "--out", "{user}/old.qdq.onnx"],
     "line 3"),
    ("qdq-cache-header-only", ["export-qdq", M, "--cache", "{bad}/header_only.cache", "--out", "{user}/old.qdq.onnx"],
     "no tensor scales"),
    ("qdq-cache-no-header", ["export-qdq", M, "--cache", "{bad}/no_header.cache", "--out", "{ws}/q.onnx"], "header"),
    ("qdq-cache-nan-scale", ["export-qdq", M, "--cache", "{bad}/nan_scale.cache", "--out", "{ws}/q.onnx"], "finite"),
    ("qdq-cache-binary", ["export-qdq", M, "--cache", "{bad}/binary.cache", "--out", "{ws}/q.onnx"], "not UTF-8"),
    ("qdq-cache-missing", ["export-qdq", M, "--cache", "{ws}/none.cache", "--out", "{ws}/q.onnx"], "none.cache"),
    ("qdq-stats-other-npz", ["export-qdq", M, "--stats", "{bad}/other_npz.npz", "--out", "{user}/old.qdq.onnx"],
     "not a trtwidgets statistics"),
    # export-qdq's check and advice options (issue 34): refused before any work, the old output kept
    ("qdq-amax-not-pair", ["export-qdq", M, "--stats", "{user}/stats.npz", "--amax", "x", "--out",
                           "{user}/old.qdq.onnx"], "TENSOR=AMAX"),
    ("qdq-amax-not-number", ["export-qdq", M, "--stats", "{user}/stats.npz", "--amax", "x=big", "--out",
                             "{user}/old.qdq.onnx"], "not a number"),
    ("qdq-amax-negative", ["export-qdq", M, "--stats", "{user}/stats.npz", "--amax", "x=-1", "--out",
                           "{user}/old.qdq.onnx"], "negative"),
    ("qdq-amax-unknown-tensor", ["export-qdq", M, "--stats", "{user}/stats.npz", "--amax", "no_such_tensor=1",
                                 "--out", "{user}/old.qdq.onnx"], "no_such_tensor"),
    ("qdq-metric-unknown", ["export-qdq", M, "--stats", "{user}/stats.npz", "--held-back", "demo", "--metric", "accuracy!",
                            "--out", "{user}/old.qdq.onnx"], "Unknown metric"),
    ("qdq-metric-without-data", ["export-qdq", M, "--stats", "{user}/stats.npz", "--metric", "top1-agreement",
                                 "--out", "{user}/old.qdq.onnx"], "--metric needs --held-back"),
    # inspect
    ("inspect-binary", ["inspect", "{bad}/binary.graph.json", "--csv", "{user}/layers.csv"], "binary"),
    ("inspect-names-only", ["inspect", "{bad}/names_only.graph.json"], "names only"),
    ("inspect-truncated", ["inspect", "{bad}/truncated.graph.json", "--csv", "{user}/layers.csv"], "truncated.graph.json"),
    ("inspect-bindings-not-a-list", ["inspect", "{bad}/bindings.graph.json"], "not a list"),
    ("inspect-missing", ["inspect", "{ws}/none.graph.json"], "none.graph.json"),
    # recipes
    ("run-recipe-empty-object", ["run", "{bad}/empty_object.recipe.json", "--report", "{user}/report.html"],
     "schema_version"),
    ("run-recipe-not-json", ["run", "{bad}/not_json.recipe.json", "--report", "{user}/report.html"], "not valid JSON"),
    ("run-recipe-unknown-key", ["run", "{bad}/unknown_key.recipe.json", "--report", "{user}/report.html"], "flagz"),
    ("run-recipe-zero-shape", ["run", "{bad}/zero_shape.recipe.json", "--report", "{user}/report.html"], "below 1"),
    ("run-recipe-unknown-home", ["run", "~no_such_user_16/r.json", "--report", "{user}/report.html"], "no user"),
    ("output-unknown-home", ["export-qdq", M, "--stats", "{user}/stats.npz", "--out", "~no_such_user_16/q.onnx"],
     "no user"),
    ("build-recipe-missing", ["build", "{ws}/none.json", "--out", "{ws}/b"], "none.json"),
]


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad_input_ws")
    make_bad_inputs(root / "bad")
    return root



def test_the_table_is_big_and_its_entries_distinct():
    assert len(CASES) >= 40
    assert len({c[0] for c in CASES}) == len(CASES) and len({tuple(c[1]) for c in CASES}) == len(CASES)


@pytest.mark.parametrize("argv, phrase", [pytest.param(c[1], c[2], id=c[0]) for c in CASES])
def test_bad_input_on_the_command_line(ws, user, capsys, argv, phrase):
    argv = fill_argv(argv, ws, user)
    before = fingerprint(user)
    rc = run_cli(argv)
    out, err = capsys.readouterr()
    assert rc == 2, f"exit {rc}\n{err}"
    assert "Traceback" not in err + out
    assert err.startswith(f"trtwidgets {argv[0]}: ") and phrase in err, err
    assert "Why:" in err and "Fix:" in err, f"the message lacks a why or a fix:\n{err}"
    assert fingerprint(user) == before, "a file the user had was changed"
    assert not (ws / "q.onnx").exists() and not (ws / "o").exists()
