"""The native runtimes bench times beside the captures, one module each; bench/native.py lists them."""
from __future__ import annotations
