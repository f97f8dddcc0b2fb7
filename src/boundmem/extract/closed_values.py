"""Which listed item of a closed category the user's words imply when they name none.

"I always go for the cheapest fuel" means "Always cheapest"; "fuel price doesn't really matter
to me" means "Price is irrelevant". Cosine to the item's name cannot tell these apart (both are
about fuel price, and an embedding hardly sees the negation), so guessing by it stores the wrong
item about half the time: a value the user never said. This is a learned decision instead: per
closed category of the schema it was trained for, a softmax over the listed items on the
sentence's MiniLM embedding (`boundmem_bench/train/closed_values.py`: CarMem users 51-100 and the challenge
set's train split). It is trusted only above a probability calibrated on a held-out part of the
training users, otherwise nothing is stored. Schemas it was not trained for get no implied items.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ..schema.model import DetailRef


@dataclass
class ClosedValueModel:
    embedder: str
    dim: int
    threshold: float
    heads: dict[str, tuple[tuple[str, ...], np.ndarray, np.ndarray]]   # detail path -> (items, W (dim, n), b (n,))

    def fits(self, embedder_name: str, dim: int) -> bool:
        return embedder_name == self.embedder and dim == self.dim

    def implied(self, ref: DetailRef, x: np.ndarray) -> tuple[Optional[str], float]:
        """(item, probability) for a category this model knows with the same items; (None, 0) otherwise."""
        head = self.heads.get(str(ref.path))
        if head is None or tuple(head[0]) != tuple(ref.detail.attributes):
            return None, 0.0
        items, W, b = head
        z = x.astype(np.float32) @ W + b
        z = z - z.max()
        p = np.exp(z)
        p /= p.sum()
        j = int(p.argmax())
        return items[j], float(p[j])

    def save(self, path: str | Path) -> None:
        arrays: dict[str, np.ndarray] = {"meta": np.array([self.embedder, str(self.dim), str(self.threshold)])}
        for i, (key, (items, W, b)) in enumerate(sorted(self.heads.items())):
            arrays[f"k{i}"] = np.array([key, *items])
            arrays[f"W{i}"] = W.astype(np.float32)
            arrays[f"b{i}"] = b.astype(np.float32)
        np.savez_compressed(path, **arrays)

    @classmethod
    def load(cls, path: str | Path) -> "ClosedValueModel":
        with np.load(path, allow_pickle=False) as z:
            meta = [str(v) for v in z["meta"]]
            heads = {}
            i = 0
            while f"k{i}" in z.files:
                names = [str(v) for v in z[f"k{i}"]]
                heads[names[0]] = (tuple(names[1:]), z[f"W{i}"], z[f"b{i}"])
                i += 1
        return cls(embedder=meta[0], dim=int(meta[1]), threshold=float(meta[2]), heads=heads)


BUNDLED = "incar_closed.npz"


def bundled_closed_values() -> Optional[ClosedValueModel]:
    path = Path(__file__).with_name("data") / BUNDLED
    return ClosedValueModel.load(path) if path.is_file() else None
