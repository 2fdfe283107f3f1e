"""Tests of services.chat."""
