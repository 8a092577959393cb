"""The HTML page: `GET /` and `POST /` (form + answer), `GET /lang/{code}` (language toggle).

Server-rendered from the same `core.plan` the API calls; JavaScript only enhances it. Templates
live in the repository's `templates/`, static files in `static/`, messages in `planner/locale/`.
"""
