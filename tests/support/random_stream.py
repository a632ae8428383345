"""Random terminal streams for fuzz tests: pieces of a vocabulary, drawn by weight."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence


def random_stream(
    rng: random.Random, size: int, kinds: Sequence[tuple[float, Callable[[], str]]]
) -> str:
    """Pieces joined until there are at least `size` characters. Each piece is made by the first
    of `kinds` whose bound is above a draw `rng.random()` (so the last bound is 1.0): with
    kinds [(0.4, words), (1.0, escapes)], 40 % words and 60 % escapes."""
    out: list[str] = []
    length = 0
    while length < size:
        pick = rng.random()
        piece = next(make for bound, make in kinds if pick < bound)()
        out.append(piece)
        length += len(piece)
    return "".join(out)
