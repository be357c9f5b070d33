"""WritePacer: a stage's batch writes wait longer when their fixed cost (open, checkpoint at close) is high."""

from __future__ import annotations

import contextlib
import time

import pytest

from pathrag_pipeline.storage.write_pacing import WritePacer


class SlowCloseStore:
    """A store whose connection takes ``close_s`` to close, as a checkpoint of a large home does."""

    def __init__(self, close_s: float) -> None:
        self.close_s = close_s
        self.writes = 0

    @contextlib.contextmanager
    def connect(self):
        yield object()
        self.writes += 1
        time.sleep(self.close_s)


def test_a_costly_write_makes_the_next_batch_wait_in_proportion():
    store = SlowCloseStore(close_s=0.05)
    pacer = WritePacer(min_seconds=0.0, share=0.1)
    assert pacer.due()                                # nothing written yet: no reason to wait
    with pacer.write(store):
        pass
    assert store.writes == 1 and pacer.writes == 1
    # the close took at least 0.05 s: the next write waits 9 x that, so writing stays ~10% of the time
    assert pacer.interval >= 0.05 * 9
    assert not pacer.due()


def test_cheap_writes_keep_the_stage_minimum_and_none_disables_pacing():
    pacer = WritePacer(min_seconds=5.0, share=0.1)
    with pacer.write(SlowCloseStore(close_s=0.0)):
        pass
    assert pacer.interval == 5.0                      # never below the stage's own minimum
    unpaced = WritePacer(min_seconds=0.0, share=None)
    with unpaced.write(SlowCloseStore(close_s=0.05)):
        pass
    assert unpaced.interval == 0.0 and unpaced.due()  # tests that count writes get one per batch


def test_a_share_outside_zero_and_one_is_refused():
    with pytest.raises(ValueError, match="share=1.5"):
        WritePacer(0.0, share=1.5)
