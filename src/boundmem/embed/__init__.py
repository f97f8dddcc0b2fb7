"""Embedders: text -> unit vectors, used by extraction, maintenance, retrieval and CAIM alike.

Only the protocol and the model-free hash embedder are imported here; the MiniLM backends and the
OpenAI-compatible client load their dependencies when chosen."""
from .base import CachedEmbedder, Embedder
from .hash import HashEmbedder

__all__ = ["CachedEmbedder", "Embedder", "HashEmbedder"]
