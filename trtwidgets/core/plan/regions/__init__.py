"""Measured placement search by region: repeated patterns, their placement schemes, the verdicts (issue 33).

:mod:`.schemes` says what can be chosen at each pattern, :mod:`.search` scores the schemes on the CPU
(ONNX Runtime, the plan's held-back samples), :mod:`.pick` chooses by the sub-models' measured times
(:mod:`trtwidgets.trt.region_measure` times them), :mod:`.records` holds it all for plan.json.
"""
