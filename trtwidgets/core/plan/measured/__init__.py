"""Measured latency: the one home of "build the candidates, time them, pick by what the GPU measured".

An estimate is a hypothesis; where a GPU is present a plan's pick goes by measurement. The
timing itself needs TensorRT and lives in :mod:`trtwidgets.trt.measure` (the builds and the
interleaved rounds) and :mod:`trtwidgets.trt.plan_measure` (a plan's candidates exported and
handed to it); everything that needs no GPU is here, in the order it is used:

* :mod:`.measurement`: one engine's measurement (its placement key, rounds, median and spread,
  its verdict on the held-back samples), estimate beside measurement, a measured latency model.
* :mod:`.paired`: two engines compared round by round (interleaved rounds are pairs): the exact sign test.
* :mod:`.pick`: the fastest engine that meets accuracy and wins FP16's paired rounds by that test.
* :mod:`.standing`: what a plan says about its latency: an estimate (and how far estimates have
  been off on the zoo) or a :class:`~.standing.PlanMeasurement`.
* :mod:`.repick`: which candidates to measure, and the plan picked again by measured time.
"""
