"""Applying plans: to the Kubernetes API, or to a simulated cluster for replay and the demo.

Only this package imports ``kubernetes``.
"""
