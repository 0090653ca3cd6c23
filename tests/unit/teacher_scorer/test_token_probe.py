"""The tokenizer probe: the student's and an endpoint's ids of one text must be the same, and the
endpoint's top-K ids must exist in the student's vocabulary."""

from services.models.loading import load_tokenizer
from services.teacher_scorer.token_probe import PROBE_TEXT, StudentTokens, student_tokens, tokenizer_mismatch

STUDENT = StudentTokens(
    tokenizer="'student' (/zoo/student, vocab 100)",
    text="a probe",
    token_ids=(5, 17, 42, 8),
    pieces=("a", "Ġpro", "be", "<|im_end|>"),
    vocab_size=100,
)
ENDPOINT = "the endpoint's (model teacher at http://vllm:8000)"


def test_the_same_ids_and_a_vocabulary_within_the_students_agree():
    assert tokenizer_mismatch(STUDENT, ENDPOINT, [5, 17, 42, 8], [0, 99, 17]) is None


def test_other_ids_name_both_tokenizers_and_the_first_difference():
    message = tokenizer_mismatch(STUDENT, ENDPOINT, [5, 17, 43, 8], [])
    assert message is not None
    assert message.startswith(f"the student's tokenizer {STUDENT.tokenizer} and {ENDPOINT} tokenise")
    assert (
        "4 tokens against 4, first difference at token 2: the student has 42 ('be'), the endpoint 43"
        in message
    )
    assert "--tokenizer <student checkpoint>" in message


def test_a_shorter_tokenisation_names_where_it_ends():
    message = tokenizer_mismatch(STUDENT, ENDPOINT, [5, 17, 42], [])
    assert message is not None and "4 tokens against 3, first difference at token 3" in message
    assert "the student has 8 ('<|im_end|>'), the endpoint nothing" in message


def test_top_k_ids_beyond_the_students_vocabulary_are_a_mismatch():
    message = tokenizer_mismatch(STUDENT, ENDPOINT, [5, 17, 42, 8], [3, 100, 151_000, 7])
    assert message is not None
    assert "ids up to 151000 (2 at or beyond 100), the student's tokenizer has 100 tokens" in message


def test_the_probe_holds_the_students_special_tokens(zoo_cache):
    tokenizer = load_tokenizer("student", zoo_cache)
    probe = student_tokens(tokenizer, "student")
    assert probe.text.startswith(PROBE_TEXT)
    special = {tokenizer.convert_tokens_to_ids(t) for t in ("<|im_start|>", "<|im_end|>", "<|endoftext|>")}
    assert special <= set(probe.token_ids)
    assert probe.token_ids == tuple(tokenizer(probe.text)["input_ids"])
    assert len(probe.pieces) == len(probe.token_ids) and probe.vocab_size == len(tokenizer)
