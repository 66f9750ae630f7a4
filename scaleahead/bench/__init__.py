"""Benchmark commands (``scaleahead bench ...``): EVALUATION.md implemented exactly.

Part of the composition root: it wires forecasters, the planner and the simulated actuator.
"""
