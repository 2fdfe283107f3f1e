"""Tests of services.store."""
