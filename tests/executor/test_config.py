"""The models file: read once, checked, with sentences for every mistake."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.executor.config import ModelConfigError, RemoteModel, api_key, load_models_file
from services.executor.protocol import ModelExecutor
from services.executor.registry import (
    ModelRegistry,
    UnknownModelError,
    default_models,
    worker_entry,
)
from services.settings import Settings

GOOD = """
[models.vllm]
base_url = "http://127.0.0.1:8000/v1"
model = "Qwen/Qwen2.5-7B-Instruct"
api_key_env = "TEST_VLLM_KEY"
trust = "local"

[models.hosted]
base_url = "https://models.example/v1"
model = "big"
api_key_file = "/run/secrets/hosted"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.toml"
    path.write_text(text)
    return path


def test_a_good_file_names_each_model_with_its_trust(tmp_path: Path) -> None:
    models = load_models_file(write(tmp_path, GOOD))
    assert models["vllm"].trust == "local"
    assert models["hosted"].trust == "external", "a model is external unless marked local"
    assert models["hosted"].timeout == 60.0


@pytest.mark.parametrize(
    ("text", "sentence"),
    [
        ("[models.a\n", "is malformed"),
        ('[models.a]\nbase_url = "http://x/v1"\n', "malformed.*model"),
        ('[models.a]\nbase_url = "x"\nmodel = "m"\n', "must be an http:// or https:// URL"),
        ('[models.a]\nbase_url = "http://x"\nmodel = "m"\ntrust = "remote"\n', "malformed"),
        ('[models.a]\nbase_url = "http://x"\nmodel = "m"\nkey = "sk-1"\n', "malformed"),
        (
            '[models.a]\nbase_url = "http://x"\nmodel = "m"\napi_key_env = "A"\n'
            'api_key_file = "/f"\n',
            "keep one",
        ),
        ('[models.a]\nbase_url = "http://x"\nmodel = "m"\ntimeout = 0\n', "above 0"),
    ],
)
def test_mistakes_are_sentences(tmp_path: Path, text: str, sentence: str) -> None:
    with pytest.raises(ModelConfigError, match=sentence):
        load_models_file(write(tmp_path, text))


def test_a_missing_file_is_a_sentence(tmp_path: Path) -> None:
    with pytest.raises(ModelConfigError, match="cannot be read"):
        load_models_file(tmp_path / "absent.toml")


def test_the_api_key_comes_from_the_environment_or_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_VLLM_KEY", "sk-env-secret\n")
    secret = tmp_path / "key"
    secret.write_text("sk-file-secret\n")
    assert api_key("a", RemoteModel("http://x", "m", api_key_env="TEST_VLLM_KEY")) == (
        "sk-env-secret"
    )
    assert api_key("a", RemoteModel("http://x", "m", api_key_file=str(secret))) == (
        "sk-file-secret"
    )
    assert api_key("a", RemoteModel("http://x", "m")) is None


def test_a_missing_key_names_where_it_was_looked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_ABSENT_KEY", raising=False)
    with pytest.raises(ModelConfigError, match="TEST_ABSENT_KEY, which is not set"):
        api_key("a", RemoteModel("http://x", "m", api_key_env="TEST_ABSENT_KEY"))


def test_a_bad_models_file_leaves_the_built_in_models_working(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, models_file=write(tmp_path, "[models.a\n"))
    models = default_models(settings)
    assert models.trust("smollm2") == "local"
    with pytest.raises(LookupError, match=r"no model named 'a'.*models file .* is malformed"):
        models.trust("a")


def test_a_models_file_may_not_take_a_built_in_name(tmp_path: Path) -> None:
    text = '[models.smollm2]\nbase_url = "http://x/v1"\nmodel = "m"\n'
    models = default_models(Settings(home=tmp_path, models_file=write(tmp_path, text)))
    assert models.problem is not None
    assert "already a model of this execution plane" in models.problem


def test_the_scripted_model_is_offered_only_when_enabled(tmp_path: Path) -> None:
    assert "script" not in default_models(Settings(home=tmp_path)).names()
    assert "script" in default_models(Settings(home=tmp_path, scripted_model=True)).names()


def test_what_users_read_of_a_bad_models_file_names_no_path(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, models_file=write(tmp_path, "[models.a\n"))
    models = default_models(settings)
    assert models.problem is not None
    assert models.problem.startswith("The models file [a path on the execution plane] is malformed")
    assert str(tmp_path) not in models.problem


def test_a_model_that_cannot_load_says_so_without_its_path_or_the_librarys_words(
    tmp_path: Path,
) -> None:
    def broken() -> ModelExecutor:
        raise ValueError(f"Failed to load model from file: {tmp_path}/models/x.gguf")

    models = ModelRegistry({"x": worker_entry(broken)})
    with pytest.raises(UnknownModelError) as raised:
        models.runner("x")
    sentence = str(raised.value)
    assert sentence.startswith("The model 'x' cannot be loaded: its file is missing or is not")
    assert str(tmp_path) not in sentence
    assert "Failed to load" not in sentence
