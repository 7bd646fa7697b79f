"""A tiny search agent for tests: a small world, a word-overlap search tool, a BPE tokenizer with
the protocol tags as special tokens, and a tiny Qwen2 briefly trained on scripted trajectories so
that it writes searches and answers (real model class, real engine; only the tool is a fake)."""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass

import torch

from treegrpo.agent.prompt import render_prompt
from treegrpo.agent.protocol import SearchProtocol
from treegrpo.core.rewards import PROTOCOL_TAGS
from treegrpo.models.tiny import tiny_qwen2, train_bpe_tokenizer
from treegrpo.retrieval.base import Passage
from treegrpo.rollout.records import Rollout
from treegrpo.warmstart.tiny import WarmStartConfig

warnings.filterwarnings("ignore", message=".*deprecated.*")

TAGS = list(PROTOCOL_TAGS)
# A warm start small enough for tests (a few seconds): the embedded job end to end
TINY_WARM = WarmStartConfig(demo_worlds=1, hidden=32, layers=2, n_demos=40, steps=3, warmup=1)

PEOPLE = ["Alan", "Berta", "Cosmo", "Dalia", "Edvin", "Frida", "Gusto", "Hanne"]
CITIES = ["Rome", "Oslo", "Lima", "Kyiv", "Doha", "Bern", "Riga", "Suva"]
FACTS = {p: c for p, c in zip(PEOPLE, CITIES, strict=True)}
CORPUS = [Passage(str(i), f'"{p}"\n{p} was born in {c}.') for i, (p, c) in enumerate(FACTS.items())]


class WordTool:
    """Ranks passages by words shared with the query (a unit-test stand-in for BM25)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def search(self, queries: list[str], topk: int = 3) -> list[list[Passage]]:
        self.calls.extend(queries)
        out = []
        for q in queries:
            words = set(q.lower().split())
            ranked = sorted(CORPUS, key=lambda p: -len(words & set(p.contents.lower().split())))
            out.append(ranked[:topk])
        return out


def question(person: str) -> str:
    return f"Where was {person} born"


def trajectory(person: str, protocol: SearchProtocol) -> list[int]:
    """Scripted response: think, search, (observation), think, answer."""
    tok = protocol.tokenizer
    enc = lambda s: tok(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    first = enc(f"<think>find {person}</think><search>{person} born</search>")
    obs = protocol.observation_ids([p.contents for p in WordTool().search([f"{person} born"])[0]])
    second = enc(
        f"<think>{person} was born in {FACTS[person]}</think><answer>{FACTS[person]}</answer>"
    )
    return first + obs + second


@dataclass
class Agent:
    model: torch.nn.Module
    tokenizer: object
    protocol: SearchProtocol

    def prompt(self, person: str) -> list[int]:
        return render_prompt(self.tokenizer, question(person))


@functools.lru_cache(maxsize=2)
def trained_agent(steps: int = 120, heads: int = 4) -> Agent:
    """Tokenizer + tiny Qwen2 fitted on the scripted trajectories (a few seconds on CPU); 2 heads
    give the head size of 32 that vLLM's CPU attention needs at least."""
    from treegrpo.agent.prompt import instruction_text

    texts = [instruction_text(question(p)) for p in PEOPLE] + [p.contents for p in CORPUS]
    texts += [f"find {p} born was born in {c}" for p, c in FACTS.items()]
    tok = train_bpe_tokenizer(texts * 4, vocab_size=400, special_tokens=TAGS)
    protocol = SearchProtocol(tok, max_obs_tokens=120)
    model = tiny_qwen2(len(tok), hidden=64, layers=2, heads=heads, seed=0)
    seqs = []
    for p in PEOPLE:
        prompt = render_prompt(tok, question(p))
        seqs.append((prompt, trajectory(p, protocol)))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    width = max(len(a) + len(b) for a, b in seqs)
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    labels = torch.full((len(seqs), width), -100)
    for i, (a, b) in enumerate(seqs):
        ids[i, : len(a) + len(b)] = torch.tensor(a + b)
        labels[i, len(a) : len(a) + len(b)] = torch.tensor(b)
    torch.manual_seed(0)
    for _ in range(steps):
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return Agent(model, tok, protocol)


def trees_by_prompt(ro: Rollout) -> list[list[object]]:
    """Each prompt's trees as content: per node (in creation order within its tree) the index
    of its parent in the tree, its action and observation tokens; then the kept leaves'
    indices. Node ids are left out: they depend on what else the forest holds."""
    f = ro.forest
    out: list[list[object]] = [[] for _ in ro.prompts]
    kept = set(ro.kept.tolist())
    for tree, root in enumerate(f.roots.tolist()):
        nodes = [v for v in range(f.n_nodes) if f.tree_id[v] == tree]  # root first
        where = {v: i for i, v in enumerate(nodes)}
        rows = [
            (where[int(f.parent[v])], ro.step(v).action_ids, ro.step(v).obs_ids) for v in nodes[1:]
        ]
        out[int(f.prompt_id[root])].append((rows, [where[v] for v in nodes if v in kept]))
    return out
