"""A deterministic generator of novel projects with planted facts, for the retrieval evaluation.

Each project is a folder of Markdown chapters (``卷一/第03章.md``,
``part-1/chapter-03.md``). A chapter is a heading and paragraphs of filler
prose: narration, dialogue and description built from many sentence templates
whose slots (characters, places, objects, times, weather, actions, feelings,
sounds, lines of speech) are filled from the project's lexicon by a seeded
``random.Random``. The filler talks about the same characters, places and
objects as the facts, so a fact's names and keywords also occur in hundreds of
chunks that do not hold it.

A fact is one sentence (or two) written by hand in ``projects.py`` and planted
in its chapter inside a narration paragraph. ``build_corpus`` returns every
fact's document and its ``[start, end)`` span as ``str`` code-point offsets in
that document's text, which is exactly what is written to disk (UTF-8, ``\\n``
line ends). A retrieved chunk is relevant to a fact when it comes from the
fact's document and its span overlaps the fact's.

The same seed and scale always give the same text.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Language = Literal["zh", "en"]
Gender = Literal["m", "f"]

DEFAULT_SEED = 20240611

# --------------------------------------------------------------------------- specifications


@dataclass(frozen=True)
class Character:
    """A person of the story: the usual name first, then the other forms prose uses."""

    names: tuple[str, ...]
    gender: Gender

    @property
    def name(self) -> str:
        return self.names[0]


@dataclass(frozen=True)
class FactSpec:
    """A planted fact: its id, the chapter (1-based, counted through the whole book) and its text."""

    id: str
    chapter: int
    text: str


@dataclass(frozen=True)
class Lexicon:
    """What a project's filler is made of.

    ``narration``, ``description`` and ``dialogue`` are sentence templates;
    ``{A}``/``{B}`` are the paragraph's two characters (in speech, the speaker
    and the one spoken to), ``{C}`` someone else, ``{P}`` its place,
    ``{P2}`` another place, ``{O}`` an object, pronoun slots follow the
    characters' genders (zh ``{Ah}``/``{Bh}``; en ``{he}``/``{his}``/``{him}``/
    ``{He}``/``{His}`` for A and ``{bhe}``/``{bhis}``/``{bhim}`` for B), ``{DT}``
    is a line of speech ``{D}`` whose final full stop becomes a comma, and any
    other slot draws from ``words`` (whose entries may hold slots themselves).
    """

    cast: tuple[Character, ...]
    extras: tuple[Character, ...]
    places: tuple[str, ...]
    objects: tuple[str, ...]
    words: Mapping[str, tuple[str, ...]]
    narration: tuple[str, ...]
    description: tuple[str, ...]
    dialogue: tuple[str, ...]


@dataclass(frozen=True)
class ProjectSpec:
    id: str
    language: Language
    title: str
    chapters: int
    chapter_chars: int  # mean length of a chapter's text, in code points, at scale 1
    path: Callable[[int], str]  # chapter number -> document id (relative POSIX path)
    heading: Callable[[int], str]  # chapter number -> the chapter's first line
    lexicon: Lexicon
    facts: tuple[FactSpec, ...]


# --------------------------------------------------------------------------- the result


@dataclass(frozen=True)
class Fact:
    id: str
    project_id: str
    document_id: str
    chapter: int
    language: Language
    text: str
    start: int  # code-point offset of the fact's first character in the document
    end: int  # one past its last character


@dataclass(frozen=True)
class Document:
    project_id: str
    id: str  # path relative to the project folder, POSIX separators
    chapter: int
    text: str


@dataclass(frozen=True)
class Project:
    id: str
    language: Language
    title: str
    documents: tuple[Document, ...]

    @property
    def chars(self) -> int:
        return sum(len(d.text) for d in self.documents)


@dataclass(frozen=True)
class Corpus:
    seed: int
    scale: float
    projects: tuple[Project, ...]
    facts: Mapping[str, Fact]
    _index: Mapping[tuple[str, str], Document] = field(repr=False, compare=False)

    def project(self, project_id: str) -> Project:
        for project in self.projects:
            if project.id == project_id:
                return project
        raise KeyError(project_id)

    def document(self, project_id: str, document_id: str) -> Document:
        return self._index[(project_id, document_id)]

    @property
    def documents(self) -> list[Document]:
        return [d for p in self.projects for d in p.documents]

    @property
    def chars(self) -> int:
        return sum(p.chars for p in self.projects)

    def write(self, root: Path) -> dict[str, Path]:
        """Write every project to ``root/<project id>/``; returns each project's folder."""
        folders: dict[str, Path] = {}
        for project in self.projects:
            folder = root / project.id
            for document in project.documents:
                path = folder / document.id
                path.parent.mkdir(parents=True, exist_ok=True)
                with path.open("w", encoding="utf-8", newline="\n") as handle:
                    handle.write(document.text)
            folders[project.id] = folder
        return folders


