"""LLM and embedding construction from settings, with offline fallbacks."""
