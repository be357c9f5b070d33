"""The base class of the pipeline's expected failures.

An expected failure is one the user can act on: a bad setting, a locked index, an unreachable endpoint. Its
message is one clear line naming the file, value or endpoint and what to do. Entry points (the CLI, the
Dagster assets) show such a message as it is, with a non-zero exit, never as a traceback; anything else is a
bug and keeps its traceback. This module imports nothing, so every layer may use it.
"""


class PipelineError(Exception):
    """An expected failure whose message tells the user what went wrong and what to do."""
