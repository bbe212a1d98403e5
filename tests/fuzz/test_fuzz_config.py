"""Fuzzing the ConfigMap parser with raw text (tests/test_config.py fuzzes well-formed YAML
trees; this feeds it what a hand edit or a broken generator can produce): any text either
loads or raises `ConfigError` with one-line problems, never another exception; YAML tags
never construct Python objects; and a document that expands exponentially through aliases
is rejected quickly."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.config import AutoscalerConfig, ConfigError, load_config_text

FRAGMENTS = [
    "controller:", "defaults:", "targets:", "  - namespace: llm", "    deployment: qwen", "  prometheus:",
    "    url: http://p:9090", "  tick_seconds: 15", "max_replicas: 8", "  max_replicas: !!int 8",
    "  min_replicas: &m 2", "  max_replicas: *m", "<<: {a: 1}", "- [", "{", "}", "]", ": :", "\t", "?", "---", "...",
    "%YAML 1.1", "!!python/object/apply:os.system ['true']", "!!binary aGk=", "!!set {a}", "key: 'unterminated",
    'key: "\\x00"', "\ufeff", "# comment", "targets: []", "targets: ~", "1e999", "0x1F", ".nan", "- .inf", "&a *a",
    "  namespace: \"ll\\nm\"", "tick_seconds: 2001-12-14",
    # the nested slo section and the capacity keys
    "  slo:", "    slo:", "slo:", "    ttft_seconds: 2", "      tpot_seconds: 0.1", "    attainment_target: 1",
    "  slo: {ttft_seconds: -1, ttft_seconds_per_1k_prompt_tokens: .nan}", "  slo: *m", "  slo: &s {tpot_seconds: 1}",
    "    slo: *s", "  slo: [1]", "    ttft: 1", "  capacity_profile: qwen3-8b/h100", "  capacity_profile: ''",
    "    capacity_prompt_tokens_per_second: 1e9", "  capacity_generation_tokens_per_second: 0",
]
texts = st.one_of(
    st.text(max_size=200),
    st.lists(st.sampled_from(FRAGMENTS), max_size=12).map("\n".join),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=10)), max_size=8).map("\n".join),
)


@settings(max_examples=500, deadline=None)
@given(text=texts)
def test_any_text_loads_or_fails_with_config_error(text: str) -> None:
    try:
        config = load_config_text(text, source="cm.yaml")
    except ConfigError as exc:
        assert exc.problems, "a ConfigError lists its problems"
        for line in exc.problems:
            assert line.strip() and len(line.splitlines()) == 1, line
        return
    assert isinstance(config, AutoscalerConfig)
    for target, policy in config.effective_policies():
        assert policy.min_replicas <= policy.max_replicas, target.name
        assert 0 < policy.slo.ttft_seconds <= 3600 and 0.5 <= policy.slo.attainment_target <= 0.999, target.name


@pytest.mark.parametrize("tag", [
    "!!python/object/apply:os.system ['echo pwned']",
    "!!python/object/new:subprocess.Popen [['true']]",
    "!!python/name:os.system",
])
def test_python_tags_are_a_config_error_not_code(tag: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config_text(f"targets: []\ndefaults: {tag}\n", source="cm.yaml")
    assert all(line.startswith("cm.yaml") for line in err.value.problems), err.value.problems


def test_an_alias_bomb_is_rejected_quickly() -> None:
    """Was a bug: the value of an unknown key was serialised whole before being cut to 60
    characters (config._fmt_value); now `_bounded_json` stops at the limit. Since issue 13 the
    loader refuses aliases that expand to more than 1,000,000 nodes first (config.bounded)."""
    lines = ["targets: []", 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    document = "\n".join(lines) + "\n"
    program = textwrap.dedent(f"""
        from autoscaler.config import ConfigError, load_config_text
        try:
            load_config_text({document!r})
        except ConfigError as exc:
            print(exc.problems[-1][:80])
    """)
    try:
        result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=3)
    except subprocess.TimeoutExpired:
        pytest.fail("an alias bomb took more than 3 s to reject")
    assert "aliases expand to more than 1,000,000 nodes" in result.stdout, result.stderr
