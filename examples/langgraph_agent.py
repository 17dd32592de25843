"""A LangGraph agent with Smriti as its long-term memory.

Run it offline (a scripted stand-in for the chat model, Smriti's offline analyser and
embedder, memories in a temporary folder unless STORAGE_LOCATION is set):

    python examples/langgraph_agent.py

With ``LLM_API_KEY`` set (and optionally ``LLM_MODEL``, ``LLM_BASE_URL``) the same code runs
with ``ChatOpenAI``. The agent is the usual model <-> ToolNode loop; Smriti contributes the
``remember``/``recall``/``forget`` tools (``smriti.as_tools``). The second conversation is a
new thread with no shared messages, yet it finds what the first one stored.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path

from langchain_core.messages import SystemMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

import smriti

# The scripted stand-in model and the demo settings are the notebooks' helpers (not part of the
# installed package): borrow them from the folder beside this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))
from helpers import agent_chat_model, open_demo_memory

PROMPT = SystemMessage(
    "You are a helpful assistant with long-term memory. Before answering, recall what you know "
    "about the user; when the user tells you something worth keeping, remember it."
)


def build_agent(model, tools):
    """model -> tools -> model ... until the model answers without calling a tool."""
    bound = model.bind_tools(tools)

    def call_model(state: MessagesState) -> dict:
        return {"messages": [bound.invoke([PROMPT, *state["messages"]])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder.compile()


def main() -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)  # stdout is the conversation
    with tempfile.TemporaryDirectory(prefix="smriti-example-") as scratch:
        location = os.environ.get("STORAGE_LOCATION") or scratch
        with open_demo_memory(user="alice", storage_location=location) as memory:
            agent = build_agent(agent_chat_model(), smriti.as_tools(memory))
            for turn in [
                "Remember that I prefer PostgreSQL for billing services and deploy on Fridays.",
                "Which database do I prefer for billing?",
            ]:
                state = agent.invoke({"messages": [("user", turn)]})
                print(f"user:  {turn}")
                print(f"agent: {state['messages'][-1].content}\n")
            print(f"memories stored: {memory.stats()['engrams']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
