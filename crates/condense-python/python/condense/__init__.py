"""condense: keep long LLM-agent sessions inside the model's context window.

Compact the messages of a harness before each model call::

    import condense

    compactor = condense.Compactor(context_window=128_000, protected_tools=["memory_store"])
    state = None
    prepared = compactor.prepare(messages, state)  # OpenAI Chat Completions dicts
    send(prepared.messages)
    state = prepared.state  # keep it for the next call: decisions stay frozen

The same layered configuration as the ``condense`` command (the built-in file, the user's and
the project's ``condense.toml``, ``config=PATH``, the ``CONDENSE_*`` variables, then keyword
settings), the same pipeline and the same bytes: a body prepared here is the body the CLI
writes for the same session and settings.
"""

from __future__ import annotations

import asyncio
import json
from os import PathLike
from typing import Any, Literal, Mapping, Sequence

from . import _condense
from ._condense import CondenseError

__all__ = [
    "CondenseError",
    "Compactor",
    "Prepared",
    "Report",
    "SessionState",
    "recall",
    "tools_schema",
]

Format = Literal["openai", "anthropic", "responses"]

# Where each format keeps its messages, its system prompt and its tools.
_MESSAGES = {"openai": "messages", "anthropic": "messages", "responses": "input"}
_SYSTEM = {"anthropic": "system", "responses": "instructions"}


class SessionState:
    """What condense keeps between two requests of a session: its frozen decisions (so the
    provider's cache keeps its prefix), the frozen summary, the circuit breaker's count and the
    provider's last reported usage. Store it with :meth:`to_json`, bring it back with
    :meth:`from_json`."""

    __slots__ = ("_json",)

    def __init__(self, text: str | None = None) -> None:
        self._json = text

    @classmethod
    def from_json(cls, text: str) -> "SessionState":
        """A state saved with :meth:`to_json`."""
        return cls(text)

    def to_json(self) -> str:
        """The state as JSON text, to save wherever the harness keeps its sessions."""
        return self._json if self._json is not None else "{}"

    def __repr__(self) -> str:
        return f"SessionState({len(self.to_json())} bytes)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SessionState) and self.to_json() == other.to_json()


class Report(dict):
    """What one call did, as a dict (the CLI's ``--report`` JSON: ``tokens_before``,
    ``tokens_after``, ``prune``, ``compaction``, ...), whose ``str`` is the CLI's short
    report in words."""

    def __init__(self, data: Mapping[str, Any], text: str) -> None:
        super().__init__(data)
        self._text = text

    def __str__(self) -> str:
        return self._text

    @property
    def tokens_before(self) -> int:
        """The request's tokens as it came."""
        return int(self["tokens_before"])

    @property
    def tokens_after(self) -> int:
        """The request's tokens as prepared."""
        return int(self["tokens_after"])

    @property
    def summarized(self) -> bool:
        """Whether this call made a summary (a frozen one reused is not made again)."""
        return (self.get("compaction") or {}).get("outcome") == "summarized"


