"""The Stack Wars study's write-up, beside the library: its findings pages (docs/findings*.md).

The benchmarks scripts (study/run/*.py) run the grids and call these. The study uses the
library's public API (stackwars_ir); the library never imports it.
"""
from .claims import Results, findings_page
from .host import host_page
from .memory import memory_page
from .page import Page, machine_line, sweep_line
from .programs import Records, programs_page
from .versions import upgrade_page, versions_page, versions_torch_page, versions_torchax_page
from .zoo import zoo_page
