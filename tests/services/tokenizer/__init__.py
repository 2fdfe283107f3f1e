"""Tests of services.tokenizer."""
