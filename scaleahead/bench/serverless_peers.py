"""The peers of the serverless benchmark: fixed keep-alive, the hybrid histogram policy, the oracle.

Each peer is an online policy over many functions at once: ``decide()`` says which functions have a
warm instance for the coming minute, using only the minutes ``observe()`` has shown it (the oracle
is the one exception, by definition). EVALUATION.md section 5 defines them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


class FixedKeepAlive:
    """Fixed keep-alive: an instance stays warm ``minutes`` after the minute of its last invocation.

    This is the policy of the public FaaS platforms that Shahrad et al. (USENIX ATC 2020, section 4)
    compare against (AWS Lambda and Azure Functions kept idle instances for a fixed 10 to 20 min).
    Minute ``m`` is warm when the function's last invocation was in minute ``l`` with
    ``1 <= m - l <= minutes``; a function never invoked is cold.
    """

    def __init__(self, n_functions: int, minutes: int) -> None:
        self.minutes = minutes
        self._last = np.full(n_functions, -1, dtype=np.int64)
        self._t = 0

    def decide(self) -> BoolArray:
        idle = self._t - self._last
        out: BoolArray = (self._last >= 0) & (idle >= 1) & (idle <= self.minutes)
        return out

    def observe(self, counts: IntArray) -> None:
        self._last = np.where(np.asarray(counts) > 0, self._t, self._last)
        self._t += 1


class HybridHistogram:
    """The hybrid histogram policy of Shahrad et al., "Serverless in the Wild: Characterizing and
    Optimizing the Serverless Workload at a Large Cloud Provider", USENIX ATC 2020, section 4.2.

    Per application (the unit that is loaded and kept warm; every function of an app shares it):

    - a range-limited histogram of idle times (minutes from one invocation to the next) with
      1-minute bins over a 4-hour range (``range_minutes`` = 240); longer idle times are
      out of bounds (OOB);
    - when the histogram is representative, the *pre-warming window* is its 5th percentile (head)
      and the *keep-alive window* reaches its 99th percentile (tail), with a 10 % margin on both
      (head x 0.9 rounded down, tail x 1.1 rounded up): after an invocation in minute ``l`` the
      instance is unloaded and loaded again at ``l + prewarm``, then kept alive until
      ``l + keepalive``; a pre-warm of 0 means it is not unloaded at all;
    - the histogram is representative when the coefficient of variation (CV) of its bin counts is
      at least 2 (the paper's threshold; a flat histogram has CV near 0, a single spike about 15)
      and most idle times are within range; otherwise, and before any idle time is seen, the
      standard keep-alive applies: no pre-warm and a fixed keep-alive of the whole range (4 h).

    The paper sends apps with many OOB idle times to an ARIMA forecast; EVALUATION.md section 5 fixes
    the 4 h keep-alive for every non-representative histogram, which is what this class does.
    """

    def __init__(
        self,
        apps: Sequence[str],
        range_minutes: int = 240,
        head_pct: float = 5.0,
        tail_pct: float = 99.0,
        margin: float = 0.10,
        cv_threshold: float = 2.0,
        max_oob_share: float = 0.5,
    ) -> None:
        names = sorted(set(apps))
        self._app_of = np.array([names.index(a) for a in apps], dtype=np.int64)
        n_apps = len(names)
        self.range = range_minutes
        self.head_pct = head_pct
        self.tail_pct = tail_pct
        self.margin = margin
        self.cv_threshold = cv_threshold
        self.max_oob_share = max_oob_share
        self._hist = np.zeros((n_apps, range_minutes + 1), dtype=np.int64)  # [apps, idle minutes 0..range]
        self._oob = np.zeros(n_apps, dtype=np.int64)
        self._last = np.full(n_apps, -1, dtype=np.int64)
        self.prewarm = np.zeros(n_apps, dtype=np.int64)
        self.keepalive = np.full(n_apps, range_minutes, dtype=np.int64)
        self._t = 0

    def windows(self, app: int) -> tuple[int, int]:
        """(pre-warm, keep-alive end) in minutes after the last invocation, from the app's histogram."""
        counts = self._hist[app, 1:]
        n = int(counts.sum())
        oob = int(self._oob[app])
        if n == 0 or oob > self.max_oob_share * (n + oob):
            return 0, self.range
        cv = float(counts.std() / counts.mean())
        if cv < self.cv_threshold:
            return 0, self.range
        cdf = np.cumsum(counts) / n
        head = int(np.searchsorted(cdf, self.head_pct / 100.0 - 1e-12)) + 1
        tail = int(np.searchsorted(cdf, self.tail_pct / 100.0 - 1e-12)) + 1
        prewarm = int(np.floor(head * (1.0 - self.margin) + 1e-9))
        keepalive = int(np.ceil(tail * (1.0 + self.margin) - 1e-9))
        return prewarm, keepalive

    def decide(self) -> BoolArray:
        idle = self._t - self._last
        warm_app = (self._last >= 0) & (idle >= np.maximum(self.prewarm, 1)) & (idle <= self.keepalive)
        out: BoolArray = warm_app[self._app_of]
        return out

    def observe(self, counts: IntArray) -> None:
        active_fn = np.asarray(counts) > 0
        active = np.zeros(len(self._last), dtype=bool)
        active[self._app_of[active_fn]] = True
        for app in np.nonzero(active)[0]:
            if self._last[app] >= 0:
                idle = self._t - int(self._last[app])
                if idle <= self.range:
                    self._hist[app, idle] += 1
                else:
                    self._oob[app] += 1
                self.prewarm[app], self.keepalive[app] = self.windows(int(app))
            self._last[app] = self._t
        self._t += 1


class Oracle:
    """Perfect foresight: warm exactly the minutes that have invocations (zero cold starts, zero waste).

    It peeks by definition: ``decide`` is given the minute's counts.
    """

    def decide_with(self, counts: IntArray) -> BoolArray:
        out: BoolArray = np.asarray(counts) > 0
        return out
