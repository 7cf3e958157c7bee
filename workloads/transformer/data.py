"""Generated, deterministic sequence data for the three stacks (no downloads).

- encoder-decoder: copy, reverse or sort a random token string (the classic seq2seq probes);
- BERT: sentence pairs from a generated grammar with topics, for masked LM (80/10/10 masking, done in the
  pipeline as a map) and next-sentence prediction;
- GPT-2: the same grammar's documents packed into fixed windows for next-token prediction.

Sample i of a split is a pure function of (task, split, i), so any worker, shard or format reads the same data.
"""

from __future__ import annotations

import zlib
from typing import Sequence

import numpy as np

from workloads.transformer.config import IGNORE_INDEX, PAD, TransformerPreset

SPLITS = {"train": 0, "eval": 1}
BOS, EOS = 1, 2                   # encoder-decoder specials; symbols start at 3
CLS, SEP, MASK = 1, 2, 3          # BERT specials; words start at 4
DOC_END = 1                       # GPT-2 document separator; words start at 2
TOPICS = 8
LEXICON = 3                       # words of each open class one document uses


def sample_rng(task: str, split: str, index: int) -> np.random.Generator:
    if split not in SPLITS:
        raise ValueError(f"split={split!r}; allowed: {'|'.join(SPLITS)}")
    return np.random.default_rng([zlib.crc32(task.encode()), SPLITS[split], index])


def pad_to(tokens: Sequence[int], length: int, fill: int) -> np.ndarray:
    out = np.full(length, fill, np.int32)
    out[:len(tokens)] = tokens[:length]
    return out


class SplitSource:
    """A generated split of a preset: `split` names it and its size is the preset's train or eval count."""

    def __init__(self, preset: TransformerPreset, split: str) -> None:
        self.split, self.seq_len = split, preset.seq_len
        self.n = preset.train_samples if split == "train" else preset.eval_samples

    def __len__(self) -> int:
        return self.n


