"""Instance files from Python: round trip, and bad files refused with the array and reason."""

import numpy as np
import pytest

import attnflow


def test_save_load_round_trip(tmp_path):
    arrays = {
        "X": np.arange(24, dtype=float).reshape(2, 3, 4),
        "y": np.array([1.0, -1.0]),
        "F": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
    }
    path = tmp_path / "mine.npz"
    attnflow.save_instance(str(path), arrays)
    back = attnflow.load_instance(str(path))
    assert sorted(back) == sorted(arrays)
    for k, v in arrays.items():
        assert back[k].shape == v.shape
        np.testing.assert_array_equal(back[k], v)


def test_reads_numpy_savez(tmp_path):
    path = tmp_path / "np.npz"
    np.savez(path, X=np.ones((2, 2), dtype=np.int64), y=np.array([True, False]))
    back = attnflow.load_instance(str(path))
    np.testing.assert_array_equal(back["X"], np.ones((2, 2)))
    np.testing.assert_array_equal(back["y"], [1.0, 0.0])


def test_non_finite_entry_names_the_entry(tmp_path):
    path = tmp_path / "bad.npz"
    X = np.zeros((2, 3))
    X[1, 2] = np.nan
    np.savez(path, X=X)
    with pytest.raises(attnflow.InputError, match=r"bad\.npz: X\[1, 2\]"):
        attnflow.load_instance(str(path))
    with pytest.raises(attnflow.InputError, match=r"X\[1, 2\]"):
        attnflow.save_instance(str(tmp_path / "out.npz"), {"X": X})
    assert not (tmp_path / "out.npz").exists()


def test_missing_file_and_wrong_extension(tmp_path):
    with pytest.raises(attnflow.InputError, match="nope.npz"):
        attnflow.load_instance(str(tmp_path / "nope.npz"))
    with pytest.raises(attnflow.InputError, match=r"\.npz"):
        attnflow.save_instance(str(tmp_path / "x.txt"), {"a": np.ones(2)})
    with pytest.raises(attnflow.InputError, match="not a numeric array"):
        attnflow.save_instance(str(tmp_path / "x.npz"), {"a": ["x", "y"]})
