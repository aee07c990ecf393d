"""``convbench report``: results directories -> pandas summaries -> PNG figures -> one page.

:mod:`.aggregate` computes the tables, :mod:`.figures` draws them, :mod:`.html` and
:mod:`.text` write them out, :mod:`.build` ties one report together.
"""
