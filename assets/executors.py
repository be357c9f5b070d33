"""`extract_fanout`'s executor: the same job on worker processes of one machine or on dagster-celery workers.

Only the run config's ``execution`` section differs:

    execution: {config: {multiprocess: {max_concurrent: 4}}}          # default: step subprocesses here
    execution: {config: {celery: {broker: redis://host:6379/0}}}      # dagster-celery workers, anywhere

dagster-celery (the ``distributed`` extra) is imported only when a run chooses it. Its workers run each step
in their own process (``execute_plan_iterator`` inside the celery task) and must see the same code, the same
PATHRAG_* settings and the same Dagster instance (``DAGSTER_HOME``: run and event storage) as the orchestrator.
Where a step runs is chosen by its ``dagster-celery/queue`` tag: the DuckDB steps (plan, write) go to
``HOME_QUEUE``, which only workers on the machine holding PATHRAG_HOME listen to; shard steps to the default
queue ``dagster``, which any worker may serve. The multiprocess executor ignores the tags.
"""

from __future__ import annotations

import dagster as dg
from dagster._core.definitions.executor_definition import (
    MULTI_PROC_CONFIG,
    _core_multiprocess_executor_creation,
)
from dagster._core.execution.retries import RetryMode

from pathrag_pipeline.errors import PipelineError

HOME_QUEUE = "pathrag-home"
"""Celery queue of the steps that open DuckDB: served only by workers on the host that holds PATHRAG_HOME."""
SHARD_QUEUE = "dagster"
"""dagster-celery's default queue: the shard steps (LLM calls only), for any worker."""
QUEUE_TAG = "dagster-celery/queue"      # dagster_celery.tags.DAGSTER_CELERY_QUEUE_TAG, without importing it

CELERY_CONFIG = dg.Field(
    {
        "broker": dg.Field(dg.StringSource, description="Celery broker URL, e.g. redis://127.0.0.1:6379/0 "
                                                        "(or {env: CELERY_BROKER_URL} to keep a password out of "
                                                        "run config)"),
        "backend": dg.Field(dg.Noneable(dg.StringSource), is_required=False, default_value=None,
                            description="result backend URL; default: the broker's"),
        "include": dg.Field([str], is_required=False, description="modules every worker imports"),
        "config_source": dg.Field(dg.Noneable(dg.Permissive()), is_required=False,
                                  description="more Celery settings (celery.Celery's config_source)"),
    },
    description="Run each step as a task on dagster-celery workers (pip install -e '.[distributed]').",
)


def is_celery_run(run_config: dict | None) -> bool:
    """Whether a run of this executor sends its steps to celery workers (so they run in other processes,
    possibly on other hosts, than the run's)."""
    execution = ((run_config or {}).get("execution") or {}).get("config") or {}
    return "celery" in execution


def _celery_executor(config: dict) -> dg.Executor:
    try:
        from dagster_celery.executor import CeleryExecutor
    except ImportError:
        raise PipelineError("execution config `celery` needs dagster-celery: pip install -e '.[distributed]' "
                            "(or run with `multiprocess`)") from None
    return CeleryExecutor(retries=RetryMode(RetryMode.DISABLED), broker=config["broker"],
                          backend=config.get("backend") or config["broker"], include=config.get("include"),
                          config_source=config.get("config_source"))


@dg.executor(
    name="fanout",
    config_schema=dg.Field(dg.Selector({"multiprocess": MULTI_PROC_CONFIG, "celery": CELERY_CONFIG}),
                           default_value={"multiprocess": {}}),
    requirements=dg.multiple_process_executor_requirements(),
)
def fanout_executor(init_context: dg.InitExecutorContext) -> dg.Executor:
    """Step subprocesses on this machine (``multiprocess``, the default) or dagster-celery workers (``celery``)."""
    choice, config = next(iter(init_context.executor_config.items()))
    if choice == "celery":
        return _celery_executor(config)
    return _core_multiprocess_executor_creation(config)
