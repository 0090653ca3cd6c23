"""TeacherOps with ``[teacher] endpoint_url``: its start probes the server, here our own teacher app
served over HTTP on the loopback, and refuses a server that tokenises otherwise than the student."""

import asyncio
import json
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from in_process_teacher import LoopbackTeacher

from services.errors import ConfigError
from services.models.loading import load_tokenizer
from services.operations.managed_service import RunContext
from services.operations.run_pieces import RunPieces
from services.operations.teacher_ops import TeacherOps
from services.run_dir import RunDir
from services.settings import TurnOPDSettings
from services.teacher_scorer.endpoint_client import EndpointTeacherClient, TokenizerMismatchError


def _serve(checkpoint: Path) -> Iterator[str]:
    """Our teacher app on a free loopback port, scoring with ``checkpoint``; yields its base URL."""
    server = LoopbackTeacher(checkpoint, token_budget=512)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


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
            "teacher": {"endpoint_url": url, "client_max_attempts": 1},  # its only model
        }
    )
    return TeacherOps(
        RunContext(pieces=RunPieces.of(settings), run=RunDir(Path("unused")), run_id="r"), Counter()
    )


def test_an_endpoint_that_tokenises_as_the_student_starts(same_tokenizer, zoo_cache):
    teacher = _teacher_ops(same_tokenizer, zoo_cache)
    teacher.start()
    asyncio.run(teacher.preflight())
    assert isinstance(teacher.handle, EndpointTeacherClient) and not teacher.deployed


def test_an_endpoint_with_other_token_ids_stops_the_start_naming_both_tokenizers(other_tokenizer, zoo_cache):
    teacher = _teacher_ops(other_tokenizer, zoo_cache)
    teacher.start()
    with pytest.raises(TokenizerMismatchError) as caught:
        asyncio.run(teacher.preflight())
    message = str(caught.value)
    assert message.startswith(
        f"the student's tokenizer 'student' ({zoo_cache / 'models' / 'student'}, vocab "
    )
    assert (
        f"and the endpoint's (model (its only one) at {other_tokenizer}) tokenise the probe text differently"
        in message
    )
    student = load_tokenizer("student", zoo_cache)
    are, the = student.convert_tokens_to_ids(["Ġare", "Ġthe"])
    # "You are in a kitchen...": the second token is where the two tokenizers part
    assert f"first difference at token 1: the student has {are} ('Ġare'), the endpoint {the}." in message


def test_a_model_name_the_endpoint_does_not_serve_stops_the_start_naming_what_it_serves(
    same_tokenizer, zoo_cache
):
    teacher = _teacher_ops(same_tokenizer, zoo_cache)
    teacher.settings = teacher.settings.model_copy(
        update={"teacher": teacher.settings.teacher.model_copy(update={"endpoint_model": "teacher"})}
    )
    served = str(zoo_cache / "models" / "teacher")
    teacher.start()
    with pytest.raises(ConfigError, match=f"it serves \\['{served}'\\], the run asks for 'teacher'"):
        asyncio.run(teacher.preflight())  # before: both probes passed and step 1 failed on the context
