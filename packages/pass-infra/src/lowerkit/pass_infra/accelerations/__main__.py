"""``python -m lowerkit.pass_infra.accelerations``: print pass-infra's table of accelerations."""

from __future__ import annotations

from lowerkit.pass_infra.accelerations.table import ACCELERATIONS, markdown

print(markdown(ACCELERATIONS), end="")
