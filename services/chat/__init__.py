"""The command chat: in-memory sessions, message normalization and the context block for intent parsing."""
