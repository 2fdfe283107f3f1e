"""Tests of services.reading."""
