"""``use_threads`` sets torch's count for the calling thread, which ``effective_threads`` reads back."""

import threading

from services.torch_threads import effective_threads, use_threads


def in_new_thread(threads: int | None, before: int) -> int:
    seen: list[int] = []

    def run() -> None:
        use_threads(before)
        use_threads(threads)
        seen.append(effective_threads())

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    return seen[0]


def test_a_count_is_set_and_read_back_in_the_calling_thread():
    assert in_new_thread(1, before=2) == 1
    assert in_new_thread(2, before=1) == 2


def test_none_leaves_the_threads_count_alone():
    assert in_new_thread(None, before=1) == 1
    assert in_new_thread(None, before=2) == 2
