"""Fleet builds: many models x targets from one FLEET.toml, in worker processes, through the cache."""
