"""Unit tests of p4src/gen_constants.py and p4src/p4info_diff.py on good and bad input."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest
from finsy.proto import p4i
from google.protobuf import text_format

P4SRC = Path(__file__).resolve().parents[1]
ROOT = P4SRC.parent


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, P4SRC / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


gen = _load("gen_constants")
p4diff = _load("p4info_diff")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A scratch copy of the generator's inputs and outputs."""
    for rel in (gen.DEFINES, gen.SIZES, gen.P4INFO, gen.OUT_PY, gen.OUT_GO, gen.OUT_C, gen.OUT_P4INFO):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    return tmp_path


def test_committed_outputs_are_current() -> None:
    assert gen.main(["--check", "--root", str(ROOT)]) == 0


def test_check_reports_stale_file(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    defines = tree / gen.DEFINES
    defines.write_text(defines.read_text().replace("HOST_FLOOD_GROUP = 1;", "HOST_FLOOD_GROUP = 7;"))
    assert gen.main(["--check", "--root", str(tree)]) == 1
    err = capsys.readouterr().err
    assert "stale" in err and "HOST_FLOOD_GROUP" in err and "+HOST_FLOOD_GROUP: Final = 7" in err
    assert gen.main(["--root", str(tree)]) == 0
    assert gen.main(["--check", "--root", str(tree)]) == 0


def test_check_reports_missing_file(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tree / gen.OUT_C).unlink()
    assert gen.main(["--check", "--root", str(tree)]) == 1
    assert "(missing)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("const bit<4> DROP_REASON_BIG = 16;", "does not fit"),
        ("const drop_reason_t DROP_REASON_DUP = 1;", "duplicate values"),
        ("const foo_t SOMETHING = 1;", "not bit<N>"),
        ("const bit<8> BROKEN = 1 + 1;", "cannot parse const"),
        ("const bit<8> CPU_PORT = 1;", "defined twice"),
    ],
)
def test_bad_defines(tree: Path, line: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    defines = tree / gen.DEFINES
    defines.write_text(defines.read_text().replace("#endif", f"{line}\n#endif"))
    assert gen.main(["--check", "--root", str(tree)]) == 2
    assert message in capsys.readouterr().err


def test_bad_p4info(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tree / gen.P4INFO).write_text("tables { nonsense: 1 }\n")
    assert gen.main(["--root", str(tree)]) == 2
    assert "not a valid P4Info" in capsys.readouterr().err


def _info() -> p4i.P4Info:
    return text_format.Parse((ROOT / gen.P4INFO).read_text(), p4i.P4Info())


def test_diff_equal_regardless_of_order() -> None:
    a, b = _info(), _info()
    b.tables.reverse()
    b.actions.reverse()
    assert p4diff.diff(a, b) == []


def test_diff_reports_changes() -> None:
    a, b = _info(), _info()
    b.tables[0].size = 7
    b.actions.pop()
    problems = p4diff.diff(a, b)
    assert any("size" in p and "7" in p for p in problems)
    assert any("only in the committed" in p for p in problems)


def test_diff_tolerates_old_p4c_without_initial_default_action() -> None:
    a, b = _info(), _info()
    for t in b.tables:
        t.ClearField("initial_default_action")
    assert p4diff.diff(a, b) == []


def test_diff_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.txtpb"
    bad.write_text("not a proto {")
    good = ROOT / gen.P4INFO
    assert p4diff.main([str(good), str(bad)]) == 2
    assert "not a P4Info" in capsys.readouterr().err
    assert p4diff.main([str(good), str(tmp_path / "absent")]) == 2
    assert p4diff.main([str(good)]) == 2
    assert p4diff.main([str(good), str(good)]) == 0
