"""The compact jieba dictionary: the same segmentation as jieba's own, read the same way."""

from __future__ import annotations

import io
import re
from pathlib import Path

import jieba
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from scripts.sample_data import NOVEL, ZH_CHAPTERS
from services.retrieval import segmenter
from services.retrieval.segmenter import CompactTokenizer, load_dictionary
from tests.retrieval_eval.corpus import build_corpus

COMPACT = CompactTokenizer()
_CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def stock(tmp_path_factory: pytest.TempPathFactory) -> jieba.Tokenizer:
    tokenizer = jieba.Tokenizer()
    tokenizer.tmp_dir = str(tmp_path_factory.mktemp("jieba"))  # its cache, kept out of /tmp
    tokenizer.initialize()
    return tokenizer


def _dictionary_words(step: int) -> list[str]:
    with jieba.get_dict_file() as lines:
        return [line.decode("utf-8").split(" ")[0] for number, line in enumerate(lines) if number % step == 0]


WORDS = _dictionary_words(97)
CHARACTERS = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FD5)
TEXTS = st.lists(st.one_of(st.sampled_from(WORDS), CHARACTERS, st.sampled_from("，。的了在是")),
                 min_size=1, max_size=40).map("".join)


def _chinese_texts() -> list[str]:
    texts = list(NOVEL["zh"].values()) + list(ZH_CHAPTERS.values())
    corpus = build_corpus(scale=0.2)
    texts += [document.text for document in corpus.documents if _CJK.search(document.text)]
    return texts


def test_sample_novel_and_evaluation_facts_segment_as_jieba_does(stock: jieba.Tokenizer) -> None:
    """Every Chinese text of the sample novel and of the retrieval evaluation's corpus (at a fifth
    of its size) gives jieba's own words in all three modes (search mode is what Strata indexes)."""
    texts = _chinese_texts()
    assert sum(map(len, texts)) > 50_000
    for text in texts:
        assert COMPACT.lcut_for_search(text) == stock.lcut_for_search(text)
        assert COMPACT.lcut(text) == stock.lcut(text)
        assert COMPACT.lcut(text, HMM=False) == stock.lcut(text, HMM=False)


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_any_chinese_text_segments_as_jieba_does(stock: jieba.Tokenizer, text: str) -> None:
    """For any mix of dictionary words, single characters and punctuation, the compact dictionary
    gives the same words as jieba's, with and without its HMM for unknown words."""
    assert COMPACT.lcut_for_search(text) == stock.lcut_for_search(text)
    assert COMPACT.lcut(text, HMM=False) == stock.lcut(text, HMM=False)


def test_frequencies_read_like_jiebas(stock: jieba.Tokenizer) -> None:
    """Words have jieba's frequency and total; a mere prefix or a non-word reads as falsy."""
    COMPACT.check_initialized()
    assert COMPACT.total == stock.total
    for word in WORDS[:2000]:
        assert COMPACT.FREQ.get(word) == stock.FREQ[word]
    assert not COMPACT.FREQ.get("灯塔下的")
    assert not COMPACT.FREQ.get("中华人民共")  # a prefix jieba keeps as 0
    assert stock.FREQ.get("中华人民共") == 0


def test_dictionary_file_reads_as_jieba_reads_it() -> None:
    """The last line of a repeated word wins, the total counts every line, frequency 0 is no word."""
    words, frequencies, total, longest = load_dictionary(io.BytesIO(
        "灯塔 5 n\n钥匙 3 n\n灯塔 7 n\n灯 0\n钥匙孔洞 2\n".encode()))
    assert total == 17
    assert longest == 4
    assert sorted(words.keys()) == sorted(["灯塔", "钥匙", "钥匙孔洞"])
    assert frequencies[words["灯塔"]] == 7
    assert frequencies[words["钥匙"]] == 3


def test_a_malformed_dictionary_line_names_its_number_only() -> None:
    """A line that is not ``word frequency`` is refused with its line number, not its text."""
    with pytest.raises(ValueError, match="line 2") as raised:
        load_dictionary(io.BytesIO("灯塔 5\n秘密的词 x\n".encode()))
    assert "秘密" not in str(raised.value)


def test_the_dictionary_cannot_be_changed() -> None:
    """Only the read side is supported: adding a word fails loudly instead of segmenting otherwise."""
    with pytest.raises(TypeError):
        COMPACT.add_word("铜钥匙", 10)
    with pytest.raises(ValueError, match="default dictionary"):
        CompactTokenizer().initialize("another.txt")


SAMPLE = "林远把铜钥匙藏在灯塔第三级台阶下，又用青苔盖住了缝隙。苏晴在钟楼顶上发现了一只银色怀表。"


def _cut(tokenizer: CompactTokenizer) -> list[str]:
    return list(tokenizer.cut_for_search(SAMPLE))


def test_the_built_dictionary_is_kept_in_the_cache_folder_and_read_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Given a cache folder, the first load builds the dictionary and writes one file there (and
    nothing else; the file of another jieba or format goes); the next load reads it without
    building, and segments as the built one does."""
    (tmp_path / "jieba-compact-0000000000000000.bin").write_bytes(b"another jieba's")
    first = CompactTokenizer(tmp_path)
    assert _cut(first) == _cut(COMPACT)
    assert [p.name for p in tmp_path.iterdir()] == [segmenter.cache_file(tmp_path).name]  # and no other

    def no_build(_: object) -> None:
        raise AssertionError("built again")

    monkeypatch.setattr(segmenter, "load_dictionary", no_build)
    again = CompactTokenizer(tmp_path)
    assert _cut(again) == _cut(COMPACT)
    assert again.total == COMPACT.total


@pytest.mark.parametrize("damage", ["flipped", "truncated", "garbage"])
def test_a_damaged_cache_file_is_built_again_and_replaced(tmp_path: Path, damage: str) -> None:
    """A cache file whose bytes do not match their SHA-256 (a flipped byte, a torn write) or that is
    not one at all is never read: the dictionary is built again, segments the same, and the file is
    replaced by a good one."""
    CompactTokenizer(tmp_path).initialize()
    path = segmenter.cache_file(tmp_path)
    data = bytearray(path.read_bytes())
    if damage == "flipped":
        data[-100] ^= 0xFF
    path.write_bytes(bytes(data[: len(data) // 2]) if damage == "truncated"
                     else b"not a dictionary" if damage == "garbage" else bytes(data))
    assert segmenter.read_cached(path) is None
    assert _cut(CompactTokenizer(tmp_path)) == _cut(COMPACT)
    assert segmenter.read_cached(path) is not None


def test_a_cache_folder_that_cannot_be_written_still_segments(tmp_path: Path) -> None:
    """A cache folder that cannot be made (a file stands there) costs the build at each start, with a
    warning that names the error type, and changes no term."""
    blocked = tmp_path / "cache"
    blocked.write_text("a file, not a folder")
    with capture_logs() as logs:
        assert _cut(CompactTokenizer(blocked)) == _cut(COMPACT)
    assert [e["exc_type"] for e in logs if e["event"] == "retrieval.dictionary_not_cached"] == [
        "FileExistsError"]
    assert [p.name for p in tmp_path.iterdir()] == ["cache"]
