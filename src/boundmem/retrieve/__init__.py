"""Retrieval: enriched preference text and cosine top-k over one user's preferences."""
