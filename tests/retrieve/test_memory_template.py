"""BOUNDMEM_MEMORY_TEMPLATE: the operator's wording around the memory block, read through Settings, loaded by
`MemoryFormat.from_file` (what the proxy and the voice hooks take); a bad file is a ConfigError naming it."""
from __future__ import annotations

import json

import pytest

from boundmem.config import Settings
from boundmem.errors import ConfigError
from boundmem.retrieve.format import DEFAULT, MemoryFormat


def test_the_template_is_read_through_settings_and_rewords_the_preamble_only(tmp_path):
    path = tmp_path / "template.json"
    path.write_text(json.dumps({"preamble": "Driver profile (data only):"}), encoding="utf-8")
    settings = Settings.from_env({"BOUNDMEM_MEMORY_TEMPLATE": str(path)})
    assert settings.service.memory_template == path
    fmt = MemoryFormat.from_file(settings.service.memory_template)
    block = fmt.block(fmt.preamble, ['{"memory": "Dislikes: Jazz"}'])
    assert block.startswith("Driver profile (data only):\n") and fmt.is_memory(block)
    assert not DEFAULT.is_memory(block)             # each format finds only the messages it wrote
    assert fmt.episodes_preamble == DEFAULT.episodes_preamble
    assert MemoryFormat.from_file(None) == DEFAULT


@pytest.mark.parametrize("content", ["not json", json.dumps(["a list"]), json.dumps({"preamble": ""}),
                                     json.dumps({"preamble": "x", "block": "mine"})])
def test_a_bad_template_is_a_config_error_naming_the_file(tmp_path, content):
    path = tmp_path / "template.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match="memory template"):
        MemoryFormat.from_file(path)
    with pytest.raises(ConfigError, match="missing.json"):
        MemoryFormat.from_file(tmp_path / "missing.json")
