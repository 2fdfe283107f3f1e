"""The vector side of retrieval: the Chroma client Strata indexes into."""
