"""collector_paused(): no automatic collection inside, the caller's setting restored after."""

from __future__ import annotations

import gc

import pytest

from tf_stitch.collector import collector_paused


def test_pauses_and_restores_even_when_the_block_raises() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(KeyError), collector_paused():
        raise KeyError("x")
    assert gc.isenabled()


def test_leaves_a_disabled_collector_disabled() -> None:
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_collect_first_frees_earlier_cycles_before_the_block() -> None:
    class Cycle:
        def __init__(self) -> None:
            self.me = self

    freed = []
    gc.collect()
    gc.disable()
    try:
        import weakref

        ref = weakref.ref(Cycle(), lambda _: freed.append(True))
        with collector_paused(collect_first=True):
            assert freed and ref() is None
    finally:
        gc.enable()
