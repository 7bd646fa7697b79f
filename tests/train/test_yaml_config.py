"""YAML run configs: sections update presets, mistakes name the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from treegrpo.jobs.presets import EmbeddedConfig
from treegrpo.train.config import AlgorithmConfig, ModelConfig, OptimConfig, RunConfig
from treegrpo.train.yaml_config import ConfigError, dump_config, load_config

DEFAULTS = {
    "algo": AlgorithmConfig(),
    "optim": OptimConfig(lr=1e-4),
    "run": RunConfig(),
    "world": EmbeddedConfig(),
    "model": ModelConfig(),
}
REPO = Path(__file__).parents[2]


def _load(tmp_path: Path, text: str) -> dict[str, object]:
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return load_config(path, DEFAULTS)


def test_sections_update_the_defaults(tmp_path: Path) -> None:
    cfg = _load(
        tmp_path,
        "algo: {algo: chain, m: 4, k: null, advantage_mode: inter}\n"
        "optim: {lr: 3e-4, betas: [0.9, 0.95], warmup_steps: 2}\n"
        "model: {lora_rank: 8, lora_alpha: 16, lora_targets: [q_proj, v_proj]}\n",
    )
    assert cfg["algo"] == AlgorithmConfig(algo="chain", m=4, advantage_mode="inter")
    # "3e-4" reads as a float (YAML 1.1 would read a string). Unset keys keep the preset.
    assert cfg["optim"] == OptimConfig(lr=3e-4, betas=(0.9, 0.95), warmup_steps=2)
    assert cfg["model"] == ModelConfig(lora_rank=8, lora_targets=("q_proj", "v_proj"))
    assert cfg["run"] is DEFAULTS["run"] and cfg["world"] is DEFAULTS["world"]
    assert _load(tmp_path, "") == DEFAULTS


def test_dump_reads_back_to_the_same_config(tmp_path: Path) -> None:
    cfg = dict(DEFAULTS, model=ModelConfig(lora_rank=4, dtype="bfloat16"))
    assert _load(tmp_path, dump_config(cfg)) == cfg


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("algo: {mm: 4}\n", "unknown key 'algo.mm' (known: algo, m, n"),
        ("algo: {mm: 4}\n", "did you mean 'm'?"),
        ("modle: {lora_rank: 4}\n", "unknown section 'modle'"),
        ("algo: {m: four}\n", "algo.m: Input should be a valid integer, got 'four' (str)"),
        ("algo: {m: 2.5}\n", "algo.m: Input should be a valid integer, got 2.5"),
        ("algo: {m: true}\n", "algo.m: Input should be a valid integer, got True"),
        ("algo: {algo: forest}\n", "algo.algo: Input should be 'tree' or 'chain'"),
        ("algo: {k: x}\n", "algo.k: Input should be a valid integer, got 'x'"),
        ("optim: {lr: fast}\n", "optim.lr: Input should be a valid number, got 'fast'"),
        ("optim: {betas: [0.9]}\n", "optim.betas[1]: missing, got [0.9] (too short)"),
        ("run: {resume: 'yes'}\n", "run.resume: Input should be a valid boolean, got 'yes'"),
        ("model: {lora_targets: [q_proj, 3]}\n", "lora_targets[1]: Input should be a valid string"),
        ("model: {lora_rank: -1}\n", "section 'model': lora_rank must be >= 0"),
        ("optim: {betas: [0.9, 0.99, 0.5]}\n", "optim.betas: Tuple should have at most 2 items"),
        ("optim: {lr: 1e-}\n", "optim.lr: Input should be a valid number, got '1e-'"),
        ("algo: [1, 2]\n", "section 'algo' must be a mapping, got list"),
        ("- algo\n", "expected a mapping of sections, got list"),
        ("algo: {m: [1,\n", "run.yaml:2: invalid YAML"),
    ],
)
def test_mistakes_name_the_file_and_the_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, text)
    assert str(err.value).startswith(str(tmp_path / "run.yaml"))
    assert message in str(err.value)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "nope.yaml", DEFAULTS)


def test_shipped_presets_load_and_compare_at_one_budget() -> None:
    tree = load_config(REPO / "configs" / "embedded-tree.yaml", DEFAULTS)
    chain = load_config(REPO / "configs" / "embedded-chain.yaml", DEFAULTS)
    shape = tree["algo"].shape()
    assert (shape.m, shape.n, shape.l) == (2, 6, 1) and tree["algo"].algo == "tree"
    assert chain["algo"] == AlgorithmConfig(  # the same budget ≈ 8: 8 chains
        algo="chain", m=8, format_score=0.0, skip_uniform_prompts=True
    )
    for section in ("optim", "world", "model"):
        assert tree[section] == chain[section], section
    assert tree["run"].eval_every == chain["run"].eval_every == 5  # as the default job
