"""A LangChain 1.x agent middleware that compacts what the model is sent.

::

    from langchain.agents import create_agent
    from condense.langchain import CondenseMiddleware

    agent = create_agent(model, tools, middleware=[CondenseMiddleware(context_window=128_000)])

Before each model call the agent's messages are prepared by condense (old tool outputs pruned,
a summary made once the conversation outgrows the window, decisions frozen so the provider's
cache keeps its prefix). The agent's own history stays whole: only what the model is sent
changes, and condense's state lives in the agent's state (``condense_state``), checkpointed
with it, so the same summary comes back on every later call. The trigger counts as the provider
does: the agent's tools are counted with the messages, and the usage the model reported for
its last answer (``usage_metadata``) is the figure it goes by. A call the provider refuses as
longer than the model's window is prepared again with the count its error gives, and sent once
more.
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
from langchain_core.messages import AIMessage, convert_to_messages, convert_to_openai_messages
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.types import Command
from typing_extensions import NotRequired

from . import CondenseError, Compactor, Prepared, SessionState

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

    def _prepare(
        self,
        request: ModelRequest,
        refused: tuple[SessionState, Any] | None = None,
    ) -> tuple[ModelRequest, str]:
        """The request with condense's preparation of its messages, and the state to keep;
        ``refused``, the state a call was prepared from and the provider's refusal of it."""
        system = request.system_message
        messages = convert_to_openai_messages(
            ([system] if system is not None else []) + list(request.messages)
        )
        tools = [_as_openai_tool(tool) for tool in (request.tools or [])] or None
        if refused is None:
            saved = (request.state or {}).get("condense_state")
            state, error = SessionState(saved) if saved else None, None
        else:
            # The state the refused call's preparation left: it holds what was sent.
            state, error = refused
        prepared = self.compactor.prepare(
            messages,
            state,
            tools=tools,
            usage=_last_usage(request.messages) if error is None else None,
            refused=error,
        )
        self.last = prepared
        lead = 1 if system is not None else 0
        # condense writes its summary into the person's message beside it, or as a user message
        # of its own; alone in a request it is a system message, and most of LangChain's chat
        # models take system messages first only, so any after the first goes to the model as
        # the person's message that it is in Anthropic's format.
        after = [
            {**message, "role": "user"} if message.get("role") == "system" else message
            for message in prepared.messages[lead:]
        ]
        compacted = convert_to_messages(after)
        return request.override(messages=compacted), prepared.state.to_json()

    def _again(
        self, request: ModelRequest, state: str, error: Exception
    ) -> tuple[ModelRequest, str] | None:
        """The call prepared again with the provider's count, where ``error`` refuses the call
        prepared with ``state`` (what that preparation left) as longer than the window; ``None``
        for any other error. The state is the call's own, not :attr:`last`: calls of two agents
        may run at once."""
        for refusal in _refusals(error):
            try:
                return self._prepare(request, refused=(SessionState(state), refusal))
            except CondenseError:
                continue
        return None

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ExtendedModelResponse:
        """Sends the model condense's preparation of the messages, and keeps its state."""
        prepared, state = self._prepare(request)
        try:
            response = handler(prepared)
        except Exception as error:
            again = self._again(request, state, error)
            if again is None:
                raise
            prepared, state = again
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
        try:
            response = await handler(prepared)
        except Exception as error:
            again = await asyncio.to_thread(self._again, request, state, error)
            if again is None:
                raise
            prepared, state = again
            response = await handler(prepared)
        return ExtendedModelResponse(
            model_response=response, command=Command(update={"condense_state": state})
        )


def _as_openai_tool(tool: Any) -> Any:
    """A tool as Chat Completions defines it, for condense to count; a provider's own tool
    (a dict LangChain does not convert) as it is."""
    try:
        return convert_to_openai_tool(tool)
    except (TypeError, ValueError):
        return tool if isinstance(tool, dict) else {"name": str(getattr(tool, "name", tool))}


def _last_usage(messages: list) -> dict[str, int] | None:
    """What the model reported for the last answer in ``messages`` (its input and that
    answer's output), where it reported anything."""
    last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    usage = getattr(last, "usage_metadata", None)
    if not usage:
        return None
    return {
        "input_tokens": int(usage.get("input_tokens", 0) or 0),
        "output_tokens": int(usage.get("output_tokens", 0) or 0),
    }


def _refusals(error: Exception) -> list[Any]:
    """The forms a provider SDK's error may carry the provider's error in, most exact first:
    the response's body as sent (``error.response.text``), the body the SDK parsed
    (``error.body``, the ``error`` object alone in OpenAI's and Anthropic's), and the error's
    message, which quotes it."""
    found: list[Any] = []
    text = getattr(getattr(error, "response", None), "text", None)
    if isinstance(text, str) and text:
        found.append(text)
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        found.append(body if "error" in body else {"error": body})
    found.append({"error": {"message": str(error)}})
    return found
