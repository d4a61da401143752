"""The random generators of the analyses, named in every record that uses one.

All randomness comes from ``numpy.random.default_rng(seed)`` (bit generator PCG64).
The legacy ``numpy.random.RandomState`` draws differently from the same seed, so a
record that says only "numpy seed 7" cannot be reproduced; these records say which.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def seeded(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def rng_record(seed: int | None) -> dict[str, Any]:
    """How to rebuild the generator a record's numbers came from."""
    return {
        "generator": "numpy.random.default_rng",
        "bit_generator": "PCG64",
        "seed": seed,
        "numpy": np.__version__,
    }
