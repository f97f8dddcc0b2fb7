"""Tests of the LLM path; `fake_openai` is reusable by other test packages (import llm.fake_openai)."""
