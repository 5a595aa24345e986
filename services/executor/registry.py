"""Models by name, each with its trust tag. Live executors stay on this side of the durable
boundary: a model step names its models, and the execution plane looks them up here."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import httpx

from schemas.model import ModelReply, ModelRequest
from services.config import model_file, plugin
from services.executor.config import ModelConfigError, RemoteModel, Trust, load_models_file
from services.executor.errors import public
from services.executor.protocol import ModelExecutor, TextSink
from services.executor.remote import RemoteExecutor
from services.executor.scripted import DirectiveExecutor
from services.executor.worker import ModelWorker
from services.settings import ConfigError, Settings

ExecutorFactory = Callable[[], ModelExecutor]
"""What a `MODELS` mapping holds: a blocking executor, run on its own worker thread."""

log = logging.getLogger(__name__)


class Runner(Protocol):
    """A model ready to be called from the event loop (a `ModelWorker`, a remote model)."""

    async def generate(
        self,
        request: ModelRequest,
        cancelled: Callable[[], Awaitable[object]] | None = ...,
        on_text: TextSink = ...,
    ) -> ModelReply: ...


@dataclass(frozen=True)
class ModelEntry:
    """How the registry starts (and stops) one named model, and how far it is trusted."""

    start: Callable[[], Runner]
    trust: Trust = "local"
    close: Callable[[Runner], None] | None = None


class UnknownModelError(LookupError):
    """No model of that name, or one that cannot be loaded: a turn fails with the sentence
    instead of retrying a step that can never succeed."""


class ModelRegistry:
    """Starts each model on first use and keeps it.

    `problem`, when set, is why the models file could not be used: the built-in models
    still answer, and a call to any other name fails with it, so a bad file shows on the
    first turn that needs it instead of as a stuck agent.
    """

    def __init__(self, entries: Mapping[str, ModelEntry], problem: str | None = None) -> None:
        self._entries = dict(entries)
        self._runners: dict[str, Runner] = {}
        self.problem = public(problem) if problem else problem
        """Shown to whoever asks for a model (no file path, no credential)."""

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._entries))

    def forget(self, agents: Sequence[str]) -> int:
        """Drop erased agents' prompt-cache entries in every model started (a model
        served by a worker whose executor keeps an `AgentCache`); how many caches."""
        caches = 0
        for runner in self._runners.values():
            cache = getattr(getattr(runner, "executor", None), "cache", None)
            forget = getattr(cache, "forget", None)
            if callable(forget):
                forget(agents)
                caches += 1
        return caches

    def trust(self, name: str) -> Trust:
        return self._entry(name).trust

    def runner(self, name: str) -> Runner:
        if name not in self._runners:
            try:
                self._runners[name] = self._entry(name).start()
            except UnknownModelError:
                raise
            except ConfigError as error:  # our own sentence: it says what to do
                raise UnknownModelError(
                    f"The model {name!r} cannot be loaded: {public(str(error))}"
                ) from error
            except Exception as error:  # any load failure ends the turn, with a sentence
                log.exception("The model %s cannot be loaded", name)
                raise UnknownModelError(
                    f"The model {name!r} cannot be loaded: its file is missing or is not a "
                    "model this execution plane can run (its log says more)."
                ) from error
        return self._runners[name]

    def _entry(self, name: str) -> ModelEntry:
        entry = self._entries.get(name)
        if entry is None:
            known = ", ".join(self.names())
            why = f" {self.problem}" if self.problem else ""
            raise UnknownModelError(
                f"There is no model named {name!r}; known models: {known}.{why}"
            )
        return entry

    def close(self) -> None:
        """Wait for each worker thread's call in flight, then stop it."""
        for name, runner in self._runners.items():
            close = self._entries[name].close
            if close is not None:
                close(runner)
        self._runners.clear()


def worker_entry(factory: ExecutorFactory, trust: Trust = "local") -> ModelEntry:
    def stop(runner: Runner) -> None:
        if isinstance(runner, ModelWorker):
            runner.close()

    return ModelEntry(lambda: ModelWorker(factory()), trust, stop)


def _smollm2(settings: Settings) -> ExecutorFactory:
    def load() -> ModelExecutor:
        from services.executor.llama import LlamaExecutor  # noqa: PLC0415

        path = model_file(settings)
        return LlamaExecutor(
            path,
            n_ctx=settings.model_context,
            n_threads=settings.model_threads,
            cache_bytes=settings.model_cache_bytes,
        )

    return load


def remote_entries(
    models: Mapping[str, RemoteModel], client: httpx.AsyncClient
) -> dict[str, ModelEntry]:
    def entry(name: str, config: RemoteModel) -> ModelEntry:
        return ModelEntry(lambda: RemoteExecutor(name, config, client), config.trust)

    return {name: entry(name, config) for name, config in models.items()}


def default_models(
    settings: Settings, modules: Iterable[str] = (), client: httpx.AsyncClient | None = None
) -> ModelRegistry:
    """`smollm2` (the bundled llama.cpp model), `script` (the scripted fake, only when
    `scripted_model` is on), the `MODELS` mapping of each named module, and the models of
    the models file (which need `client`)."""
    entries = {"smollm2": worker_entry(_smollm2(settings))}
    if settings.scripted_model:
        entries["script"] = worker_entry(DirectiveExecutor)
    for name in modules:
        module_models: Mapping[str, ExecutorFactory] = plugin(
            name, "MODELS", "TEASPILL_MODEL_MODULES"
        )
        entries.update({key: worker_entry(factory) for key, factory in module_models.items()})
    problem = None
    if settings.models_file is not None:
        try:
            remote = load_models_file(settings.models_file)
            _check_names(settings.models_file, remote, entries)
            entries.update(remote_entries(remote, client or httpx.AsyncClient()))
        except ModelConfigError as error:
            problem = str(error)
            log.error("%s Its models are unavailable until it is fixed.", problem)
    return ModelRegistry(entries, problem)


def _check_names(
    path: object, remote: Mapping[str, RemoteModel], known: Mapping[str, ModelEntry]
) -> None:
    for name in remote:
        if name in known:
            raise ModelConfigError(
                f"The models file {path} names {name!r}, which is already a model of this "
                "execution plane; choose another name."
            )
