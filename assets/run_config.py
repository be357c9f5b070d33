"""Numeric bounds of run config checked at launch, not when the step starts.

Dagster's config types have enums but no numeric ranges: a `dg.Config` field declared with
`Field(ge=..., le=...)` is only checked by pydantic when the step builds its config, after the run was
created and started. A job made with `config=bounded_run_config(...)` gets a `ConfigMapping` whose schema is
the same `ops: {op: {config: ...}}` shape the Launchpad shows anyway; its function runs while Dagster
resolves the run config, which every launch path does before it creates a run (`execute_in_process`, the
instance's `create_run_for_job`, the UI's and `dagster job launch`'s GraphQL launch, sensors and schedules).
It validates each op's config with its pydantic model and raises `DagsterInvalidConfigError` naming the
field, the value and the allowed range, so an out-of-range number is rejected like `mode: "pathh"`.
"""

from __future__ import annotations

from typing import Any, Mapping

import dagster as dg
import pydantic

PASS_THROUGH = ("resources", "execution", "loggers")
"""Top-level run config sections left to the job's own schema (validated after the mapping)."""

_SYMBOLS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}


def allowed_range(model: type[dg.Config], name: str) -> str:
    """The field's bounds as text, e.g. '0.0 <= theta <= 1.0' (empty when the field has none)."""
    lower, upper = "", ""
    for item in model.model_fields[name].metadata:
        for attr, symbol in _SYMBOLS.items():
            value = getattr(item, attr, None)
            if value is None:
                continue
            if attr in ("ge", "gt"):
                lower = f"{value} {'<=' if attr == 'ge' else '<'} "
            else:
                upper = f" {symbol} {value}"
    return f"{lower}{name}{upper}" if lower or upper else ""


def _message(op: str, model: type[dg.Config], error: Mapping[str, Any]) -> str:
    if not error.get("loc"):   # a rule over the whole config (a model validator), not one field
        message = str(error.get("msg", "")).removeprefix("Value error, ")
        return f"ops.{op}.config: {message}"
    field = str(error["loc"][0])
    path = f"ops.{op}.config.{field}"
    value = error.get("input")
    bounds = allowed_range(model, field) if field in model.model_fields else ""
    if bounds:
        return f"{path} = {value!r} is out of range: allowed {bounds}"
    return f"{path} = {value!r}: {error.get('msg')}"


def check_op_config(op: str, model: type[dg.Config], config: Mapping[str, Any]) -> None:
    """Raise DagsterInvalidConfigError (one line per bad field) if ``config`` breaks the model's bounds."""
    try:
        model.model_validate(dict(config))
    except pydantic.ValidationError as exc:
        lines = [_message(op, model, e) for e in exc.errors()]
        raise dg.DagsterInvalidConfigError("; ".join(lines), [], dict(config)) from None


def bounded_run_config(op_configs: Mapping[str, type[dg.Config]]) -> dg.ConfigMapping:
    """A ConfigMapping for a job whose ops (or assets) take these config models: same run-config shape,
    numeric bounds enforced at launch."""
    ops_schema = {
        op: dg.Field({"config": model.to_config_schema().as_field()}, is_required=False)
        for op, model in op_configs.items()
    }
    schema = {"ops": dg.Field(ops_schema, is_required=False),
              **{key: dg.Field(dg.Permissive(), is_required=False) for key in PASS_THROUGH}}

    def config_fn(outer: Mapping[str, Any]) -> dict[str, Any]:
        ops = outer.get("ops") or {}
        for op, model in op_configs.items():
            check_op_config(op, model, (ops.get(op) or {}).get("config") or {})
        run_config: dict[str, Any] = {"ops": {op: {"config": dict((ops.get(op) or {}).get("config") or {})}
                                              for op in op_configs}}
        for key in PASS_THROUGH:
            if outer.get(key):
                run_config[key] = outer[key]
        return run_config

    return dg.ConfigMapping(config_fn=config_fn, config_schema=schema)
