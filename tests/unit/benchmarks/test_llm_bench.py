"""``ferret bench llm``'s arithmetic: a paired comparison's interval and sign test."""

from benchmarks.llm import paired


def test_paired_differences_give_a_mean_an_interval_and_a_sign_test():
    same = paired([0.0] * 10)
    assert same["mean"] == 0 and same["ci95"] == [0.0, 0.0] and same["ties"] == 10 and same["sign_test_p"] == 1.0
    better = paired([1.0] * 8 + [0.0] * 2)
    assert better["wins"] == 8 and better["losses"] == 0 and better["sign_test_p"] == round(2 / 2 ** 8, 4)
    assert 0.5 <= better["ci95"][0] <= better["mean"] == 0.8 <= better["ci95"][1] <= 1.0
    mixed = paired([1.0, -1.0, 1.0, -1.0])
    assert mixed["sign_test_p"] == 1.0 and mixed["ci95"][0] < 0 < mixed["ci95"][1]
    assert paired([]) == {"n": 0}
