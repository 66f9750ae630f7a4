"""Fixtures of the actuator tests: an emulated Kubernetes API (see kubeemu.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kubeemu import kube  # noqa: E402, F401 - the fixture
