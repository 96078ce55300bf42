import numpy as np
import pytest

from ferret.worker.semantic.vectors import VectorIndex, unit_rows


def test_nearest_by_cosine_best_first_clipped_to_zero_one():
    index = VectorIndex()
    index.upsert(["x", "y", "minus"], [[1, 0], [1, 1], [-1, 0]])
    found = index.nearest([2, 0], 3)
    assert [i for i, _ in found] == ["x", "y", "minus"]
    assert found[0][1] == pytest.approx(1.0) and found[1][1] == pytest.approx(0.7071, abs=1e-4)
    assert found[2][1] == 0.0


def test_a_write_overwrites_in_place_and_a_delete_fills_the_hole():
    index = VectorIndex()
    index.upsert(["a", "b", "c"], np.eye(3))
    index.upsert(["a"], [[0, 0, 1]])  # a now points where c does
    index.delete(["b", "unknown"])
    assert len(index) == 2 and "b" not in index
    assert {i for i, s in index.nearest([0, 0, 1], 2) if s > 0.99} == {"a", "c"}
    index.upsert(["d"], [[0, 1, 0]])
    assert index.nearest([0, 1, 0], 1)[0][0] == "d"


def test_growth_keeps_every_row():
    index = VectorIndex()
    rng = np.random.default_rng(1)
    rows = rng.normal(size=(500, 8))
    for start in range(0, 500, 7):
        index.upsert([str(i) for i in range(start, min(start + 7, 500))], rows[start:start + 7])
    assert len(index) == 500 and index.nbytes >= 500 * 8 * 4
    for probe in (0, 123, 499):
        assert index.nearest(rows[probe], 1)[0][0] == str(probe)


def test_a_filter_looks_further_to_fill_the_limit():
    index = VectorIndex()
    index.upsert([str(i) for i in range(100)], unit_rows(np.random.default_rng(2).normal(size=(100, 4))))
    kept = index.nearest([1, 0, 0, 0], 5, keep=lambda i: int(i) % 10 == 0)
    assert len(kept) == 5 and all(int(i) % 10 == 0 for i, _ in kept)


def test_vectors_of_another_size_are_refused():
    index = VectorIndex()
    index.upsert(["a"], [[1, 0, 0]])
    with pytest.raises(ValueError, match="dimensions"):
        index.upsert(["b"], [[1, 0]])
    with pytest.raises(ValueError, match="ids"):
        index.upsert(["b", "c"], [[1, 0, 0]])
