"""Numbers in chat messages and titles: Arabic, Chinese, English words, ordinals and Roman numerals."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.chat.numerals import chinese_numeral, ordinal_en, parse_number, parse_roman

# --- an independent writer of Chinese numerals, for round trips ---------------------------------

_DIGITS = "零一二三四五六七八九"


def _zh(n: int) -> str:
    """``n`` (1..9999) as a Chinese numeral, written the way chapter headings write it."""
    out = ""
    thousands, hundreds, tens, ones = n // 1000, n // 100 % 10, n // 10 % 10, n % 10
    if thousands:
        out += _DIGITS[thousands] + "千"
    if hundreds:
        out += _DIGITS[hundreds] + "百"
    elif thousands and (tens or ones):
        out += "零"
    if tens:
        out += ("" if n < 20 else _DIGITS[tens]) + "十"
    elif (thousands or hundreds) and ones and not out.endswith("零"):
        out += "零"
    if ones:
        out += _DIGITS[ones]
    return out



# --- parse_number --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5", 5), ("05", 5), ("0", 0), ("123", 123), ("０５", 5), ("１２", 12), (" 7 ", 7),
        ("五", 5), ("十", 10), ("十二", 12), ("二十", 20), ("二十三", 23), ("一百零五", 105),
        ("一百一十", 110), ("两", 2), ("两百", 200), ("〇", 0), ("零", 0), ("百", 100), ("千", 1000),
        ("一千零五十", 1050), ("一百五", 150), ("三万五", 35000), ("二〇二四", 2024), ("一十", 10),
        ("第五", 5), ("第12", 12), ("#3", 3), ("伍", 5), ("拾贰", 12),
        ("one", 1), ("ten", 10), ("twelve", 12), ("twenty", 20), ("twenty-one", 21),
        ("twenty one", 21), ("ninety-nine", 99), ("Thirty", 30), ("a hundred", 100),
        ("one hundred and five", 105), ("two hundred twenty-one", 221),
        ("first", 1), ("second", 2), ("fifth", 5), ("twelfth", 12), ("twentieth", 20),
        ("twenty-first", 21), ("thirtieth", 30), ("5th", 5), ("1st", 1), ("22nd", 22), ("3rd", 3),
    ],
)
def test_parse_number_reads_every_script(text: str, expected: int) -> None:
    """Arabic (full-width, leading zeros), Chinese numerals, English words and ordinals are numbers."""
    assert parse_number(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", " ", "chapter", "五五五五五五五五五五五", "十十", "两两", "twenty twenty", "five five",
     "first second", "one-hundred-hundred", "1" * 5000, "0x10", "5.5", "-3", "第", "灯塔", "fifth one"],
)
def test_parse_number_rejects_what_is_not_one_number(text: str) -> None:
    """Words, mixed runs, malformed numerals and overlong digit strings are not numbers."""
    assert parse_number(text) is None


@given(st.integers(min_value=1, max_value=999))
def test_parse_number_round_trips_chinese_numerals(n: int) -> None:
    """Every number 1..999 written as a Chinese numeral (by the test's own writer) reads back."""
    assert parse_number(_zh(n)) == n


@given(st.integers(min_value=0, max_value=99_999))
def test_chinese_numeral_round_trips(n: int) -> None:
    """``chinese_numeral`` writes what ``parse_number`` reads back, up to 99999."""
    assert parse_number(chinese_numeral(n)) == n


@pytest.mark.parametrize(("n", "text"), [(5, "五"), (10, "十"), (12, "十二"), (20, "二十"), (105, "一百零五"),
                                         (110, "一百一十"), (1005, "一千零五"), (100_000, "100000")])
def test_chinese_numeral_writes_heading_style(n: int, text: str) -> None:
    """``chinese_numeral`` writes numbers as headings do (十二, not 一十二); huge ones in digits."""
    assert chinese_numeral(n) == text


@given(st.integers(min_value=0, max_value=10**9 - 1))
def test_parse_number_round_trips_arabic(n: int) -> None:
    """Any Arabic number up to nine digits reads back, with or without leading zeros."""
    assert parse_number(str(n)) == n
    assert parse_number(f"00{n}") == n


_EN_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
             "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
             "nineteen"]
_EN_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


@given(st.integers(min_value=0, max_value=99))
def test_parse_number_round_trips_english_words(n: int) -> None:
    """English words for 0..99 (hyphenated compounds) read back."""
    words = _EN_WORDS[n] if n < 20 else _EN_TENS[n // 10] + (f"-{_EN_WORDS[n % 10]}" if n % 10 else "")
    assert parse_number(words) == n


@pytest.mark.parametrize(("n", "text"), [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"),
                                         (12, "12th"), (13, "13th"), (21, "21st"), (112, "112th")])
def test_ordinal_en_suffixes(n: int, text: str) -> None:
    """``ordinal_en`` gives English ordinal suffixes, 11th-13th included."""
    assert ordinal_en(n) == text
    assert parse_number(text) == n


@pytest.mark.parametrize(("text", "expected"), [("IV", 4), ("v", 5), ("XII", 12), ("XL", 40), ("IIII", None),
                                                ("VV", None), ("civil", None), ("", None)])
def test_parse_roman_reads_canonical_numerals_only(text: str, expected: int | None) -> None:
    """Roman numerals read case-insensitively when written canonically; words that look like them do not."""
    assert parse_roman(text) == expected
