"""Error templates for the edges: CLI flags, model resolution, the catalog, the page and the API.

Part of `planner.core.errors.ERROR_TEMPLATES` (code → English template). Codes are a contract:
add new ones, never rename one."""

from __future__ import annotations

EDGE_ERRORS: dict[str, str] = {
    "api.no_calibration_store": "no calibration store is open on this server; omit the field",
    "api.hub_timeout": (
        "the Hub did not answer within {seconds:g} s for {repo_id!r} (KVPLAN_HUB_TIMEOUT_SECONDS); "
        "paste the model's config.json as `model`."
    ),
    "catalog.refused": "{typed}: {reason}",
    "cli.batch_needs_context": "--batch N needs --context: N requests of that length",
    "cli.batch_below_1": "--batch needs at least 1 request",
    "cli.file_unreadable": "cannot read {source}: {reason}",
    "cli.context_mix_unreadable": (
        "cannot read {item!r}; write share:length, e.g. 70%:2k,20%:8k,10%:32k"
    ),
    "cli.mix_unreadable": "cannot read {item!r}; write tokens x count, e.g. 8192x10,2048x30",
    "cli.chunks_total": "chunks sum to {total} tokens; keep the total <= {most}",
    "cli.chunks_not_integers": "{text!r} is not a comma-separated list of integers; e.g. 1,3,2,5",
    "cli.chunk_length": "each chunk length must be 1..{most}; got {text!r}",
    "cli.log_not_utf8": "the file is not UTF-8 text (binary?); pass the engine's text log",
    "cli.mix_entries": "give 1 to {most} entries, e.g. 8192x10,2048x30",
    "cli.chunks_count": (
        "give 2 to {most} chunk lengths (got {n_chunks}); a chunk must follow cached tokens for "
        "the mask check to mean anything, e.g. 1,3,2,5"
    ),
    "cli.batch_and_mix": "give --batch or --mix, not both",
    "cli.request_object_required": "give at least one request object",
    "cli.request_or_model": "give --request FILE or --model",
    "cli.report_url_invalid": "{url!r} is not an http(s) URL; e.g. http://planner:8000",
    "cli.seed_invalid": "{text!r} is not an integer in 0..{most}; e.g. --seed 7",
    "cli.speculative_config_invalid_json": "invalid JSON: {reason}",
    "cli.log_too_large": (
        "the log is larger than {mib} MiB; keep only the start-up lines (e.g. `head -n 2000 "
        "server.log > startup.log`)"
    ),
    "cli.budget_above_gpu": (
        "{budget} is more than the {gpu} has ({memory}): the budget is per GPU; leave it out to "
        "derive it from the GPU"
    ),
    "cli.context_mix_classes": "at most {most} length classes",
    "cli.prefix_needs_requests": "--prefix needs --batch or --mix: requests that share it",
    "cli.report_needs_token": (
        "--report needs --token (or KVPLAN_ADMIN_TOKEN): the service's admin token"
    ),
    "cli.request_list_empty": "the request list is empty",
    "cli.model_required": "required: a catalog id (kvplan models) or a config.json path",
    "cli.settings_not_object": "the settings file must hold a JSON object",
    "cli.speculative_config_not_json": "--speculative-config is not JSON",
    "cli.no_such_file": "no such file: {source}",
    "cli.size_without_unit": (
        "{stripped!r} has no unit, so it would be {n_bytes:,} bytes; write e.g. {stripped}GiB or "
        "{stripped}GB"
    ),
    "cli.validate_shape_flags": (
        "--validate probes the validation model's own shape and dtype (CPU: 16 q / 4 KV heads, d "
        "64, fp32; CUDA: 32 / 8 / 128, bf16); drop --num-q-heads, --num-kv-heads, --head-dim and "
        "--dtype"
    ),
    "cli.max_model_len_unreadable": "{reason}; write e.g. 32768 or 32k",
    "cli.bandwidth_unreadable": "{reason}; write e.g. 3.35TB/s",
    "cli.size_unreadable": "{reason}; write e.g. 48GiB, 48G (= GiB) or 80GB",
    "cli.duration_unreadable": "{reason}; write e.g. 50ms or 0.05s",
    "cli.tokens_unreadable_32k": "{reason}; write tokens, e.g. 32768 or 32k (k = 1024)",
    "cli.tokens_unreadable": "{reason}; write tokens, e.g. 8192 or 8k (k = 1024)",
    "resolve.revision_invalid": (
        "{revision!r} is not a branch, tag or commit name (letters, digits, `-`, `_`, `.` and `/` "
        "between non-empty parts; no `..`)"
    ),
    "resolve.hub_off": (
        "{typed!r} is not in the bundled catalog and Hub access is turned off "
        "(KVPLAN_HUB_ENABLED=false); paste the model's config.json as `model`, or use a bundled id "
        "(GET /api/v1/models or `kvplan models`).{hint}"
    ),
    "resolve.repo_config_not_object": "{repo_id!r}: config.json is not a JSON object",
    "resolve.directory_without_config": (
        "directory {path!r} has no config.json; point `model` at a downloaded model directory, a "
        "Hub id, or paste the config.json"
    ),
    "resolve.index_empty": "{repo_id!r}: {name} is empty",
    "resolve.config_empty": "is an empty object; paste the model's config.json",
    "resolve.hub_busy": (
        "the Hub at {where} answered {detail} for {repo_id!r} (rate limited or down); {later}, or "
        "paste the model's config.json as `model` (a JSON object) instead."
    ),
    "resolve.hub_error_status": (
        "the Hub at {where} answered {status} for {repo_id!r}; try again later, or paste the "
        "model's config.json as `model` (a JSON object) instead."
    ),
    "resolve.hub_timeout": (
        "the Hub at {where} did not answer within {seconds:g} s for {repo_id!r} "
        "(KVPLAN_HUB_TIMEOUT_SECONDS); paste the model's config.json as `model` (a JSON object) "
        "instead."
    ),
    "resolve.hub_deadline": (
        "the Hub at {where} did not answer within {seconds:g} s for {repo_id!r} "
        "(KVPLAN_HUB_TIMEOUT_SECONDS, all requests of one lookup together); paste the model's "
        "config.json as `model` (a JSON object) instead."
    ),
    "resolve.hub_circuit_open": (
        "the Hub at {where} is failing: {down}; paste the model's config.json as `model`, or retry "
        "later.{hint}"
    ),
    "resolve.hub_not_protocol": (
        "the Hub at {where} sent {detail} for {repo_id!r}, which is not the Hub's protocol; check "
        "HF_ENDPOINT, or paste the model's config.json as `model` (a JSON object) instead."
    ),
    "resolve.hub_transport_error": (
        "{detail} to the Hub at {where} for {repo_id!r}; set HF_ENDPOINT to a reachable mirror, or "
        "paste the model's config.json as `model` (a JSON object) instead."
    ),
    "resolve.cache_not_writable": (
        "the Hugging Face cache at {cache_dir!r} cannot be written ({reason}), so {repo_id!r} "
        "cannot be fetched; set HF_HOME to a writable directory (the Deployment mounts one), or "
        "paste the model's config.json as `model` (a JSON object) instead."
    ),
    "resolve.file_not_json": "{repo_id!r}: {what} is not JSON ({exc})",
    "resolve.config_not_object": "{cfg_path!r} is not a JSON object",
    "resolve.index_not_object": "{repo_id!r}: {name} is not a JSON object",
    "resolve.config_too_large": "{name} is larger than {limit} bytes",
    "resolve.file_too_large": "{repo_id!r}: {what} is larger than {limit} bytes",
    "resolve.model_not_id_or_config": (
        "must be a model id (e.g. meta-llama/Llama-3.1-8B) or a config"
    ),
    "resolve.hub_unreachable": (
        "no network path to the Hub at {where} ({error}) for {repo_id!r}; set HF_ENDPOINT to a "
        "reachable mirror, or paste the model's config.json as `model` (a JSON object) instead."
    ),
    "resolve.file_offered_too_large": (
        "{repo_id!r} on {where} offered {detail}; refused before reading it"
    ),
    "resolve.index_too_large": "{repo_id!r}: {name} is over {limit} bytes",
    "resolve.config_unreadable_json": "{cfg_path!r} is not readable JSON ({exc})",
    "resolve.token_rejected": (
        "{where} rejected the token in HF_TOKEN (401); set a valid token, unset it for public "
        "repos, or paste the model's config.json as `model` (a JSON object) instead."
    ),
    "resolve.no_such_revision": (
        "{repo_id!r} has no revision {revision!r} on {where}; use a branch, tag or commit that "
        "exists, or leave revision unset for main."
    ),
    "resolve.unknown_model_typo": (
        "unknown model {typed!r}: not in the bundled catalog, and a misspelling of the catalog's "
        "{typo!r} (the Hub was not asked).{hint}"
    ),
    "resolve.unknown_model_not_hub_id": (
        "unknown model {typed!r}: not in the bundled catalog, and not a Hub id of the form "
        "owner/name. List bundled ids with GET /api/v1/models or `kvplan models`, or paste the "
        "model's config.json as `model`.{hint}"
    ),
    # An unknown id's suggestions, appended to its message.
    "id.did_you_mean": " Did you mean: {ids}?",
    "catalog.unknown_model": (
        "unknown model {model_id!r}; list them with GET /api/v1/models or `kvplan models`.{hint}"
    ),
    "catalog.unknown_id": (
        "unknown {kind} {key!r}; list them with GET /api/v1/{kind}s or `kvplan {kind}s`.{hint}"
    ),
    "resolve.gated_token_no_access": (
        "{repo_id!r} is gated on {where}: the token in HF_TOKEN has no access; accept the licence "
        "on the model page with that account, or paste the model's config.json as `model` (a JSON "
        "object) instead."
    ),
    "resolve.gated_token_not_used": (
        "{repo_id!r} is gated on {where}: this server's HF_TOKEN is not used for it "
        "(KVPLAN_HUB_TOKEN_REPOS), or paste the model's config.json as `model` (a JSON object) "
        "instead."
    ),
    "resolve.gated_no_token": (
        "{repo_id!r} is gated on {where}: set HF_TOKEN to a Hugging Face token whose account "
        "accepted its licence, or paste the model's config.json as `model` (a JSON object) instead."
    ),
    "resolve.no_such_repo": (
        "unknown model {repo_id!r}: not in the bundled catalog and no such repo on {where}. Check "
        "the spelling in `model` (list bundled ids with GET /api/v1/models or `kvplan models`); "
        "for a private repo set HF_TOKEN; or paste the model's config.json as `model` (a JSON "
        "object) instead."
    ),
    "resolve.repo_without_config": (
        "{repo_id!r} on {where} has no config.json (not a transformers model repo); paste the "
        "model's config.json as `model` (a JSON object) instead."
    ),
    "resolve.offline_not_cached": (
        "{repo_id!r} is not in the bundled catalog and not in the Hugging Face cache, and the Hub "
        "cannot be asked (HF_HUB_OFFLINE is set or the network is unreachable); paste the model's "
        "config.json as `model` (a JSON object) instead, or run once with network access to fill "
        "the cache."
    ),
    "resolve.retry_after": "retry after {seconds:g} s",
    "resolve.try_again_later": "try again later",
    # What a typed quantity (planner.quantities) could not be read as.
    "quantity.not_a_number": "cannot read {text!r} as a number",
    "quantity.decimal_comma": (
        "{text!r} is ambiguous: write a dot for decimals ({dotted}) or whole groups of three "
        "digits (1,500)"
    ),
    "quantity.unknown_unit": "unknown unit in {text!r}; use one of: {units}",
    "quantity.needs_unit": "{text!r} has no unit; write it with one of: {units}",
    "quantity.not_whole": "{text!r} is not a whole number of tokens",
    "quantity.too_large": "{text!r} is too large",
    "quantity.unreadable": "cannot read {text!r}",
    # Pass-through wordings: their one param is English from outside the registry (a device
    # probe's own reason, the API's work limits, several requests' problems joined).
    "cli.requests_problems": "{problems}",
    "probe.unavailable": "{reason}",
    "probe.failed": "{reason}",
    "page.too_expensive": "{reason}",
    "page.busy": "{reason}",
    # A Hub failure for an id close to catalog ids: its own reason, then the "did you mean".
    "resolve.with_hint": "{reason}{hint}",
}
