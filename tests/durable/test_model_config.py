"""Bad model configuration is a sentence at publish or when the turn starts, never a stuck
agent: a model that cannot be loaded, an unknown name, an unreachable server, a malformed
models file."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas.spec import AgentSpec
from schemas.wake import Message
from services.contracts import PUBLISH
from services.ingress import IngressError
from services.stack import isolated_settings
from services.stack.process import free_port
from tests.durable.conftest import LiveStack, live_stack

pytestmark = pytest.mark.durable


@pytest.fixture
def broken_model(tmp_path: Path) -> Iterator[LiveStack]:
    """A stack whose TEASPILL_MODEL_PATH is a file, but not a model."""
    bad = tmp_path / "damaged.gguf"
    bad.write_bytes(b"not a gguf file")
    with live_stack(isolated_settings(tmp_path / "home", model_path=bad)) as stack:
        yield stack


def test_a_model_that_cannot_load_fails_the_first_turn_with_the_sentence(
    broken_model: LiveStack,
) -> None:
    spec = AgentSpec(kind="plain", instructions="Be brief.", model="smollm2")
    started = time.monotonic()
    broken_model.ingress.send_wake("test.broken", Message("hello", spec=spec))
    ended = broken_model.wait_for_turn_end("test.broken", 1, timeout=30)
    seconds = time.monotonic() - started
    assert ended.outcome == "failed"
    assert "The model 'smollm2' cannot be loaded" in ended.reason
    assert "damaged.gguf" not in ended.reason
    assert seconds < 5, "the step is not retried"


LAB = AgentSpec(kind="lab", instructions="Be brief.", model="lab")


@pytest.fixture
def models_file(tmp_path: Path) -> Path:
    """One model server, `lab`, on a port nothing listens on."""
    path = tmp_path / "models.toml"
    path.write_text(
        f'[models.lab]\nbase_url = "http://127.0.0.1:{free_port()}/v1"\n'
        'model = "m"\ntrust = "local"\ntimeout = 5\n'
    )
    return path


@pytest.fixture
def lab(tmp_path: Path, models_file: Path) -> Iterator[LiveStack]:
    with live_stack(isolated_settings(tmp_path / "home", models_file=models_file)) as stack:
        yield stack


def test_unknown_model_names_are_refused_when_the_spec_is_published_or_sent(
    lab: LiveStack,
) -> None:
    inline = Message("Hi", spec=AgentSpec("k", "x", model="nope"))
    with pytest.raises(IngressError) as sent:
        lab.ingress.wake("acme.unknown", inline)
    assert sent.value.status == 422
    assert "this deployment has no model 'nope'" in sent.value.message
    fallback = AgentSpec("k", "x", model="lab", fallback=("smolm2",))
    with pytest.raises(IngressError) as published:
        lab.ingress.call(PUBLISH, fallback, "acme")
    assert published.value.status == 422
    assert "field 'fallback': this deployment has no model 'smolm2'; did you mean" in (
        published.value.message
    )
    assert lab.ingress.status("acme.unknown").turn == 0


def test_an_unreachable_server_fails_the_turn_with_a_sentence(lab: LiveStack) -> None:
    assert lab.ingress.call(PUBLISH, LAB, "acme").spec.version == 1
    lab.ingress.send_wake("acme.lab", Message("Hi", kind="lab"))
    ended = lab.wait_for_turn_end("acme.lab", 1, timeout=30)
    assert ended.outcome == "failed"
    assert "The model 'lab' could not be reached at http://127.0.0.1:" in ended.reason
    lab.ingress.wake("acme.lab", Message("Hi again", kind="lab"))
    assert lab.wait_for_turn_end("acme.lab", 2, timeout=30).outcome == "failed", "not stuck"


def test_a_malformed_models_file_is_named_at_publish_and_at_turn_start(
    lab: LiveStack, models_file: Path
) -> None:
    assert lab.ingress.call(PUBLISH, LAB, "acme").spec.version == 1
    models_file.write_text('[models.lab\nbase_url = "http://127.0.0.1:1/v1"\n')
    lab.restart_endpoint(kill=False)  # the planes read the models file when they start
    with pytest.raises(IngressError) as refused:
        lab.ingress.call(PUBLISH, LAB, "acme")
    assert refused.value.status == 422
    assert "no model 'lab'" in refused.value.message
    assert "The models file [a path on the execution plane] is malformed" in refused.value.message
    assert str(models_file.parent) not in refused.value.message

    lab.ingress.send_wake("acme.lab", Message("Hi", kind="lab"))  # published before
    ended = lab.wait_for_turn_end("acme.lab", 1, timeout=30)
    assert ended.outcome == "failed"
    assert "There is no model named 'lab'" in ended.reason
    assert "The models file [a path on the execution plane] is malformed" in ended.reason
    assert str(models_file.parent) not in ended.reason
    script = AgentSpec(kind="plain", instructions="x", model="script")
    assert lab.ingress.message("acme.plain", "hello", spec=script).reply == "You said: hello"
