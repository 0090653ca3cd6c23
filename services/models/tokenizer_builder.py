"""Train the zoo's byte-level BPE tokenizer and wrap it as a Hugging Face fast tokenizer.

Byte-level BPE starts from all 256 byte symbols, so any text encodes without an unknown token;
the merges learnt from the corpus make household words single tokens. Control and markup tokens
are added as atomic tokens and stripped from the training text, so no merge is spent on them.
"""

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from services.errors import InputError
from services.models.chat_template import CHAT_TEMPLATE, IM_END, MARKUP_TOKENS, PAD, SPECIAL_TOKENS

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

MIN_VOCAB_SIZE = 256 + len(SPECIAL_TOKENS) + len(MARKUP_TOKENS)


def _without_control_tokens(texts: Iterable[str]) -> Iterator[str]:
    for text in texts:
        for token in SPECIAL_TOKENS + MARKUP_TOKENS:
            text = text.replace(token, "\n")
        yield text


def train_tokenizer(
    texts: Iterable[str], vocab_size: int = 4096, entity_tokens: Sequence[str] = ()
) -> "PreTrainedTokenizerFast":
    """A byte-level BPE tokenizer of at most ``vocab_size`` ids trained on ``texts``, with the chat template.

    ``entity_tokens`` (e.g. ``" drawer 3"``) become single atomic tokens matched anywhere in the
    text (longest match first), so an entity the model copies from an observation is one id, not a
    kind word and a number that must be copied as a pair. Deterministic: the same texts in the same
    order give the same tokenizer.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    entities = list(dict.fromkeys(entity_tokens))
    smallest = MIN_VOCAB_SIZE + len(entities)
    if vocab_size < smallest:
        raise InputError(
            f"vocab_size must be >= {smallest} (bytes + control tokens + {len(entities)} entity tokens), "
            f"got {vocab_size}"
        )
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(MARKUP_TOKENS) - len(entities),
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(_without_control_tokens(texts), trainer=trainer)
    backend.add_tokens([AddedToken(t, special=False, normalized=False) for t in (*MARKUP_TOKENS, *entities)])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=IM_END,
        pad_token=PAD,
        chat_template=CHAT_TEMPLATE,
        model_max_length=1 << 20,
        padding_side="left",
    )
