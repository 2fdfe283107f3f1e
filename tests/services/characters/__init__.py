"""Tests of services.characters."""
