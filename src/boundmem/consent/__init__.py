"""Consent said in a conversation ("stop remembering where I like to eat", "forget my music preferences"): found
before extraction and applied in the ingest's own transaction. `local`: offline detection; `llm`: the LLM endpoint's
forced tool call, for an LLM extractor."""
