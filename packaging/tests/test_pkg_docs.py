"""docs/deploy-linux.md is followed by the deploy test: every step the test takes is named in
the guide, every test the guide names exists, every file it points to is there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from sgwdeploy import lab

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs/deploy-linux.md"
DEPLOY_TEST = REPO / "packaging/deploy_tests/test_deploy_linux.py"


def deploy_steps() -> set[str]:
    tree = ast.parse(DEPLOY_TEST.read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


def test_the_guide_names_every_deploy_step_and_only_those() -> None:
    named = set(re.findall(r"test_deploy_linux\.py::(test_\w+)", GUIDE.read_text()))
    steps = deploy_steps()
    assert steps - named == set(), f"deploy-test steps the guide does not name: {sorted(steps - named)}"
    assert named - steps == set(), f"the guide names steps that do not exist: {sorted(named - steps)}"


def test_every_repository_path_the_guide_names_exists() -> None:
    text = GUIDE.read_text()
    paths = set(re.findall(r"\]\((\.\./[^)#\s]+)", text))  # relative links from docs/
    paths |= {f"../{p}" for p in re.findall(r"`((?:packaging|controller|backends|targets|docs)/[\w./@-]+)`", text)}
    missing = [p for p in sorted(paths) if not (GUIDE.parent / p).resolve().exists()]
    assert not missing, f"docs/deploy-linux.md points to missing files: {missing}"


def test_every_tested_by_tag_names_a_real_test() -> None:
    """`Tested by:` lines name test files (and functions) that exist."""
    for ref in re.findall(r"[Tt]ested by[^:]*:\s*(.+)", GUIDE.read_text()):
        for path, func in re.findall(r"`([\w./-]+\.py)(?:::(\w+))?`", ref):
            f = REPO / path
            assert f.is_file(), f"tested by {path}: no such file"
            if func:
                assert re.search(rf"def {func}\b", f.read_text()), f"{path} has no {func}"


def test_the_guide_issues_the_certificates_the_deploy_test_issues() -> None:
    """Section "Certificates" shows the very pki command the deploy test runs, and every file
    the test copies to a box is in the guide's table."""
    text = GUIDE.read_text()
    assert " ".join(lab.PKI_COMMAND) in text
    for names, _owner in lab.TLS_FILES.values():
        for name in names:
            assert f"`{name}" in text, f"the guide's certificate table lacks {name}"
