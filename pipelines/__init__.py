"""The three compiled LangGraph graphs (store, recall, consolidate) and their shared context."""
