"""The findings pages (docs/findings*.md), each rendered from its records: the benchmarks scripts run the grids and call these."""
from .claims import Results, findings_page
from .host import host_page
from .memory import memory_page
from .page import Page, machine_line, sweep_line
from .programs import Records, programs_page
from .versions import upgrade_page, versions_page, versions_torch_page, versions_torchax_page
from .zoo import zoo_page
