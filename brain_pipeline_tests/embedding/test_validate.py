"""Every answer is validated: count, dimension, finite values, norm above the floor."""

from __future__ import annotations

import math

import numpy as np
import pytest

from brain_pipeline.embedding.validate import (
    InvalidAnswer,
    answer_matrix,
    row_problems,
    zero_rows,
)


def test_count_and_dimension_are_checked() -> None:
    with pytest.raises(InvalidAnswer, match="2 vectors for 3 texts"):
        answer_matrix([[0.1, 0.2], [0.3, 0.4]], 3, 2)
    with pytest.raises(InvalidAnswer, match="dimension 2, expected 4"):
        answer_matrix([[0.1, 0.2]], 1, 4)
    with pytest.raises(InvalidAnswer):
        answer_matrix([[0.1, 0.2], [0.3]], 2, 2)
    assert answer_matrix([[0.1, 0.2]], 1, 2).dtype == np.float64


def test_rows_that_are_not_finite_or_zero_are_named() -> None:
    rows = np.array([[0.1, 0.2], [0.0, 0.0], [math.nan, 0.1], [math.inf, 0.0], [1e-9, 0.0]])
    problems = row_problems(rows)
    assert problems[0] is None
    assert "zero" in str(problems[1]) and "zero" in str(problems[4])
    assert "non-finite" in str(problems[2]) and "non-finite" in str(problems[3])


def test_stored_zero_rows_are_found() -> None:
    stored = np.array([[1, 0], [0, 0], [0, -3]], dtype=np.int8)
    assert zero_rows(stored).tolist() == [False, True, False]
