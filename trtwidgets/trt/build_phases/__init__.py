"""The phases of :func:`trtwidgets.trt.build.build`, one module each, and what they share.

In the order a build runs them: ``prepare`` (the recipe's model, lint, the GPU),
``network`` (parse ONNX), ``config`` (flags, precision constraints, layer
precisions, tactic sources), ``timing_cache``, ``profiles``, ``calibrator``,
``engine`` (the build itself, then the inspector's view) and ``write`` (the build
folder). They pass one ``state.BuildState`` along; ``result`` holds the build
folder's file names and :class:`~trtwidgets.trt.build_phases.result.BuildResult`,
``failure`` turns TensorRT's log into a BuildError. Import the public entry point
from :mod:`trtwidgets.trt.build`.
"""
