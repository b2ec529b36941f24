"""A tiny chat model built on the spot, for tests and benchmarks against a real server.

No weights are downloaded: a byte-level BPE tokenizer is trained with the `tokenizers` library on
a few kilobytes of text, a `LlamaForCausalLM` with random weights is made from a hand-written
config, and both are saved with a chat template to a directory that `transformers serve` (or any
loader of Hugging Face checkpoints) can load. Its replies are noise, but a real server computes
them token by token, one request at a time on CPU, with real usage counts, real chat-template
errors and real status codes.

`build_qwen3` makes a tiny Qwen3 (Qwen3's special tokens and a given chat template, e.g. the one
TRL recognises to parse tool calls) for training loops such as TRL's GRPOTrainer.

Needs the `serve` extra (torch, transformers): `pip install -e ".[serve]"`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

# The usual template: every role, including system.
TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
# A template that refuses the system role, as Gemma's and some Mistral templates do.
NO_SYSTEM_TEMPLATE = (
    "{% for m in messages %}{% if m['role'] == 'system' %}"
    "{{ raise_exception('System role not supported') }}{% endif %}"
    "<|{{ m['role'] }}|>\n{{ m['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
SPECIAL = ["<unk>", "<s>", "</s>", "<pad>"]
QWEN3_SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
]


@dataclass(frozen=True)
class TinyModel:
    """What to build. `sampling=False` leaves sampling out of the generation config, so the
    server decodes greedily whatever temperature a request asks for. `stops=False` suppresses
    the end-of-sequence token: every reply runs to `max_tokens`, so its cost is known."""

    name: str = "tiny-llama"
    system_role: bool = True
    sampling: bool = True
    stops: bool = True
    hidden: int = 64
    layers: int = 2
    vocab: int = 800
    context: int = 16384
    seed: int = 0


def corpus() -> list[str]:
    """Text to train the tokenizer on: the project's prompts and some shell."""
    root = Path(__file__).resolve().parents[2] / "prompts"
    texts = [p.read_text(encoding="utf-8") for p in sorted(root.glob("*.md"))]
    texts += [
        "<command>ls -la /home/user</command>",
        "<command>cat /home/user/in.txt | tr a-z A-Z > /home/user/out.txt</command>",
        "<action>done</action> <think>First look at the files.</think>",
        "grep sed awk find xargs sort uniq wc head tail python3 pytest echo printf",
    ] * 4
    return texts


def _tokenizer(vocab: int, special: list[str], **roles: str) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on `corpus()`, with `special` tokens; `roles` name
    some of them (eos_token=..., pad_token=...)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(unk_token=special[0]))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(corpus(), trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=bpe, **roles)


def build(spec: TinyModel, directory: Path) -> Path:
    """Write the model `spec` describes into `directory` (created); returns the directory."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer(
        spec.vocab, SPECIAL, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    tokenizer.chat_template = TEMPLATE if spec.system_role else NO_SYSTEM_TEMPLATE
    tokenizer.save_pretrained(directory)

    torch.manual_seed(spec.seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden,
        intermediate_size=spec.hidden * 2,
        num_hidden_layers=spec.layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=spec.context,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    generation = {"bos_token_id": config.bos_token_id, "eos_token_id": config.eos_token_id}
    if spec.sampling:
        generation.update(do_sample=True, temperature=1.0, top_k=0, top_p=1.0)
    if not spec.stops:
        generation["suppress_tokens"] = [config.eos_token_id]
    model.generation_config = GenerationConfig(**generation)
    model.save_pretrained(directory)
    (directory / "tiny_model.json").write_text(json.dumps(spec.__dict__), encoding="utf-8")
    return directory


def build_qwen3(directory: Path, chat_template: str, *, hidden: int = 64, seed: int = 0) -> Path:
    """A tiny Qwen3ForCausalLM with random weights and Qwen3's special tokens (end of turn
    `<|im_end|>`, padding `<|endoftext|>`) and `chat_template`, saved into `directory` (created)
    with its tokenizer: what `from_pretrained(directory)` and TRL's trainers load."""
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer(800, QWEN3_SPECIAL, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.chat_template = chat_template
    tokenizer.save_pretrained(directory)
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden // 4,
        max_position_embeddings=8192,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=[tokenizer.eos_token_id, tokenizer.pad_token_id],
        pad_token_id=tokenizer.pad_token_id,
    )
    model.save_pretrained(directory)
    return directory
