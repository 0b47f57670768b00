"""Running a graph on OpenGL: contexts and their program cache, GL calls moderngl lacks, shader
source assembly, the texture plan, the `Pipeline`, precisions and u8 calibration, GPU min/max
statistics and the per-layer summary.

Knows graphs and ops; knows no model file format, window or tooling.
"""
