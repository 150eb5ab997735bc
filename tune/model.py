"""A learned cost model: ridge regression on candidate features, trained online.

It predicts log(time) from a point's features (log2 tile sizes, packing flags, working
set sizes against cache sizes, register-tile area) plus their pairwise products (so the
model can express "big kc is good only when B is packed"). With few measurements it
is not trusted: the tuner ranks by it only once it has `min_samples` points, and always
measures some random candidates too (exploration).
"""

from __future__ import annotations

import math

import numpy as np


class RidgeCostModel:
    def __init__(self, alpha: float = 1.0, min_samples: int = 4):
        self.alpha = alpha
        self.min_samples = min_samples
        self.xs: list[list[float]] = []
        self.ys: list[float] = []
        self.w: np.ndarray | None = None
        self.mu: np.ndarray | None = None
        self.sd: np.ndarray | None = None

    @staticmethod
    def _expand(x: list[float]) -> np.ndarray:
        v = np.asarray(x, dtype=float)
        pairs = np.outer(v, v)[np.triu_indices(len(v))]
        return np.concatenate([v, pairs])

    def update(self, features: list[float], seconds: float) -> None:
        self.xs.append(features)
        self.ys.append(math.log(seconds))
        self.fit()

    @property
    def trained(self) -> bool:
        return self.w is not None and len(self.ys) >= self.min_samples

    def fit(self) -> None:
        if len(self.ys) < 2:
            return
        X = np.stack([self._expand(x) for x in self.xs])
        self.mu, self.sd = X.mean(0), X.std(0) + 1e-9
        Z = (X - self.mu) / self.sd
        Z = np.hstack([Z, np.ones((len(Z), 1))])
        y = np.asarray(self.ys)
        reg = self.alpha * np.eye(Z.shape[1])
        reg[-1, -1] = 0.0  # do not shrink the intercept
        self.w = np.linalg.solve(Z.T @ Z + reg, Z.T @ y)

    def predict(self, features: list[float]) -> float:
        """Predicted log(seconds); 0 before training."""
        if self.w is None:
            return 0.0
        z = (self._expand(features) - self.mu) / self.sd
        return float(np.append(z, 1.0) @ self.w)
