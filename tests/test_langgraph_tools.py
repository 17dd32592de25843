"""smriti.as_tools: LangChain tools driven by a prebuilt LangGraph agent and a scripted model."""

from __future__ import annotations

import warnings

import pytest
from langchain_core.messages import AIMessage, ToolMessage

import smriti
from notebooks.helpers import ScriptedChatModel
from smriti.memory import Memory


def _agent(model, tools):
    with warnings.catch_warnings():  # create_react_agent is deprecated in favour of langchain.agents
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(model, tools)


def _call(name, args, call_id):
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


@pytest.fixture
def memory(make_context):
    return Memory(make_context())


def test_tools_are_named_described_and_typed(memory):
    tools = smriti.as_tools(memory)
    assert [t.name for t in tools] == ["remember", "recall", "forget"]
    for tool in tools:
        assert len(tool.description) > 150  # written for the model, not a one-liner
    assert set(tools[0].args) == {"content", "importance", "tags"}
    assert set(tools[1].args) == {"query", "limit"}
    assert set(tools[2].args) == {"memory_id"}


def test_as_tools_accepts_a_context_and_refuses_anything_else(make_context):
    tools = smriti.as_tools(make_context())
    assert tools[0].invoke({"content": "Kuzu is an embedded graph database."}).startswith("Remembered as")
    with pytest.raises(TypeError, match="Memory or MemoryContext"):
        smriti.as_tools("not a memory")


def test_agent_remembers_then_recalls_in_a_new_conversation(memory):
    tools = smriti.as_tools(memory)
    fact = "Alice prefers PostgreSQL for the billing service."
    writer = ScriptedChatModel(
        script=[_call("remember", {"content": fact, "importance": 0.9, "tags": "db"}, "c1"), AIMessage("ok")]
    )
    state = _agent(writer, tools).invoke({"messages": [("user", "remember my database choice")]})
    stored = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert stored.status == "success" and stored.content.startswith("Remembered as")
    memory_id = stored.artifact["id"]
    assert memory.context.store.get_engram(memory_id).content == fact

    reader = ScriptedChatModel(
        script=[_call("recall", {"query": "Which database for billing?"}, "c2"), AIMessage("PostgreSQL")]
    )
    state = _agent(reader, tools).invoke({"messages": [("user", "which database for billing?")]})
    recalled = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert recalled.artifact["results"][0]["id"] == memory_id
    assert fact in recalled.content and memory_id in recalled.content
    assert state["messages"][-1].content == "PostgreSQL"
    assert reader.calls == 2 and writer.calls == 2


def test_rule_based_model_drives_the_tools_without_a_script(memory):
    agent = _agent(ScriptedChatModel(), smriti.as_tools(memory))
    agent.invoke({"messages": [("user", "Remember that the deploy window is Friday afternoon.")]})
    state = agent.invoke({"messages": [("user", "When is the deploy window?")]})
    assert "the deploy window is Friday afternoon." in state["messages"][-1].content
    assert memory.stats()["engrams"] == 1


def test_tool_errors_reach_the_model_instead_of_ending_the_run(memory):
    model = ScriptedChatModel(
        script=[_call("forget", {"memory_id": "no-such-id"}, "c1"), AIMessage("That memory did not exist.")]
    )
    state = _agent(model, smriti.as_tools(memory)).invoke({"messages": [("user", "forget no-such-id")]})
    error = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert error.status == "error" and "no memory with id" in error.content
    assert state["messages"][-1].content == "That memory did not exist."


def test_forget_tool_deletes_and_empty_content_is_refused(memory):
    remember, recall, forget = smriti.as_tools(memory)
    message = remember.invoke(
        {"type": "tool_call", "name": "remember", "args": {"content": "Lisbon trip in March."}, "id": "x"}
    )
    memory_id = message.artifact["id"]
    assert forget.invoke({"memory_id": memory_id}) == f"Forgot memory {memory_id}."
    assert recall.invoke({"query": "Lisbon trip"}) == "No matching memories."
    assert "non-empty" in remember.invoke({"content": "   "})
