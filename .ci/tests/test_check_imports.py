"""The import checker: it finds a cycle and a private import in a tree built to have them,
and the project's own tree has neither."""

from __future__ import annotations

from pathlib import Path

from ci_scripts import REPO, load_script

ci = load_script("check-imports")


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_cycle_through_three_modules_is_found(tmp_path: Path) -> None:
    repo = _tree(tmp_path, {
        "controller/supergw_controller/__init__.py": "",
        "controller/supergw_controller/a.py": "from supergw_controller import b\n",
        "controller/supergw_controller/b.py": "from .c import thing\n",
        "controller/supergw_controller/c.py": "import supergw_controller.a\nthing = 1\n",
    })  # fmt: skip
    assert ci.check(repo) == [
        "import cycle: supergw_controller.a -> supergw_controller.b -> supergw_controller.c"
    ]


def test_a_private_name_from_another_module_is_found_and_type_checking_imports_are_not(tmp_path: Path) -> None:
    repo = _tree(tmp_path, {
        "proto/supergw_proto/__init__.py": "",
        "proto/supergw_proto/x.py": "_secret = 1\n__all__ = ['y']\n",
        "proto/supergw_proto/y.py": (
            "from typing import TYPE_CHECKING\n"
            "from supergw_proto.x import __all__\n"
            "if TYPE_CHECKING:\n    from supergw_proto.z import Z\n"
            "try:\n    from .x import _secret\nexcept ImportError:\n    pass\n"
        ),
        "proto/supergw_proto/z.py": "from supergw_proto.y import Y\n",
        "proto/supergw_proto/tests/test_x.py": "from supergw_proto.x import _secret\n",
    })  # fmt: skip
    assert ci.check(repo) == ["proto/supergw_proto/y.py:6: private name _secret imported from supergw_proto.x"]


def test_the_project_has_no_cycle_and_no_private_import() -> None:
    assert ci.check(REPO) == []
