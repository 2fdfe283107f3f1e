"""Tests of services.retrieval."""