class SequenceTaskSource(SplitSource):
    """Encoder-decoder samples (src_ids, tgt_ids, labels): target = task(source), teacher-forced from BOS."""

    def __init__(self, preset: TransformerPreset, split: str) -> None:
        super().__init__(preset, split)
        self.task, self.vocab = preset.task, preset.vocab_size

    def __getitem__(self, index: int) -> tuple[np.ndarray, ...]:
        rng = sample_rng(self.task, self.split, index)
        length = int(rng.integers(max(1, (self.seq_len - 1) // 2), self.seq_len))  # leaves room for EOS
        symbols = rng.integers(EOS + 1, self.vocab, length)
        target = {"copy": symbols, "reverse": symbols[::-1], "sort": np.sort(symbols)}[self.task]
        src = pad_to(list(symbols) + [EOS], self.seq_len, PAD)
        tgt = pad_to([BOS] + list(target), self.seq_len, PAD)
        labels = pad_to(list(target) + [EOS], self.seq_len, IGNORE_INDEX)
        return src, tgt, labels


class WordClass:
    """Word ids drawn Zipf(1): rank r has weight 1/(r+1), as word frequencies roughly do."""

    def __init__(self, ids: np.ndarray) -> None:
        self.ids, self.cdf = ids, np.cumsum(1.0 / np.arange(1, len(ids) + 1))

    def pick(self, rng: np.random.Generator) -> int:
        return int(self.ids[min(int(np.searchsorted(self.cdf, rng.random() * self.cdf[-1])), len(self.ids) - 1)])


class Grammar:
    """A small agreement grammar over word classes laid out in [first, vocab): singular/plural agreement
    between determiner, noun and verb, optional adjectives, adverbs and prepositional phrases. Each document
    has a topic (a slice of the nouns) and a small lexicon it keeps reusing: what makes masked words
    predictable from their context and next-sentence prediction learnable."""

    def __init__(self, first: int, vocab: int) -> None:
        n = vocab - first
        closed = max(2, n // 64)
        sizes = {"det_sg": closed, "det_pl": closed, "prep": 2 * closed, "noun_sg": n // 4, "noun_pl": n // 4,
                 "verb_sg": n // 8, "verb_pl": n // 8, "adv": n // 16}
        if n < 64:
            raise ValueError(f"vocab_size={vocab} leaves {n} words; the grammar needs at least 64")
        self.words, start = {}, first
        for name, size in sizes.items():
            self.words[name], start = WordClass(np.arange(start, start + size)), start + size
        self.words["adj"] = WordClass(np.arange(start, vocab))
        self.topic_nouns = {(plural, topic): WordClass(self.words[f"noun_{plural}"].ids[topic::TOPICS])
                            for plural in ("sg", "pl") for topic in range(TOPICS)}

    def lexicon(self, rng: np.random.Generator, topic: int) -> dict[str, np.ndarray]:
        """A document's own words: a few of each open class (nouns from its topic), reused in every sentence,
        as topic words recur in real documents. Closed classes (determiners, prepositions) stay whole."""
        chosen = {name: np.array([self.words[name].pick(rng) for _ in range(LEXICON)])
                  for name in ("verb_sg", "verb_pl", "adj", "adv")}
        for number in ("sg", "pl"):
            chosen[f"noun_{number}"] = np.array([self.topic_nouns[(number, topic)].pick(rng) for _ in range(LEXICON)])
        for name in ("det_sg", "det_pl", "prep"):
            chosen[name] = self.words[name].ids
        return chosen

    def sentence(self, rng: np.random.Generator, words: dict[str, np.ndarray]) -> list[int]:
        number = "pl" if rng.random() < 0.5 else "sg"
        out = self.noun_phrase(rng, words, number)
        out.append(int(rng.choice(words[f"verb_{number}"])))
        if rng.random() < 0.3:
            out.append(int(rng.choice(words["adv"])))
        out += self.noun_phrase(rng, words, "pl" if rng.random() < 0.5 else "sg")
        if rng.random() < 0.4:
            out.append(int(rng.choice(words["prep"])))
            out += self.noun_phrase(rng, words, "pl" if rng.random() < 0.5 else "sg")
        return out

    def noun_phrase(self, rng: np.random.Generator, words: dict[str, np.ndarray], number: str) -> list[int]:
        out = [int(rng.choice(words[f"det_{number}"]))]
        while rng.random() < 0.35 and len(out) < 3:
            out.append(int(rng.choice(words["adj"])))
        out.append(int(rng.choice(words[f"noun_{number}"])))
        return out

    def document(self, rng: np.random.Generator, min_tokens: int) -> list[list[int]]:
        """Sentences of one topic and lexicon until they hold at least `min_tokens` tokens."""
        words, sentences, total = self.lexicon(rng, int(rng.integers(TOPICS))), [], 0
        while total < min_tokens:
            sentences.append(self.sentence(rng, words))
            total += len(sentences[-1])
        return sentences


def flatten(sentences: list[list[int]]) -> list[int]:
    return [t for s in sentences for t in s]


class BertPairSource(SplitSource):
    """(input_ids, token_type_ids, nsp_label): `[CLS] A [SEP] B [SEP]`, B the true continuation of A
    (label 0, IsNext) or text from another document (label 1, NotNext), as in BERT's pre-training data."""

    def __init__(self, preset: TransformerPreset, split: str) -> None:
        super().__init__(preset, split)
        self.grammar = Grammar(MASK + 1, preset.vocab_size)

    def __getitem__(self, index: int) -> tuple[np.ndarray, ...]:
        rng = sample_rng("mlm", self.split, index)
        budget = self.seq_len - 3
        doc = self.grammar.document(rng, budget)
        cut = 1
        while cut < len(doc) - 1 and len(flatten(doc[:cut])) < budget // 2:
            cut += 1
        first = flatten(doc[:cut])[: budget // 2 + budget % 2]
        not_next = bool(rng.random() < 0.5)
        rest = self.grammar.document(rng, budget) if not_next else doc[cut:]
        second = flatten(rest)[: budget - len(first)]
        tokens = [CLS] + first + [SEP] + second + [SEP]
        types = [0] * (len(first) + 2) + [1] * (len(second) + 1)
        return pad_to(tokens, self.seq_len, PAD), pad_to(types, self.seq_len, 0), np.int32(not_next)


class BertMasking:
    """BERT's masking of 15% of the word positions (at most `max_predictions`): 80% -> [MASK], 10% -> a
    random word, 10% unchanged. Returns (masked input_ids, masked_positions, masked_ids); unused slots hold
    position 0 and label IGNORE_INDEX. The draw is seeded by the sample's tokens (static masking, as in
    BERT's pre-training data), so it does not depend on worker scheduling."""

    def __init__(self, preset: TransformerPreset, seed: int = 0) -> None:
        self.max_predictions, self.vocab, self.seed = preset.max_predictions, preset.vocab_size, seed

    def __call__(self, input_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ids = np.array(input_ids, dtype=np.int32)
        rng = np.random.default_rng([self.seed, zlib.crc32(ids.tobytes())])
        candidates = np.flatnonzero(ids > MASK)
        count = min(self.max_predictions, max(1, int(round(len(candidates) * 0.15))))
        chosen = np.sort(rng.choice(candidates, size=count, replace=False))
        positions = np.zeros(self.max_predictions, np.int32)
        labels = np.full(self.max_predictions, IGNORE_INDEX, np.int32)
        positions[:count], labels[:count] = chosen, ids[chosen]
        roll = rng.random(count)
        ids[chosen[roll < 0.8]] = MASK
        swap = chosen[(roll >= 0.8) & (roll < 0.9)]
        ids[swap] = rng.integers(MASK + 1, self.vocab, len(swap))
        return ids, positions, labels


class LanguageModelSource(SplitSource):
    """(input_ids, labels): a window of seq_len tokens of generated documents (separated by DOC_END, packed
    as in GPT-2's training) and the same window shifted by one token."""

    def __init__(self, preset: TransformerPreset, split: str) -> None:
        super().__init__(preset, split)
        self.grammar = Grammar(DOC_END + 1, preset.vocab_size)

    def __getitem__(self, index: int) -> tuple[np.ndarray, ...]:
        rng = sample_rng("lm", self.split, index)
        tokens: list[int] = []
        while len(tokens) <= self.seq_len:
            tokens += flatten(self.grammar.document(rng, min(self.seq_len, 64))) + [DOC_END]
        window = np.asarray(tokens[: self.seq_len + 1], np.int32)
        return window[:-1], window[1:]
