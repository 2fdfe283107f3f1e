"""Summaries without owning a model: ask a connected client, else summarize extractively."""