# --------------------------------------------------------------------------- generation

_SLOT = re.compile(r"\{(\w+)\}")
_ZH_PRONOUN = {"m": "他", "f": "她"}
_EN_PRONOUNS = {
    "m": {"he": "he", "his": "his", "him": "him", "He": "He", "His": "His"},
    "f": {"he": "she", "his": "her", "him": "her", "He": "She", "His": "Her"},
}
_EN_B = {"bhe": "he", "bhis": "his", "bhim": "him"}


@dataclass
class _Scene:
    a: Character
    b: Character
    place: str


@dataclass
class _Paragraph:
    kind: Literal["narration", "dialogue", "description"]
    sentences: list[str]
    facts: dict[int, str] = field(default_factory=dict)  # sentence index -> fact id


class _Writer:
    """Fills templates for one project from its own random stream."""

    def __init__(self, spec: ProjectSpec, rng: random.Random) -> None:
        self.spec = spec
        self.lex = spec.lexicon
        self.rng = rng
        self.people = (*self.lex.cast, *self.lex.extras)
        # The cast is on stage far more often than the townsfolk.
        self.weights = [4.0] * len(self.lex.cast) + [1.0] * len(self.lex.extras)

    def scene(self) -> _Scene:
        a = self.rng.choice(self.lex.cast)
        b = a
        while b is a:
            b = self.rng.choices(self.people, self.weights)[0]
        return _Scene(a, b, self.rng.choice(self.lex.places))

    def name(self, who: Character) -> str:
        if len(who.names) == 1 or self.rng.random() < 0.7:
            return who.names[0]
        return self.rng.choice(who.names[1:])

    def fill(self, template: str, scene: _Scene, depth: int = 0) -> str:
        rng = self.rng

        def one(match: re.Match[str]) -> str:
            key = match.group(1)
            if key == "A":
                return self.name(scene.a)
            if key == "B":
                return self.name(scene.b)
            if key == "C":
                third = scene.a
                while third is scene.a or third is scene.b:
                    third = rng.choice(self.people)
                return self.name(third)
            if key == "P":
                return scene.place
            if key == "P2":
                other = scene.place
                while other == scene.place:
                    other = rng.choice(self.lex.places)
                return other
            if key == "O":
                return rng.choice(self.lex.objects)
            if key == "Ah":
                return _ZH_PRONOUN[scene.a.gender]
            if key == "Bh":
                return _ZH_PRONOUN[scene.b.gender]
            if key in _EN_PRONOUNS["m"]:
                return _EN_PRONOUNS[scene.a.gender][key]
            if key in _EN_B:
                return _EN_PRONOUNS[scene.b.gender][_EN_B[key]]
            if key == "DT":
                line = self.fill(rng.choice(self.lex.words["D"]), scene, depth + 1)
                return line[:-1] + "," if line.endswith(".") else line
            if depth > 4:
                raise ValueError(f"slots nest too deep at {key!r}")
            return self.fill(rng.choice(self.lex.words[key]), scene, depth + 1)

        text = _SLOT.sub(one, template)
        if depth == 0 and self.spec.language == "en":
            text = _capitalize(text)
        return text

    def paragraph(self) -> _Paragraph:
        rng = self.rng
        scene = self.scene()
        roll = rng.random()
        if roll < 0.5:
            templates = rng.sample(self.lex.narration, rng.randint(3, 6))
            return _Paragraph("narration", [self.fill(t, scene) for t in templates])
        if roll < 0.8:
            # One line per paragraph is how both languages print speech; the
            # exchange is returned as one _Paragraph and split when joined.
            lines = []
            for turn in range(rng.randint(2, 5)):
                speaker = scene if turn % 2 == 0 else _Scene(scene.b, scene.a, scene.place)
                lines.append(self.fill(rng.choice(self.lex.dialogue), speaker))
            return _Paragraph("dialogue", lines)
        templates = rng.sample(self.lex.description, rng.randint(2, 3))
        return _Paragraph("description", [self.fill(t, scene) for t in templates])

    def chapter(self, number: int, facts: Sequence[FactSpec], scale: float) -> tuple[str, dict[str, int]]:
        """The chapter's text and the offset of each planted fact in it."""
        rng = self.rng
        target = max(1, round(self.spec.chapter_chars * scale * rng.uniform(0.8, 1.2)))
        paragraphs: list[_Paragraph] = []
        size = 0
        while size < target or sum(p.kind == "narration" for p in paragraphs) < len(facts) + 1:
            paragraph = self.paragraph()
            paragraphs.append(paragraph)
            size += sum(len(s) for s in paragraph.sentences) + 2 * len(paragraph.sentences)
        narration = [i for i, p in enumerate(paragraphs) if p.kind == "narration"]
        # Not in the first paragraph when there is a choice: facts sit inside chapters.
        eligible = narration[1:] if len(narration) > len(facts) else narration
        for fact, index in zip(facts, sorted(rng.sample(eligible, len(facts))), strict=True):
            paragraph = paragraphs[index]
            position = rng.randint(0, len(paragraph.sentences))
            paragraph.sentences.insert(position, fact.text)
            paragraph.facts = {(i + 1 if i >= position else i): f for i, f in paragraph.facts.items()}
            paragraph.facts[position] = fact.id
        return self.join(number, paragraphs)

    def join(self, number: int, paragraphs: list[_Paragraph]) -> tuple[str, dict[str, int]]:
        separator = "" if self.spec.language == "zh" else " "
        parts: list[str] = [self.spec.heading(number), "\n\n"]
        offset = sum(len(p) for p in parts)
        spans: dict[str, int] = {}
        for k, paragraph in enumerate(paragraphs):
            if k:
                parts.append("\n\n")
                offset += 2
            if paragraph.kind == "dialogue":
                text = "\n\n".join(paragraph.sentences)
                parts.append(text)
                offset += len(text)
                continue
            for i, sentence in enumerate(paragraph.sentences):
                if i:
                    parts.append(separator)
                    offset += len(separator)
                if i in paragraph.facts:
                    spans[paragraph.facts[i]] = offset
                parts.append(sentence)
                offset += len(sentence)
        parts.append("\n")
        return "".join(parts), spans


