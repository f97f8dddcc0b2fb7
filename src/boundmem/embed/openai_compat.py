"""Embeddings from an OpenAI-compatible `/v1/embeddings` endpoint (OpenAI, vLLM, Ollama, LiteLLM...).

The paper used OpenAI embeddings; this makes that configuration available next to the bundled
MiniLM. Vectors of different models are not comparable, so a store must be (re)built with the
embedder it is queried with: `name` carries the model for that check.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..errors import UpstreamError
from .base import CachedEmbedder


# Output sizes of the common OpenAI models, so `dim` is known before the first request.
KNOWN_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}


class EmbeddingError(UpstreamError):
    """The embedding endpoint failed (timeout, HTTP error) or answered with unusable vectors."""

    code = "embedding_unavailable"
    upstream = "the embedding endpoint"


class OpenAIEmbedder(CachedEmbedder):
    """`Embedder` over the openai SDK; batches requests, unit-normalises; the per-text cache is CachedEmbedder's."""

    def __init__(self, model: str = "text-embedding-3-small", base_url: Optional[str] = None,
                 api_key: Optional[str] = None, batch_size: int = 256, timeout: float = 60.0, max_retries: int = 2,
                 client=None):
        from openai import OpenAI  # optional dependency: only needed when this embedder is chosen

        super().__init__()
        self.model = model
        self.name = f"openai:{model}"
        self.batch_size = batch_size
        self._dim: Optional[int] = KNOWN_DIMS.get(model)
        self._dim_confirmed = False  # KNOWN_DIMS is a prior; the first response is the truth
        # a local OpenAI-compatible server usually needs no key, but the SDK insists on one
        self.client = client or OpenAI(base_url=base_url, api_key=api_key or "not-needed", timeout=timeout,
                                       max_retries=max_retries)

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.embed(["dimension probe"])  # unknown model: ask once
        assert self._dim is not None
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:   # no request just to learn an unknown model's dimension
            return np.zeros((0, self._dim or 0), np.float32)
        return super().embed(texts)

    def _encode(self, texts: list[str]) -> np.ndarray:
        return np.vstack([self._request(texts[i:i + self.batch_size]) for i in range(0, len(texts), self.batch_size)])

    def _request(self, batch: list[str]) -> np.ndarray:
        # the API rejects empty strings; a single space embeds to "nothing" consistently
        # "float" explicitly: the SDK defaults to base64, which several compatible servers lack
        from openai import APIError

        try:
            resp = self.client.embeddings.create(model=self.model, input=[t if t.strip() else " " for t in batch],
                                                 encoding_format="float")
        except APIError as e:   # timeouts, refused connections, HTTP errors: the endpoint failed, not the caller
            raise EmbeddingError(f"the embedding endpoint failed for model {self.model!r} at "
                                 f"{getattr(self.client, 'base_url', '?')}: {type(e).__name__}: {e}") from e
        except (ValueError, RecursionError) as e:   # a 200 whose body is not JSON (undecodable, too deep)
            raise self._garbage(f"{type(e).__name__}: {str(e)[:200]}") from e
        try:
            data = sorted(resp.data, key=lambda d: d.index)
            if len(data) != len(batch):
                raise EmbeddingError(f"embedding server returned {len(data)} vectors for {len(batch)} texts")
            sizes = {len(d.embedding) for d in data}
            if len(sizes) != 1 or 0 in sizes:
                raise EmbeddingError(f"embedding server returned vectors of sizes {sorted(sizes)} in one response")
            m = np.asarray([d.embedding for d in data], dtype=np.float32)
        except (AttributeError, TypeError, ValueError) as e:   # a 200 of another shape (an HTML page, strings)
            raise self._garbage(f"{str(resp)[:200]!r}") from e
        if not self._dim_confirmed:
            self._dim, self._dim_confirmed = int(m.shape[1]), True
        elif m.shape[1] != self._dim:
            raise EmbeddingError(f"model {self.model!r} returned {m.shape[1]}-d vectors, expected {self._dim}")
        if m.ndim != 2:
            raise self._garbage(f"vectors of shape {m.shape}")
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        if not np.all(np.isfinite(m)) or np.any(norms == 0):
            raise EmbeddingError("embedding server returned a zero or non-finite vector")
        return m / norms

    def _garbage(self, what: str) -> EmbeddingError:
        return EmbeddingError(f"the embedding endpoint answered model {self.model!r} at "
                              f"{getattr(self.client, 'base_url', '?')} with a body that is not an embeddings "
                              f"response: {what}")
