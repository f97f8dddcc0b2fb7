"""Extraction: conversation -> candidate preferences inside the user's (pruned) schema. Local (MiniLM) and LLM."""
