"""Model errors shown outside the execution plane carry no credential and no file path."""

from __future__ import annotations

import pytest

from services.executor.errors import KEY_WITHHELD, PATH_WITHHELD, for_log, public, public_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "https://bob:hunter2@api.example.com:8443/v1?key=abc#frag",
            "https://api.example.com:8443/v1",
        ),
        ("http://token@10.0.0.5/v1", "http://10.0.0.5/v1"),
        ("http://[::1]:8000/v1?api_key=x", "http://[::1]:8000/v1"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ],
)
def test_a_url_keeps_where_it_points_never_its_credentials(url: str, shown: str) -> None:
    assert public_url(url) == shown
    assert (
        public(f"The model 'm' at {url} answered 401.") == f"The model 'm' at {shown} answered 401."
    )


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Invalid API key sk-proj-abcdefghijklmnop1234", "sk-proj-abcdefghijklmnop1234"),
        ("the header was Authorization: Bearer abc.def-123", "abc.def-123"),
        ("rejected api_key=hunter2hunter2 for this model", "hunter2hunter2"),
        ("password: correct-horse", "correct-horse"),
        ("the key tsk_0123456789ab_secretpart is revoked", "tsk_0123456789ab_secretpart"),
    ],
)
def test_api_keys_are_withheld_even_where_a_server_echoes_them(text: str, secret: str) -> None:
    for shown in (public(text), for_log(text)):
        assert secret not in shown
        assert KEY_WITHHELD in shown


def test_a_known_key_is_withheld_whatever_it_looks_like() -> None:
    assert public("you sent plainword123", secrets=("plainword123",)) == f"you sent {KEY_WITHHELD}"


@pytest.mark.parametrize(
    "path",
    ["/etc/teaspill/models.toml", "/run/secrets/vllm", "/root/models/a.gguf", "~/keys/hosted"],
)
def test_file_paths_are_withheld_from_users_but_kept_in_the_log(path: str) -> None:
    text = f"The API key file {path}, of the model 'hosted', cannot be read."
    assert public(text) == (
        f"The API key file {PATH_WITHHELD}, of the model 'hosted', cannot be read."
    )
    assert for_log(text) == text
    assert public(f"see file://{path.lstrip('~')}") == f"see {PATH_WITHHELD}"


def test_ordinary_text_is_left_alone() -> None:
    text = "The prompt is 900 tokens; 1/2 of the window, and/or 10:30/11:00 at http://x:1/v1."
    assert public(text) == text
