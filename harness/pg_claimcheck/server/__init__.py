"""Where the server comes from and what a run owns on it: provisioning, the run's connections and schema, leftovers."""
