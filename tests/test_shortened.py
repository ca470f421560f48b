"""The package's one text-shortening helper (core.text.shortened), as each of its users calls it."""

from apibank_bench.core.text import shortened
from apibank_bench.optimize.rollouts import clip


def test_a_text_is_cut_at_its_start_or_its_end_with_the_mark_where_it_was_cut():
    assert shortened("abcdef", 3) == "abc..."
    assert shortened("abcdef", 3, end=True) == "...def"
    assert shortened("abcdef", 3, end=True, mark="[...]\n") == "[...]\ndef"
    assert shortened("abc", 3) == "abc" and shortened("abcdef", 0) == "abcdef"  # fits; no limit
    assert clip("  " + "x" * 10 + "  ", 4) == "xxxx [...]"  # the optimizer's: trimmed first
