"""Concurrency limits shared by services."""
