"""A LangChain 1.x agent middleware that compacts what the model is sent.

::

    from langchain.agents import create_agent
    from condense.langchain import CondenseMiddleware

    agent = create_agent(model, tools, middleware=[CondenseMiddleware(context_window=128_000)])

Before each model call the agent's messages are prepared by condense (old tool outputs pruned,
a summary made once the conversation outgrows the window, decisions frozen so the provider's
cache keeps its prefix). The agent's own history stays whole: only what the model is sent
changes, and condense's state lives in the agent's state (``condense_state``), checkpointed
with it, so the same summary comes back on every later call.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import convert_to_messages, convert_to_openai_messages
from langgraph.types import Command
from typing_extensions import NotRequired

from . import Compactor, Prepared, SessionState

__all__ = ["CondenseMiddleware", "CondenseState"]


class CondenseState(AgentState):
    """The agent's state with condense's own beside the messages."""

    condense_state: NotRequired[str]
    """The session state condense keeps between model calls, as JSON."""


class CondenseMiddleware(AgentMiddleware):
    """Compacts the messages of each model call with condense.

    Keyword settings are condense's (``context_window=128_000``,
    ``protected_tools=["memory_store"]``, ``config="condense.toml"``), as for
    :class:`condense.Compactor`."""

    state_schema = CondenseState

    def __init__(self, *, config: str | None = None, **settings: Any) -> None:
        super().__init__()
        self.compactor = Compactor(config, **settings)
        self.last: Prepared | None = None
        """The last call's preparation (its report says what was done)."""

    def _prepare(self, request: ModelRequest) -> tuple[ModelRequest, str]:
        system = request.system_message
        messages = convert_to_openai_messages(
            ([system] if system is not None else []) + list(request.messages)
        )
        state = (request.state or {}).get("condense_state")
        prepared = self.compactor.prepare(messages, SessionState(state) if state else None)
        self.last = prepared
        lead = 1 if system is not None else 0
        # condense's summary is a system message in Chat Completions, where one may stand
        # anywhere; most of LangChain's chat models take system messages first only, so it goes
        # to the model as the person's message that it is in Anthropic's format.
        after = [
            {**message, "role": "user"} if message.get("role") == "system" else message
            for message in prepared.messages[lead:]
        ]
        compacted = convert_to_messages(after)
        return request.override(messages=compacted), prepared.state.to_json()

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ExtendedModelResponse:
        """Sends the model condense's preparation of the messages, and keeps its state."""
        prepared, state = self._prepare(request)
        response = handler(prepared)
        return ExtendedModelResponse(
            model_response=response, command=Command(update={"condense_state": state})
        )

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ExtendedModelResponse:
        """The async :meth:`wrap_model_call`."""
        import asyncio

        prepared, state = await asyncio.to_thread(self._prepare, request)
        response = await handler(prepared)
        return ExtendedModelResponse(
            model_response=response, command=Command(update={"condense_state": state})
        )
