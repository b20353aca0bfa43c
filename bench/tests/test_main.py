"""`python -m bench` argument handling (the benchmarks themselves need root and run elsewhere)."""

from __future__ import annotations

import pytest

from bench.__main__ import main


def test_unknown_benchmark_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["nonsense"])
    assert exc.value.code == 2
    assert "unknown benchmark nonsense" in capsys.readouterr().err
