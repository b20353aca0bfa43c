"""The strict base model and the YAML loader: every refusal names the file and the key."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from pydantic import Field

from supergw_proto.strict import StrictModel, read_yaml_mapping, validate


class Inner(StrictModel):
    rate: float = Field(ge=0)


class Doc(StrictModel):
    name: str
    inner: Inner
    items: list[Inner] = []
    ports: dict[int, Inner] = {}


class DocError(ValueError):
    pass


def test_unknown_key_is_named() -> None:
    with pytest.raises(DocError, match=r"src: invalid doc:\n  inner.extra: unknown key"):
        validate(Doc, {"name": "a", "inner": {"rate": 1, "extra": 2}}, "src", "doc", DocError)


def test_missing_key_and_list_index_are_named() -> None:
    with pytest.raises(DocError) as err:
        validate(Doc, {"inner": {"rate": 1}, "items": [{"rate": 1}, {"rate": -1}]}, "src", "doc", DocError)
    text = str(err.value)
    assert "name: required key is missing" in text
    assert "items[1].rate: Input should be greater than or equal to 0" in text


def test_mapping_keys_read_as_keys() -> None:
    with pytest.raises(DocError, match=r"ports\.7\.rate"):
        validate(Doc, {"name": "a", "inner": {"rate": 1}, "ports": {7: {"rate": -1}}}, "src", "doc", DocError,
                 mapping_keys=frozenset({"ports"}))


def test_inf_and_nan_are_refused() -> None:
    for bad in (math.inf, math.nan):
        with pytest.raises(DocError, match="inner.rate"):
            validate(Doc, {"name": "a", "inner": {"rate": bad}}, "src", "doc", DocError)


def test_models_are_frozen() -> None:
    doc = validate(Doc, {"name": "a", "inner": {"rate": 1}}, "src", "doc")
    with pytest.raises(ValueError):
        doc.name = "b"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: [unclosed\n", "not valid YAML"),
        ("- a\n- b\n", r"top level must be a mapping of keys \(doc\), got list"),
        ("", r"top level must be a mapping of keys \(doc\), got NoneType"),
    ],
)
def test_read_yaml_mapping_refusals(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "doc.yaml"
    path.write_text(text)
    with pytest.raises(DocError, match=message):
        read_yaml_mapping(path, "doc", DocError)


def test_read_yaml_mapping_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DocError, match=r"missing.yaml: cannot read doc: No such file"):
        read_yaml_mapping(tmp_path / "missing.yaml", "doc", DocError)
