"""The student and every teacher must share one vocabulary; a mismatch names both tokenizers."""

import shutil

import pytest

from services.errors import ConfigError
from services.models.loading import load_tokenizer
from services.models.tokenizer_match import check_same_tokenizer


def test_the_zoo_student_and_teacher_share_one_tokenizer(zoo_cache):
    check_same_tokenizer("student", {"sources[0].teacher": "teacher"}, zoo_cache)


def test_a_teacher_with_another_vocabulary_is_refused_naming_both(zoo_cache, tmp_path):
    other = tmp_path / "other-teacher"
    shutil.copytree(zoo_cache / "models" / "teacher", other)
    tokenizer = load_tokenizer("teacher", zoo_cache)
    tokenizer.add_tokens(["<an_extra_token>"])
    tokenizer.save_pretrained(other)
    size = len(load_tokenizer("student", zoo_cache))
    with pytest.raises(ConfigError) as caught:
        check_same_tokenizer("student", {"sources[1].teacher": str(other)}, zoo_cache)
    message = str(caught.value)
    assert message.startswith("sources[1].teacher: the teacher")
    assert f"vocab {size + 1})" in message and f"vocab {size})" in message and str(other) in message
