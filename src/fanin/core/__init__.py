"""The ground floor: records and the Dataset contract, configuration, text, atomic files, fingerprints, locks, and the engine that runs work in shards."""
