"""scaleahead: a forecast-driven predictive autoscaler and pre-provisioner for Kubernetes.

This package holds the shared vocabulary (``types``), settings and policy schema, and the
composition root (CLI, control loop) that wires the adapters in ``forecaster``, ``planner``,
``actuator`` and ``storage`` together.
"""

__version__ = "0.1.0"
