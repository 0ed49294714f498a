"""The quantization planner: which layers to quantize so that INT8 is faster than FP16 and accurate.

A stage of its own after :mod:`trtwidgets.core.qdq` (the export): the search
(:mod:`.planner`) exports candidates with the export, scores them with ONNX Runtime
(:mod:`.plan_eval`), judges them one way (:mod:`.judge`) and times them through one
latency interface (:mod:`.latency`: the cost model's estimate, an implicit build's
choices, or a measurement). Its result is a :class:`~.plan_artifact.Plan`, saved and
loaded as plan.json (:mod:`.plan_file` checks it as it is read); measured latency,
and the pick made again by it, live in :mod:`.measured`.
"""
