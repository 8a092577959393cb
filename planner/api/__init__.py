"""REST surface under `/api/v1`: thin routers over `planner.core.plan`, errors as problem+json."""
