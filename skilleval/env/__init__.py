"""Environment backends: the in-process shopsim world and the HTTP environment server."""
