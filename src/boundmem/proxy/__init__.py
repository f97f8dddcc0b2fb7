"""`boundmem proxy`: an OpenAI-compatible chat endpoint that adds the user's memory and learns from the exchange."""
