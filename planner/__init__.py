"""The pure planning core: forecasts + cluster state + policies -> Plan.

No I/O and no clock: ``now`` is an argument. Every action carries a reason.
"""

from planner.planning import plan, share_capacity

__all__ = ["plan", "share_capacity"]
