"""Put ptf-tests/lib on sys.path for the rootless unit tests of the PTF support code."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
