"""packaging/ holds the build (sgwpkg) and deploy-test (sgwdeploy) code; make it importable."""

from __future__ import annotations

import sys
from pathlib import Path

PACKAGING = Path(__file__).resolve().parent.parent
if str(PACKAGING) not in sys.path:
    sys.path.insert(0, str(PACKAGING))
