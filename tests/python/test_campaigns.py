"""The quick run of the corruption campaign (tests/fault/corruption_campaign.py;
`make soak` runs a longer one)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fault"))

import corruption_campaign  # noqa: E402


def test_every_damage_is_detected_and_restart_falls_back(tmp_path):
    tally = corruption_campaign.run(trials=1000, seed=20261122, root=tmp_path)
    print(corruption_campaign.summary(tally, 20261122, 0.0))
    assert tally.trials == 1000
    assert set(tally.damages) == set(corruption_campaign.DAMAGES)
    assert set(tally.writers) == set(corruption_campaign.WRITERS)  # files of every writer were damaged
    assert sum(tally.compaction_trials.values()) == 1000 // corruption_campaign.COMPACTION_TRIAL_EVERY
    assert tally.violations == 0, "\n".join(tally.failures[:20])
