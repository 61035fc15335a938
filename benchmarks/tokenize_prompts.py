"""How long does the API server take to tokenise a benchmark prompt? A CPU microbenchmark.

    pip install tokenizers transformers tiktoken && pip install --no-deps llama-models
    python benchmarks/tokenize_prompts.py [--lengths 1024 2048 4096 8192] [--repeats 15]

vLLM's OpenAI server turns every text prompt into token ids on one thread before the
engine sees the request (`AsyncMicrobatchTokenizer`, a single-worker executor; vllm#25301
describes the queue it forms), so a client's TTFT includes it. The benchmark clients the
closed-loop sweeps come from (vLLM's `benchmark_serving.py` random dataset, InferenceX's copy
of it) send text: consecutive vocabulary ids from a random offset, decoded. This times
Hugging Face's fast tokenizer (the one vLLM loads) encoding exactly such prompts, each once
(as the server sees them), with the Llama 3 (128k) and Llama 4 (200k, o200k's pattern)
vocabularies that Meta's `llama-models` wheel ships; no model download is needed.

The median microseconds per prompt token it prints is what `cost_model.frontend_us_per_token`
takes (docs/fidelity.md, item 27).
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from importlib import resources


def fast_tokenizer(family: str):
    """The Hugging Face fast tokenizer of one `llama_models` vocabulary, built from its
    tiktoken ranks with the pre-tokenizer pattern that package's own tokenizer uses."""
    from transformers.convert_slow_tokenizer import TikTokenConverter

    module = importlib.import_module(f"llama_models.{family}.tokenizer")
    pattern = getattr(module.Tokenizer, "pat_str", None) or module.Tokenizer.O200K_PATTERN
    path = resources.files("llama_models") / family / "tokenizer.model"
    return TikTokenConverter(vocab_file=str(path), pattern=pattern, additional_special_tokens=[]).converted()


def time_prompts(tokenizer, length: int, repeats: int, seed: int) -> list[float]:
    """Seconds to encode `repeats` fresh benchmark-style prompts of `length` tokens."""
    import numpy as np

    vocab = tokenizer.get_vocab_size()
    rng = np.random.default_rng(seed)
    seconds = []
    for i in range(repeats):
        start = int(rng.integers(0, vocab))
        text = tokenizer.decode([(start + i + j) % vocab for j in range(length)])
        began = time.perf_counter()
        tokenizer.encode(text, add_special_tokens=False)
        seconds.append(time.perf_counter() - began)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        tokenizers = {family: fast_tokenizer(family) for family in ("llama3", "llama4")}
    except ImportError as err:
        print(f"error: {err.name or err} is not installed; this benchmark needs "
              "`pip install tokenizers transformers tiktoken && pip install --no-deps llama-models`",
              file=sys.stderr)
        return 2
    per_token = []
    print("vocabulary  tokens  median ms  µs/token")
    for family, tokenizer in tokenizers.items():
        for length in args.lengths:
            median = statistics.median(time_prompts(tokenizer, length, args.repeats, args.seed))
            per_token.append(median / length * 1e6)
            print(f"{family:<10}  {length:>6}  {median * 1e3:>9.2f}  {per_token[-1]:>8.2f}")
    print(f"median over all: {statistics.median(per_token):.2f} µs per prompt token")
    return 0


if __name__ == "__main__":
    sys.exit(main())
