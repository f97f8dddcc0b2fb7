"""`boundmem demo | less` reads well: piped (no terminal, 80 columns) it prints no table folded into narrow columns,
and it speaks the user's language (category labels, what happened in words, no internal keys or scores)."""
from __future__ import annotations

import os
import re
import subprocess
import sys


def test_demo_piped_prints_whole_sentences_not_a_folded_table(tmp_path, minilm):
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR", "TERM")}
    r = subprocess.run([sys.executable, "-m", "boundmem.cli", "demo", "--db", str(tmp_path / "demo.db")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    stored = r.stdout.split(" stored ")[1].split(" recall: ")[0]
    assert not any(ch in stored for ch in "│┃┏┡└"), stored               # no table
    lines = stored.splitlines()
    said = [ln for ln in lines if ln.strip().startswith("said:")]
    assert len(said) >= 3
    # each sentence whole on its line, as the user said it
    assert any('"Plan the route to Munich, and please avoid highways, I never like driving on them."' in ln
               for ln in said), stored
    assert any(ln.startswith("- Restaurant > Favorite Cuisine = Italian") for ln in lines), stored
    # an avoidance reads as one, not as a liking of highways
    assert any(ln.startswith("- Routing > Avoidance of Specific Road Types = Avoids: Highways") for ln in lines), stored
    assert "\x1b[" not in r.stdout                                        # no colour codes into a pipe

    # the user's language: labels and words, no category key, action name or unexplained score
    out = r.stdout
    assert "points_of_interest" not in out and "-> insert" not in out and "Celcius" not in out, out
    assert '-> remembered Restaurant > Favorite Cuisine: Italian, because you said "Italian' in out, out
    assert "-> remembered Climate Control > Preferred Temperature: 21 °C" in out, out
    recalled = out.split(" recall: ")[1]
    assert "the assistant would be told" in recalled and "Favorite Cuisine: Italian, because you said" in recalled
    assert not re.search(r"\b0\.\d{3}\b", recalled), recalled          # no bare score
