// PiconetHub — see Aggregator.swift: per-node and per-group windows (pure: no Glibc, no Foundation).
