"""TeacherOps with ``[teacher] endpoint_url``: its start probes the server, here our own teacher app
served over HTTP on the loopback, and refuses a server that tokenises otherwise than the student."""

import json
import shutil
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from in_process_teacher import InProcessBackend

from services.models.loading import load_tokenizer
from services.operations.lifecycle import RunContext, TeacherOps
from services.run_dir import RunDir
from services.settings import TurnOPDSettings
from services.teacher_scorer.endpoint_client import EndpointTeacherClient, TokenizerMismatchError
from services.teacher_scorer.routes import build_http_app
from services.teacher_scorer.scorer import TeacherScorer
from services.teacher_scorer.transformers_engine import TransformersEngine, load_teacher_model


def _serve(checkpoint: Path) -> Iterator[str]:
    """Our teacher app on a free loopback port, scoring with ``checkpoint``; yields its base URL."""
    engine = TransformersEngine(load_teacher_model(checkpoint, "cpu", "float32"))
    backend = InProcessBackend(TeacherScorer(engine, token_budget=512, max_batch_size=8), 5, str(checkpoint))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(build_http_app(lambda: backend), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def same_tokenizer(zoo_cache):
    yield from _serve(zoo_cache / "models" / "teacher")


@pytest.fixture
def other_tokenizer(zoo_cache, tmp_path):
    """The zoo teacher with two tokens' ids swapped in its tokenizer: as large a vocabulary, other ids."""
    other = tmp_path / "teacher-other-ids"
    shutil.copytree(zoo_cache / "models" / "teacher", other)
    spec = json.loads((other / "tokenizer.json").read_text())
    vocab = spec["model"]["vocab"]
    vocab["Ġare"], vocab["Ġthe"] = vocab["Ġthe"], vocab["Ġare"]
    (other / "tokenizer.json").write_text(json.dumps(spec))
    yield from _serve(other)


def _teacher_ops(url: str, zoo_cache: Path) -> TeacherOps:
    settings = TurnOPDSettings.model_validate(
        {
            "models": {"cache_dir": str(zoo_cache)},
            "distill": {"distill_topk": 5},
            "teacher": {"endpoint_url": url, "endpoint_model": "teacher", "client_max_attempts": 1},
        }
    )
    return TeacherOps(RunContext(settings=settings, run=RunDir(Path("unused")), run_id="r"), Counter())


def test_an_endpoint_that_tokenises_as_the_student_starts(same_tokenizer, zoo_cache):
    teacher = _teacher_ops(same_tokenizer, zoo_cache)
    teacher.start()
    assert isinstance(teacher.handle, EndpointTeacherClient) and not teacher.deployed


def test_an_endpoint_with_other_token_ids_stops_the_start_naming_both_tokenizers(other_tokenizer, zoo_cache):
    teacher = _teacher_ops(other_tokenizer, zoo_cache)
    with pytest.raises(TokenizerMismatchError) as caught:
        teacher.start()
    message = str(caught.value)
    assert message.startswith(
        f"the student's tokenizer 'student' ({zoo_cache / 'models' / 'student'}, vocab "
    )
    assert (
        f"and the endpoint's (model teacher at {other_tokenizer}) tokenise the probe text differently"
        in message
    )
    student = load_tokenizer("student", zoo_cache)
    are, the = student.convert_tokens_to_ids(["Ġare", "Ġthe"])
    # "You are in a kitchen...": the second token is where the two tokenizers part
    assert f"first difference at token 1: the student has {are} ('Ġare'), the endpoint {the}." in message
