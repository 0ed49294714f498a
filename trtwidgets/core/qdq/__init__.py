"""Explicit quantization: Q/DQ placement, export, validation and the quantization planner."""
