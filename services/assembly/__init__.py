"""Context assembly as a service: resolve, gather from providers, run the engine, remember prefixes."""
