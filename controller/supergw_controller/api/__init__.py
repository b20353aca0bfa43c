"""REST API of the controller (FastAPI, "bigger applications" layout).

`create_app(core, config)` in `app.py`; one router per resource in `routers/`;
dependencies (core, token, validated path parameters) in `deps.py`.
"""

from supergw_controller.api.app import API_PREFIX, create_app

__all__ = ["API_PREFIX", "create_app"]
