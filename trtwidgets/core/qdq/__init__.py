"""Explicit quantization: Q/DQ placement, export, high precision and validation (the planner is core.plan)."""
