"""``convbench compare``: the CI regression gate.

match (read both sides, pair variants by identity) -> decision (the per-variant verdicts) ->
gate (all verdicts, what fails under --fail-on) -> confirm (re-measure flagged variants) ->
report (text, Markdown, JSON, JUnit).  thresholds holds the minimum effects.
"""
