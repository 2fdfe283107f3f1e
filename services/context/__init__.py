"""The context engine: layers, budgeting and trimming, rendering, prefix hashing."""
