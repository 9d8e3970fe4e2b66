"""The produce form's body, validated by its pydantic model: each refusal names the field."""

from __future__ import annotations

import pytest

from trikafka.console.produce import ProduceProblem, parse_produce_form


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "value: a JSON value is required"),
        (b"key=1", "value: a JSON value is required"),
        (b"value=%7Bnope", "value: not JSON"),
        (b"key=%7B&value=1", "key: not JSON"),
        (b"value=1&partition=-1", "partition '-1': a partition number"),
    ],
)
def test_a_malformed_form_is_a_400_naming_the_field(body, message):
    with pytest.raises(ProduceProblem) as refused:
        parse_produce_form(body)
    assert refused.value.status == 400 and str(refused.value).startswith(message)


def test_a_form_becomes_the_proxys_record():
    assert parse_produce_form(b"key=%22k%22&value=%7B%22a%22%3A1%7D&partition=2&extra=x") == {
        "key": "k", "value": {"a": 1}, "partition": 2,
    }
    assert parse_produce_form(b"key=&value=1&partition=") == {"value": 1}
