"""Admin bearer-token dependency: `dependencies=[Depends(require_admin)]` on admin routes.

- No `admin_token` configured (KVPLAN_ADMIN_TOKEN unset): admin routes are disabled and answer
  404, rather than being open.
- Missing, malformed or wrong bearer: 401 with `WWW-Authenticate: Bearer` (RFC 6750), so
  clients and schemathesis see the standard challenge.
- Each client (peer address) gets a token bucket of admin requests (`enforce_admin_rate`):
  beyond it, 429 with `Retry-After`, counted before the token is checked.
- The comparison is constant-time (`hmac.compare_digest`); the token is never logged or echoed.
"""

from __future__ import annotations

import hmac

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from planner.api.limits import enforce_admin_rate

# auto_error=False: this dependency decides between 404 (disabled) and 401 itself; the scheme
# still appears in OpenAPI so generated clients know to send the header.
admin_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="AdminToken",
    description="`Authorization: Bearer $KVPLAN_ADMIN_TOKEN`",
)

_CHALLENGE = 'Bearer realm="kvplan"'


def _configured_token(request: Request) -> bytes | None:
    settings = getattr(request.app.state, "settings", None)
    secret = getattr(settings, "admin_token", None)
    if secret is None:
        return None
    value = secret.get_secret_value()
    return value.encode("utf-8") if value else None


def require_admin(
    request: Request,
    credentials: HTTPAuthorizationCredentials | None = Depends(admin_bearer),
) -> None:
    expected = _configured_token(request)
    if expected is None:
        raise HTTPException(
            status_code=404,
            detail="admin routes are disabled on this server; set KVPLAN_ADMIN_TOKEN to enable",
        )
    enforce_admin_rate(request)  # 429 before the token check: also slows down token guessing
    if credentials is None:
        raise HTTPException(
            status_code=401,
            detail="admin route: send `Authorization: Bearer <KVPLAN_ADMIN_TOKEN>`",
            headers={"WWW-Authenticate": _CHALLENGE},
        )
    if not hmac.compare_digest(credentials.credentials.encode("utf-8"), expected):
        raise HTTPException(
            status_code=401,
            detail="admin route: the bearer token is not valid",
            headers={"WWW-Authenticate": f'{_CHALLENGE}, error="invalid_token"'},
        )
