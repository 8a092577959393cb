"""The error contract every surface shares (REST API, page, CLI), free of any web framework.

`problems`: the RFC 9457 problem model and the functions that build one from a core error or a
validation failure. `strict_json`: the strict JSON body reader both the API and the CLI use.
Importing this package loads Pydantic and `planner.core.errors`, never FastAPI or Starlette.
"""
