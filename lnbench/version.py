"""lnbench's version: a leaf, so that any module can name it without importing the package's public API
(`lnbench.layernorm`, lnbench/__init__.py), which stands above everything (lnbench.layers)."""

__version__ = "0.1.0"
