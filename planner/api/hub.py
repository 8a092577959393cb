"""Hub lookups for the web front end: never on the event loop, one fetch per id at a time.

A model id outside the bundled catalog is resolved here before its cost is estimated, so the
estimate reads the model's own layers (a 4096-layer repo is priced as one) and the plan, which
then runs in a worker, gets the resolved model instead of asking the Hub again.

- What this process already knows (the model, a remembered miss, an open circuit) is answered
  on the loop: dictionary lookups, no I/O. Of a model it keeps only its layers and the model
  pickled for the worker (bounded by KVPLAN_HUB_CACHE_ENTRIES and _MEMORY_CACHE_BYTES).
- Otherwise one thread (of `HUB_THREADS`) runs `resolve_model`, whose requests share one
  deadline (KVPLAN_HUB_TIMEOUT_SECONDS) and are never retried (`planner.resolve.transport`);
  callers asking for the same repo and revision meanwhile await that one lookup.
- A caller that goes away stops waiting; the lookup itself finishes (bounded) and is cached
  for the next caller.
"""

from __future__ import annotations

import asyncio
import dataclasses
import pickle
from collections import OrderedDict
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from planner.core.errors import FieldError
from planner.resolve import Key, hub_id, hub_key, hub_state, resolve_model
from planner.resolve.errors import HubUnavailableError

if TYPE_CHECKING:
    from planner.resolve.settings import HubSettings

# Lookups running at once per process; more wait for a thread (each is bounded by its deadline).
HUB_THREADS = 8
# Past the lookup's own deadline, how long a caller waits before giving up on it.
_BACKSTOP_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class Prefetched:
    """What the server keeps of a resolved Hub model: only what it reads itself (the layers
    and layer kinds that price a request) and the model pickled for the worker that plans."""

    id: str | None
    layers: tuple[int, int]
    blob: bytes


class HubLookups:
    def __init__(self, settings: HubSettings, *, threads: int = HUB_THREADS) -> None:
        self.settings = settings
        # The resolver's own in-process cache is off here: this one keeps less per model.
        self._resolver_settings = settings.model_copy(update={"cache_entries": 0})
        self._limiter = anyio.CapacityLimiter(threads)
        self._flights: dict[Key, asyncio.Future[Prefetched]] = {}
        self._models: OrderedDict[Key, Prefetched] = OrderedDict()
        self.cached_bytes = 0
        self.fetches = 0  # lookups that reached the resolver (tests, metrics)

    async def resolve(self, model: object, revision: str | None) -> Prefetched | None:
        """The Hub model `model` names, or None when it is not a Hub id (a catalog id, a pasted
        config: the plan reads those itself)."""
        from planner.cost import is_hub_id
        from planner.resolve import check_revision

        if revision is not None:
            check_revision(revision)
        if not isinstance(model, str) or not (is_hub_id(model) or revision is not None):
            return None
        s = self.settings
        repo_id = hub_id(model)
        if repo_id is None:
            return None
        if not s.enabled:
            # Refused without I/O: resolve_model says why (KVPLAN_HUB_ENABLED).
            resolve_model(model, revision=revision, settings=s, allow_local_dirs=False)
            return None
        key = hub_key(repo_id, revision, s)
        hit = self._models.get(key)
        if hit is not None:
            self._models.move_to_end(key)
            return hit
        known = hub_state(model, revision, s)  # a remembered miss, an open circuit
        if isinstance(known, FieldError):
            raise known
        flight = self._flights.get(key)
        if flight is None:
            flight = asyncio.ensure_future(self._fetch(key, model, revision))
            self._flights[key] = flight
            flight.add_done_callback(partial(self._landed, key))
        try:
            with anyio.fail_after(s.timeout_seconds + _BACKSTOP_SECONDS):
                return await asyncio.shield(flight)
        except TimeoutError:
            raise HubUnavailableError(
                "model",
                "api.hub_timeout",
                seconds=s.timeout_seconds,
                repo_id=repo_id,
            ) from None

    async def _fetch(self, key: Key, model: str, revision: str | None) -> Prefetched:
        self.fetches += 1
        found = await anyio.to_thread.run_sync(
            partial(_prefetch, model, revision, self._resolver_settings),
            limiter=self._limiter,
            abandon_on_cancel=True,
        )
        self._keep(key, found)
        return found

    def _keep(self, key: Key, found: Prefetched) -> None:
        limit, max_bytes = self.settings.cache_entries, self.settings.memory_cache_bytes
        size = len(found.blob) + 256
        if limit <= 0 or size > max_bytes:
            return
        old = self._models.pop(key, None)
        self.cached_bytes += size - (len(old.blob) + 256 if old is not None else 0)
        self._models[key] = found
        while len(self._models) > limit or self.cached_bytes > max_bytes:
            _, dropped = self._models.popitem(last=False)
            self.cached_bytes -= len(dropped.blob) + 256

    def _landed(self, key: Key, flight: asyncio.Future[Any]) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]
        if not flight.cancelled():
            flight.exception()  # retrieved: no "never retrieved" warning when nobody waits


def _prefetch(model: str, revision: str | None, settings: HubSettings) -> Prefetched:
    """In a thread: resolve, then keep the layers and the pickled model (no parsing on the
    loop, and a plain value for the worker)."""
    from planner.cost import config_layers

    r = resolve_model(model, revision=revision, settings=settings, allow_local_dirs=False)
    plain = dataclasses.replace(r, config=dict(r.config))
    return Prefetched(r.id, config_layers(r.config), pickle.dumps(plain, pickle.HIGHEST_PROTOCOL))


def lookups_of(app: Any) -> HubLookups:
    """The app's lookups, built from its Hub settings on first use."""
    found: HubLookups | None = getattr(app.state, "hub_lookups", None)
    if found is None:
        settings = getattr(app.state, "hub_settings", None)
        if settings is None:
            from planner.resolve.settings import HubSettings

            settings = app.state.hub_settings = HubSettings()
        found = app.state.hub_lookups = HubLookups(settings)
    return found


__all__ = ["HUB_THREADS", "HubLookups", "Prefetched", "lookups_of"]
