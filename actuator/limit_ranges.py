"""A namespace's LimitRange defaults applied to a pod template, as the API server would.

The ``LimitRanger`` admission plugin runs before ResourceQuota admission: it gives each container
(and init container) that sets no limit of a resource the LimitRange's ``default``, and no request
the ``defaultRequest``; a request the container left out but whose limit it set is already the
limit (the API's defaulting comes first). So a template without requests, in a namespace whose
LimitRange gives defaults (the usual companion of a quota on ``requests.cpu``, which refuses pods
without requests), is charged the defaults. Reading the template as it is would count such pods as
free and plan replicas the quota then refuses.

Each LimitRange of the namespace is applied in turn (in the order listed; the admission plugin's
order is its cache's, which Kubernetes does not define: namespaces rarely have more than one), and
each fills only what is still missing; within one LimitRange, a later Container item's value wins
over an earlier one's. Its own defaulting (done when it is stored; repeated here for objects read without it): a missing
``default`` is its ``max``; a missing ``defaultRequest`` is its ``default``, else its ``min``. Only
items of ``type: Container`` give defaults.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: Per LimitRange: (default limits, default requests) of its Container items.
Defaults = tuple[dict[str, Any], dict[str, Any]]


def container_defaults(limit_ranges: Sequence[Mapping[str, Any]]) -> list[Defaults]:
    """The Container defaults of ``limit_ranges`` (LimitRange objects, in the order listed)."""
    out: list[Defaults] = []
    for lr in limit_ranges:
        default: dict[str, Any] = {}
        request: dict[str, Any] = {}
        for item in (lr.get("spec") or {}).get("limits") or []:
            if not isinstance(item, Mapping) or item.get("type") != "Container":
                continue
            item_default = {**(item.get("max") or {}), **(item.get("default") or {})}
            # several Container items of one LimitRange: the later one's value wins (LimitRanger
            # copies each item's defaults into one map in turn)
            default.update(item_default)
            request.update({**(item.get("min") or {}), **item_default, **(item.get("defaultRequest") or {})})
        if default or request:
            out.append((default, request))
    return out


def with_defaults(template: Mapping[str, Any], defaults: Sequence[Defaults]) -> Mapping[str, Any]:
    """``template`` with every container's missing requests and limits filled as LimitRanger would."""
    if not defaults:
        return template
    spec = template.get("spec") or {}

    def fill(c: Mapping[str, Any]) -> dict[str, Any]:
        res = dict(c.get("resources") or {})
        limits = dict(res.get("limits") or {})
        requests = dict(res.get("requests") or {})
        for name, value in limits.items():  # the API's defaulting: a request left out is the limit
            requests.setdefault(name, value)
        for default, default_request in defaults:
            for name, value in default.items():
                limits.setdefault(name, value)
            for name, value in default_request.items():
                requests.setdefault(name, value)
        return {**c, "resources": {**res, "limits": limits, "requests": requests}}

    filled = dict(spec)
    for key in ("containers", "initContainers"):
        if spec.get(key):
            filled[key] = [fill(c) for c in spec[key]]
    return {**template, "spec": filled}
