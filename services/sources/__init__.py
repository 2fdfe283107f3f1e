"""One provider per layer source. Providers do I/O and may fail; failures become warnings."""
