"""Where `extract_fanout`'s step data travels between steps: an IO manager every worker can reach.

The shard lists the plan step emits and the results each shard step returns are Dagster step outputs. With the
multiprocess executor on one machine Dagster's default (pickles under the Dagster home) is enough; once steps
run on other hosts (dagster-celery workers, Kubernetes pods) no step may read another's local disk, so
``PATHRAG_SHARD_STORAGE`` names a place they share:

- unset: the Dagster home's ``storage/`` folder (one machine, or a Dagster home on a shared file system);
- a folder (an NFS or other shared mount, the same path on every worker): pickles there;
- ``s3://bucket/prefix``: pickles in S3 or any S3-compatible store (dagster-aws, the ``distributed`` extra),
  reached with the standard AWS_* variables (``AWS_ENDPOINT_URL`` for a non-AWS server); no key is ever in
  Dagster's run config or resources.

The setting is read in the process that runs the step, when the IO manager is built, so the orchestrator and
every worker must be given the same value (as they are given the same PATHRAG_HOME and LLM settings).
"""

from __future__ import annotations

import dagster as dg

from pathrag_pipeline.config import ENV_NAMES, Settings
from pathrag_pipeline.errors import PipelineError

SHARD_IO = "shard_io"
"""The resource key the fan-out ops' outputs use."""


def split_s3_uri(uri: str) -> tuple[str, str]:
    """(bucket, prefix) of ``s3://bucket/prefix`` (prefix '' at the bucket's root)."""
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    return bucket, prefix.strip("/")


def io_manager_for(uri: str | None, context: dg.InitResourceContext) -> dg.IOManager:
    """The IO manager that keeps step data at ``uri`` (a folder or s3://); unset, under the Dagster home."""
    if not uri or not uri.startswith("s3://"):
        return dg.FilesystemIOManager(base_dir=uri).create_io_manager(context)
    try:
        from dagster_aws.s3 import S3Resource
        from dagster_aws.s3.io_manager import PickledObjectS3IOManager
    except ImportError:
        raise PipelineError(f"{ENV_NAMES['shard_storage']}={uri} needs dagster-aws: pip install -e "
                            "'.[distributed]', or give a shared folder instead") from None
    bucket, prefix = split_s3_uri(uri)
    # S3Resource() takes endpoint, region and keys from the standard AWS_* variables (boto3's own chain)
    return PickledObjectS3IOManager(s3_bucket=bucket, s3_session=S3Resource().get_client(),
                                    s3_prefix=prefix or "dagster")


class ShardStorage(dg.ConfigurableIOManagerFactory):
    """Step data of extract_fanout at PATHRAG_SHARD_STORAGE (``uri`` overrides it per deployment); unset, Dagster's
    default place, the run's Dagster home."""

    uri: str | None = None

    def create_io_manager(self, context: dg.InitResourceContext) -> dg.IOManager:
        return io_manager_for(self.uri or Settings.from_env().shard_storage, context)
