"""Character chat: templates, typed memory across conversations and the display text of messages."""