class Prepared:
    """A prepared request: ``messages`` ready to send (plain objects in the format given),
    ``state`` for the next call, ``report`` of what was done, and ``body``, the whole request
    body as JSON text as condense writes it (the CLI's bytes for the same session)."""

    __slots__ = ("_written", "_given", "_format", "_messages", "state", "report")

    def __init__(self, written, given, format, state, report):
        self._written = written
        self._given = given
        self._format = format
        self._messages = None
        self.state: SessionState = state
        self.report: Report = report

    @property
    def changed(self) -> bool:
        """Whether condense changed anything (else ``messages`` are the ones given)."""
        return self._written is not None

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The messages to send, in the format given."""
        if self._messages is None:
            if self._written is not None:
                self._messages = self._written.messages()
            else:
                body = self._given if isinstance(self._given, Mapping) else json.loads(self._given)
                self._messages = body[_MESSAGES[self._format]]
        return self._messages

    @property
    def body(self) -> str:
        """The request body as condense writes it: pretty-printed JSON when it changed, the
        body as given (as JSON text) when it did not."""
        if self._written is not None:
            return self._written.text()
        if isinstance(self._given, (str, bytes)):
            return self._given if isinstance(self._given, str) else self._given.decode()
        return json.dumps(self._given, ensure_ascii=False)

    def __repr__(self) -> str:
        return f"Prepared({len(self.messages)} messages, {self.report.get('tokens_before')} -> {self.report.get('tokens_after')} tokens)"


def _setting(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, set, frozenset)):
        return ",".join(str(item) for item in value)
    return str(value)


class Compactor:
    """condense's compactor.

    ``config`` is a ``condense.toml`` to layer over the user's and the project's files;
    keyword settings come last and name a key alone when one section has it
    (``context_window=128_000``, ``protected_tools=["memory_store"]``) or with its section
    (``**{"prune.protect_tokens": 20_000}``). A misspelt key raises :class:`CondenseError` with
    the CLI's message."""

    def __init__(self, config: str | PathLike[str] | None = None, **settings: Any) -> None:
        pairs = [(name, _setting(value)) for name, value in settings.items()]
        self._inner = _condense.Compactor(None if config is None else str(config), pairs)

    @staticmethod
    def _body(
        messages: Sequence[Mapping[str, Any]] | Mapping[str, Any] | str | bytes,
        format: Format,
        system: str | Sequence[Mapping[str, Any]] | None,
        tools: Sequence[Mapping[str, Any]] | None,
    ) -> Mapping[str, Any] | str | bytes:
        if format not in _MESSAGES:
            raise CondenseError(
                f"unknown format `{format}` (expected openai, anthropic or responses)"
            )
        if isinstance(messages, (str, bytes)):
            if system is not None or tools is not None:
                raise CondenseError("a body given as JSON text holds its own system prompt and tools")
            return messages
        if isinstance(messages, Mapping):
            if system is None and tools is None:
                return messages
            body = dict(messages)
        else:
            body = {_MESSAGES[format]: list(messages)}
        if system is not None:
            if format == "openai":
                body["messages"] = [{"role": "system", "content": system}, *body["messages"]]
            else:
                body[_SYSTEM[format]] = system
        if tools is not None:
            body["tools"] = list(tools)
        return body

    @staticmethod
    def _prepared(format: Format, given: Any, out: tuple[Any, str, str, str]) -> Prepared:
        written, state, report, text = out
        return Prepared(written, given, format, SessionState(state), Report(json.loads(report), text))

    def prepare(
        self,
        messages: Sequence[Mapping[str, Any]] | Mapping[str, Any],
        state: SessionState | str | None = None,
        *,
        format: Format = "openai",
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        usage: int | Mapping[str, Any] | None = None,
        refused: int | Mapping[str, Any] | str | bytes | None = None,
        cut_short: int | Mapping[str, Any] | None = None,
    ) -> Prepared:
        """Prepares the next request of a session: decisions frozen from ``state`` (``None``
        for a new session), old outputs pruned, and a summary made when the request is due.

        ``messages`` is the list of messages in ``format``, or the whole request body (a dict,
        or its JSON text);
        ``usage`` is what the provider counted for the request the last assistant message
        answered: its ``usage`` object, or an ``int``, the input and that answer's output
        together, so the trigger counts as the provider does;
        ``refused`` is the provider's refusal of the request last prepared from ``state`` as
        longer than the model's window (its error body, or the count the error gave). Until the
        provider's first answer condense counts with its own tokenizer, and a resumed session's
        first request can go out over the window: the provider's refusal says how long it
        counted it, and the same messages prepared again with it are compacted to fit. Once:
        refused again, give the caller the provider's error. Any other error raises
        :class:`CondenseError`;
        ``cut_short`` is the provider's usage of the request last prepared from ``state`` (its
        ``usage`` object, or an ``int``, its input), whose reply stopped at the limit condense
        lowered it to (``prepared.report["reply_limit"]``; Anthropic's ``stop_reason:
        "max_tokens"``, Chat Completions' ``finish_reason: "length"``): the same messages
        prepared again, as a harness sends them to try once more, leave the reply twice that
        limit, up to the window's reserve, until a reply goes through."""
        body = self._body(messages, format, system, tools)
        if isinstance(state, SessionState):
            state = state.to_json() if state._json is not None else None
        if isinstance(refused, Mapping):
            refused = json.dumps(refused)
        return self._prepared(
            format,
            body,
            self._inner.prepare(
                body, format, state, _usage(usage), refused, _input(cut_short)
            ),
        )

    async def aprepare(
        self,
        messages: Sequence[Mapping[str, Any]] | Mapping[str, Any],
        state: SessionState | str | None = None,
        **options: Any,
    ) -> Prepared:
        """:meth:`prepare` off the event loop (condense releases the GIL while it works)."""
        return await asyncio.to_thread(self.prepare, messages, state, **options)

    def compact(
        self,
        messages: Sequence[Mapping[str, Any]] | Mapping[str, Any],
        *,
        format: Format = "openai",
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> Prepared:
        """Compacts a saved session now, with fresh decisions, as ``condense compact`` does."""
        body = self._body(messages, format, system, tools)
        return self._prepared(format, body, self._inner.compact(body, format))

    def apply_trim(
        self,
        messages: Sequence[Mapping[str, Any]] | Mapping[str, Any],
        *,
        format: Format = "openai",
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> Prepared:
        """Applies the agent's ``trim_tool_result`` calls now (and phase 1's pruning, as
        ``condense prune`` does): each trimmed result is replaced by the agent's summary, its
        original kept. ``report["prune"]["trims"]`` says what each call did, which is what the
        harness answers the call with. :meth:`prepare` applies them as well."""
        body = self._body(messages, format, system, tools)
        return self._prepared(format, body, self._inner.prune(body, format))

    def count(
        self,
        messages: Sequence[Mapping[str, Any]] | Mapping[str, Any],
        *,
        format: Format = "openai",
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> int:
        """The tokens of the messages, as condense's trigger counts them."""
        return self._inner.count(self._body(messages, format, system, tools), format)

    def recall(self, handle: str) -> str:
        """The original a placeholder names (``condense recall HANDLE``), from this
        configuration's store."""
        return bytes(self._inner.recall(handle)).decode("utf-8", errors="replace")

    def config_show(self) -> str:
        """The effective configuration with where each value came from."""
        return self._inner.config_show()


def _usage(usage: int | Mapping[str, Any] | None) -> int | None:
    if usage is None or isinstance(usage, int):
        return usage
    # The figure stands at the answer, which the next request sends too: the input and the
    # answer's output. Chat Completions' prompt_tokens and completion_tokens; Anthropic's input
    # tokens with the cached ones, and its output_tokens; the Responses API's input_tokens and
    # output_tokens.
    def count(key: str) -> int:
        return int(usage.get(key, 0) or 0)

    if "prompt_tokens" in usage:
        return count("prompt_tokens") + count("completion_tokens")
    return (
        count("input_tokens")
        + count("cache_read_input_tokens")
        + count("cache_creation_input_tokens")
        + count("output_tokens")
    )


def _input(usage: int | Mapping[str, Any] | None) -> int | None:
    if usage is None or isinstance(usage, int):
        return usage
    # A request's input alone: Chat Completions' prompt_tokens; Anthropic's input tokens with
    # the cached ones; the Responses API's input_tokens.
    if "prompt_tokens" in usage:
        return int(usage.get("prompt_tokens", 0) or 0)
    return sum(
        int(usage.get(key, 0) or 0)
        for key in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )


def recall(handle: str, store: str | PathLike[str] | None = None) -> str:
    """The original a placeholder names, from ``store`` (a directory; by default the one the
    built-in configuration names)."""
    data = _condense.recall(handle, None if store is None else str(store))
    return bytes(data).decode("utf-8", errors="replace")


def tools_schema(format: Format = "openai") -> dict[str, Any]:
    """The ``trim_tool_result`` tool as ``format``'s tool list wants it: add it to the agent's
    tools, and condense replaces the result the agent trims with its own summary on the next
    :meth:`Compactor.prepare` (the original stays recallable)."""
    return json.loads(_condense.tools_schema(format))
