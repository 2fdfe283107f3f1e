"""The labelled retrieval evaluation set: a generated bilingual corpus with planted facts, and queries.

``corpus.build_corpus()`` writes nothing: it returns three novel projects (two
Chinese, one English) as Markdown chapters, with the exact code-point span of
every planted fact. ``queries.QUERIES`` are the labelled queries over those
facts. ``scripts/eval_retrieval.py`` indexes the corpus with the real retrieval
code and scores every query.
"""
