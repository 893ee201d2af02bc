"""The ground floor: records and the Dataset contract, configuration, text, atomic files, fingerprints and locks."""
