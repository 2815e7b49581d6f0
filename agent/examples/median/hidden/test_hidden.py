from stats import median


def test_median_of_even_count():
    assert median([1, 2, 3, 4]) == 2.5
    assert median([4, 1]) == 2.5
    assert median([5, 5, 1, 9]) == 5
