"""Smriti inside LangGraph: the BaseStore adapter (``langgraph_store``) and LangChain tools (``tools``)."""
