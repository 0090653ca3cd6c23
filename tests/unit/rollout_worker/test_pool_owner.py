"""The rollout pool's owner role and inbox, with threads and no Ray: one thread applies the messages at
a time, a play applies them between its chunks, and a message posted as the owner lets go is not lost."""

import threading
import time
from concurrent.futures import Future

import pytest

from services.rollout_worker.pool_owner import Owner


class Applier:
    """An owner's side in miniature: applies each message by recording it (and the thread that did)."""

    def __init__(self, owner: Owner[str]) -> None:
        self.owner = owner
        self.applied: list[tuple[str, str]] = []  # (message, thread name)

    def settle(self) -> None:
        for message, answer in self.owner.take():
            if message == "bad":
                answer.set_exception(ValueError("a bad message"))
                continue
            self.applied.append((message, threading.current_thread().name))
            answer.set_result(f"{message} done")


def in_thread(name: str, call) -> tuple[threading.Thread, "Future[object]"]:
    out: Future[object] = Future()

    def run() -> None:
        try:
            out.set_result(call())
        except BaseException as exc:
            out.set_exception(exc)

    thread = threading.Thread(target=run, name=name)
    thread.start()
    return thread, out


def test_with_no_owner_the_caller_applies_its_own_message():
    owner: Owner[str] = Owner()
    applier = Applier(owner)
    assert owner.ask("resize", applier.settle) == "resize done"
    assert applier.applied == [("resize", threading.current_thread().name)]
    with pytest.raises(ValueError, match="a bad message"):
        owner.ask("bad", applier.settle)


def test_a_message_posted_while_a_play_runs_is_applied_between_its_chunks():
    owner: Owner[str] = Owner()
    applier = Applier(owner)
    chunks_done: list[int] = []
    first_chunk = threading.Event()
    asked = threading.Event()

    def play() -> None:
        with owner.role():
            for chunk in range(4):
                applier.settle()  # between chunks
                applier.applied.append((f"chunk {chunk}", threading.current_thread().name))
                if chunk == 0:
                    first_chunk.set()
                    assert asked.wait(5)
                time.sleep(0.05)
                chunks_done.append(chunk)

    player, played = in_thread("play", play)
    assert first_chunk.wait(5)
    operator, answer = in_thread("operator", lambda: owner.ask("replace", applier.settle))
    time.sleep(0.1)  # the operator is waiting: the play holds the role
    asked.set()
    assert answer.result(timeout=5) == "replace done"
    player.join(5)
    operator.join(5)
    played.result(timeout=0)
    assert applier.applied == [
        ("chunk 0", "play"),
        ("replace", "play"),  # applied by the play, between chunk 0 and chunk 1
        ("chunk 1", "play"),
        ("chunk 2", "play"),
        ("chunk 3", "play"),
    ]


def test_a_message_posted_as_the_owner_lets_go_is_applied_by_its_poster():
    """The lost wakeup: the owner looked at its inbox for the last time before the message came, and
    lets go without looking again; the poster, which found the role taken, takes it and applies it."""
    owner: Owner[str] = Owner()
    applier = Applier(owner)
    last_look = threading.Event()
    posted = threading.Event()

    def owner_finishing() -> None:
        with owner.role():
            applier.settle()  # its last look: empty
            last_look.set()
            assert posted.wait(5)
            time.sleep(0.1)  # the poster has found the role taken and waits on its answer

    finishing, done = in_thread("play", owner_finishing)
    assert last_look.wait(5)

    def ask() -> object:
        posted.set()
        return owner.ask("switch", applier.settle)

    poster, answer = in_thread("poster", ask)
    assert answer.result(timeout=5) == "switch done"
    finishing.join(5)
    poster.join(5)
    done.result(timeout=0)
    assert applier.applied == [("switch", "poster")]


def test_many_posters_each_get_their_own_answer_once():
    owner: Owner[str] = Owner()
    applier = Applier(owner)
    threads = [in_thread(f"t{i}", lambda i=i: owner.ask(f"m{i}", applier.settle)) for i in range(8)]
    assert sorted(answer.result(timeout=10) for _, answer in threads) == sorted(
        f"m{i} done" for i in range(8)
    )
    assert sorted(message for message, _ in applier.applied) == sorted(f"m{i}" for i in range(8))


def test_the_owner_cannot_wait_for_its_own_message():
    owner: Owner[str] = Owner()
    applier = Applier(owner)
    with owner.role(), pytest.raises(RuntimeError, match="cannot wait for its own message"):
        owner.ask("resize", applier.settle)
    assert owner.ask("resize", applier.settle) == "resize done"  # the refused one was never posted
