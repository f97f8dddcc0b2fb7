"""Retrieval: enriched preference text, embedders, cosine top-k over one user's preferences."""
