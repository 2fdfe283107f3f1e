"""The reading companion's pure core: a book's pages and paragraphs, validated summaries, the seed's prompts.

No I/O here: the channels and the summarizer seam that use these live elsewhere.
"""
