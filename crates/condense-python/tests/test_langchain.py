"""condense.langchain.CondenseMiddleware with the real `langchain` package: an agent made by
`create_agent` whose fake chat model runs a tool that prints a few thousand tokens each time.
Once the conversation outgrows the window, the model receives compacted, pair-safe messages;
later calls get the same summary; the agent's own history keeps every output."""

import json

import pytest

pytest.importorskip("langchain")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    HumanMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.tools import tool  # noqa: E402

import condense  # noqa: E402
from condense.langchain import CondenseMiddleware  # noqa: E402

CALLS = 8


@tool
def count_to(n: int) -> str:
    """Print the numbers from 1 to n, one a line."""
    return "\n".join(str(i) for i in range(1, n + 1))


class RecordingModel(GenericFakeChatModel):
    """A fake chat model that keeps what each call was sent, and takes tools."""

    seen: list = []

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(list(messages))
        result = super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
        # With the usage a provider reports for it (LangChain's `usage_metadata`): a tokenizer
        # that counts a tenth more than condense's, and a system prompt of its own.
        counted = condense.Compactor().count(convert_to_openai_messages(messages))
        usage = {"input_tokens": counted * 11 // 10 + 500, "output_tokens": 20}
        result.generations[0].message.usage_metadata = {**usage, "total_tokens": sum(usage.values())}
        return result


def script():
    steps = [
        AIMessage(content="", tool_calls=[{"name": "count_to", "args": {"n": 1500 + 100 * i}, "id": f"call_{i}"}])
        for i in range(CALLS)
    ]
    return iter([*steps, AIMessage(content="Counted eight times.")])


def pairs_are_whole(messages):
    calls = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    results = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return calls == results


class Reporting(CondenseMiddleware):
    """Keeps whether each call made a new summary."""

    made: list = []

    def _prepare(self, request, refused=None):
        prepared = super()._prepare(request, refused)
        self.made.append(self.last.report.summarized)
        return prepared


def test_the_model_gets_compacted_pair_safe_messages_and_the_same_summary(isolated):
    model = RecordingModel(messages=script())
    model.seen = []
    middleware = Reporting(
        context_window=16_000, max_output_tokens=2_000, **{"prune.skip_tool_calls": 2}
    )
    middleware.made = []
    agent = create_agent(model, [count_to], middleware=[middleware], system_prompt="You count.")
    result = agent.invoke({"messages": [{"role": "user", "content": "count a lot, eight times"}]})

    assert result["messages"][-1].content == "Counted eight times."
    # The agent's own history keeps every output whole.
    outputs = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert len(outputs) == CALLS
    assert all("condense recall" not in m.content for m in outputs)
    assert "condense_state" in result

    sent = model.seen
    assert len(sent) == CALLS + 1
    history = [len(json.dumps([m.content for m in call])) for call in sent]
    # What the model was sent stopped growing with the history: compacted.
    assert history[-1] < sum(len(m.content) for m in outputs) / 2
    for call in sent:
        assert pairs_are_whole(call), [type(m).__name__ for m in call]
        # The person's request and the last exchange are always there.
        assert isinstance(call[-1], (ToolMessage,)) or call is sent[0]
    summaries = [
        next((m.content for m in call if "<prior-conversation-summary>" in str(m.content)), None)
        for call in sent
    ]
    first = next(i for i, s in enumerate(summaries) if s is not None)
    assert first < CALLS and middleware.made[first]
    # Frozen: a call that made no summary of its own carries the one before it, as it was.
    for call in range(first + 1, len(sent)):
        assert summaries[call] is not None
        if not middleware.made[call]:
            assert summaries[call] == summaries[call - 1], call
    assert middleware.made.count(False) > middleware.made.count(True)
    # The trigger went by the answers' usage.
    assert middleware.last.report["measured"]["source"] == "provider_usage"
    assert middleware.last is not None and middleware.last.report.tokens_after < middleware.last.report.tokens_before


class Refusal(Exception):
    """A provider SDK's error for a request over the window: Anthropic's, as its SDK keeps it
    (`body`, the `error` object alone)."""

    def __init__(self, counted):
        super().__init__("Error code: 400")
        self.body = {"type": "invalid_request_error",
                     "message": f"prompt is too long: {counted} tokens > 16000 maximum"}


class RefusingModel(GenericFakeChatModel):
    """Counts twice what condense counts (a tokenizer of its own and a long system prompt):
    refuses a call over its 16K window as too long, with its count, and answers the others."""

    seen: list = []

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(list(messages))
        counted = 2 * condense.Compactor().count(convert_to_openai_messages(messages))
        if counted > 16_000:
            raise Refusal(counted)
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def resumed_history(steps):
    """A resumed thread: the person's request and `steps` tool calls with long outputs, each
    its own (an output identical to the last one would be sent once, as a pointer to it)."""
    history = [HumanMessage("count a lot")]
    for i in range(steps):
        n = 1500 + i
        history.append(AIMessage(content="", tool_calls=[{"name": "count_to", "args": {"n": n}, "id": f"old_{i}"}]))
        history.append(ToolMessage(count_to.invoke({"n": n}), tool_call_id=f"old_{i}"))
    history.append(HumanMessage("go on"))
    return history


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
def test_a_call_the_provider_refuses_as_too_long_is_compacted_and_sent_again(run, isolated):
    model = RefusingModel(messages=iter([AIMessage(content="Done.")]))
    model.seen = []
    middleware = CondenseMiddleware(context_window=16_000, max_output_tokens=2_000)
    agent = create_agent(model, [count_to], middleware=[middleware])
    # Under the window by condense's count, over it by the model's.
    history = resumed_history(3)
    counted = condense.Compactor().count(convert_to_openai_messages(history))
    assert counted < 14_000 < 2 * counted

    if run == "invoke":
        result = agent.invoke({"messages": history})
    else:
        import asyncio

        result = asyncio.run(agent.ainvoke({"messages": history}))

    assert result["messages"][-1].content == "Done."
    assert len(model.seen) == 2
    assert len(model.seen[1]) < len(model.seen[0])
    assert any("<prior-conversation-summary>" in str(m.content) for m in model.seen[1])
    assert pairs_are_whole(model.seen[1])


def test_another_error_reaches_the_agent_as_the_provider_gave_it(isolated):
    class RateLimited(Exception):
        pass

    class Failing(RecordingModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            raise RateLimited("Error code: 429 - rate limited")

    agent = create_agent(Failing(messages=iter([])), [count_to],
                         middleware=[CondenseMiddleware(context_window=16_000, max_output_tokens=2_000)])
    with pytest.raises(RateLimited):
        agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