def _capitalize(text: str) -> str:
    for i, char in enumerate(text):
        if char.isalpha():
            return text[:i] + char.upper() + text[i + 1:]
    return text


def build_project(spec: ProjectSpec, seed: int = DEFAULT_SEED, scale: float = 1.0,
                  chapters: int | None = None) -> tuple[Project, list[Fact]]:
    """One project's documents and facts; ``chapters`` keeps only the first chapters (and their facts)."""
    rng = random.Random(f"{seed}:{spec.id}")
    writer = _Writer(spec, rng)
    count = spec.chapters if chapters is None else min(chapters, spec.chapters)
    by_chapter: dict[int, list[FactSpec]] = {}
    for fact in spec.facts:
        if not 1 <= fact.chapter <= spec.chapters:
            raise ValueError(f"fact {fact.id} is planted in chapter {fact.chapter} of {spec.chapters}")
        by_chapter.setdefault(fact.chapter, []).append(fact)
    documents: list[Document] = []
    facts: list[Fact] = []
    for number in range(1, count + 1):
        planted = by_chapter.get(number, [])
        text, spans = writer.chapter(number, planted, scale)
        document = Document(spec.id, spec.path(number), number, text)
        documents.append(document)
        for fact in planted:
            start = spans[fact.id]
            facts.append(Fact(fact.id, spec.id, document.id, number, spec.language, fact.text,
                              start, start + len(fact.text)))
    return Project(spec.id, spec.language, spec.title, tuple(documents)), facts


def build_corpus(seed: int = DEFAULT_SEED, scale: float = 1.0, *,
                 projects: Iterable[str] | None = None, chapters: int | None = None,
                 specs: Sequence[ProjectSpec] | None = None) -> Corpus:
    """The evaluation corpus: every project of ``projects.PROJECTS`` (or the ones named).

    ``scale`` multiplies every chapter's length (1.0 is the evaluation size;
    tests use a few hundredths); ``chapters`` keeps only each project's first
    chapters, dropping the facts planted later.
    """
    if specs is None:
        from tests.retrieval_eval.projects import PROJECTS

        specs = PROJECTS
    wanted = None if projects is None else set(projects)
    built: list[Project] = []
    facts: dict[str, Fact] = {}
    for spec in specs:
        if wanted is not None and spec.id not in wanted:
            continue
        project, planted = build_project(spec, seed, scale, chapters)
        built.append(project)
        for fact in planted:
            if fact.id in facts:
                raise ValueError(f"duplicate fact id {fact.id}")
            facts[fact.id] = fact
    index = {(d.project_id, d.id): d for p in built for d in p.documents}
    return Corpus(seed, scale, tuple(built), facts, index)


# --------------------------------------------------------------------------- numbering helpers

_DIGITS = "零一二三四五六七八九"


def chinese_number(n: int) -> str:
    """1..99 in Chinese numerals: 3 -> 三, 12 -> 十二, 30 -> 三十, 47 -> 四十七."""
    if not 1 <= n <= 99:
        raise ValueError(n)
    tens, ones = divmod(n, 10)
    head = "" if tens == 0 else ("十" if tens == 1 else _DIGITS[tens] + "十")
    return head + ("" if ones == 0 else _DIGITS[ones])
