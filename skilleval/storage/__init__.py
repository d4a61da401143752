"""How artifacts are stored: atomic writes, the YAML loader, content hashes."""
