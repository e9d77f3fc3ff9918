"""What makes an embedding answer usable, checked for every provider's answer.

A vector the agent cannot rank with must never reach a vector pack or embeddings.bin:
a zero row quantises to a zero row (cosine 0 with everything, so the chunk is invisible
to semantic search), and a NaN or infinite component normalises to garbage or to zero.
A short or over-long answer, or rows of the wrong dimension, say the answer is not for
these texts at all.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

NORM_FLOOR = 1e-6
"""Rows whose L2 norm is at or below this are refused: real embeddings have norms
near 1 (unnormalised Gemini rows at low dimensions are still above 0.1)."""


class InvalidAnswer(ValueError):
    """The answer as a whole does not fit the request (count or dimension)."""


def answer_matrix(rows: npt.ArrayLike, expected: int, dimension: int) -> npt.NDArray[np.float64]:
    """The answer as float64 (expected × dimension), or InvalidAnswer naming the misfit."""
    try:
        matrix = np.asarray(rows, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidAnswer(f"answer is not a matrix of numbers ({exc})") from None
    if matrix.ndim != 2 or matrix.shape[0] != expected:
        got = matrix.shape[0] if matrix.ndim >= 1 else 0
        raise InvalidAnswer(f"{got} vectors for {expected} texts")
    if matrix.shape[1] != dimension:
        raise InvalidAnswer(f"vectors of dimension {matrix.shape[1]}, expected {dimension}")
    return matrix


def row_problems(matrix: npt.NDArray[np.float64]) -> list[str | None]:
    """Per row: None when usable, else why not (non-finite values, norm at the floor)."""
    finite: list[bool] = np.all(np.isfinite(matrix), axis=1).tolist()
    safe = np.where(np.isfinite(matrix), matrix, 0.0)
    norms: list[float] = np.sqrt(np.einsum("ij,ij->i", safe, safe)).tolist()
    problems: list[str | None] = []
    for ok, norm in zip(finite, norms, strict=True):
        if not ok:
            problems.append("invalid answer: non-finite values (NaN or infinity)")
        elif norm <= NORM_FLOOR:
            problems.append(f"invalid answer: norm {norm:.3g} (a zero vector)")
        else:
            problems.append(None)
    return problems


def zero_rows(vectors: npt.NDArray[np.int8]) -> npt.NDArray[np.bool_]:
    """Stored int8 rows that are all zero (an earlier bad answer): to be re-embedded."""
    if vectors.size == 0:
        return np.zeros(vectors.shape[0], dtype=bool)
    return np.logical_not(np.any(vectors, axis=1))
