"""Named Ray actors: waiting until a killed actor's name is free, so a fresh actor can take it."""

import time

import ray


def wait_name_free(name: str, namespace: str, timeout_s: float) -> bool:
    """Wait until no live actor holds ``name``; False if one still does after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            ray.get_actor(name, namespace=namespace)
        except ValueError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
