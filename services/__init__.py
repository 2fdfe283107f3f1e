"""Strata's domain services, importable and testable without any socket."""
