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
    # "3e-4" is a string to YAML 1.1; float fields take it. Unset keys keep the caller's preset.
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
        ("algo: {m: four}\n", "algo.m: expected int, got 'four' (str)"),
        ("algo: {m: 2.5}\n", "algo.m: expected int"),
        ("algo: {m: true}\n", "algo.m: expected int"),
        ("algo: {algo: forest}\n", "algo.algo: expected one of 'tree', 'chain'"),
        ("algo: {k: x}\n", "algo.k: expected int or null"),
        ("optim: {lr: fast}\n", "optim.lr: expected float"),
        ("optim: {betas: [0.9]}\n", "optim.betas: expected a list (float, float)"),
        ("run: {resume: 'yes'}\n", "run.resume: expected bool"),
        ("model: {lora_targets: [q_proj, 3]}\n", "model.lora_targets[1]: expected str"),
        ("model: {lora_rank: -1}\n", "section 'model': lora_rank must be >= 0"),
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
    assert tree["algo"].shape().m == 2 and tree["algo"].algo == "tree"  # type: ignore[attr-defined]
    assert chain["algo"] == AlgorithmConfig(
        algo="chain", m=4, format_score=0.0, skip_uniform_prompts=True
    )
    for section in ("optim", "world", "model"):
        assert tree[section] == chain[section], section
