"""The yardstick for `bench/api_throughput.sh`: a bare FastAPI app, one async route returning a
small dict, no middleware. Served by the same uvicorn, uvloop and httptools, in the same venv, as
`kvplan serve`:

    .venv/bin/python bench/bare_app.py PORT
"""

from __future__ import annotations

import sys

import uvicorn
from fastapi import FastAPI

app = FastAPI()


@app.get("/item/{item_id}")
async def item(item_id: str) -> dict[str, object]:
    return {"id": item_id, "memory_bytes": 85899345920, "ok": True}


if __name__ == "__main__":
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=int(sys.argv[1]),
        loop="uvloop",
        http="httptools",
        access_log=False,
        server_header=False,
        log_level="warning",
    )
