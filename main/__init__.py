"""Strata's main process: the composition root, CLI and lifecycle."""
