"""Models by name. Live executors stay on this side of the durable boundary: a model
step names its model, and the execution plane looks it up here."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from services.config import model_file, plugin
from services.executor.protocol import ModelExecutor
from services.executor.scripted import DirectiveExecutor
from services.executor.worker import ModelWorker
from services.settings import Settings

ExecutorFactory = Callable[[], ModelExecutor]


class UnknownModelError(LookupError):
    """No model of that name, or one that cannot be loaded: a turn fails with the sentence
    instead of retrying a step that can never succeed."""


class ModelRegistry:
    """Creates each model on first use and keeps it, with its one worker thread."""

    def __init__(self, factories: Mapping[str, ExecutorFactory]) -> None:
        self._factories = dict(factories)
        self._workers: dict[str, ModelWorker] = {}

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._factories))

    def worker(self, name: str) -> ModelWorker:
        if name not in self._workers:
            factory = self._factories.get(name)
            if factory is None:
                known = ", ".join(self.names())
                raise UnknownModelError(f"There is no model named {name!r}; known models: {known}.")
            try:
                executor = factory()
            except Exception as error:  # any load failure ends the turn, with its sentence
                raise UnknownModelError(f"The model {name!r} cannot be loaded: {error}") from error
            self._workers[name] = ModelWorker(executor)
        return self._workers[name]

    def close(self) -> None:
        for worker in self._workers.values():
            worker.close()
        self._workers.clear()


def _smollm2(settings: Settings) -> ExecutorFactory:
    def load() -> ModelExecutor:
        from services.executor.llama import LlamaExecutor  # noqa: PLC0415

        path = model_file(settings)
        return LlamaExecutor(path, n_ctx=settings.model_context, n_threads=settings.model_threads)

    return load


def default_models(settings: Settings, modules: Iterable[str] = ()) -> ModelRegistry:
    """`smollm2` (the bundled llama.cpp model), `script` (the scripted fake), and the
    `MODELS` mapping of each named module."""
    factories: dict[str, ExecutorFactory] = {
        "smollm2": _smollm2(settings),
        "script": DirectiveExecutor,
    }
    for name in modules:
        factories.update(plugin(name, "MODELS", "TEASPILL_MODEL_MODULES"))
    return ModelRegistry(factories)
