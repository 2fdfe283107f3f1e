"""Numbers in command-chat messages and document titles, Chinese and English.

Arabic digits (full-width too, leading zeros allowed), Chinese numerals (一..九, 十, 百, 千, 万,
两, 〇/零, the financial forms), English number words and ordinals ("twenty-one", "fifth",
"5th") and Roman numerals; and the other way: a number as a Chinese numeral or English ordinal.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

# Arabic numbers longer than this are not chapter numbers (and int() of huge strings is slow).
MAX_DIGITS: Final = 9


_ZH_DIGITS: Final = {
    "零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7,
    "八": 8, "九": 9, "壹": 1, "贰": 2, "叁": 3, "肆": 4, "伍": 5, "陆": 6, "柒": 7, "捌": 8, "玖": 9,
}
_ZH_UNITS: Final = {"十": 10, "拾": 10, "百": 100, "佰": 100, "千": 1000, "仟": 1000}
_ZH_MYRIAD: Final = {"万": 10_000, "萬": 10_000}
ZH_NUMERAL_CHARS: Final = "".join([*_ZH_DIGITS, *_ZH_UNITS, *_ZH_MYRIAD])
CHINESE_NUMBER: Final = f"[{ZH_NUMERAL_CHARS}]+"
"""A regular expression for a run of Chinese numeral characters (check it with :func:`parse_number`)."""

_EN_UNITS: Final = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen",
)
_EN_TENS: Final = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_EN_ORDINAL_UNITS: Final = (
    "zeroth", "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
    "tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth",
    "seventeenth", "eighteenth", "nineteenth",
)
_EN_ORDINAL_TENS: Final = (
    "twentieth", "thirtieth", "fortieth", "fiftieth", "sixtieth", "seventieth", "eightieth",
    "ninetieth",
)
_CARDINAL: Final = {word: value for value, word in enumerate(_EN_UNITS)} | {
    word: 20 + 10 * i for i, word in enumerate(_EN_TENS)
}
_ORDINAL: Final = {word: value for value, word in enumerate(_EN_ORDINAL_UNITS)} | {
    word: 20 + 10 * i for i, word in enumerate(_EN_ORDINAL_TENS)
}


def _alternation(words: tuple[str, ...] | list[str]) -> str:
    return "|".join(sorted(words, key=lambda w: (-len(w), w)))


_UNIT_RE: Final = _alternation(list(_EN_UNITS))
_DIGIT_WORD_RE: Final = _alternation(list(_EN_UNITS[1:10]))
_TENS_RE: Final = _alternation(list(_EN_TENS))
_ORD_UNIT_RE: Final = _alternation(list(_EN_ORDINAL_UNITS))
_ORD_DIGIT_RE: Final = _alternation(list(_EN_ORDINAL_UNITS[1:10]))
_ORD_TENS_RE: Final = _alternation(list(_EN_ORDINAL_TENS))
_BELOW_100: Final = f"(?:(?:{_TENS_RE})(?:[-\\s](?:{_DIGIT_WORD_RE}))?|(?:{_UNIT_RE}))"
_ORD_BELOW_100: Final = (
    f"(?:(?:{_TENS_RE})[-\\s](?:{_ORD_DIGIT_RE})|(?:{_ORD_TENS_RE})|(?:{_ORD_UNIT_RE}))"
)
_HUNDRED: Final = f"(?:a|{_DIGIT_WORD_RE})\\s+hundred"
ENGLISH_ORDINAL: Final = (
    f"(?:{_HUNDRED}\\s+(?:and\\s+)?{_ORD_BELOW_100}|{_ORD_BELOW_100}|\\d{{1,{MAX_DIGITS}}}(?:st|nd|rd|th))"
)
"""A regular expression for an English ordinal ("fifth", "twenty-first", "5th")."""
ENGLISH_NUMBER: Final = (
    f"(?:{_HUNDRED}(?:\\s+(?:and\\s+)?{_BELOW_100})?|{ENGLISH_ORDINAL}|{_BELOW_100})"
)
"""A regular expression for an English number in words or an ordinal ("twenty-one", "fifth", "5th")."""

_DIGIT_ORDINAL: Final = re.compile(f"(\\d{{1,{MAX_DIGITS}}})(?:st|nd|rd|th)", re.IGNORECASE)


def _parse_chinese(text: str) -> int | None:
    """A Chinese numeral: "五", "十二", "二十三", "一百零五", "两百", "一百五" (150), "二〇二四" (2024)."""
    if not text or any(ch not in ZH_NUMERAL_CHARS for ch in text):
        return None
    if not any(ch in _ZH_UNITS or ch in _ZH_MYRIAD for ch in text):
        # Digits read position by position ("二〇二四", "〇五"); 两 only stands alone.
        if len(text) > 1 and "两" in text:
            return None
        if len(text) > MAX_DIGITS:
            return None
        value = 0
        for ch in text:
            value = value * 10 + _ZH_DIGITS[ch]
        return value
    total = 0
    section = 0
    digit: int | None = None
    last_unit: int | None = None
    zero_seen = False
    myriad_seen = False
    for ch in text:
        if ch in _ZH_DIGITS:
            value = _ZH_DIGITS[ch]
            if digit is not None:
                return None
            if value == 0:
                zero_seen = True
            else:
                digit = value
        elif ch in _ZH_UNITS:
            unit = _ZH_UNITS[ch]
            if last_unit is not None and unit >= last_unit:
                return None
            section += (1 if digit is None else digit) * unit
            digit = None
            last_unit = unit
            zero_seen = False
        else:
            if myriad_seen:
                return None
            myriad_seen = True
            section += 0 if digit is None else digit
            total = (section or 1) * _ZH_MYRIAD[ch]
            section = 0
            digit = None
            last_unit = None
            zero_seen = False
    if digit is not None:
        if zero_seen:
            section += digit
        elif last_unit is not None and last_unit >= 100:
            section += digit * (last_unit // 10)  # 一百五 is 150, 三千二 is 3200
        elif last_unit is None and myriad_seen:
            section += digit * 1000  # 三万五 is 35000
        else:
            section += digit
    return total + section


def _parse_english(text: str) -> int | None:
    """English number words: "five", "twenty-one", "a hundred and five", "fifth", "twenty-first"."""
    words = text.lower().replace("-", " ").split()
    if not words:
        return None
    value = 0
    if len(words) >= 2 and words[1] == "hundred":
        head = 1 if words[0] == "a" else _CARDINAL.get(words[0])
        if head is None or not 1 <= head <= 9:
            return None
        value = head * 100
        words = words[2:]
        if words and words[0] == "and":
            words = words[1:]
        if not words:
            return value
    last = words[-1]
    ordinal = _ORDINAL.get(last)
    body = [*words[:-1], last] if ordinal is None else words[:-1]
    tail = 0 if ordinal is None else ordinal
    if len(body) > 2:
        return None
    parts = [_CARDINAL.get(word) for word in body]
    if any(part is None for part in parts):
        return None
    numbers = [part for part in parts if part is not None]
    if ordinal is not None:
        if numbers and not (len(numbers) == 1 and numbers[0] >= 20 and numbers[0] % 10 == 0
                            and 1 <= tail <= 9):
            return None
        return value + sum(numbers) + tail
    if len(numbers) == 2 and not (numbers[0] >= 20 and numbers[0] % 10 == 0 and 1 <= numbers[1] <= 9):
        return None
    return value + sum(numbers)


def parse_number(text: str) -> int | None:
    """The number ``text`` is, or None.

    The whole text (trimmed, an optional leading "第" or "#" aside) is one number: Arabic digits
    (full-width too, leading zeros allowed: "05" is 5), a Chinese numeral ("五", "十二", "二十",
    "一百零五", "两", "〇", "二〇二四"), English words ("one" to "twenty", "twenty-one", "a hundred
    and five") or an ordinal ("first" to "twentieth", "twenty-first", "5th").
    """
    cleaned = unicodedata.normalize("NFKC", text).strip()
    if cleaned[:1] in ("第", "#"):
        cleaned = cleaned[1:].strip()
    if not cleaned:
        return None
    if cleaned.isascii() and cleaned.isdigit():
        return int(cleaned) if len(cleaned.lstrip("0")) <= MAX_DIGITS else None
    ordinal = _DIGIT_ORDINAL.fullmatch(cleaned)
    if ordinal is not None:
        return int(ordinal.group(1))
    if not cleaned.isascii():
        return _parse_chinese(cleaned)
    if cleaned.isascii():
        return _parse_english(cleaned)
    return None


def parse_roman(text: str) -> int | None:
    """A Roman numeral from I to CCCXCIX written canonically ("IV", not "IIII"), else None."""
    value = 0
    rest = text.upper()
    for symbol, amount in (("CCC", 300), ("CC", 200), ("XC", 90), ("C", 100), ("XL", 40),
                           ("L", 50), ("XXX", 30), ("XX", 20), ("IX", 9), ("X", 10), ("IV", 4),
                           ("V", 5), ("III", 3), ("II", 2), ("I", 1)):
        if rest.startswith(symbol):
            value += amount
            rest = rest[len(symbol):]
    if rest or value == 0 or _to_roman(value) != text.upper():
        return None
    return value


def _to_roman(value: int) -> str:
    out = []
    for amount, symbol in ((100, "C"), (90, "XC"), (50, "L"), (40, "XL"), (10, "X"), (9, "IX"),
                           (5, "V"), (4, "IV"), (1, "I")):
        while value >= amount:
            out.append(symbol)
            value -= amount
    return "".join(out)


def chinese_numeral(value: int) -> str:
    """``value`` (0..99999) in Chinese numerals, as written in a chapter heading ("五", "十二", "一百零五").

    Larger numbers, and negative ones, are given in Arabic digits.
    """
    if not 0 <= value < 100_000:
        return str(value)
    if value == 0:
        return "零"
    digits = "零一二三四五六七八九"
    out: list[str] = []
    zero_pending = False
    for unit, symbol in ((10_000, "万"), (1000, "千"), (100, "百"), (10, "十"), (1, "")):
        digit = value // unit % 10
        if digit == 0:
            if out:
                zero_pending = True
            continue
        if zero_pending:
            out.append("零")
            zero_pending = False
        if not (unit == 10 and digit == 1 and not out):
            out.append(digits[digit])
        out.append(symbol)
    return "".join(out)


def ordinal_en(value: int) -> str:
    """``value`` with its English ordinal suffix ("1st", "2nd", "11th", "23rd")."""
    if 10 <= value % 100 <= 20:
        return f"{value}th"
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(value % 10, "th")
    return f"{value}{suffix}"


